"""The BERT network, top to bottom: embeddings, self-attention, encoder layer, encoder, pooler, BertModel,
the masked-LM head, and the pre-training and fine-tuning heads.

Numerics follow the original BERT and Hugging Face's ``modeling_bert.py``: post-LN layers, exact (erf) GELU,
LayerNorm eps from the config (1e-12), additive masking of padded keys only. ``BertConfig.layer_norm_position =
"pre"`` makes the layers pre-LN with a final LayerNorm, as ``transformers``' RoBERTa-PreLayerNorm computes them. Attention runs through
``torch.nn.functional.scaled_dot_product_attention``; an eager path computes the same thing by hand and can
return the attention probabilities. Parameter names are bertkit's own; ``bertkit.checkpoint_files`` holds the
explicit table to and from Hugging Face names (Q, K and V are one fused projection here).

Training batches with much padding are unpadded (``Packed``): projections, feed-forward and LayerNorm, nearly
all of the work, run on the real tokens only; the attention alone sees the padded layout.

Each class loads and saves itself as in ``transformers`` (``BertModel.from_pretrained(path)``,
``model.save_pretrained(directory)``) through the floor below, ``bertkit.checkpoint_files``; the model knows
nothing of the loader above (``bertkit.weights``: quantization, compilation, tokenizer files).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from bertkit.checkpoint_files import (
    HEAD_NAMES,
    QUANTIZATION_KEY,
    TF_NAMES,
    load_hf_state_dict,
    read_pretrained,
    write_pretrained,
)
from bertkit.config import BERT_ATTN_IMPLEMENTATIONS, PRESETS, BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.architecture import Architecture
from bertkit.models.attention import (
    Packed,
    choose_attention,
    flex_attention_module,
    flex_kernel,
    refuse_dropout,
    varlen_attention,
    varlen_kernel_exists,
)
from bertkit.models.heads import (
    BertOutput,
    MaskedLMOutput,
    PreTrainingOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
    masked_lm,
    problem_type,
    sequence_classification_loss,
    span_loss,
    token_classification_loss,
)
from bertkit.models.parts import activation, init_weights

ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flex", "varlen")
"""``sdpa``: ``scaled_dot_product_attention`` on the padded layout (every device); ``eager``: the same by hand;
``flex``: FlexAttention with a block mask of the sequences (document mask); ``varlen``: variable-length
attention over the flattened sequences (``torch.nn.attention.varlen`` on CUDA, a loop of SDPA calls elsewhere).
``flex`` and ``varlen`` have no attention-probability dropout: train them with ``attention_probs_dropout_prob=0``."""
UNPAD_SHARE = 0.1
"""A training batch with at least this share of padding runs its layers on the real tokens only (``Packed``).
Below it there is little to save (length-grouped batches have 2-5 %), and unpadding costs two copies per layer."""


# ------------------------------------------------------------------------------------------ pieces
class Embeddings(nn.Module):
    """word[ids] + position[0..L-1] + token_type[segments], then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, position_ids: Tensor | None = None
    ) -> Tensor:
        """``position_ids [B, L]``: each token's position in its own sequence (packed rows restart at 0 with
        each sequence; the packer keeps every sequence within ``max_position_embeddings``); default 0..L-1."""
        seq_len = input_ids.shape[1]
        if position_ids is None and seq_len > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence of {seq_len} tokens is longer than max_position_embeddings "
                f"({self.position_embeddings.num_embeddings}); truncate the input"
            )
        positions = torch.arange(seq_len, device=input_ids.device) if position_ids is None else position_ids
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.layer_norm(x))


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused Q/K/V projection and the output projection.

    ``mask`` is a boolean ``[B, 1, 1, L]`` (True = real key) or None when nothing is padded, which lets
    SDPA choose its fastest kernel. Only keys are masked; padded queries produce values nobody reads.
    """

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa"):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob
        self.attn_implementation = attn_implementation

    def forward(
        self,
        x: Tensor,
        mask: AttentionMask,
        output_attentions: bool = False,
        rows: Tensor | None = None,
        unpadded: Packed | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``rows [B, K]``: attend from those positions only (every position is still a key); the output is
        then ``[B, K, H]``. ``unpadded``: ``x`` is the ``[T, H]`` real tokens of a padded batch; the
        projections run on those alone and only the attention itself sees the padded ``[B, L]`` layout.
        ``mask``: a boolean tensor (True = may attend), a ``FlexLayout`` (FlexAttention) or a ``VarlenLayout``
        (variable-length attention over ``x``'s tokens flattened, padded or not: no padded layout at all)."""
        hidden = x.shape[-1]
        dropout_p = self.dropout_p if self.training else 0.0
        if isinstance(mask, VarlenLayout):
            refuse_dropout("varlen", dropout_p)
            q, k, v = self.qkv(x.reshape(-1, hidden)).view(-1, 3, self.num_heads, self.head_dim).unbind(1)
            context = varlen_attention(q, k, v, mask.cu_seqlens, mask.max_seqlen)
            return self.out(context.reshape(x.shape)), None
        if unpadded is not None:
            q, k, v = self._split_heads(unpadded.pad(self.qkv(x)))
        elif rows is None:
            q, k, v = self._split_heads(self.qkv(x))
        else:
            weight, bias = self.qkv.weight, self.qkv.bias
            (q,) = self._split_heads(F.linear(gather_rows(x, rows), weight[:hidden], bias[:hidden]), parts=1)
            k, v = self._split_heads(F.linear(x, weight[hidden:], bias[hidden:]), parts=2)
        probs = None
        if isinstance(mask, FlexLayout):
            refuse_dropout("flex", dropout_p)
            context = flex_kernel(q)(q, k, v, block_mask=mask.block_mask)
        elif output_attentions or self.attn_implementation == "eager":
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if mask is not None:
                # finfo.min rather than -inf: a fully padded row stays finite (as in Hugging Face's eager path)
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            probs = scores.softmax(dim=-1)
            context = F.dropout(probs, dropout_p, training=self.training) @ v
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        context = context.transpose(1, 2).reshape(q.shape[0], q.shape[2], hidden)
        if unpadded is not None:
            context = unpadded.unpad(context)
        return self.out(context), probs

    def _split_heads(self, projected: Tensor, parts: int = 3) -> tuple[Tensor, ...]:
        """``[B, L, parts * H]`` -> ``parts`` tensors ``[B, heads, L, head_dim]``."""
        batch, seq_len, _ = projected.shape
        return projected.view(batch, seq_len, parts, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)


