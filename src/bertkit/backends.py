"""Which engine runs a loaded model's forward: PyTorch, or ONNX Runtime on an ONNX export that bertkit makes,
quantizes and caches for the user.

``choose_backend`` holds the CPU rule for int8. torchao's int8 matmuls (``bertkit.quantize``) are fast only
where Inductor has int8 micro-kernels (AVX512-VNNI, AMX: ``bertkit.cpu_features``); elsewhere they are slower
than float32. So ``--quantize int8`` with the backend left to bertkit (``auto``) runs torchao there, and on
any other CPU runs ONNX Runtime's int8 graph (its int8 kernels use AVX2, NEON...), or float32 with one line
when ``onnxruntime`` is not installed. An explicit ``--backend torch`` is obeyed.

``use_onnxruntime(model)`` puts ONNX Runtime behind ``model``'s forward (and its encoder's, for a head), so
every pipeline and route that calls the model works unchanged: a call with the three inputs only runs the
ONNX graph and returns the model's own output class; a call that asks for more (hidden states, attention
maps, masked positions, labels) runs the PyTorch weights, which stay loaded. The graph is exported on first
use into ``cache_dir()/onnx/<key>``, where the key hashes the weights, the config, the model class, the
options and the onnx / onnxruntime / torch / bertkit versions, so that a change to any of them builds it anew;
files are written under a temporary name and renamed, so a process never reads half of one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from bertkit import __version__
from bertkit.cpu_features import CpuFeatures, detect
from bertkit.errors import BertkitError, ConfigError
from bertkit.export import INPUT_NAMES, export_onnx, onnx_session, output_names, quantize_onnx
from bertkit.io import atomic_write_text
from bertkit.model import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertOutput,
    MaskedLMOutput,
    PreTrainingOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from bertkit.notices import notice
from bertkit.quantize import check_scheme

if TYPE_CHECKING:
    import onnxruntime

BACKENDS = ("auto", "torch", "onnxruntime")
"""``--backend`` choices: ``auto`` is ``torch`` except for int8 on a CPU where torchao's int8 is slow."""
MISSING = "--backend onnxruntime needs the onnx and onnxruntime packages; pip install 'bertkit[export]'"
OUTPUT_CLASSES: dict[type[nn.Module], type] = {
    BertModel: BertOutput,
    BertForPreTraining: PreTrainingOutput,
    BertForMaskedLM: MaskedLMOutput,
    BertForSequenceClassification: SequenceClassifierOutput,
    BertForTokenClassification: TokenClassifierOutput,
    BertForQuestionAnswering: QuestionAnsweringOutput,
}
"""The output dataclass of each model class; ONNX output names are its field names."""


@dataclasses.dataclass(frozen=True)
class Choice:
    """What ``choose_backend`` decided."""

    backend: str
    """``torch`` or ``onnxruntime``."""
    quantize: str | None
    """The quantization that engine applies (``None``: float32)."""
    note: str | None = None
    """One line for the user when the choice is not what was asked for literally."""


