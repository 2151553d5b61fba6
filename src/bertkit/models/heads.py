"""What every architecture's heads share: the output of each role, and the head computations that do not
depend on the encoder: the masked-LM task on the predicted rows only, the losses of sequence classification,
token classification and span extraction, and sentence pooling. Each architecture keeps its own head modules
(and so its checkpoint's tensor names: BERT's ``cls.predictions``, ModernBERT's ``head``/``decoder``) and
calls these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


# ------------------------------------------------------------------------------------------ outputs
@dataclass
class BertOutput:
    """What ``BertModel`` returns."""

    last_hidden_state: Tensor
    """``[B, L, H]`` output of the last encoder layer."""
    pooler_output: Tensor | None
    """``[B, H]`` ``tanh(Dense(h[:, 0]))``; None for heads built without a pooler (as in Hugging Face)."""
    hidden_states: tuple[Tensor, ...] | None = None
    """Embeddings output and every layer's output (``num_hidden_layers + 1`` tensors), on request."""
    attentions: tuple[Tensor, ...] | None = None
    """Every layer's attention probabilities ``[B, heads, L, L]``, on request (uses the eager path)."""


@dataclass
class PreTrainingOutput:
    """What ``BertForPreTraining`` returns. Losses are None when their labels are not given."""

    loss: Tensor | None
    """``mlm_loss + nsp_loss`` (or whichever of them has labels)."""
    mlm_loss: Tensor | None
    nsp_loss: Tensor | None
    mlm_logits: Tensor
    """``[B, P, V]`` with ``masked_positions``; ``[N, V]`` (the N labelled positions, row-major) with dense
    ``labels``; the full ``[B, L, V]`` with neither."""
    nsp_logits: Tensor
    """``[B, 2]``; class 0 = sentence B follows A, 1 = B is random."""
    mlm_correct: Tensor | None = None
    """Number of labelled positions whose argmax is the label (0-dim long tensor; no host sync)."""
    mlm_count: Tensor | None = None
    """Number of labelled positions (0-dim long tensor)."""
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class MaskedLMOutput:
    """What ``BertForMaskedLM`` returns; ``logits`` has the same shapes as ``PreTrainingOutput.mlm_logits``."""

    loss: Tensor | None
    logits: Tensor
    mlm_correct: Tensor | None = None
    mlm_count: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class SequenceClassifierOutput:
    loss: Tensor | None
    logits: Tensor
    """``[B, num_labels]``."""
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class TokenClassifierOutput:
    loss: Tensor | None
    logits: Tensor
    """``[B, L, num_labels]``."""
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class QuestionAnsweringOutput:
    loss: Tensor | None
    start_logits: Tensor
    """``[B, L]``."""
    end_logits: Tensor
    """``[B, L]``."""
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


# ------------------------------------------------------------------------------------------ head computations
def masked_lm(
    head: Callable[[Tensor], Tensor],
    sequence_output: Tensor,
    masked_positions: Tensor | None,
    masked_labels: Tensor | None,
    labels: Tensor | None,
) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """Logits, loss, correct and count of the MLM task. With positions or labels, only the hidden states of the
    masked tokens go through the transform and the vocabulary projection (sparse MLM). With positions,
    ``sequence_output`` holds just those rows already (``BertModel(output_rows=masked_positions)``). ``head`` maps
    hidden states to vocabulary logits (BERT's ``MaskedLMHead``, ModernBERT's head and decoder)."""
    if masked_positions is not None:
        logits = head(sequence_output)  # [B, P, V]
        targets = masked_labels
    elif labels is not None:
        selected = labels != -100
        logits = head(sequence_output[selected])  # [N, V]
        targets = labels[selected]
    else:
        return head(sequence_output), None, None, None
    if targets is None:
        return logits, None, None, None
    real = targets != -100
    count = real.sum()
    # Sum / count (not mean) so that a batch without any prediction gives 0, not NaN.
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100, reduction="sum"
    ) / count.clamp(min=1)
    correct = ((logits.argmax(-1) == targets) & real).sum()
    return logits, loss, correct, count


def problem_type(configured: str | None, num_labels: int, labels: Tensor) -> str:
    """The loss of a sequence head: the config's ``problem_type``, else regression for one output, single-label
    for integer labels, multi-label for float targets (as ``transformers`` decides)."""
    if configured is not None:
        return configured
    if num_labels == 1:
        return "regression"
    return "single_label_classification" if labels.dtype in (torch.long, torch.int) else "multi_label_classification"


def sequence_classification_loss(logits: Tensor, labels: Tensor, kind: str) -> Tensor:
    """MSE (``regression``), cross-entropy (``single_label_classification``) or BCE-with-logits (multi-label) of
    ``logits [B, num_labels]``, in float32."""
    if kind == "regression":
        if logits.shape[-1] == 1:
            return F.mse_loss(logits.float().squeeze(-1), labels.float().reshape(-1))
        return F.mse_loss(logits.float(), labels.float())
    if kind == "single_label_classification":
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits.float(), labels.float())


def token_classification_loss(logits: Tensor, labels: Tensor, label_normalizer: Tensor | float | None) -> Tensor:
    """Cross-entropy over the tokens whose label is not -100: their mean, or their sum divided by
    ``label_normalizer`` when given."""
    flat_logits, flat_labels = logits.float().view(-1, logits.shape[-1]), labels.view(-1)
    if label_normalizer is None:
        return F.cross_entropy(flat_logits, flat_labels, ignore_index=-100)
    return F.cross_entropy(flat_logits, flat_labels, ignore_index=-100, reduction="sum") / label_normalizer


def span_loss(start_logits: Tensor, end_logits: Tensor, start_positions: Tensor, end_positions: Tensor) -> Tensor:
    """(CE(start) + CE(end)) / 2 over ``[B, L]`` logits; positions outside the sequence are clamped to L and
    ignored."""
    seq_len = start_logits.shape[1]
    start = start_positions.reshape(-1).clamp(0, seq_len)
    end = end_positions.reshape(-1).clamp(0, seq_len)
    return (
        F.cross_entropy(start_logits.float(), start, ignore_index=seq_len)
        + F.cross_entropy(end_logits.float(), end, ignore_index=seq_len)
    ) / 2


def pool_tokens(hidden: Tensor, attention_mask: Tensor, pooling: str) -> Tensor:
    """Sentence vectors of token vectors ``[N, L, H]``, as sentence-transformers' ``Pooling`` makes them:
    ``mean`` over real tokens, ``cls`` (the first token) or ``max`` over real tokens (padding never wins). One
    function for training and inference, so a model is embedded the way it was trained."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    if pooling == "max":
        return hidden.masked_fill(mask == 0, torch.finfo(hidden.dtype).min).amax(dim=1)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
