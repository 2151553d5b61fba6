"""ONNX export of a bertkit model (the encoder or any head) with dynamic batch and sequence axes.

The graph takes ``input_ids``, ``token_type_ids`` and ``attention_mask`` (int64, ``[batch, sequence]``; an
architecture without segments, ModernBERT's, has no ``token_type_ids``: its record's ``onnx_inputs``) and returns
the head's outputs by name (``bertkit.models.architecture.ONNX_OUTPUTS``). What is traced is the record's
``traceable`` forward: ModernBERT's runs on the padded layout (``modernbert_padded``), since the unpadded
network's gathers and host-side lengths would freeze into the graph. Exporting uses PyTorch's TorchScript-based
exporter (``torch.onnx.export(..., dynamo=False)``): it needs only the ``onnx`` package, while the newer
dynamo exporter would also pull in ``onnxscript``. ``verify_onnx`` runs the file with ``onnxruntime`` and
compares it with the PyTorch model.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from bertkit.backends.sessions import onnx_session
from bertkit.errors import BertkitError
from bertkit.io import atomic_path
from bertkit.models import registry
from bertkit.models.architecture import Architecture

logger = logging.getLogger("bertkit.export")

INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
"""Every input a graph may take, in order; an architecture's record names those its graph takes."""

DEFAULT_OPSET = 17


def _architecture(model: nn.Module) -> Architecture:
    """``model``'s record, for a class of a role the exporter writes (every bertkit model class)."""
    architecture = registry.of_model(model)
    if architecture is None or architecture.role_of(model) is None:
        classes = [cls.__name__ for name in registry.names() for cls in registry.named(name).classes.values()]
        raise BertkitError(f"cannot export {type(model).__name__}: choose one of {', '.join(dict.fromkeys(classes))}")
    return architecture


def exportable(model: nn.Module) -> nn.Module:
    """``model``'s inference forward as a traceable module of the graph's inputs (``input_names``)."""
    return _architecture(model).traceable(model)


def input_names(model: nn.Module) -> tuple[str, ...]:
    """The inputs of ``model``'s graph (its architecture's ``onnx_inputs``)."""
    return _architecture(model).onnx_inputs


def output_names(model: nn.Module) -> list[str]:
    """Names of the ONNX outputs ``export_onnx`` writes for ``model``."""
    architecture = registry.of_model(model)
    return list(architecture.onnx_outputs(model)) if architecture is not None else []


def example_inputs(model: nn.Module, batch: int = 2, length: int = 8) -> tuple[Tensor, Tensor, Tensor]:
    """Small valid inputs with one padded row, to trace the graph (and to check it)."""
    _architecture(model)
    config = registry.config_of(model)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, config.vocab_size, (batch, length), generator=generator)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, length // 2 :] = min(1, config.type_vocab_size - 1)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, length - 2 :] = 0
    return input_ids, token_type_ids, attention_mask


def export_onnx(model: nn.Module, output: str | os.PathLike, *, opset: int = DEFAULT_OPSET) -> Path:
    """Write ``model`` (any bertkit model class, on CPU) to ``output`` as ONNX with dynamic batch and
    sequence axes. The file is written atomically."""
    output = Path(output)
    if output.suffix != ".onnx":
        raise BertkitError(f"the output file must end with .onnx, got {output}")
    wrapper = exportable(model).eval()
    names, inputs = output_names(model), input_names(model)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in inputs}
    for name in names:
        dynamic[name] = (
            {0: "batch"}
            if name in ("pooler_output", "nsp_logits")
            or (name == "logits" and registry.role_of(model) == "BertForSequenceClassification")
            else {0: "batch", 1: "sequence"}
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(output) as tmp, torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter warns about its own deprecation and about Python-side shape checks
        # that it traces as constants (the position-table bound); neither changes the graph's results.
        warnings.simplefilter("ignore")
        examples = dict(zip(INPUT_NAMES, example_inputs(model)))
        torch.onnx.export(
            wrapper,
            tuple(examples[name] for name in inputs),
            str(tmp),
            input_names=list(inputs),
            output_names=names,
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return output


def verify_onnx(model: nn.Module, path: str | os.PathLike, *, batch: int = 3, length: int = 11) -> float:
    """Largest absolute difference between ``onnxruntime`` on ``path`` and ``model`` on fresh inputs (a
    different batch and length than the export's, so that the dynamic axes are exercised)."""
    session = onnx_session(path)
    examples = dict(zip(INPUT_NAMES, example_inputs(model, batch=batch, length=length)))
    inputs = {name: examples[name] for name in input_names(model)}
    with torch.inference_mode():
        expected = model.eval()(**inputs)
    expected = tuple(getattr(expected, name) for name in output_names(model))
    got = session.run(None, {name: tensor.numpy() for name, tensor in inputs.items()})
    worst = 0.0
    for name, want, have in zip(output_names(model), expected, got):
        if tuple(want.shape) != tuple(have.shape):
            raise BertkitError(f"{path}: output {name} has shape {tuple(have.shape)}, expected {tuple(want.shape)}")
        worst = max(worst, float((want - torch.from_numpy(have)).abs().max()))
    return worst


def int8_reduce_range(model: nn.Module) -> bool:
    """Whether ``quantize_onnx`` keeps ``model``'s weights to 7 bits (its record's ``int8_reduce_range``: for
    ModernBERT). On a CPU without VNNI, onnxruntime's u8 x s8 kernels sum pairs of products in int16, which
    saturates at full 8-bit range: on the tiny ModernBERT of the tests the logits moved by 0.12 with 8 bits and
    by 0.03 with 7."""
    architecture = registry.of_model(model)
    return architecture is not None and architecture.int8_reduce_range


def quantize_onnx(source: str | os.PathLike, output: str | os.PathLike, *, reduce_range: bool = False) -> Path:
    """Rewrite an exported graph with int8 matmuls: onnxruntime's dynamic quantizer, weights int8 per output
    channel (7-bit values with ``reduce_range``: ``int8_reduce_range``), activations quantized per call.
    ``output`` may be ``source``; it is written atomically."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise BertkitError("onnxruntime is not installed; pip install 'bertkit[export]'") from None
    output = Path(output)
    root = logging.getLogger()
    level = root.level
    # The quantizer logs advice to run its shape-inference pre-pass, which the exporter's graph does not need.
    root.setLevel(logging.ERROR)
    try:
        with atomic_path(output) as tmp:
            quantize_dynamic(
                Path(source), Path(tmp), weight_type=QuantType.QInt8, per_channel=True, reduce_range=reduce_range
            )
    finally:
        root.setLevel(level)
    return output


def check_onnx_installed() -> None:
    """Raise a one-line error when the ``onnx`` package (needed by the exporter) is missing."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise BertkitError("exporting to ONNX needs the onnx package; pip install 'bertkit[export]'") from None
