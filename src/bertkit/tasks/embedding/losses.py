"""The losses of sentence-embedding training, each a small pure function of the batch's sentence vectors.

Every loss takes ``embeddings [B, C, D]``: row ``b`` holds the vectors of example ``b``'s texts in column
order (anchor, positive, then each hard negative; or sentence1, sentence2 for scored pairs), unnormalised.
Similarities are cosines, so the vectors' lengths never matter (``Normalize`` in the saved model only makes
the served vectors unit-length).

* :func:`in_batch_negatives_loss` (InfoNCE, sentence-transformers' ``MultipleNegativesRankingLoss``);
* :func:`cosent_loss` (sentence-transformers' ``CoSENTLoss``) for pairs scored 0..1;
* :func:`matryoshka_loss`, a wrapper that applies either at several leading widths of the vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

PairLoss = Callable[[Tensor, Tensor | None], Tensor]
"""``loss(embeddings [B, C, D], scores [B] or None) -> scalar``."""


def cosine_matrix(a: Tensor, b: Tensor) -> Tensor:
    """``[N, D] x [M, D] -> [N, M]`` cosine similarities (zero vectors give 0, as in sentence-transformers)."""
    return F.normalize(a, p=2, dim=-1) @ F.normalize(b, p=2, dim=-1).T


def in_batch_negatives_loss(embeddings: Tensor, scale: float = 20.0, *, symmetric: bool = False) -> Tensor:
    """Multiple-negatives ranking loss (InfoNCE with in-batch negatives).

    Input: ``embeddings [B, C, D]`` with ``C >= 2``: column 0 the anchors, column 1 their positives, columns
    2.. hard negatives. Each anchor ``i`` is scored against every candidate of the batch, all positives then
    all negatives column by column (``B * (C - 1)`` candidates), as ``scale * cos``; the loss is the
    cross-entropy of picking candidate ``i``, its own positive, averaged over anchors. ``symmetric`` also
    scores each positive against all anchors and averages the two directions (sentence-transformers'
    ``MultipleNegativesSymmetricRankingLoss``).
    """
    if embeddings.dim() != 3 or embeddings.shape[1] < 2:
        raise ValueError(f"in-batch negatives need [B, C >= 2, D] vectors, got {tuple(embeddings.shape)}")
    batch = embeddings.shape[0]
    anchors = embeddings[:, 0]
    candidates = embeddings[:, 1:].transpose(0, 1).reshape(-1, embeddings.shape[-1])  # positives first
    scores = cosine_matrix(anchors, candidates).float() * scale
    labels = torch.arange(batch, device=embeddings.device)
    loss = F.cross_entropy(scores, labels)
    if symmetric:
        backward = scores[:, :batch].T  # positive j against every anchor
        loss = (loss + F.cross_entropy(backward, labels)) / 2
    return loss


def cosent_loss(embeddings: Tensor, scores: Tensor, scale: float = 20.0) -> Tensor:
    """CoSENT: ``log(1 + sum over pairs (i, j) with score_i > score_j of exp(scale * (cos_j - cos_i)))``.

    Input: ``embeddings [B, 2, D]`` (sentence1, sentence2 of each pair) and ``scores [B]``, the gold
    similarities (any scale: only their order counts). Every pair ranked above another by its score should
    have the higher cosine; the ``1 +`` is a zero logit in the log-sum-exp, as sentence-transformers writes it.
    """
    if embeddings.dim() != 3 or embeddings.shape[1] != 2:
        raise ValueError(f"CoSENT needs [B, 2, D] vectors (sentence1, sentence2), got {tuple(embeddings.shape)}")
    cosines = F.cosine_similarity(embeddings[:, 0], embeddings[:, 1], dim=-1).float() * scale
    differences = cosines[None, :] - cosines[:, None]  # [i, j] = cos_j - cos_i
    ranked = scores[:, None] > scores[None, :]  # pairs (i, j) where i should score higher
    differences = differences - (~ranked).float() * 1e12
    flat = torch.cat([differences.new_zeros(1), differences.reshape(-1)])
    return torch.logsumexp(flat, dim=0)


def matryoshka_loss(
    base: PairLoss, dims: Sequence[int], weights: Sequence[float] | None = None
) -> Callable[[Tensor, Tensor | None], Tensor]:
    """``base`` applied to the vectors cut to each of ``dims`` leading components, the weighted sum (weights 1
    by default, as sentence-transformers' ``MatryoshkaLoss``). The losses compare cosines, so every cut
    vector is in effect re-normalised. Same input as ``base``."""
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"matryoshka dims must be positive, got {list(dims)}")
    factors = list(weights) if weights is not None else [1.0] * len(dims)
    if len(factors) != len(dims):
        raise ValueError(f"{len(factors)} matryoshka weights for {len(dims)} dims")

    def loss(embeddings: Tensor, scores: Tensor | None) -> Tensor:
        width = embeddings.shape[-1]
        if max(dims) > width:
            raise ValueError(f"matryoshka dim {max(dims)} exceeds the model's {width}-wide vectors")
        total = embeddings.new_zeros((), dtype=torch.float32)
        for dim, weight in zip(dims, factors):
            total = total + weight * base(F.normalize(embeddings[..., :dim], p=2, dim=-1), scores)
        return total

    return loss
