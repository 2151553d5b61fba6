"""OpenVINO behind a model's forward: the cached ONNX export read by OpenVINO and compiled for the CPU.

float32 compiles the export as it is. int8 compresses the weights of every matmul to int8 (one scale per
output channel, no calibration data) with NNCF and saves the result as OpenVINO IR in
``cache_dir()/openvino/<key>``; OpenVINO keeps its compiled blobs in ``cache_dir()/openvino/compiled``
(its ``CACHE_DIR``, which it keys by the graph, the options and its own version), so a second process starts
without compiling. Threads: torch's count; the latency hint (one request at a time per thread, each Python
thread with its own infer request).

Precision: float32, said to OpenVINO (``INFERENCE_PRECISION_HINT`` ``f32``). Left to itself, its CPU plugin runs
bf16 on a CPU with AVX512_BF16 or AMX, whose answers differ from float32 in the third decimal. bf16 is the
user's choice: ``BERTKIT_OPENVINO_PRECISION=bf16``. The hint is a request: OpenVINO may run another precision
(float32 on a CPU without bf16, or where its plugin declines), so bertkit reads the compiled model's own
``INFERENCE_PRECISION_HINT`` and a notice says what ran whenever it differs from what was asked.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.backends.cache import cache_dir, cache_key, exported_graph, write_about
from bertkit.backends.graph import Runner, put_behind
from bertkit.backends.signal_stack import signal_stack_kept
from bertkit.errors import BertkitError, ConfigError
from bertkit.notices import notice, quiet_libraries

MISSING = "--backend openvino needs the onnx and openvino packages; pip install 'bertkit[openvino]'"
MISSING_NNCF = "--backend openvino --quantize int8 needs the nncf package; pip install 'bertkit[openvino]'"
HINT = "LATENCY"
"""OpenVINO's performance hint: bertkit sends one batch per call and waits for it."""
PRECISION_ENV = "BERTKIT_OPENVINO_PRECISION"
"""The environment variable that lets OpenVINO run bf16 (``bf16``); unset or ``float32``: float32."""
PRECISIONS = {"float32": "f32", "f32": "f32", "bf16": "bf16"}
"""``BERTKIT_OPENVINO_PRECISION`` values -> OpenVINO's ``INFERENCE_PRECISION_HINT``."""


def inference_precision() -> str:
    """OpenVINO's ``INFERENCE_PRECISION_HINT`` for this process: ``f32`` unless ``BERTKIT_OPENVINO_PRECISION``
    says ``bf16``."""
    asked = os.environ.get(PRECISION_ENV, "").strip().lower() or "float32"
    if asked not in PRECISIONS:
        raise ConfigError(f"{PRECISION_ENV}={asked!r}: use float32 or bf16")
    return PRECISIONS[asked]


def openvino_installed(quantize: str | None = None) -> bool:
    """Whether ``onnx`` and ``openvino`` import (and ``nncf`` too, for int8)."""
    try:
        import onnx  # noqa: F401
        import openvino  # noqa: F401

        if quantize:
            import nncf  # noqa: F401
    except ImportError:
        return False
    return True


def int8_graph(model: nn.Module, core: Any) -> Path:
    """The cached OpenVINO IR of ``model`` with int8 weights, compressed first if absent."""
    import openvino

    folder = cache_dir() / "openvino" / cache_key(model, "int8", "openvino", weights="int8_sym")
    path = folder / "model.xml"
    if path.is_file():
        return path
    source = exported_graph(model, None)
    notice(f"compressing the weights to int8 for OpenVINO (once, cached in {folder})")
    with quiet_libraries("nncf"), signal_stack_kept():
        import nncf

        compressed = nncf.compress_weights(core.read_model(str(source)), mode=nncf.CompressWeightsMode.INT8_SYM)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f"partial-{threading.get_ident()}.xml"
    openvino.save_model(compressed, str(scratch), compress_to_fp16=False)
    scratch.with_suffix(".bin").replace(path.with_suffix(".bin"))
    scratch.replace(path)  # the .xml last: its presence says the pair is whole
    write_about(folder, model, "int8", "openvino")
    return path


def compile_graph(model: nn.Module, quantize: str | None, threads: int | None = None) -> Any:
    """``model``'s graph compiled by OpenVINO for the CPU (exported and compressed first if absent), with
    ``threads`` (default: torch's), in float32 unless bf16 was asked for (module docstring)."""
    import openvino

    precision = inference_precision()
    core = openvino.Core()
    core.set_property({"CACHE_DIR": str(cache_dir() / "openvino" / "compiled")})
    path = int8_graph(model, core) if quantize else exported_graph(model, None)
    config = {
        "PERFORMANCE_HINT": HINT,
        "INFERENCE_NUM_THREADS": threads or torch.get_num_threads(),
        "INFERENCE_PRECISION_HINT": precision,
    }
    with signal_stack_kept():  # the CPU plugin is created here (see signal_stack)
        compiled = core.compile_model(str(path), "CPU", config)
    told = precision_notice(precision, precision_name(compiled.get_property("INFERENCE_PRECISION_HINT")))
    if told:
        notice(told)
    return compiled


def precision_name(value: Any) -> str:
    """OpenVINO's short name (``f32``, ``bf16``, ``f16``) of an element type or of its string form."""
    name = getattr(value, "get_type_name", None)
    text = str(name() if callable(name) else value)
    return {"<Type: 'float32'>": "f32", "<Type: 'bfloat16'>": "bf16", "<Type: 'float16'>": "f16"}.get(text, text)


def precision_notice(asked: str, ran: str) -> str | None:
    """The line that says what OpenVINO ran when it is not what bertkit asked for; ``None`` when it is."""
    if asked == ran:
        return None
    return f"OpenVINO was asked for {asked} ({PRECISION_ENV}) and compiled the model for {ran}; running {ran}"


def build(model: nn.Module, quantize: str | None, threads: int | None = None) -> Runner:
    """The runner of ``compile_graph``'s model: one infer request per Python thread."""
    compiled = compile_graph(model, quantize, threads)
    local = threading.local()

    def run(names: list[str], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(local, "request", None)
        if request is None:
            request = local.request = compiled.create_infer_request()
        got = request.infer(inputs)
        return [got[compiled.output(name)] for name in names]

    return run


def use_openvino(model: nn.Module, quantize: str | None = None) -> nn.Module:
    """Put OpenVINO (int8 weights when ``quantize``) behind ``model``'s forward and, for a head, its
    encoder's; returns ``model``. The graphs are exported and compiled on first call."""
    if not openvino_installed():
        raise BertkitError(MISSING)
    if quantize and not openvino_installed(quantize):
        raise BertkitError(MISSING_NNCF)
    return put_behind(model, "openvino", quantize, build)
