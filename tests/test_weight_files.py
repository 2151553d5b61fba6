"""checkpoint_files.weight_files: the files bertkit's other modules read and write weights through are byte for
byte what safetensors itself writes, and read back to the same tensors (ties restored)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file, save_model
from torch import nn

from bertkit.checkpoint_files import load_module_weights, read_weights, write_module_weights, write_weights
from bertkit.errors import CheckpointError


class Tied(nn.Module):
    """A module that is no bertkit model, with an input and output embedding sharing one tensor."""

    def __init__(self, rows: int = 7) -> None:
        super().__init__()
        self.embed = nn.Embedding(rows, 4)
        self.out = nn.Linear(4, rows, bias=True)
        self.out.weight = self.embed.weight


def test_write_weights_is_byte_for_byte_safetensors_with_the_pt_format(tmp_path: Path) -> None:
    torch.manual_seed(0)
    tensors = {"bert.embeddings.word_embeddings.weight": torch.randn(5, 3), "cls.predictions.bias": torch.randn(5)}
    write_weights(tensors, tmp_path / "ours" / "model.safetensors")
    save_file(tensors, str(tmp_path / "plain.safetensors"), metadata={"format": "pt"})
    assert (tmp_path / "ours" / "model.safetensors").read_bytes() == (tmp_path / "plain.safetensors").read_bytes()
    back = read_weights(tmp_path / "ours")  # the directory, as callers pass it
    assert back.keys() == tensors.keys() and all(torch.equal(back[k], tensors[k]) for k in tensors)
    assert not [p.name for p in (tmp_path / "ours").iterdir() if p.name != "model.safetensors"]  # no temporary left


def test_a_module_round_trips_under_its_own_names_with_its_ties(tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = Tied()
    write_module_weights(source, tmp_path / "model.safetensors")
    save_model(source, str(tmp_path / "plain.safetensors"))
    assert (tmp_path / "model.safetensors").read_bytes() == (tmp_path / "plain.safetensors").read_bytes()
    assert len(load_file(tmp_path / "model.safetensors")) == 2  # the shared tensor once, plus the bias
    target = Tied()
    assert load_module_weights(target, tmp_path / "model.safetensors") == ([], [])
    assert target.out.weight is target.embed.weight
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))


def test_loading_a_module_of_another_shape_is_a_checkpoint_error(tmp_path: Path) -> None:
    write_module_weights(Tied(rows=7), tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"cannot load weights from .*model\.safetensors"):
        load_module_weights(Tied(rows=9), tmp_path / "model.safetensors")


def test_loading_reports_what_the_file_and_the_module_do_not_share(tmp_path: Path) -> None:
    write_module_weights(nn.Linear(3, 2), tmp_path / "model.safetensors")
    missing, unexpected = load_module_weights(nn.Linear(3, 2, bias=False), tmp_path / "model.safetensors")
    assert (missing, unexpected) == ([], ["bias"])