@dataclass(frozen=True)
class VarlenLayout:
    """Where each sequence of a batch starts among its tokens flattened (``[B * L]``, or the ``[T]`` real tokens of
    an ``Packed`` batch): ``cu_seqlens [S + 1]`` int32, 0 first and the token count last; padding runs are
    sequences of their own, whose outputs nobody reads. ``max_seqlen`` bounds a sequence's length."""

    cu_seqlens: Tensor
    max_seqlen: int


@dataclass(frozen=True)
class FlexLayout:
    """FlexAttention's block mask for a batch: a token attends to the tokens of its own sequence only."""

    block_mask: Any
    """``torch.nn.attention.flex_attention.BlockMask``."""


AttentionMask = Tensor | FlexLayout | VarlenLayout | None


def sequence_starts(sequence_ids: Tensor) -> Tensor:
    """Boolean ``[B, L]``: True where a sequence begins, at each row's first token and wherever the id changes."""
    starts = torch.ones_like(sequence_ids, dtype=torch.bool)
    starts[:, 1:] = sequence_ids[:, 1:] != sequence_ids[:, :-1]
    return starts


def packed_positions(sequence_ids: Tensor) -> Tensor:
    """Position ids ``[B, L]`` that restart at 0 with every sequence of a packed row (no host sync)."""
    index = torch.arange(sequence_ids.shape[1], device=sequence_ids.device).expand_as(sequence_ids)
    first = torch.where(sequence_starts(sequence_ids), index, 0).cummax(dim=1).values
    return index - first


def varlen_layout(sequence_ids: Tensor, keep: Tensor | None = None, max_seqlen: int | None = None) -> VarlenLayout:
    """The ``VarlenLayout`` of rows of ``sequence_ids [B, L]`` (``keep``: only the flat positions an ``Packed``
    batch keeps). Finding the starts costs one host sync; a packer that knows them gives ``cu_seqlens`` itself."""
    starts = sequence_starts(sequence_ids).reshape(-1)
    if keep is not None:
        starts = starts.index_select(0, keep)
    first = starts.nonzero().squeeze(1)
    cu_seqlens = torch.cat([first, first.new_full((1,), starts.numel())]).to(torch.int32)
    return VarlenLayout(cu_seqlens, max_seqlen or sequence_ids.shape[1])


