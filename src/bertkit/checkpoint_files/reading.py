"""Which file of a model directory holds the weights, and its tensors under Hugging Face names, whatever its
format (safetensors, PyTorch, Google TensorFlow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from torch import Tensor

from bertkit.checkpoint_files.hf_files import (
    PYTORCH_INDEX,
    PYTORCH_NAME,
    SAFETENSORS_INDEX,
    SAFETENSORS_NAME,
    read_pytorch,
    read_safetensors,
    read_sharded,
)
from bertkit.checkpoint_files.tf_files import checkpoint_index, read_tf_checkpoint
from bertkit.checkpoint_files.tf_names import tf_to_hf_state_dict
from bertkit.errors import CheckpointError


def weights_file(directory: Path) -> Path | None:
    """The weights file of a model directory: safetensors first, then PyTorch, then a TensorFlow checkpoint's
    ``.index`` file; None if there is none."""
    for name in (SAFETENSORS_NAME, SAFETENSORS_INDEX, PYTORCH_NAME, PYTORCH_INDEX):
        if (directory / name).is_file():
            return directory / name
    return checkpoint_index(directory)


def read_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """Tensors of a weights file or model directory, under Hugging Face names: ``*.safetensors`` (or its shard
    index), ``pytorch_model.bin``/``*.bin``/``*.pt`` read with ``weights_only=True``, or a Google TensorFlow
    checkpoint (``bert_model.ckpt`` prefix or its ``.index``). Other files are refused."""
    path = Path(path)
    if not path.exists():  # .../bert_model.ckpt, Google's way to name a checkpoint, is no file itself
        path = checkpoint_index(path) or path
    if path.is_dir():
        found = weights_file(path)
        if found is None:
            raise CheckpointError(f"{path} has no {SAFETENSORS_NAME} or {PYTORCH_NAME}; is it a model directory?")
        path = found
    if not path.is_file():
        raise CheckpointError(f"weights file {path} does not exist")
    name = path.name
    if name.endswith(".safetensors"):
        return read_safetensors(path)
    if name.endswith(".safetensors.index.json"):
        return read_sharded(path, read_safetensors)
    if name.endswith(".bin.index.json"):
        return read_sharded(path, read_pytorch)
    if name.endswith((".bin", ".pt", ".pth")):
        return read_pytorch(path)
    if name.endswith(".index"):
        return tf_to_hf_state_dict(read_tf_checkpoint(path))
    raise CheckpointError(
        f"{path} is not a supported weights file; use model.safetensors, pytorch_model.bin or a TensorFlow "
        f"checkpoint (pickles are never loaded)"
    )


def tensor_names(path: str | os.PathLike) -> list[str]:
    """Names of the tensors in a model directory's weights (or a weights file), read from the file's header or
    index where it has one, not from the data."""
    path = Path(path)
    file = weights_file(path) if path.is_dir() else path
    if file is None:
        return []
    if file.name.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(str(file), framework="pt") as handle:
            return list(handle.keys())
    if file.name.endswith(".index.json"):
        return list(json.loads(file.read_text(encoding="utf-8")).get("weight_map", {}))
    return list(read_state_dict(file))
