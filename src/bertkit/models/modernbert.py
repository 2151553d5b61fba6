"""ModernBERT, top to bottom: the unpadded batch, rotary positions, attention (global or sliding-window, three
variable-length paths), the GeGLU feed-forward, the pre-norm layer, ``ModernBertModel`` and its heads.

Numerics follow ``transformers``' ``modeling_modernbert.py``: LayerNorm without bias (eps 1e-5), no linear
biases, the first layer's attention norm an identity, a final norm, rotary positions (``global_rope_theta`` on
global layers, ``local_rope_theta`` on local ones) computed in float32, local layers seeing
``local_attention // 2`` tokens on each side, and the prediction head ``norm(act(dense(x)))`` before the
classifier or the tied decoder. Parameter names are ``transformers``' own, so a checkpoint loads by name.

The whole network runs unpadded: the batch's real tokens are gathered once into ``[T, H]`` (``Packed``), every
projection, norm and feed-forward sees those only, and each sequence's tokens are numbered from 0 (so left
and right padding give the same vectors, as transformers' FlashAttention path does). Attention is
variable-length, by one of ``ATTN_IMPLEMENTATIONS``:

- ``sdpa``: each layer's q, k, v laid out ``[B, heads, max_len, d]`` for ``scaled_dot_product_attention`` with a
  key mask, and the window mask on local layers; long local layers run in blocks of queries against the keys
  within reach, so memory grows with the window, not the square of the length. Any device.
- ``flex``: FlexAttention on the packed tokens with a block mask (same sequence, within the window); compile the
  model for the fused kernel (eager runs it unfused).
- ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` with ``window_size`` on CUDA (FlashAttention; bfloat16
  inside for float32 models, as transformers does).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from bertkit.checkpoint_files.named_layout import load_named_state, read_named_directory, write_named_directory
from bertkit.config import MODERNBERT_PRESETS, ModernBertConfig
from bertkit.errors import ConfigError
from bertkit.models.architecture import Architecture
from bertkit.models.attention import (
    KERNELS,
    Packed,
    attention_for,
    flex_packed,
    refuse_dropout,
    sdpa_packed,
    varlen_attention,
    varlen_kernel_applies,
)
from bertkit.models.heads import (
    BertOutput,
    MaskedLMOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
    masked_lm,
    pool_tokens,
    problem_type,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from bertkit.models.parts import activation
from bertkit.models.parts import init_weights as init_module

ATTN_IMPLEMENTATIONS = KERNELS
LOCAL_BLOCK = 256
"""Queries per block of the ``sdpa`` path's local layers on sequences longer than four blocks."""

logger = logging.getLogger("bertkit.weights")


