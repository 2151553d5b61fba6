"""Output files get the mode a plain ``open`` gives (0644 under umask 022) and directories 0755, although
they are written to private temporary names and renamed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from bertkit.io import atomic_directory, atomic_open, atomic_path, atomic_write_bytes, atomic_write_text


@pytest.fixture(autouse=True)
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def every_file(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): mode(p) for p in sorted(directory.rglob("*")) if p.is_file()}


def test_atomic_writers_give_0644_files_and_0755_directories(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "a")
    atomic_write_bytes(tmp_path / "b.bin", b"b")
    with atomic_open(tmp_path / "c.txt") as handle:
        handle.write("c")
    with atomic_path(tmp_path / "d.npy") as tmp:
        tmp.unlink()  # a writer that recreates the file
        tmp.write_bytes(b"d")
    with atomic_directory(tmp_path / "dir") as staging:
        (staging / "inner").write_text("e")
    assert every_file(tmp_path) == {name: 0o644 for name in ("a.txt", "b.bin", "c.txt", "d.npy", "dir/inner")}
    assert mode(tmp_path / "dir") == 0o755


def test_mode_follows_the_umask(tmp_path):
    os.umask(0o077)
    atomic_write_text(tmp_path / "private.txt", "p")
    assert mode(tmp_path / "private.txt") == 0o600
    os.umask(0o002)
    atomic_write_text(tmp_path / "group.txt", "g")
    assert mode(tmp_path / "group.txt") == 0o664


def test_weights_and_predictions_are_0644(tmp_path, tokenizer):
    from bertkit.inference import predict
    from bertkit.models.bert import BertForSequenceClassification
    from inference_helpers import save_model

    model = save_model(tmp_path / "model", BertForSequenceClassification, tokenizer, id2label={0: "neg", 1: "pos"})
    files = every_file(model)
    assert "model.safetensors" in files and "vocab.txt" in files
    assert files == {name: 0o644 for name in files}
    assert mode(model) == 0o755

    (tmp_path / "in.tsv").write_text("sentence\tlabel\ngood movie\tpos\nbad movie\tneg\n", encoding="utf-8")
    predict(model, tmp_path / "in.tsv", tmp_path / "out" / "predictions.jsonl", task="classification")
    assert mode(tmp_path / "out" / "predictions.jsonl") == 0o644


def test_checkpoint_files_are_0644(tmp_path, tokenizer):
    from bertkit.models.bert import BertForPreTraining
    from bertkit.training.checkpoint import save_checkpoint
    from inference_helpers import tiny_config

    model = BertForPreTraining(tiny_config(tokenizer))
    directory = save_checkpoint(tmp_path / "run", 3, model, {"step": 3})
    files = every_file(directory)
    assert len(files) >= 3  # weights, trainer state, manifest
    assert files == {name: 0o644 for name in files}
    assert mode(directory) == 0o755


def test_onnx_export_is_0644(tmp_path, tokenizer):
    pytest.importorskip("onnx", reason="the export extra (onnx) is not installed")
    from bertkit.export import export_onnx
    from bertkit.models.bert import BertForSequenceClassification
    from inference_helpers import tiny_config

    torch.manual_seed(0)
    path = export_onnx(BertForSequenceClassification(tiny_config(tokenizer)).eval(), tmp_path / "model.onnx")
    assert mode(path) == 0o644
    assert all(mode(p) == 0o644 for p in tmp_path.iterdir() if p.is_file())


def test_umask_without_proc(tmp_path, monkeypatch):
    import bertkit.io

    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(bertkit.io, "open", no_proc, raising=False)
    os.umask(0o027)
    atomic_write_text(tmp_path / "x.txt", "x")
    assert mode(tmp_path / "x.txt") == 0o640
    assert os.umask(0o022) == 0o027  # the fallback put the umask back
