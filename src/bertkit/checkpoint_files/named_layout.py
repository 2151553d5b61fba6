"""Checkpoints whose tensors carry the model's own parameter names (``transformers``' layout for ModernBERT, and
any registered architecture that keeps its names): a directory read and written as a whole, and a state dict
copied into a model with the same checks as BERT's name table (``state_dicts``).

A head keeps its encoder under ``prefix`` (``model.``); a checkpoint of the bare encoder has the same names
without it, so either loads into either.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bertkit.checkpoint_files.hf_files import SAFETENSORS_NAME, write_safetensors
from bertkit.checkpoint_files.reading import read_state_dict, weights_file
from bertkit.config import CONFIG_NAME
from bertkit.errors import CheckpointError, ConfigError
from bertkit.hub import resolve_model

logger = logging.getLogger("bertkit.weights")


def normalise_names(state: dict[str, Tensor], prefix: str, encoder_parts: tuple[str, ...]) -> dict[str, Tensor]:
    """Checkpoint names as a model whose encoder sits under ``prefix`` (``model.``, or ``""``) names them."""
    out = {}
    for name, tensor in state.items():
        bare = name.removeprefix("model.")
        out[prefix + bare if bare.startswith(encoder_parts) else name] = tensor
    return out


@torch.no_grad()
def load_named_state(
    model: nn.Module,
    state: dict[str, Tensor],
    *,
    prefix: str,
    encoder_parts: tuple[str, ...],
    tied: set[str],
    ignore_mismatched_sizes: bool = False,
    source: str = "",
) -> None:
    """Copy tensors named as ``model``'s parameters into it: every encoder tensor (``prefix`` + one of
    ``encoder_parts``) must be there with its shape; a missing head stays initialised, another model's head is
    ignored (each reported in one log line); ``tied`` parameters are their embedding's."""
    state = normalise_names(state, prefix, encoder_parts)
    params = model.state_dict()
    initialised, mismatched = [], []
    for name, param in params.items():
        if name in tied:
            continue
        is_encoder = name.removeprefix(prefix).startswith(encoder_parts)
        if name not in state:
            if is_encoder:
                raise CheckpointError(f"{source} lacks encoder weight {name}; it is not a checkpoint for this config")
            initialised.append(name)
            continue
        tensor = state[name]
        if tensor.shape != param.shape:
            if is_encoder or not ignore_mismatched_sizes:
                raise CheckpointError(
                    f"{source}: {name} has shape {tuple(tensor.shape)} but the model expects {tuple(param.shape)}; "
                    + (
                        "the config does not match the weights"
                        if is_encoder
                        else "pass ignore_mismatched_sizes=True to train a new head"
                    )
                )
            mismatched.append(name)
            continue
        param.copy_(tensor)
    stray = [n for n in state if n not in params and n.removeprefix(prefix).startswith(encoder_parts)]
    if stray:
        raise CheckpointError(f"{source} has encoder weights the config does not describe ({', '.join(stray[:4])})")
    if initialised or mismatched:
        logger.warning("%s: %s not in %s; newly initialised, train before use", type(model).__name__,
                       ", ".join(initialised + mismatched), source)  # fmt: skip
    ignored = [n for n in state if n not in params and n not in tied]
    if ignored:
        logger.warning("%s: ignored %d weights the model does not use (%s)", type(model).__name__, len(ignored),
                       ", ".join(ignored[:4]))  # fmt: skip


def read_named_directory(
    path: str | os.PathLike, load_config: Callable[[Path], Any], overrides: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Tensor], Path]:
    """A model directory (or its weights file, or a hub id) read: ``load_config(directory)`` with ``overrides``
    applied, its tensors, its weights file."""
    directory = resolve_model(path)
    if directory.is_file():
        directory = directory.parent
    if not (directory / CONFIG_NAME).is_file():
        raise CheckpointError(f"{directory} is not a model directory: it has no {CONFIG_NAME}")
    weights = weights_file(directory)
    if weights is None:
        raise CheckpointError(f"{directory} has a config but no weights ({SAFETENSORS_NAME})")
    config = load_config(directory)
    try:
        config = replace(config, **(overrides or {}))
    except TypeError as exc:
        raise ConfigError(f"unknown {type(config).__name__} field: {exc}") from None
    return config, read_state_dict(weights), weights


def write_named_directory(model: nn.Module, config: Any, directory: str | os.PathLike, leave_out: set[str]) -> Path:
    """``config.json`` (``config.save``) and ``model.safetensors`` of ``model``'s tensors under its own names,
    less ``leave_out`` (tied weights, as ``transformers`` leaves them out), each atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {n: t.detach().to("cpu", copy=True).contiguous() for n, t in model.state_dict().items()}
    write_safetensors({n: t for n, t in tensors.items() if n not in leave_out}, directory / SAFETENSORS_NAME)
    config.save(directory)
    return directory
