"""The weight files the rest of bertkit reads and writes through: a model directory's or weights file's tensors
(``read_weights``), named tensors written as ``model.safetensors`` (``write_weights``), and a module that is no
bertkit model saved and loaded under its own parameter names (``write_module_weights``/``load_module_weights``)."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model
from torch import Tensor, nn

from bertkit.checkpoint_files.hf_files import write_safetensors
from bertkit.checkpoint_files.reading import read_state_dict
from bertkit.errors import CheckpointError
from bertkit.io import atomic_path


def read_weights(source: str | os.PathLike) -> dict[str, Tensor]:
    """The tensors of a model directory or weights file under the names they were written with (Hugging Face's
    for BERT, the model's own for a named layout), whatever the format: see ``read_state_dict``."""
    return read_state_dict(source)


def write_weights(tensors: dict[str, Tensor], path: str | os.PathLike) -> None:
    """Write named tensors (contiguous, on the CPU) as a safetensors file that ``transformers`` reads too."""
    write_safetensors(tensors, path)


def write_module_weights(module: nn.Module, path: str | os.PathLike) -> None:
    """Write ``module``'s state under its own parameter names as safetensors; tied weights are stored once and
    ``load_module_weights`` restores the ties."""
    with atomic_path(Path(path)) as tmp:
        save_model(module, str(tmp))


def load_module_weights(
    module: nn.Module, path: str | os.PathLike, device: str | torch.device = "cpu"
) -> tuple[list[str], list[str]]:
    """Load a file ``write_module_weights`` wrote into ``module`` in place; returns the names ``module`` has that
    the file lacks and those the file has that ``module`` lacks. A tensor of another shape is a CheckpointError."""
    try:
        missing, unexpected = load_model(module, str(path), strict=False, device=str(device))
    except Exception as exc:  # safetensors raises plain errors on shape mismatches
        raise CheckpointError(f"cannot load weights from {path}: {exc}") from None
    return list(missing), list(unexpected)