# ------------------------------------------------------------------------------------------ rotary positions
class RotaryEmbedding(nn.Module):
    """Rotary position tables (``cos``, ``sin`` of ``position * inv_freq``, halves repeated) for one base."""

    inv_freq: Tensor

    def __init__(self, head_dim: int, base: float):
        super().__init__()
        self.base = base
        exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        self.register_buffer("inv_freq", 1.0 / (base**exponents), persistent=False)

    def forward(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        freqs = positions.float()[:, None] * self.inv_freq.float()[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x [T, heads, d]`` rotated by its positions' tables ``[T, d]``."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


# ------------------------------------------------------------------------------------------ attention paths
def _sdpa(q: Tensor, k: Tensor, v: Tensor, packed: Packed, half_window: int | None, dropout: float) -> Tensor:
    return sdpa_packed(q, k, v, packed, half_window, dropout, LOCAL_BLOCK)


def _varlen(q: Tensor, k: Tensor, v: Tensor, packed: Packed, half_window: int | None, dropout: float) -> Tensor:
    """FlashAttention's varlen kernel where it applies (CUDA, half precision), else the same through SDPA."""
    refuse_dropout("varlen", dropout)
    if not varlen_kernel_applies(q):
        return _sdpa(q, k, v, packed, half_window, dropout)
    return varlen_attention(q, k, v, packed.cu_seqlens, packed.max_len, half_window)


ATTENTION: dict[str, Callable[[Tensor, Tensor, Tensor, Packed, int | None, float], Tensor]] = {
    "sdpa": _sdpa,
    "flex": flex_packed,
    "varlen": _varlen,
}


# ------------------------------------------------------------------------------------------ the layers
def layer_norm(config: ModernBertConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


class ModernBertEmbeddings(nn.Module):
    """Token embedding, LayerNorm, dropout (no position or segment embedding: positions are rotary)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = layer_norm(config)
        self.drop = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.drop(self.norm(self.tok_embeddings(input_ids)))


class ModernBertAttention(nn.Module):
    """Fused ``Wqkv``, rotary q and k, variable-length attention (global, or within the window), ``Wo``."""

    def __init__(self, config: ModernBertConfig, layer_id: int):
        super().__init__()
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.attention_dropout = config.attention_dropout
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.out_drop = nn.Dropout(config.attention_dropout) if config.attention_dropout > 0 else nn.Identity()
        is_global = config.is_global(layer_id)
        self.half_window: int | None = None if is_global else config.local_attention // 2
        theta = config.global_rope_theta if is_global or config.local_rope_theta is None else config.local_rope_theta
        self.rotary_emb = RotaryEmbedding(config.head_dim, theta)
        self.implementation: str | None = None
        """One of ``ATTN_IMPLEMENTATIONS``, or None: chosen per forward by the device (``attention_for``)."""

    def forward(self, x: Tensor, packed: Packed) -> Tensor:
        q, k, v = self.Wqkv(x).view(-1, 3, self.num_heads, self.head_dim).unbind(1)
        key = ("rotary", self.rotary_emb.base, x.dtype)
        if key not in packed.cache:
            packed.cache[key] = self.rotary_emb(packed.positions, x.dtype)
        cos, sin = packed.cache[key]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        dropout = self.attention_dropout if self.training else 0.0
        chosen = self.implementation or attention_for(None, x.device, ATTN_IMPLEMENTATIONS, dropout > 0)
        out = ATTENTION[chosen](q, k, v, packed, self.half_window, dropout)
        return self.out_drop(self.Wo(out.reshape(x.shape[0], -1)))


class ModernBertMLP(nn.Module):
    """GeGLU: ``Wo(drop(act(input) * gate))`` with ``input, gate = Wi(x).chunk(2)``."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = activation(config.hidden_activation)
        self.drop = nn.Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        value, gate = self.Wi(x).chunk(2, dim=-1)
        return self.Wo(self.drop(self.act(value) * gate))


class ModernBertEncoderLayer(nn.Module):
    """Pre-norm: ``x + attn(attn_norm(x))``, then ``x + mlp(mlp_norm(x))`` (layer 0's ``attn_norm`` is identity,
    the embedding norm having just run)."""

    def __init__(self, config: ModernBertConfig, layer_id: int):
        super().__init__()
        self.attn_norm: nn.Module = nn.Identity() if layer_id == 0 else layer_norm(config)
        self.attn = ModernBertAttention(config, layer_id)
        self.mlp_norm = layer_norm(config)
        self.mlp = ModernBertMLP(config)

    def forward(self, x: Tensor, packed: Packed) -> Tensor:
        x = x + self.attn(self.attn_norm(x), packed)
        return x + self.mlp(self.mlp_norm(x))


# ------------------------------------------------------------------------------------------ init, load, save
def init_weights(model: nn.Module, config: ModernBertConfig) -> None:
    """transformers' initialisation: truncated normals (cut at ``initializer_cutoff_factor`` std), ``in`` std for
    input projections and embeddings, ``out`` std (scaled by depth) for output projections and the head,
    ``hidden_size ** -0.5`` for classifiers; zero biases, LayerNorm weight 1."""
    std_in = config.initializer_range
    std_out = config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers)
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        std = {"Wqkv": std_in, "Wi": std_in, "classifier": config.hidden_size**-0.5}.get(last, std_out)
        std = std_in if isinstance(module, nn.Embedding) else std
        init_module(module, std, cutoff=config.initializer_cutoff_factor)


ENCODER_PARTS = ("embeddings.", "layers.", "final_norm.")


def load_state(
    model: nn.Module, state: dict[str, Tensor], *, ignore_mismatched_sizes: bool = False, source: str = ""
) -> None:
    """Copy ``transformers``-named tensors into ``model``: every encoder tensor must be there with its shape; a
    missing head stays initialised, another model's head is ignored (each reported in one log line)."""
    prefix = "" if isinstance(model, ModernBertModel) else "model."
    tied = {"decoder.weight"} if getattr(model.config, "tie_word_embeddings", True) else set()
    load_named_state(model, state, prefix=prefix, encoder_parts=ENCODER_PARTS, tied=tied,
                     ignore_mismatched_sizes=ignore_mismatched_sizes, source=source)  # fmt: skip


def read_checkpoint(
    path: str | os.PathLike, overrides: dict[str, Any] | None = None
) -> tuple[ModernBertConfig, dict[str, Tensor], Path]:
    """A ModernBERT model directory (or hub id) read: its config with ``overrides``, its tensors, its weights file."""
    config, state, weights = read_named_directory(path, ModernBertConfig.load, overrides)
    return config, state, weights


class ModernBertPreTrained(nn.Module):
    """The base of the ModernBERT classes: each loads and saves itself in ``transformers``' layout."""

    config: ModernBertConfig

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike, *, ignore_mismatched_sizes: bool = False, **config_overrides: Any
    ) -> Self:
        """This class from a directory ``transformers`` (or bertkit) wrote, in eval mode."""
        config, state, weights = read_checkpoint(path, config_overrides)
        model = cls(config)
        load_state(model, state, ignore_mismatched_sizes=ignore_mismatched_sizes, source=str(weights))
        return model.eval()

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """``config.json`` (``model_type: modernbert``, ``architectures: [<class>]``) and ``model.safetensors``
        under transformers' names (the tied decoder weight left out, as transformers does), each atomically."""
        config = replace(self.config, architectures=[type(self).__name__])
        if isinstance(self, ModernBertForQuestionAnswering):
            config = replace(config, num_labels=2, id2label=None)
        tied = {"decoder.weight"} if self.config.tie_word_embeddings else set()
        return write_named_directory(self, config, directory, tied)

    def set_attention(self, name: str | None) -> None:
        """Run attention through ``name`` (one of ``ATTN_IMPLEMENTATIONS``), or None: by the device of each
        forward (``varlen`` on CUDA where the kernel exists, ``sdpa`` elsewhere)."""
        chosen = None if name is None else attention_for(name, None, ATTN_IMPLEMENTATIONS, architecture="ModernBERT")
        for module in self.modules():
            if isinstance(module, ModernBertAttention):
                module.implementation = chosen


# ------------------------------------------------------------------------------------------ the encoder
class ModernBertModel(ModernBertPreTrained):
    """The ModernBERT encoder: embeddings, ``num_hidden_layers`` pre-norm layers, the final norm."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = layer_norm(config)
        self.gradient_checkpointing = False
        init_weights(self, config)
        self.set_attention(config.attn_implementation)

    def gradient_checkpointing_enable(self, enabled: bool = True) -> None:
        """Recompute each layer's activations in the backward pass: less memory, more compute."""
        self.gradient_checkpointing = enabled

    def forward_packed(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, *, output_hidden_states: bool = False
    ) -> tuple[Tensor, Packed, list[Tensor]]:
        """The final vectors of the real tokens ``[T, H]``, where they sit, and (on request) every layer's input."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        packed = Packed.of(attention_mask)
        x = self.embeddings(packed.unpad(input_ids))
        states = []
        for layer in self.layers:
            if output_hidden_states:
                states.append(x)
            if self.gradient_checkpointing and self.training:
                x = checkpoint(layer, x, packed, use_reentrant=False)
            else:
                x = layer(x, packed)
        if output_hidden_states:
            states.append(x)
        return self.final_norm(x), packed, states

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertOutput:
        """``input_ids [B, L]``, ``attention_mask`` 1 for real tokens (default all); ``token_type_ids`` is accepted
        and ignored (ModernBERT has no segments). Padded positions of the outputs are zeros."""
        if output_attentions:
            raise ConfigError("ModernBERT does not return attention probabilities (it never forms them)")
        x, packed, states = self.forward_packed(input_ids, attention_mask, output_hidden_states=output_hidden_states)
        hidden = tuple(packed.pad(s) for s in states) if output_hidden_states else None
        return BertOutput(packed.pad(x), None, hidden)


# ------------------------------------------------------------------------------------------ heads
class ModernBertPredictionHead(nn.Module):
    """``norm(act(dense(x)))``: before the decoder and before every classifier."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = activation(config.classifier_activation)
        self.norm = layer_norm(config)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.act(self.dense(x)))