def document_block_mask(sequence_ids: Tensor) -> Any:
    """FlexAttention's ``BlockMask`` that keeps each token's attention within its sequence of ``sequence_ids``."""

    def same_sequence(b: Tensor, h: Tensor, q: Tensor, kv: Tensor) -> Tensor:
        return sequence_ids[b, q] == sequence_ids[b, kv]

    batch, seq_len = sequence_ids.shape
    return flex_attention_module().create_block_mask(
        same_sequence, batch, None, seq_len, seq_len, device=sequence_ids.device
    )


def gather_rows(x: Tensor, rows: Tensor) -> Tensor:
    """``x[b, rows[b, k]]`` for every b, k: ``[B, L, H]`` and ``[B, K]`` give ``[B, K, H]``."""
    return torch.gather(x, 1, rows.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


def residual_norm(
    x: Tensor, update: Tensor, weight: Tensor, bias: Tensor, eps: float, p: float, training: bool
) -> Tensor:
    """``LayerNorm(x + Dropout(update))``: the post-LN residual step, one fused kernel when compiled."""
    return F.layer_norm(x + F.dropout(update, p, training), (x.shape[-1],), weight, bias, eps)


def feed_forward(h: Tensor, weights: tuple[Tensor, ...], act: str, eps: float, p: float, training: bool) -> Tensor:
    """``LayerNorm(h + Dropout(W2 act(W1 h + b1) + b2))`` with ``weights = (W1, b1, W2, b2, gamma, beta)``. A
    function of tensors, not of a module, so that one compiled graph serves every layer."""
    w1, b1, w2, b2, gamma, beta = weights
    inner = F.linear(h, w1, b1)
    if act == "gelu":
        inner = F.gelu(inner)
    elif act == "relu":
        inner = F.relu(inner)
    else:  # gelu_new, gelu_pytorch_tanh (BertConfig allows no other)
        inner = F.gelu(inner, approximate="tanh")
    return residual_norm(h, F.linear(inner, w2, b2), gamma, beta, eps, p, training)


class EncoderLayer(nn.Module):
    """Post-LN Transformer block: ``h = LN(x + Drop(Attn(x)))``; ``out = LN(h + Drop(W2 act(W1 h)))``. With
    ``config.layer_norm_position == "pre"`` (RoBERTa-PreLayerNorm's layout, the same parameters):
    ``h = x + Drop(Attn(LN(x)))``; ``out = h + Drop(W2 act(W1 LN(h)))``.

    ``self.fused``: None runs the modules as they are; ``bertkit.compiling.compile_layers`` sets it to compiled
    ``(residual_norm, feed_forward)``, functions of tensors that compute the same two position-wise steps in
    fused kernels, one graph for all layers (attention stays outside the graph, as ModernBERT compiles). Those
    are post-LN steps: a pre-LN layer runs its modules as they are."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa"):
        super().__init__()
        self.attention = SelfAttention(config, attn_implementation)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.ffn_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.act = activation(config.hidden_act)
        self.hidden_act = config.hidden_act
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_norm = config.pre_layer_norm
        self.fused: tuple[Callable[..., Tensor], Callable[..., Tensor]] | None = None

    def forward(
        self,
        x: Tensor,
        mask: AttentionMask,
        output_attentions: bool = False,
        rows: Tensor | None = None,
        unpadded: Packed | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """``rows [B, K]``: compute the block's output at those positions only (``[B, K, H]``).
        ``unpadded``: ``x`` is ``[T, H]``, the real tokens only (see ``Packed``), and so is the output."""
        if self.pre_norm:
            return self._pre_norm_forward(x, mask, output_attentions, rows, unpadded)
        attended, probs = self.attention(x, mask, output_attentions, rows, unpadded)
        if rows is not None:
            x = gather_rows(x, rows)
        if self.fused is None:
            h = self.attention_norm(x + self.dropout(attended))
            return self.ffn_norm(h + self.dropout(self.ffn_out(self.act(self.ffn_in(h))))), probs
        fused_residual_norm, fused_feed_forward = self.fused
        p, norm, ffn_norm = self.dropout.p, self.attention_norm, self.ffn_norm
        h = fused_residual_norm(x, attended, norm.weight, norm.bias, norm.eps, p, self.training)
        weights = (
            self.ffn_in.weight,
            self.ffn_in.bias,
            self.ffn_out.weight,
            self.ffn_out.bias,
            ffn_norm.weight,
            ffn_norm.bias,
        )
        return fused_feed_forward(h, weights, self.hidden_act, ffn_norm.eps, p, self.training), probs

    def _pre_norm_forward(
        self, x: Tensor, mask: AttentionMask, output_attentions: bool, rows: Tensor | None, unpadded: Packed | None
    ) -> tuple[Tensor, Tensor | None]:
        """The pre-LN block (the residual stream ``x`` is never normalised; each branch reads it normalised)."""
        attended, probs = self.attention(self.attention_norm(x), mask, output_attentions, rows, unpadded)
        if rows is not None:
            x = gather_rows(x, rows)
        h = x + self.dropout(attended)
        return h + self.dropout(self.ffn_out(self.act(self.ffn_in(self.ffn_norm(h))))), probs


class Encoder(nn.Module):
    """A stack of ``num_hidden_layers`` encoder layers, optionally with activation checkpointing; pre-LN layers
    end with one more LayerNorm (``final_norm``) on the last layer's output."""

    def __init__(self, config: BertConfig, attn_implementation: str = "sdpa"):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config, attn_implementation) for _ in range(config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.pre_layer_norm else None
        self.gradient_checkpointing = False

    def forward(
        self,
        x: Tensor,
        mask: AttentionMask,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        last_layer_rows: Tensor | None = None,
        unpadded: Packed | None = None,
    ) -> tuple[Tensor, tuple[Tensor, ...] | None, tuple[Tensor, ...] | None]:
        """``last_layer_rows [B, K]``: the last layer computes only those positions (see ``BertModel``).
        ``unpadded``: run the layers on the real tokens only (not with per-layer outputs); the output is
        padded again, with zeros at the padded positions. Per-layer outputs are the layers' own (before a pre-LN
        stack's ``final_norm``, as ``transformers`` returns them)."""
        if unpadded is not None and (output_hidden_states or output_attentions):
            raise ValueError("unpadded layers do not return per-layer outputs")
        hidden_states = [x] if output_hidden_states else None
        attentions: list[Tensor] | None = [] if output_attentions else None
        if unpadded is not None:
            x = unpadded.unpad(x)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            rows = last_layer_rows if i == last else None
            if rows is not None and unpadded is not None:  # a last layer of a few rows reads the padded layout
                x, unpadded = unpadded.pad(x), None
            if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
                x, probs = checkpoint(layer, x, mask, output_attentions, rows, unpadded, use_reentrant=False)
            else:
                x, probs = layer(x, mask, output_attentions, rows, unpadded)
            if hidden_states is not None:
                hidden_states.append(x)
            if attentions is not None:
                attentions.append(probs)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if unpadded is not None:
            x = unpadded.pad(x)
        return (
            x,
            tuple(hidden_states) if hidden_states is not None else None,
            tuple(attentions) if attentions is not None else None,
        )


class Pooler(nn.Module):
    """``tanh(Dense(h[:, 0]))``: the [CLS] vector through one more layer, trained by NSP."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


def _check_attn_implementation(name: str | None) -> str:
    # Unrequested, BERT runs sdpa: it trains with attention dropout (0.1), which neither flex nor varlen computes.
    exists = varlen_kernel_exists()
    return choose_attention(
        name or "sdpa", None, allowed=ATTN_IMPLEMENTATIONS, varlen_exists=exists, architecture="BERT"
    )


class PreTrainedMixin(nn.Module):
    """The base of every model class here (the encoder and each head), so that other code can tell a bertkit
    model from any module, and each class loads and saves itself as in Hugging Face ``transformers``.

    ``from_pretrained``/``save_pretrained`` call down to ``bertkit.checkpoint_files`` (the name tables and the
    files); quantizing, compiling and tokenizer files are ``bertkit.weights``' job (``load_model``,
    ``save_pretrained``), which the model never imports."""

    config: BertConfig

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike, *, ignore_mismatched_sizes: bool = False, **config_overrides: Any
    ) -> Self:
        """This class built from a Hugging Face-layout directory's ``config.json`` and loaded with its weights
        (``model.safetensors``, sharded or ``pytorch_model.bin``, Google's TF checkpoint; or a hub id), in eval
        mode. ``config_overrides`` replace config fields (``num_labels=3``...). The checks are
        ``bertkit.load_model``'s: missing or misshapen encoder tensors raise ``CheckpointError``, a missing head
        is initialised with a notice (``ignore_mismatched_sizes``: also one of another size)."""
        pretrained = read_pretrained(path, config_overrides)
        if pretrained.quantization:
            raise CheckpointError(
                f"{pretrained.directory} holds {pretrained.quantization}-quantized weights; load it with "
                f"bertkit.load_model"
            )
        pretrained.check_sizes()
        model = cls(pretrained.config)
        source = str(pretrained.weights)
        load_hf_state_dict(model, pretrained.state, ignore_mismatched_sizes=ignore_mismatched_sizes, source=source)
        return model.eval()

    def set_attention(self, name: str | None) -> None:
        """Run attention through ``name`` (one of ``ATTN_IMPLEMENTATIONS``; None: ``sdpa``)."""
        chosen = _check_attn_implementation(name)
        for module in self.modules():
            if isinstance(module, BertModel | SelfAttention):
                module.attn_implementation = chosen

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write ``config.json`` and ``model.safetensors`` in Hugging Face's layout (names, ``architectures``),
        each atomically, so that ``transformers``' class of the same name loads the directory. Returns it."""
        if self.config.extra.get(QUANTIZATION_KEY):
            raise CheckpointError(
                f"this {type(self).__name__} is quantized; save it with bertkit.save_pretrained, which writes "
                f"its int8 weights with their scales"
            )
        return write_pretrained(self, directory)


# ------------------------------------------------------------------------------------------ BertModel
class BertModel(PreTrainedMixin):
    """The BERT encoder: embeddings, ``num_hidden_layers`` post-LN layers (pre-LN ones and a final LayerNorm with
    ``config.layer_norm_position == "pre"``) and (optionally) the pooler.

    ``attn_implementation`` ("sdpa" or "eager") overrides ``config.attn_implementation``; both compute the
    same function, eager by hand (and it is always used for a call with ``output_attentions=True``).
    """

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True, attn_implementation: str | None = None):
        super().__init__()
        _check_position_embedding_type(config)
        self.config = config
        self.attn_implementation = _check_attn_implementation(attn_implementation or config.attn_implementation)
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config, self.attn_implementation)
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.unpad = True
        """Run training batches with ``UNPAD_SHARE`` or more padding on their real tokens only (``Packed``);
        False pads them through every layer, as Hugging Face does."""
        self.apply(lambda m: init_weights(m, config.initializer_range, config.pad_token_id))

    def gradient_checkpointing_enable(self, enabled: bool = True) -> None:
        """Recompute each layer's activations in the backward pass: less memory, about 30% more compute."""
        self.encoder.gradient_checkpointing = enabled

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        output_rows: Tensor | None = None,
        sequence_ids: Tensor | None = None,
        cu_seqlens: Tensor | None = None,
    ) -> BertOutput:
        """``input_ids [B, L]``; ``token_type_ids`` 0/1 segments (default all 0); ``attention_mask`` 1 for real
        tokens and 0 for padding (default all 1).

        Packed rows (``bertkit.data.packing``): ``sequence_ids [B, L]`` numbers the sequences within each row;
        a token attends to its own sequence only and positions restart at 0 with each one. ``cu_seqlens``: the
        sequences' starts over the flattened batch, as the packer computed them (varlen attention then needs no
        host sync to find them). ``pooler_output`` is then the first sequence's of each row.

        ``output_rows [B, K]`` (positions): ``last_hidden_state`` is then ``[B, K, H]``, the final vectors at
        those positions only, and the last layer computes just those rows (plus [CLS] for the pooler). A
        head that reads a few positions (MLM at the masked tokens, classification at [CLS]) skips most of
        the last layer's work this way; the values are the same as gathering from the full output.
        """
        key_mask = None
        # Unpadded batches reach SDPA with no mask (fastest kernel); the check costs one host sync per
        # forward, so under torch.compile (where it would break the graph) the mask is always passed.
        if attention_mask is not None and (torch.compiler.is_compiling() or not bool(attention_mask.all())):
            key_mask = attention_mask[:, None, None, :].bool()
        if sequence_ids is not None and attention_mask is not None:  # padding is a sequence of its own
            sequence_ids = sequence_ids.masked_fill(attention_mask == 0, -1)
        positions = packed_positions(sequence_ids) if sequence_ids is not None else None
        x = self.embeddings(input_ids, token_type_ids, positions)
        dense = output_hidden_states or output_attentions  # every layer's full output is asked for
        unpadded = None if dense else self._unpadded(key_mask)
        mask = self._attention_mask(key_mask, sequence_ids, cu_seqlens, unpadded, dense)
        if dense:
            x, hidden_states, attentions = self.encoder(x, mask, output_hidden_states, output_attentions)
            pooled = self.pooler(x) if self.pooler is not None else None
            return BertOutput(
                x if output_rows is None else gather_rows(x, output_rows), pooled, hidden_states, attentions
            )
        if output_rows is not None and not (mask is None or (isinstance(mask, Tensor) and sequence_ids is None)):
            # the last layer's few query rows work with a key mask only: gather them from the full output
            x, _, _ = self.encoder(x, mask, unpadded=unpadded)
            return BertOutput(gather_rows(x, output_rows), self.pooler(x) if self.pooler is not None else None)
        if output_rows is None:
            x, _, _ = self.encoder(x, mask, unpadded=unpadded)
            return BertOutput(x, self.pooler(x) if self.pooler is not None else None)
        if self.pooler is None:
            x, _, _ = self.encoder(x, mask, last_layer_rows=output_rows, unpadded=unpadded)
            return BertOutput(x, None)
        cls_first = torch.cat([output_rows.new_zeros(output_rows.shape[0], 1), output_rows], dim=1)
        x, _, _ = self.encoder(x, mask, last_layer_rows=cls_first, unpadded=unpadded)
        return BertOutput(x[:, 1:], self.pooler(x))

    def _attention_mask(
        self,
        key_mask: Tensor | None,
        sequence_ids: Tensor | None,
        cu_seqlens: Tensor | None,
        unpadded: Packed | None,
        dense: bool,
    ) -> AttentionMask:
        """What the layers' attention takes for this batch and ``attn_implementation``: the key mask (or None)
        for padded rows; for packed rows the block-diagonal mask of the sequences; a ``FlexLayout`` or a
        ``VarlenLayout`` for those implementations (``dense``: per-layer outputs asked for, a plain mask)."""
        implementation = self.attn_implementation
        if dense or implementation in ("sdpa", "eager"):
            if sequence_ids is None:
                return key_mask
            return (sequence_ids[:, :, None] == sequence_ids[:, None, :]).unsqueeze(1)
        if sequence_ids is None and key_mask is not None:  # padded rows: each row's tokens, then its padding
            sequence_ids = key_mask[:, 0, 0].long() - 1
        if sequence_ids is None:
            return None  # nothing padded, nothing packed: plain SDPA computes the same, as fast
        if implementation == "flex":
            return FlexLayout(document_block_mask(sequence_ids))
        if cu_seqlens is not None and unpadded is None:
            return VarlenLayout(cu_seqlens.to(torch.int32), self.config.max_position_embeddings)
        keep = unpadded.indices if unpadded is not None else None
        return varlen_layout(sequence_ids, keep, self.config.max_position_embeddings)

    def _unpadded(self, mask: Tensor | None) -> Packed | None:
        """Unpad a training batch whose padding is at least ``UNPAD_SHARE`` of it. Only in training: in
        evaluation the padded positions keep the values Hugging Face computes there (nothing reads them,
        but outputs stay identical tensor for tensor), and inference batches are length-sorted anyway."""
        if mask is None or not (self.training and self.unpad) or torch.compiler.is_compiling():
            return None
        real = int(mask.sum())
        return Packed.of(mask) if real <= (1.0 - UNPAD_SHARE) * mask.numel() else None


