"""Hugging Face files: ``model.safetensors`` (also sharded) read and written, and ``pytorch_model.bin`` read
through ``torch.load(weights_only=True)``, so that nothing from a file is ever unpickled and run."""

from __future__ import annotations

import json
import os
import pickle
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor

from bertkit.errors import CheckpointError
from bertkit.io import atomic_path

SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"


def read_safetensors(path: Path) -> dict[str, Tensor]:
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc}); is it truncated?") from None


def write_safetensors(tensors: dict[str, Tensor], path: str | os.PathLike) -> None:
    """Write ``tensors`` (contiguous, on the CPU) to ``path`` atomically: a reader never sees half a file."""
    with atomic_path(Path(path)) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})  # transformers refuses files without "format"


def _torch_reason(exc: Exception) -> str:
    """The informative line of torch.load's long multi-line error messages."""
    text = str(exc)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith(("Weights only load failed", "Check the documentation"))
    ]
    return (lines[0].split(". ")[0] if lines else type(exc).__name__)[:160]


def read_pytorch(path: Path) -> dict[str, Tensor]:
    # weights_only=True: tensors and plain containers only; any other pickled object is refused, never run.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's pickle-protocol notes; our error below says what matters
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path} holds pickled objects other than tensors ({_torch_reason(exc)}); refusing to unpickle it, "
            f"convert it to safetensors with a trusted tool"
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint ({_torch_reason(exc)}); is it truncated?"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise CheckpointError(f"{path} is not a state dict of named tensors")
    return state


def read_sharded(index: Path, reader: Callable[[Path], dict[str, Tensor]]) -> dict[str, Tensor]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{index} is not a valid shard index ({exc})") from None
    state: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = index.parent / shard
        if not shard_path.is_file():
            raise CheckpointError(f"{index} lists shard {shard}, which is missing")
        state.update(reader(shard_path))
    return state