def onnxruntime_installed() -> bool:
    """Whether ``onnx`` and ``onnxruntime`` import."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


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
    if backend == "onnxruntime":
        if not on_cpu:
            raise ConfigError(f"--backend onnxruntime runs on the CPU; use --device cpu, not {device}")
        if not onnxruntime_installed():
            raise BertkitError(MISSING)
        return Choice("onnxruntime", quantize)
    if backend == "torch" or quantize is None or not on_cpu:
        return Choice("torch", quantize)
    cpu = cpu or detect()
    if cpu.fast_torchao_int8:
        return Choice("torch", quantize)
    why = f"torchao's int8 is slower than float32 on this CPU ({cpu.int8_kernels} int8 kernels, no AVX512-VNNI/AMX)"
    if onnxruntime_installed():
        return Choice("onnxruntime", quantize, f"{why}; running int8 through ONNX Runtime")
    return Choice("torch", None, f"{why}; running float32 (pip install 'bertkit[export]' for int8 via ONNX Runtime)")


# ------------------------------------------------------------------------------------------ the cache
def cache_dir() -> Path:
    """bertkit's cache: ``$BERTKIT_CACHE``, else ``$XDG_CACHE_HOME/bertkit``, else ``~/.cache/bertkit``."""
    root = os.environ.get("BERTKIT_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bertkit"


def versions() -> dict[str, str]:
    """The versions an exported graph depends on (part of its cache key)."""
    found = {"bertkit": __version__, "torch": torch.__version__}
    for package in ("onnx", "onnxruntime"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def cache_key(model: nn.Module, quantize: str | None) -> str:
    """A hash of what the exported graph depends on: the model class, its config, every weight, the options
    and ``versions()``."""
    digest = hashlib.sha256()
    to_dict = getattr(getattr(model, "config", None), "to_dict", None)
    header = {
        "class": type(model).__name__,
        "config": to_dict() if callable(to_dict) else None,
        "options": {"quantize": quantize, "outputs": output_names(model)},
        "versions": versions(),
    }
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


def exported_graph(model: nn.Module, quantize: str | None) -> Path:
    """The cached ONNX file of ``model`` (int8 when ``quantize``), exported (and quantized) first if absent."""
    folder = cache_dir() / "onnx" / cache_key(model, quantize)
    path = folder / "model.onnx"
    if path.is_file():
        return path
    notice(f"exporting to ONNX (once, cached in {folder})")
    folder.mkdir(parents=True, exist_ok=True)
    if quantize is None:
        export_onnx(model, path)
    else:
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            quantize_onnx(export_onnx(model, Path(scratch) / "float32.onnx"), path)
    info = {"class": type(model).__name__, "quantize": quantize, "versions": versions()}
    atomic_write_text(folder / "about.json", json.dumps(info, indent=1) + "\n")
    return path


# ------------------------------------------------------------------------------------------ the forward
class OnnxForward:
    """A model's forward through ONNX Runtime (see the module docstring); the session starts on first call."""

    def __init__(self, model: nn.Module, quantize: str | None):
        self.model = model
        self.quantize = quantize
        self.names = output_names(model)
        self.output_class = next(out for cls, out in OUTPUT_CLASSES.items() if isinstance(model, cls))
        self._session: onnxruntime.InferenceSession | None = None

    @property
    def session(self) -> onnxruntime.InferenceSession:
        if self._session is None:
            self._session = onnx_session(exported_graph(self.model, self.quantize), threads=torch.get_num_threads())
        return self._session

    def __call__(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        **more: Any,
    ) -> Any:
        if any(value is not None and value is not False for value in more.values()):  # not in the graph
            return type(self.model).forward(self.model, input_ids, token_type_ids, attention_mask, **more)
        ids = input_ids.to(torch.int64).cpu()
        inputs = (
            ids,
            torch.zeros_like(ids) if token_type_ids is None else token_type_ids.to(torch.int64).cpu(),
            torch.ones_like(ids) if attention_mask is None else attention_mask.to(torch.int64).cpu(),
        )
        got = self.session.run(self.names, {n: t.numpy() for n, t in zip(INPUT_NAMES, inputs)})
        values: dict[str, Any] = {name: torch.from_numpy(array) for name, array in zip(self.names, got)}
        for field in dataclasses.fields(self.output_class):
            if field.default is dataclasses.MISSING and field.name not in values:
                values[field.name] = None  # losses, and a pooler the model was built without
        return self.output_class(**values)


def use_onnxruntime(model: nn.Module, quantize: str | None = None) -> nn.Module:
    """Put ONNX Runtime (int8 when ``quantize``) behind ``model``'s forward and, for a head, its encoder's;
    returns ``model``. The graphs are exported on first call (``exported_graph``)."""
    if not onnxruntime_installed():
        raise BertkitError(MISSING)
    if not isinstance(model, tuple(OUTPUT_CLASSES)):
        raise BertkitError(f"--backend onnxruntime cannot run a {type(model).__name__}")
    vars(model)["forward"] = OnnxForward(model, quantize)  # the instance's own forward, before its class's
    encoder = getattr(model, "bert", None)
    if isinstance(encoder, BertModel):
        vars(encoder)["forward"] = OnnxForward(encoder, quantize)
    return model


def backend_of(model: nn.Module) -> tuple[str, str | None]:
    """``(engine, quantization)`` that runs ``model``'s forward: ``("onnxruntime", "int8")``, ``("torch",
    None)``... (torchao int8 is reported by ``bertkit.quantize.is_quantized``)."""
    forward = model.__dict__.get("forward")
    return ("onnxruntime", forward.quantize) if isinstance(forward, OnnxForward) else ("torch", None)
