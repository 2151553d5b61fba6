"""``choose_backend``: the engine for a load, with the CPU rule for int8 (``bertkit.backends``' docstring), and
``use_backend``, which puts that engine behind a model's forward."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from bertkit.backends.ort import MISSING as MISSING_ORT
from bertkit.backends.ort import onnxruntime_installed, use_onnxruntime
from bertkit.backends.ov import MISSING as MISSING_OV
from bertkit.backends.ov import MISSING_NNCF, openvino_installed, use_openvino
from bertkit.cpu_features import CpuFeatures, detect
from bertkit.errors import BertkitError, ConfigError
from bertkit.quantize import check_scheme

BACKENDS = ("auto", "torch", "onnxruntime", "openvino")
"""``--backend`` choices: ``auto`` is ``torch`` except for int8 on a CPU where torchao's int8 is slow."""
ENGINES = {"onnxruntime": use_onnxruntime, "openvino": use_openvino}
"""The engines that run an exported graph, by ``--backend`` name."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """What ``choose_backend`` decided."""

    backend: str
    """``torch``, ``onnxruntime`` or ``openvino``."""
    quantize: str | None
    """The quantization that engine applies (``None``: float32)."""
    note: str | None = None
    """One line for the user when the choice is not what was asked for literally."""


def _check_engine(backend: str, quantize: str | None, on_cpu: bool, device: str | torch.device) -> None:
    if not on_cpu:
        raise ConfigError(f"--backend {backend} runs on the CPU; use --device cpu, not {device}")
    if backend == "onnxruntime" and not onnxruntime_installed():
        raise BertkitError(MISSING_ORT)
    if backend == "openvino" and not openvino_installed():
        raise BertkitError(MISSING_OV)
    if backend == "openvino" and not openvino_installed(quantize):
        raise BertkitError(MISSING_NNCF)


def choose_backend(
    backend: str | None, quantize: str | None, device: str | torch.device = "cpu", cpu: CpuFeatures | None = None
) -> Choice:
    """The engine for a load: ``backend`` (``None`` = ``auto``) and ``quantize`` as asked, on ``device``, with
    the int8 rule of the module docstring for ``auto``. ``cpu``: the CPU's features (default: detected)."""
    check_scheme(quantize)
    backend = backend or "auto"
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; use --backend {' or '.join(BACKENDS)}")
    on_cpu = torch.device(device).type == "cpu"
    if backend in ENGINES:
        _check_engine(backend, quantize, on_cpu, device)
        return Choice(backend, quantize)
    if backend == "torch" or quantize is None or not on_cpu:
        return Choice("torch", quantize)
    if onnxruntime_installed():
        return Choice("onnxruntime", quantize, "running int8 through ONNX Runtime (the graph is cached once built)")
    cpu = cpu or detect()
    if cpu.fast_torchao_int8:
        return Choice("torch", quantize, "onnxruntime is not installed: running torchao's int8, compiled per shape")
    why = f"torchao's int8 is slower than float32 on this CPU ({cpu.int8_kernels} int8 kernels, no AVX512-VNNI/AMX)"
    if openvino_installed(quantize):
        return Choice("openvino", quantize, f"{why}; running int8 weights through OpenVINO")
    return Choice("torch", None, f"{why}; running float32 (pip install 'bertkit[export]' for int8 via ONNX Runtime)")


def use_backend(model: nn.Module, backend: str, quantize: str | None = None) -> nn.Module:
    """Put ``backend`` (``onnxruntime`` or ``openvino``) behind ``model``'s forward; returns ``model``."""
    return ENGINES[backend](model, quantize)