def _check_position_embedding_type(config: BertConfig) -> None:
    kind = config.extra.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise ConfigError(f"position_embedding_type {kind!r} is not supported; bertkit implements 'absolute'")


# ------------------------------------------------------------------------------------------ MLM head
class MaskedLMHead(nn.Module):
    """``Dense(H->H)``, activation, LayerNorm, then the decoder: ``x @ E.T + bias`` with E the word embeddings.

    ``decoder.weight`` is tied by the owning model to ``bert.embeddings.word_embeddings.weight`` (the same
    Parameter), unless ``config.tie_word_embeddings`` is false: then it is a matrix of its own, initialised as
    every weight. ``decoder.bias`` is the head's own zero-initialised output bias.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = activation(config.hidden_act)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.layer_norm(self.act(self.dense(hidden))))


def _tie(head: MaskedLMHead, bert: BertModel) -> None:
    if bert.config.tie_word_embeddings:
        head.decoder.weight = bert.embeddings.word_embeddings.weight


# ------------------------------------------------------------------------------------------ heads
class BertForPreTraining(PreTrainedMixin):
    """BERT with the masked-LM head (decoder tied to the word embeddings by default) and the next-sentence head on
    the pooled output."""

    def __init__(self, config: BertConfig, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=True, attn_implementation=attn_implementation)
        self.mlm = MaskedLMHead(config)
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.mlm.apply(lambda m: init_weights(m, config.initializer_range))
        self.nsp.apply(lambda m: init_weights(m, config.initializer_range))
        _tie(self.mlm, self.bert)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        masked_positions: Tensor | None = None,
        masked_labels: Tensor | None = None,
        labels: Tensor | None = None,
        next_sentence_label: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        sequence_ids: Tensor | None = None,
        cu_seqlens: Tensor | None = None,
    ) -> PreTrainingOutput:
        """``masked_positions``/``masked_labels [B, P]`` (label -100 in padding slots) or dense ``labels [B, L]``
        (-100 = not predicted); ``next_sentence_label [B]`` 0 = B follows A, 1 = random."""
        out = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            output_rows=masked_positions,
            sequence_ids=sequence_ids,
            cu_seqlens=cu_seqlens,
        )
        mlm_logits, mlm_loss, correct, count = masked_lm(
            self.mlm, out.last_hidden_state, masked_positions, masked_labels, labels
        )
        nsp_logits = self.nsp(out.pooler_output)
        nsp_loss = None
        if next_sentence_label is not None and sequence_ids is not None:
            raise ConfigError("packed rows hold several sequences: the next-sentence task needs unpacked batches")
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label.reshape(-1))
        loss: Tensor | None
        if mlm_loss is not None and nsp_loss is not None:
            loss = mlm_loss + nsp_loss
        else:
            loss = mlm_loss if mlm_loss is not None else nsp_loss
        return PreTrainingOutput(
            loss, mlm_loss, nsp_loss, mlm_logits, nsp_logits, correct, count, out.hidden_states, out.attentions
        )


class BertForMaskedLM(PreTrainedMixin):
    """BERT with the masked-LM head only (no pooler, no NSP), as Hugging Face's ``BertForMaskedLM``."""

    def __init__(self, config: BertConfig, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False, attn_implementation=attn_implementation)
        self.mlm = MaskedLMHead(config)
        self.mlm.apply(lambda m: init_weights(m, config.initializer_range))
        _tie(self.mlm, self.bert)

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
        sequence_ids: Tensor | None = None,
        cu_seqlens: Tensor | None = None,
    ) -> MaskedLMOutput:
        out = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            output_rows=masked_positions,
            sequence_ids=sequence_ids,
            cu_seqlens=cu_seqlens,
        )
        logits, loss, correct, count = masked_lm(
            self.mlm, out.last_hidden_state, masked_positions, masked_labels, labels
        )
        return MaskedLMOutput(loss, logits, correct, count, out.hidden_states, out.attentions)