class ModernBertForMaskedLM(ModernBertPreTrained):
    """The encoder, the prediction head and the decoder (tied to the token embedding, with a bias)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=config.decoder_bias)
        init_weights(self.head, config)
        init_weights(self.decoder, config)
        if config.tie_word_embeddings:
            self.decoder.weight = self.model.embeddings.tok_embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        masked_positions: Tensor | None = None,
        masked_labels: Tensor | None = None,
        labels: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """As ``BertForMaskedLM``: ``masked_positions``/``masked_labels [B, P]`` or dense ``labels [B, L]`` (-100
        = not predicted) run the head on the predicted tokens only; with neither, logits are ``[B, L, V]``."""
        out = self.model(input_ids, None, attention_mask, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)  # fmt: skip
        hidden = out.last_hidden_state
        if masked_positions is not None:  # the rows masked_lm reads
            hidden = hidden.gather(1, masked_positions[..., None].expand(-1, -1, hidden.shape[-1]))
        logits, loss, correct, count = masked_lm(
            lambda x: self.decoder(self.head(x)), hidden, masked_positions, masked_labels, labels
        )
        return MaskedLMOutput(loss, logits, correct, count, out.hidden_states)


class _Classifying(ModernBertPreTrained):
    """The encoder, the prediction head, dropout and a linear classifier of ``outputs`` classes."""

    def __init__(self, config: ModernBertConfig, outputs: int):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, outputs)
        init_weights(self.head, config)
        nn.init.trunc_normal_(self.classifier.weight, std=config.hidden_size**-0.5,
                              a=-config.initializer_cutoff_factor * config.hidden_size**-0.5,
                              b=config.initializer_cutoff_factor * config.hidden_size**-0.5)  # fmt: skip
        nn.init.zeros_(self.classifier.bias)

    def classify(self, x: Tensor) -> Tensor:
        return self.classifier(self.drop(self.head(x)))


class ModernBertForSequenceClassification(_Classifying):
    """``classifier_pooling`` (``cls`` or ``mean``) of the final vectors, the head, the classifier. Loss: MSE for
    one label, cross-entropy for integer labels, BCE-with-logits for multi-label float targets."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, config.num_labels)

    def problem_type(self, labels: Tensor) -> str:
        return problem_type(self.config.problem_type, self.num_labels, labels)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        out = self.model(input_ids, None, attention_mask, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)  # fmt: skip
        logits = self.classify(pool_tokens(out.last_hidden_state, attention_mask, self.config.classifier_pooling))
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.problem_type(labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states)


