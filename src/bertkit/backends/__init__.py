"""Which engine runs a loaded model's forward: PyTorch, ONNX Runtime or OpenVINO, the last two on an ONNX
export that bertkit makes, quantizes and caches for the user (``cache``: the cache and its key; ``graph``:
the forward through a graph; ``ort``, ``ov``: the two engines).

``choose_backend`` holds the CPU rule for int8. ``--quantize int8`` with the backend left to bertkit
(``auto``) runs ONNX Runtime's int8 graph wherever ``onnxruntime`` is installed: its int8 kernels are fast on
every CPU (AVX2, AVX512-VNNI, AMX, NEON), and the graph is exported and quantized once and cached (seconds).
torchao's int8 matmuls (``bertkit.quantize``) are fast only where Inductor has int8 micro-kernels
(AVX512-VNNI, AMX: ``bertkit.cpu_features``), slower than float32 elsewhere, and compile again for every new
input shape (minutes for BERT-base), so ``auto`` runs them only on such a CPU without ``onnxruntime``; then
OpenVINO's int8 weights when only ``openvino`` is installed; else float32 with one line. An explicit
``--backend`` is obeyed. OpenVINO's int8 is int8 weights (``ov``): on an AVX2 CPU without VNNI it runs at its
float32 speed, with the closest answers to float32.

``use_backend(model, engine, quantize)`` puts the engine behind ``model``'s forward (and its encoder's, for
a head), so every pipeline and route that calls the model works unchanged (``graph.GraphForward``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bertkit import resolve_export

if TYPE_CHECKING:  # resolved on first use (``__getattr__``): the session module runs without torch
    from bertkit.backends.cache import cache_dir, cache_key, exported_graph, versions
    from bertkit.backends.choice import BACKENDS, Choice, choose_backend, use_backend
    from bertkit.backends.graph import OUTPUT_CLASSES, GraphForward, backend_of
    from bertkit.backends.ort import onnxruntime_installed, use_onnxruntime
    from bertkit.backends.ov import openvino_installed, use_openvino

__all__ = [
    "BACKENDS",
    "OUTPUT_CLASSES",
    "Choice",
    "GraphForward",
    "backend_of",
    "cache_dir",
    "cache_key",
    "choose_backend",
    "exported_graph",
    "onnxruntime_installed",
    "openvino_installed",
    "use_backend",
    "use_onnxruntime",
    "use_openvino",
    "versions",
]

_HOMES = {
    **dict.fromkeys(("cache_dir", "cache_key", "exported_graph", "versions"), "bertkit.backends.cache"),
    **dict.fromkeys(("BACKENDS", "Choice", "choose_backend", "use_backend", "ENGINES"), "bertkit.backends.choice"),
    **dict.fromkeys(("OUTPUT_CLASSES", "GraphForward", "backend_of"), "bertkit.backends.graph"),
    **dict.fromkeys(("onnxruntime_installed", "use_onnxruntime"), "bertkit.backends.ort"),
    **dict.fromkeys(("openvino_installed", "use_openvino"), "bertkit.backends.ov"),
}


def __getattr__(name: str) -> Any:
    return resolve_export(__name__, globals(), _HOMES, name)