def _classifier_dropout(config: BertConfig) -> float:
    return config.hidden_dropout_prob if config.classifier_dropout is None else config.classifier_dropout


class BertForSequenceClassification(PreTrainedMixin):
    """``Linear(H -> num_labels)`` on the dropped-out pooled output. Loss: MSE when ``num_labels == 1``
    (regression), cross-entropy for integer labels, BCE-with-logits for multi-label float targets."""

    def __init__(self, config: BertConfig, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=True, attn_implementation=attn_implementation)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        init_weights(self.classifier, config.initializer_range)

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
        # Only [CLS] is read, so the last layer computes that row alone (no other output rows).
        out = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            output_rows=input_ids.new_zeros(input_ids.shape[0], 0),
        )
        logits = self.classifier(self.dropout(out.pooler_output))
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.problem_type(labels))
        return SequenceClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class BertForTokenClassification(PreTrainedMixin):
    """``Linear(H -> num_labels)`` on every dropped-out token vector; cross-entropy ignoring label -100."""

    def __init__(self, config: BertConfig, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False, attn_implementation=attn_implementation)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        init_weights(self.classifier, config.initializer_range)

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
        sequence_ids: Tensor | None = None,
        cu_seqlens: Tensor | None = None,
    ) -> TokenClassifierOutput:
        """``label_normalizer``: divide the summed token losses by this (the mean count of labeled tokens per
        batch) instead of by this batch's own count, so that every token weighs the same in batches of
        similar lengths (length grouping puts short sentences together; a per-batch mean would weigh
        their tokens several times more than those of long ones)."""
        out = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            sequence_ids=sequence_ids,
            cu_seqlens=cu_seqlens,
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))
        loss = None if labels is None else token_classification_loss(logits, labels, label_normalizer)
        return TokenClassifierOutput(loss, logits, out.hidden_states, out.attentions)


