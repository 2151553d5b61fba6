"""The ONNX Runtime session every exported graph runs in, with bertkit's settings: the CPU provider, every graph
optimisation on, and the thread count it is given. Both the PyTorch-installed ``--backend onnxruntime`` and the
torch-free runtime of an export folder (``bertkit.inference.exported``) open their graphs here."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bertkit.errors import BertkitError

if TYPE_CHECKING:
    import onnxruntime


def onnx_session(path: str | os.PathLike, threads: int | None = None) -> onnxruntime.InferenceSession:
    """An ``onnxruntime.InferenceSession`` on the CPU for an exported file, with every graph optimisation on."""
    try:
        import onnxruntime  # an optional extra: imported when used
    except ImportError:
        raise BertkitError("onnxruntime is not installed; pip install 'bertkit[onnx]'") from None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