class ModernBertForTokenClassification(_Classifying):
    """The head and classifier on every token; cross-entropy ignoring label -100."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, config.num_labels)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        label_normalizer: Tensor | float | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TokenClassifierOutput:
        """``label_normalizer``: divide the summed token losses by it instead of by this batch's count."""
        out = self.model(input_ids, None, attention_mask, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)  # fmt: skip
        logits = self.classify(out.last_hidden_state)
        loss = None if labels is None else token_classification_loss(logits, labels, label_normalizer)
        return TokenClassifierOutput(loss, logits, out.hidden_states)


class ModernBertForQuestionAnswering(_Classifying):
    """Extractive QA: the head and a 2-way classifier give start and end logits at every position.
    Loss = (CE(start) + CE(end)) / 2; positions outside the sequence are clamped to L and ignored."""

    def __init__(self, config: ModernBertConfig):
        super().__init__(config, 2)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        start_positions: Tensor | None = None,
        end_positions: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> QuestionAnsweringOutput:
        out = self.model(input_ids, None, attention_mask, output_hidden_states=output_hidden_states,
                         output_attentions=output_attentions)  # fmt: skip
        start_logits, end_logits = self.classify(out.last_hidden_state).unbind(-1)
        start_logits, end_logits = start_logits.contiguous(), end_logits.contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits, end_logits, out.hidden_states)


