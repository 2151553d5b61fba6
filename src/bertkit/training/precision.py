"""Numeric precision of a training run: autocast context and (for fp16) a gradient scaler.

bf16 keeps fp32's exponent range, so it needs no loss scaling; fp16 overflows without it. Master weights
and optimizer state stay fp32 in every mode.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Literal

import torch

from bertkit.errors import ConfigError
from bertkit.notices import notice

PrecisionName = Literal["auto", "fp32", "bf16", "fp16"]
"""What a config may ask for; ``auto`` is made concrete by :func:`precision_name`."""


@dataclass
class Precision:
    """A resolved precision: ``name`` is ``fp32``, ``bf16`` or ``fp16`` on ``device``."""

    name: str
    device: torch.device
    scaler: torch.amp.GradScaler | None = None

    @property
    def dtype(self) -> torch.dtype:
        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.name]

    def autocast(self) -> contextlib.AbstractContextManager:
        """Context for the forward pass (and loss); a no-op in fp32."""
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)


def precision_name(name: str, device: torch.device) -> str:
    """``name`` made concrete for ``device`` and checked: ``auto`` is bf16 on a GPU that supports it, else fp32.

    The entry points (pretrain, finetune) resolve once, before anything runs, so every later reader (the loop,
    the MFU peak, the saved config) sees the precision that actually runs.
    """
    if name == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    if name == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 training needs a CUDA GPU; use --precision fp32 (or bf16) on CPU")
    if name == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ConfigError("this GPU does not support bf16; use --precision fp16 or fp32")
    if name not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"unknown precision {name!r}; choose fp32, bf16, fp16 or auto")
    return name


def resolve_precision(name: str, device: torch.device) -> Precision:
    """The :class:`Precision` of ``name`` on ``device`` (checked by :func:`precision_name`), with the scaler
    fp16 needs."""
    name = precision_name(name, device)
    if name == "fp16":
        return Precision("fp16", device, torch.amp.GradScaler("cuda"))
    if name == "bf16":
        if device.type == "cpu":
            notice("bf16 autocast on CPU is usually slower than fp32; it is meant for GPUs", logging.WARNING)
        return Precision("bf16", device)
    if device.type == "cuda":
        # TF32 matmuls on Ampere+: fp32 storage at tensor-core speed, precise enough for BERT training.
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return Precision("fp32", device)