class BertForQuestionAnswering(PreTrainedMixin):
    """Extractive QA: ``Linear(H -> 2)`` gives start and end logits at every position.

    Loss = (CE(start) + CE(end)) / 2; positions outside the sequence are clamped to L and ignored.
    """

    def __init__(self, config: BertConfig, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False, attn_implementation=attn_implementation)
        # The loss's softmax runs over every position, padding included (as the reference's does), so the
        # padded positions must keep their values: no unpadding.
        self.bert.unpad = False
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        init_weights(self.qa_outputs, config.initializer_range)

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
        out = self.bert(
            input_ids,
            token_type_ids,
            attention_mask,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(-1)
        start_logits, end_logits = start_logits.contiguous(), end_logits.contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringOutput(loss, start_logits, end_logits, out.hidden_states, out.attentions)


HEAD_CLASSES: dict[str, type[nn.Module]] = {
    cls.__name__: cls
    for cls in (
        BertModel,
        BertForPreTraining,
        BertForMaskedLM,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
    )
}
"""Model classes by name; the names are Hugging Face's, as written in ``config.json``'s ``architectures``."""


# ------------------------------------------------------------------------------------------ the record
class BertTraceable(nn.Module):
    """The model's inference forward as a traceable function of the three input tensors.

    ``BertModel.forward`` drops the attention mask when nothing is padded (a host-side check that lets SDPA
    pick its fastest kernel); a tracer would freeze whichever branch the example took, so the encoder is
    called here with the mask always applied.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        bert = model if isinstance(model, BertModel) else model.bert
        assert isinstance(bert, BertModel)
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
        assert isinstance(model, BertForQuestionAnswering)  # the exporter admits the classes of ARCHITECTURE only
        start, end = model.qa_outputs(hidden).unbind(-1)
        return start, end


def _load_state(model: nn.Module, state: dict[str, Tensor], *, source: str = "") -> None:
    load_hf_state_dict(model, state, source=source)


def _pretraining_config(config: BertConfig, tokenizer: Mapping[str, Any], fresh: bool) -> BertConfig:
    """``config`` with the size and [PAD] id of a prepared dataset's tokenizer."""
    return replace(config, vocab_size=tokenizer["vocab_size"], pad_token_id=tokenizer["pad_id"])


def _with_dropout(config: BertConfig, p: float) -> BertConfig:
    return replace(config, hidden_dropout_prob=p, attention_probs_dropout_prob=p)


ARCHITECTURE = Architecture(
    name="bert",
    title="BERT",
    config_class=BertConfig,
    base=PreTrainedMixin,
    classes={name: cls for name, cls in HEAD_CLASSES.items()},
    encoder_attribute="bert",
    attention_implementations=BERT_ATTN_IMPLEMENTATIONS,
    load_state=_load_state,
    traceable=BertTraceable,
    hf_names=HEAD_NAMES,
    tf_names=TF_NAMES,
    nsp=True,
    pre_ln=True,
    int8=True,
    pretraining_config=_pretraining_config,
    with_dropout=_with_dropout,
    presets=tuple(PRESETS),
)
"""BERT's record in ``bertkit.models.registry``."""
