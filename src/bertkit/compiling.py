"""``torch.compile`` for a bertkit model, for inference and for training.

Batches are padded to their longest input only, so every batch may have another length (and the last one
another size). The graph is compiled with symbolic batch and sequence sizes (``dynamic=True``), so that other
lengths reuse it instead of compiling again per shape; sizes 0 and 1 are still specialised by PyTorch, so a
single-input batch or a one-token call adds one graph. The model is compiled in place (``nn.Module.compile``):
it keeps its class, so code that asks what head it is still gets the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from bertkit.errors import BertkitError
from bertkit.notices import notice


def compiling_line(frozen: bool) -> str:
    """What the first batch will wait for, said before the wait (``compile_model`` prints it)."""
    purpose = "inference" if frozen else "training"
    return (
        f"compiling the model for {purpose} on its first batch (once per process; up to a minute or two on a "
        f"CPU, then every batch runs the compiled graph)"
    )


def compile_model(
    model: nn.Module, *, frozen: bool = False, backend: str | Callable[..., Any] = "inductor"
) -> nn.Module:
    """Compile ``model`` in place with symbolic batch and sequence sizes; returns it. The first call per
    mode (training, inference) pays the compilation (tens of seconds on a CPU for a small BERT), which is said
    on stderr before the wait (``compiling_line``).

    ``frozen``: for a model that only answers (``bertkit.inference``): inductor's freezing takes the weights
    as constants and lays them out once for the CPU's matmul kernels (oneDNN), nearly twice the speed of the
    unfrozen graph on a small BERT. Weights changed afterwards are not seen, so training never freezes.
    ``backend``: ``torch.compile``'s (inductor generates the fused kernels; others serve to inspect graphs)."""
    options = {"freezing": True} if frozen and backend == "inductor" else None
    try:
        model.compile(dynamic=True, backend=backend, options=options)
    except RuntimeError as exc:  # e.g. no C++ compiler for inductor's CPU kernels
        raise BertkitError(f"torch.compile is unavailable here ({exc}); run without --compile") from None
    if backend == "inductor":
        notice(compiling_line(frozen))
    return model


def is_compiled(model: nn.Module) -> bool:
    """Whether ``compile_model`` (``nn.Module.compile``) was applied to ``model``."""
    return getattr(model, "_compiled_call_impl", None) is not None
