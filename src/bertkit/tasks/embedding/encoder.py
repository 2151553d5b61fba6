"""The module the loop trains for sentence embeddings: the encoder, its pooling, the loss, and the gradient cache.

:class:`SentenceEncoder` wraps an encoder (``BertModel``'s role: ``bertkit.models.registry``). In training, ``forward`` takes a
batch of texts (``input_ids``, ``attention_mask``; every text of every row once) and ``columns [B, C]``, the index
of each row's c-th text, embeds the texts and returns the loss of their vectors in that ``[B, C, D]`` layout. Out
of training, without ``columns``, it returns the pooled vectors (dev scoring).

Texts are embedded in *mini-batches* sorted by length, each cut to its own longest text, so a batch of short
questions and long passages wastes no compute on padding (``mini_batch_size`` texts each).

The gradient cache (GradCache, sentence-transformers' ``CachedMultipleNegativesRankingLoss``), ``cache=True``:
the mini-batches are embedded without a graph, the loss and its gradient with respect to the vectors are
computed, and when the loop calls ``backward`` each mini-batch is embedded again with a graph and the cached
gradient is pushed through it. Memory is then that of one mini-batch, whatever the batch; each mini-batch's
random state (dropout) is saved before the first pass and restored for the second, so the gradients are those
of the uncached loss over the same mini-batches, to float rounding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from bertkit.models import registry
from bertkit.models.heads import pool_tokens

Loss = Callable[[Tensor, Tensor | None], Tensor]


@dataclass
class EmbeddingOutput:
    """What :class:`SentenceEncoder` returns: the loss in training, the pooled vectors otherwise."""

    loss: Tensor | None
    embeddings: Tensor
    """``[B, C, D]`` in training (rows x columns), ``[N, D]`` for plain texts."""


class _RandomState:
    """The CPU and (when used) CUDA random states, to replay a forward pass's dropout exactly."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state(self.cuda, self.device)


class SentenceEncoder(nn.Module):
    """``bert`` + pooling + ``loss`` (see the module doc); ``bert`` is what is saved."""

    def __init__(
        self,
        bert: nn.Module,
        loss: Loss,
        *,
        pooling: str = "mean",
        mini_batch_size: int = 32,
        cache: bool = False,
    ) -> None:
        super().__init__()
        if mini_batch_size < 1:
            raise ValueError(f"mini_batch_size must be positive, got {mini_batch_size}")
        self.bert, self.loss_fn, self.pooling = bert, loss, pooling
        self.mini_batch_size, self.cache = mini_batch_size, cache

    @property
    def config(self) -> Any:
        """The encoder's config, as the heads expose theirs."""
        return registry.config_of(self.bert)

    def embed(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """Pooled vectors ``[N, H]`` of padded texts (one forward pass)."""
        lengths = attention_mask.sum(1)
        width = int(lengths.max())
        ids, mask = input_ids[:, :width], attention_mask[:, :width]
        return pool_tokens(self.bert(ids, None, mask).last_hidden_state, mask, self.pooling)

    def mini_batches(self, attention_mask: Tensor) -> list[Tensor]:
        """Text indexes in mini-batches of similar length (longest first)."""
        order = torch.argsort(attention_mask.sum(1), descending=True, stable=True)
        return list(order.split(self.mini_batch_size))

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        columns: Tensor | None = None,
        scores: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> EmbeddingOutput:
        if columns is None:
            return EmbeddingOutput(None, self.embed(input_ids, attention_mask))
        parts = self.mini_batches(attention_mask)
        if self.cache and torch.is_grad_enabled():
            return self._cached(input_ids, attention_mask, columns, scores, parts)
        vectors = torch.cat([self.embed(input_ids[p], attention_mask[p]) for p in parts])
        embeddings = vectors[_inverse(torch.cat(parts))][columns]
        return EmbeddingOutput(self.loss_fn(embeddings, scores), embeddings)

    def _cached(
        self, input_ids: Tensor, attention_mask: Tensor, columns: Tensor, scores: Tensor | None, parts: list[Tensor]
    ) -> EmbeddingOutput:
        """First pass without a graph, the loss's gradient by the vectors, and a hook on the returned loss
        that runs the second pass when the loop calls ``backward``."""
        states, pieces = [], []
        with torch.no_grad():
            for p in parts:
                states.append(_RandomState(input_ids.device))
                pieces.append(self.embed(input_ids[p], attention_mask[p]))
        order = torch.cat(parts)
        vectors = torch.cat(pieces)[_inverse(order)].detach().requires_grad_()
        with torch.enable_grad():
            loss = self.loss_fn(vectors[columns], scores)
            (gradient,) = torch.autograd.grad(loss, vectors)
        device_type = input_ids.device.type
        autocast_on, autocast_dtype = torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)

        def second_pass(grad_output: Tensor) -> None:
            after = _RandomState(input_ids.device)
            with torch.enable_grad(), torch.autocast(device_type, autocast_dtype, autocast_on):
                for p, state in zip(parts, states):
                    state.restore()
                    again = self.embed(input_ids[p], attention_mask[p])
                    again.backward(gradient[p] * grad_output.to(gradient.dtype))
            after.restore()

        result = loss.detach().requires_grad_()
        result.register_hook(second_pass)
        return EmbeddingOutput(result, vectors.detach()[columns])


def _inverse(order: Tensor) -> Tensor:
    """The permutation that undoes ``order``."""
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse
