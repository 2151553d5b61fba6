"""ONNX Runtime behind a model's forward: the cached ONNX export (int8: ONNX Runtime's dynamic quantizer)
in an ``InferenceSession`` on the CPU with torch's thread count."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from bertkit.backends.cache import exported_graph
from bertkit.backends.graph import Runner, put_behind
from bertkit.errors import BertkitError
from bertkit.export import onnx_session

MISSING = "--backend onnxruntime needs the onnx and onnxruntime packages; pip install 'bertkit[export]'"


def onnxruntime_installed() -> bool:
    """Whether ``onnx`` and ``onnxruntime`` import."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def build(model: nn.Module, quantize: str | None, threads: int | None = None) -> Runner:
    """A session on ``model``'s cached graph (exported first if absent), with ``threads`` (default: torch's)."""
    session = onnx_session(exported_graph(model, quantize), threads=threads or torch.get_num_threads())

    def run(names: list[str], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return list(session.run(names, inputs))

    return run


def use_onnxruntime(model: nn.Module, quantize: str | None = None) -> nn.Module:
    """Put ONNX Runtime (int8 when ``quantize``) behind ``model``'s forward and, for a head, its encoder's;
    returns ``model``. The graphs are exported on first call."""
    if not onnxruntime_installed():
        raise BertkitError(MISSING)
    return put_behind(model, "onnxruntime", quantize, build)
