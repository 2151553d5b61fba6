"""ONNX export of a bertkit model (the encoder or any head) with dynamic batch and sequence axes.

The graph takes ``input_ids``, ``token_type_ids`` and ``attention_mask`` (int64, ``[batch, sequence]``; a
ModernBERT graph has no ``token_type_ids``: ``input_names``) and returns the head's outputs by name (see
``OUTPUT_NAMES``). A ModernBERT model is traced on the padded layout (``modernbert_padded``): the unpadded
network's gathers and host-side lengths would freeze into the graph, while the padded one gives the same
vectors at every real token for any batch and length. Exporting uses PyTorch's TorchScript-based
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
import torch.nn.functional as F
from torch import Tensor, nn

from bertkit.backends.sessions import onnx_session
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
    pool_tokens,
)
from bertkit.models.modernbert import (
    ModernBertEncoderLayer,
    ModernBertForMaskedLM,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
    ModernBertPreTrained,
    rotate,
)

logger = logging.getLogger("bertkit.export")

INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")
OUTPUT_NAMES: dict[str, tuple[str, ...]] = {
    "BertModel": ("last_hidden_state", "pooler_output"),
    "BertForPreTraining": ("mlm_logits", "nsp_logits"),
    "BertForMaskedLM": ("logits",),
    "BertForSequenceClassification": ("logits",),
    "BertForTokenClassification": ("logits",),
    "BertForQuestionAnswering": ("start_logits", "end_logits"),
    "ModernBertModel": ("last_hidden_state",),
    "ModernBertForMaskedLM": ("logits",),
    "ModernBertForSequenceClassification": ("logits",),
    "ModernBertForTokenClassification": ("logits",),
    "ModernBertForQuestionAnswering": ("start_logits", "end_logits"),
}
"""Graph outputs per model class, in order."""
MODERNBERT_INPUT_NAMES = ("input_ids", "attention_mask")
"""A ModernBERT graph's inputs (it has no segments)."""

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


def modernbert_padded(encoder: ModernBertModel, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """``encoder``'s final vectors ``[B, L, H]`` (zeros at the padding) computed on the padded layout, in
    operations a tracer records for any batch and length: each sequence's real tokens numbered from 0 (left or
    right padding alike), keys limited to real tokens, and on local layers to ``half_window`` positions away;
    padded query rows see every key (their outputs are zeroed)."""
    real = attention_mask.bool()
    positions = (attention_mask.cumsum(1) - 1).clamp(min=0)
    query_pad = ~real[:, None, :, None]
    seen = real[:, None, None, :] | query_pad
    distance = (positions[:, :, None] - positions[:, None, :]).abs()[:, None]
    x = encoder.embeddings(input_ids)
    tables: dict[float, tuple[Tensor, Tensor]] = {}
    for layer in encoder.layers:
        assert isinstance(layer, ModernBertEncoderLayer)
        attn = layer.attn
        if attn.rotary_emb.base not in tables:  # RotaryEmbedding's tables, [B, L, d] (no reshape a tracer freezes)
            freqs = positions.float()[..., None] * attn.rotary_emb.inv_freq.float()
            emb = torch.cat((freqs, freqs), dim=-1)
            tables[attn.rotary_emb.base] = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        cos, sin = tables[attn.rotary_emb.base]
        qkv = attn.Wqkv(layer.attn_norm(x)).unflatten(-1, (3, attn.num_heads, attn.head_dim)).permute(0, 2, 3, 1, 4)
        q, k, v = qkv.unbind(1)  # [B, heads, L, d]; rotate() broadcasts [B, L, d] tables over the heads
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        mask = seen if attn.half_window is None else seen & ((distance <= attn.half_window) | query_pad)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + attn.Wo(out.transpose(1, 2).flatten(2))
        x = x + layer.mlp(layer.mlp_norm(x))
    return encoder.final_norm(x) * real[..., None].to(x.dtype)


class _ModernBertExportable(nn.Module):
    """A ModernBERT model's inference forward on the padded layout (``modernbert_padded``), a traceable function
    of ``input_ids`` and ``attention_mask``."""

    def __init__(self, model: ModernBertPreTrained):
        super().__init__()
        self.model = model
        encoder = model if isinstance(model, ModernBertModel) else getattr(model, "model", None)
        if type(model).__name__ not in OUTPUT_NAMES or not isinstance(encoder, ModernBertModel):
            raise BertkitError(f"cannot export {type(model).__name__}: choose one of {', '.join(OUTPUT_NAMES)}")
        self.encoder = encoder

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, ...]:
        hidden = modernbert_padded(self.encoder, input_ids, attention_mask)
        model = self.model
        if isinstance(model, ModernBertModel):
            return (hidden,)
        if isinstance(model, ModernBertForMaskedLM):
            return (model.decoder(model.head(hidden)),)
        if isinstance(model, ModernBertForSequenceClassification):
            return (model.classify(pool_tokens(hidden, attention_mask, model.config.classifier_pooling)),)
        if isinstance(model, ModernBertForTokenClassification):
            return (model.classify(hidden),)
        assert isinstance(model, ModernBertForQuestionAnswering)  # __init__ admits the classes of OUTPUT_NAMES
        start, end = model.classify(hidden).unbind(-1)
        return start, end


def exportable(model: nn.Module) -> nn.Module:
    """``model``'s inference forward as a traceable module of the graph's inputs (``input_names``)."""
    return _ModernBertExportable(model) if isinstance(model, ModernBertPreTrained) else _Exportable(model)


def input_names(model: nn.Module) -> tuple[str, ...]:
    """The inputs of ``model``'s graph: ``INPUT_NAMES``, or ``MODERNBERT_INPUT_NAMES``."""
    return MODERNBERT_INPUT_NAMES if isinstance(model, ModernBertPreTrained) else INPUT_NAMES


def output_names(model: nn.Module) -> list[str]:
    """Names of the ONNX outputs ``export_onnx`` writes for ``model``."""
    names = list(OUTPUT_NAMES.get(type(model).__name__, ()))
    if isinstance(model, BertModel) and model.pooler is None:
        names = names[:1]
    return names


def example_inputs(model: nn.Module, batch: int = 2, length: int = 8) -> tuple[Tensor, Tensor, Tensor]:
    """Small valid inputs with one padded row, to trace the graph (and to check it)."""
    if not isinstance(model, PreTrainedMixin | ModernBertPreTrained):
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
    wrapper = exportable(model).eval()
    names, inputs = output_names(model), input_names(model)
    dynamic = {name: {0: "batch", 1: "sequence"} for name in inputs}
    for name in names:
        dynamic[name] = (
            {0: "batch"}
            if name in ("pooler_output", "nsp_logits")
            or (
                name == "logits"
                and isinstance(model, BertForSequenceClassification | ModernBertForSequenceClassification)
            )
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
    """Whether ``quantize_onnx`` keeps ``model``'s weights to 7 bits: for ModernBERT. On a CPU without VNNI,
    onnxruntime's u8 x s8 kernels sum pairs of products in int16, which saturates at full 8-bit range: on the
    tiny ModernBERT of the tests the logits moved by 0.12 with 8 bits and by 0.03 with 7."""
    return isinstance(model, ModernBertPreTrained)


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
