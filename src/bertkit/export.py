"""ONNX export of a bertkit model (the encoder or any head) with dynamic batch and sequence axes.

The graph takes ``input_ids``, ``token_type_ids`` and ``attention_mask`` (int64, ``[batch, sequence]``) and
returns the head's outputs by name (see ``OUTPUT_NAMES``). Exporting uses PyTorch's TorchScript-based
exporter (``torch.onnx.export(..., dynamo=False)``): it needs only the ``onnx`` package, while the newer
dynamo exporter would also pull in ``onnxscript``. ``verify_onnx`` runs the file with ``onnxruntime`` and
compares it with the PyTorch model.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from bertkit.errors import BertkitError
from bertkit.io import atomic_path
from bertkit.model import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    PreTrainedMixin,
)

if TYPE_CHECKING:
    import onnxruntime

logger = logging.getLogger("bertkit.export")

INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
OUTPUT_NAMES: dict[str, tuple[str, ...]] = {
    "BertModel": ("last_hidden_state", "pooler_output"),
    "BertForPreTraining": ("mlm_logits", "nsp_logits"),
    "BertForMaskedLM": ("logits",),
    "BertForSequenceClassification": ("logits",),
    "BertForTokenClassification": ("logits",),
    "BertForQuestionAnswering": ("start_logits", "end_logits"),
}
"""Graph outputs per model class, in order."""

DEFAULT_OPSET = 17


class _Exportable(nn.Module):
    """The model's inference forward as a traceable function of the three input tensors.

    ``BertModel.forward`` drops the attention mask when nothing is padded (a host-side check that lets SDPA
    pick its fastest kernel); a tracer would freeze whichever branch the example took, so the encoder is
    called here with the mask always applied.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        kind = type(model).__name__
        bert = model if isinstance(model, BertModel) else getattr(model, "bert", None)
        if kind not in OUTPUT_NAMES or not isinstance(bert, BertModel):
            raise BertkitError(f"cannot export {kind}: choose one of {', '.join(OUTPUT_NAMES)}")
        self.model = model
        self.bert = bert

    def forward(self, input_ids: Tensor, token_type_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, ...]:
        bert = self.bert
        mask = attention_mask[:, None, None, :].bool()
        hidden, _, _ = bert.encoder(bert.embeddings(input_ids, token_type_ids), mask)
        pooled = bert.pooler(hidden) if bert.pooler is not None else None
        model = self.model
        if isinstance(model, BertModel):
            return (hidden,) if pooled is None else (hidden, pooled)
        if isinstance(model, BertForPreTraining):
            return model.mlm(hidden), model.nsp(pooled)
        if isinstance(model, BertForMaskedLM):
            return (model.mlm(hidden),)
        if isinstance(model, BertForSequenceClassification):
            return (model.classifier(pooled),)
        if isinstance(model, BertForTokenClassification):
            return (model.classifier(hidden),)
        assert isinstance(model, BertForQuestionAnswering)  # __init__ admits the six classes of OUTPUT_NAMES only
        start, end = model.qa_outputs(hidden).unbind(-1)
        return start, end


def output_names(model: nn.Module) -> list[str]:
    """Names of the ONNX outputs ``export_onnx`` writes for ``model``."""
    names = list(OUTPUT_NAMES.get(type(model).__name__, ()))
    if isinstance(model, BertModel) and model.pooler is None:
        names = names[:1]
    return names


def example_inputs(model: nn.Module, batch: int = 2, length: int = 8) -> tuple[Tensor, Tensor, Tensor]:
    """Small valid inputs with one padded row, to trace the graph (and to check it)."""
    if not isinstance(model, PreTrainedMixin):
        raise BertkitError(f"cannot export {type(model).__name__}: choose one of {', '.join(OUTPUT_NAMES)}")
    config = model.config
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
    wrapper = _Exportable(model).eval()
    names = output_names(model)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
    for name in names:
        dynamic[name] = (
            {0: "batch"}
            if name in ("pooler_output", "nsp_logits")
            or (name == "logits" and isinstance(model, BertForSequenceClassification))
            else {0: "batch", 1: "sequence"}
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(output) as tmp, torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter warns about its own deprecation and about Python-side shape checks
        # that it traces as constants (the position-table bound); neither changes the graph's results.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapper,
            example_inputs(model),
            str(tmp),
            input_names=list(INPUT_NAMES),
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
    inputs = example_inputs(model, batch=batch, length=length)
    with torch.inference_mode():
        expected = _Exportable(model).eval()(*inputs)
    got = session.run(None, {name: tensor.numpy() for name, tensor in zip(INPUT_NAMES, inputs)})
    worst = 0.0
    for name, want, have in zip(output_names(model), expected, got):
        if tuple(want.shape) != tuple(have.shape):
            raise BertkitError(f"{path}: output {name} has shape {tuple(have.shape)}, expected {tuple(want.shape)}")
        worst = max(worst, float((want - torch.from_numpy(have)).abs().max()))
    return worst


def quantize_onnx(source: str | os.PathLike, output: str | os.PathLike) -> Path:
    """Rewrite an exported graph with int8 matmuls: onnxruntime's dynamic quantizer, weights int8 per output
    channel, activations quantized per call. ``output`` may be ``source``; it is written atomically."""
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
            quantize_dynamic(Path(source), Path(tmp), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        root.setLevel(level)
    return output


def onnx_session(path: str | os.PathLike, threads: int | None = None) -> onnxruntime.InferenceSession:
    """An ``onnxruntime.InferenceSession`` on the CPU for an exported file, with every graph optimisation on."""
    try:
        import onnxruntime  # an optional extra: imported when used
    except ImportError:
        raise BertkitError("onnxruntime is not installed; pip install 'bertkit[export]'") from None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def check_onnx_installed() -> None:
    """Raise a one-line error when the ``onnx`` package (needed by the exporter) is missing."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise BertkitError("exporting to ONNX needs the onnx package; pip install 'bertkit[export]'") from None
