"""``torch.compile`` for a bertkit model, for inference and for training.

Batches are padded to their longest input only, so every batch may have another length (and the last one
another size). The graph is compiled with symbolic batch and sequence sizes (``dynamic=True``), so that other
lengths reuse it instead of compiling again per shape; sizes 0 and 1 are still specialised by PyTorch, so a
single-input batch or a one-token call adds one graph. The model is compiled in place (``nn.Module.compile``):
it keeps its class, so code that asks what head it is still gets the answer.

Two scopes: ``model`` compiles the whole forward (the fastest on a CPU); ``layers`` compiles only the encoder
layers' position-wise steps (residual + LayerNorm, and the feed-forward block with its bias, GELU, dropout and
residual), one graph that every layer reuses, and leaves attention and the rest eager, as ModernBERT compiles:
attention keeps its own kernels (FlashAttention, varlen, FlexAttention) and the graph stays small. The GPU
training step uses ``layers``. ``cuda_graphs`` replays each step's kernels as a CUDA graph
(``mode="reduce-overhead"``): for steps of one fixed shape (packed rows, ``pack_batch(rows=...)``), on CUDA only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from bertkit.errors import BertkitError, ConfigError
from bertkit.models.bert import EncoderLayer, feed_forward, residual_norm
from bertkit.notices import notice

CompileScope = Literal["model", "layers"]


def compiling_line(frozen: bool) -> str:
    """What the first batch will wait for, said before the wait (``compile_model`` prints it)."""
    purpose = "inference" if frozen else "training"
    return (
        f"compiling the model for {purpose} on its first batch (once per process; up to a minute or two on a "
        f"CPU, then every batch runs the compiled graph)"
    )


def compile_model(
    model: nn.Module,
    *,
    frozen: bool = False,
    backend: str | Callable[..., Any] = "inductor",
    scope: CompileScope = "model",
    cuda_graphs: bool = False,
) -> nn.Module:
    """Compile ``model`` in place with symbolic batch and sequence sizes; returns it. The first call per
    mode (training, inference) pays the compilation (tens of seconds on a CPU for a small BERT), which is said
    on stderr before the wait (``compiling_line``).

    ``frozen``: for a model that only answers (``bertkit.inference``): inductor's freezing takes the weights
    as constants and lays them out once for the CPU's matmul kernels (oneDNN), nearly twice the speed of the
    unfrozen graph on a small BERT. Weights changed afterwards are not seen, so training never freezes.
    ``backend``: ``torch.compile``'s (inductor generates the fused kernels; others serve to inspect graphs).
    ``scope``: ``model`` or ``layers`` (see the module's text). ``cuda_graphs``: replay fixed-shape steps as CUDA
    graphs; refused unless the model is on a CUDA device."""
    if cuda_graphs:
        _require_cuda(model)
    if scope == "layers":
        return compile_layers(model, backend=backend, cuda_graphs=cuda_graphs)
    options: dict[str, Any] | None = {"freezing": True} if frozen and backend == "inductor" else None
    mode = None
    if cuda_graphs:
        mode, options = "reduce-overhead", None
    try:
        model.compile(dynamic=not cuda_graphs, backend=backend, options=options, mode=mode)
    except RuntimeError as exc:  # e.g. no C++ compiler for inductor's CPU kernels
        raise BertkitError(f"torch.compile is unavailable here ({exc}); run without --compile") from None
    if backend == "inductor":
        notice(compiling_line(frozen))
    return model


def is_compiled(model: nn.Module) -> bool:
    """Whether ``compile_model`` (``nn.Module.compile``, or the ``layers`` scope) was applied to ``model``."""
    if getattr(model, "_compiled_call_impl", None) is not None:
        return True
    return any(isinstance(m, EncoderLayer) and m.fused is not None for m in model.modules())


def compile_layers(
    model: nn.Module, *, backend: str | Callable[..., Any] = "inductor", cuda_graphs: bool = False
) -> nn.Module:
    """Compile the position-wise steps of every ``EncoderLayer`` of ``model`` (the ``layers`` scope), in place;
    returns it. Every layer shares one compiled ``residual_norm`` and one ``feed_forward`` (their weights are
    inputs, not constants), so a 24-layer model compiles as fast as a 2-layer one."""
    if cuda_graphs:
        _require_cuda(model)
    layers = [m for m in model.modules() if isinstance(m, EncoderLayer)]
    if not layers:
        raise ConfigError(f"{type(model).__name__} has no bertkit encoder layers to compile; use scope 'model'")
    fused = _compiled_steps(backend, "reduce-overhead" if cuda_graphs else None)
    for layer in layers:
        layer.fused = fused
    if backend == "inductor":
        notice(compiling_line(False))
    return model


@functools.cache
def _compiled_steps(
    backend: str | Callable[..., Any], mode: str | None
) -> tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]:
    """The two compiled step functions, once per process and backend (``torch.compile`` caches by function)."""
    compiled = [
        torch.compile(fn, dynamic=mode is None, backend=backend, mode=mode) for fn in (residual_norm, feed_forward)
    ]
    return compiled[0], compiled[1]


def _require_cuda(model: nn.Module) -> None:
    where = next(model.parameters()).device
    if where.type != "cuda":
        raise ConfigError(
            f"CUDA graphs replay GPU kernels; this model is on {where.type}: move it to a CUDA device first, or "
            f"compile without cuda_graphs"
        )