MODERNBERT_CLASSES: dict[str, type[ModernBertPreTrained]] = {
    cls.__name__: cls
    for cls in (
        ModernBertModel,
        ModernBertForMaskedLM,
        ModernBertForSequenceClassification,
        ModernBertForTokenClassification,
        ModernBertForQuestionAnswering,
    )
}
"""ModernBERT classes by name, as ``config.json``'s ``architectures`` writes them."""


# ------------------------------------------------------------------------------------------ the record
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


class ModernBertTraceable(nn.Module):
    """A ModernBERT model's inference forward on the padded layout (``modernbert_padded``), a traceable function
    of ``input_ids`` and ``attention_mask``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        encoder = model if isinstance(model, ModernBertModel) else model.model
        assert isinstance(encoder, ModernBertModel)
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
        assert isinstance(model, ModernBertForQuestionAnswering)  # the exporter admits the classes of ARCHITECTURE only
        start, end = model.classify(hidden).unbind(-1)
        return start, end


def _flops_per_token(config: ModernBertConfig, seq_len: int, masked: float) -> float:
    """Training FLOPs per token as a run executes it: every layer on every token (local layers at their window)
    and the prediction head with the tied decoder at the masked positions."""
    h, v = config.hidden_size, config.vocab_size
    return config.flops_per_token(seq_len) + 3 * 2 * (h * h + h * v) * masked / seq_len


def _pretraining_config(config: ModernBertConfig, tokenizer: Mapping[str, Any], fresh: bool) -> ModernBertConfig:
    """A fresh model's ``config`` with the size and special ids of a prepared dataset's tokenizer; a checkpoint's
    as it is, with embeddings for every token of the tokenizer."""
    if not fresh:
        if tokenizer["vocab_size"] > config.vocab_size:
            raise ConfigError(
                f"the dataset's tokenizer has {tokenizer['vocab_size']} tokens but the checkpoint to start from "
                f"only {config.vocab_size} embeddings"
            )
        return config
    return replace(
        config, vocab_size=tokenizer["vocab_size"], pad_token_id=tokenizer["pad_id"], bos_token_id=tokenizer["cls_id"],
        eos_token_id=tokenizer["sep_id"], cls_token_id=tokenizer["cls_id"], sep_token_id=tokenizer["sep_id"],
    )  # fmt: skip


def _with_dropout(config: ModernBertConfig, p: float) -> ModernBertConfig:
    return replace(config, attention_dropout=p, mlp_dropout=p, embedding_dropout=p)


ARCHITECTURE = Architecture(
    name="modernbert",
    title="ModernBERT",
    config_class=ModernBertConfig,
    base=ModernBertPreTrained,
    attention_implementations=ATTN_IMPLEMENTATIONS,
    classes={
        "BertModel": ModernBertModel,
        "BertForMaskedLM": ModernBertForMaskedLM,
        "BertForSequenceClassification": ModernBertForSequenceClassification,
        "BertForTokenClassification": ModernBertForTokenClassification,
        "BertForQuestionAnswering": ModernBertForQuestionAnswering,
    },
    encoder_attribute="model",
    load_state=load_state,
    traceable=ModernBertTraceable,
    onnx_inputs=("input_ids", "attention_mask"),
    head_tensors={"fill_mask": ("head.dense.weight",), "answer": ("classifier.weight",)},
    token_types=False,
    attention_probabilities=False,
    int8_reduce_range=True,
    flops_per_token=_flops_per_token,
    pretraining_config=_pretraining_config,
    with_dropout=_with_dropout,
    presets=tuple(MODERNBERT_PRESETS),
)
"""ModernBERT's record in ``bertkit.models.registry``: in transformers' layout, no segments, no NSP, attention
probabilities never formed; onnxruntime's int8 weights kept to 7 bits (``bertkit.export.quantize_onnx``)."""
