"""Masked-LM selection: THE one place where tokens are chosen and replaced, for static and dynamic masking.

Faithful to google-research/bert ``create_masked_lm_predictions`` (reference section 5), on token ids:

- candidates are all positions except ``[CLS]``, ``[SEP]`` (and ``[PAD]``, which never occurs in an
  instance but must never be chosen if a caller passes padded rows);
- with whole-word masking a WordPiece continuation (``##x``) joins the previous candidate's group, so
  all pieces of a word are masked together;
- the groups are shuffled, ``num_to_predict = min(max_predictions, max(1, round(len(tokens) * prob)))``
  (``len`` includes the special tokens; Python's banker's rounding, as the original);
- a group is skipped if it would overshoot ``num_to_predict``;
- each chosen token is replaced by ``[MASK]`` with probability 0.8, kept with 0.1, and replaced by a
  token drawn uniformly from the WHOLE vocabulary (specials and ``[unused]`` included, as the original)
  with 0.1;
- predictions are returned sorted by position.

Same distribution, cheaper draws: without whole words the group shuffle is a uniform k-subset and is
drawn with ``rng.sample``; the 80/10/10 draws follow the selection instead of interleaving with it.

The random source is always passed in (a ``random.Random``), never global, so the same call sequence
gives the same masks: static masking seeds it per corpus block, dynamic masking per (seed, epoch,
instance index).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bertkit.errors import DataError

MASK_PROB = 0.8
"""Share of the chosen tokens replaced by ``[MASK]``."""
KEEP_PROB_OF_REST = 0.5
"""Of the remaining 20 %, the share left unchanged (the others become a random token)."""


@dataclass(frozen=True)
class MaskingSpec:
    """Everything masking needs to know about the vocabulary and the masking settings."""

    mask_id: int
    """Id of ``[MASK]``."""
    vocab_size: int
    """Random replacements are drawn from ``[0, vocab_size)``."""
    special_ids: frozenset[int]
    """Ids never selected: ``[CLS]``, ``[SEP]``, ``[PAD]``."""
    masked_lm_prob: float = 0.15
    """Fraction of the tokens (specials included in the count, as BERT) to predict."""
    max_predictions_per_seq: int = 20
    """Cap on predictions per instance; the width of ``masked_positions``."""
    whole_word_mask: bool = False
    """Mask all WordPieces of a word together."""
    is_continuation: np.ndarray | None = None
    """Boolean per vocabulary id: the token is a ``##`` continuation piece. Required for whole words."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise DataError(f"--masked-lm-prob must be in [0, 1], got {self.masked_lm_prob}")
        if self.max_predictions_per_seq < 0:
            raise DataError(f"--max-predictions-per-seq must be >= 0, got {self.max_predictions_per_seq}")
        if self.whole_word_mask and self.is_continuation is None:
            raise DataError("whole-word masking needs the continuation table of the vocabulary")


@dataclass
class MaskedTokens:
    """Result of masking one instance."""

    tokens: list[int]
    """The input ids after replacement (same length as the input)."""
    positions: list[int]
    """Chosen positions, ascending."""
    labels: list[int]
    """Original ids at ``positions``."""


def continuation_table(vocab: dict[str, int], vocab_size: int | None = None) -> np.ndarray:
    """Boolean array over ids: True where the WordPiece starts with ``##`` (continues a word)."""
    size = vocab_size if vocab_size is not None else max(vocab.values()) + 1
    table = np.zeros(size, dtype=bool)
    for token, index in vocab.items():
        if token.startswith("##") and index < size:
            table[index] = True
    return table


def mask_tokens(tokens: Sequence[int], spec: MaskingSpec, rng: random.Random) -> MaskedTokens:
    """Choose and replace masked-LM targets in one ``[CLS] A [SEP] B [SEP]`` instance (see module doc)."""
    tokens = list(tokens)
    special = spec.special_ids
    num_to_predict = min(spec.max_predictions_per_seq, max(1, round(len(tokens) * spec.masked_lm_prob)))
    if spec.whole_word_mask:
        order = _whole_word_order(tokens, spec, rng, num_to_predict)
    else:
        # Single-token groups are never skipped, so "shuffle all, take the first k" is a uniform
        # k-subset: ``sample`` draws the same distribution with k instead of len(tokens) random numbers.
        candidates = [i for i, t in enumerate(tokens) if t not in special]
        order = rng.sample(candidates, min(num_to_predict, len(candidates)))
    output = list(tokens)
    chosen: list[int] = []
    for i in order:
        # 80 % [MASK]; of the rest half unchanged (so the model cannot trust an unmasked token) and
        # half a random token (so it must keep a representation of every position).
        if rng.random() < MASK_PROB:
            output[i] = spec.mask_id
        elif rng.random() < KEEP_PROB_OF_REST:
            pass
        else:
            output[i] = rng.randint(0, spec.vocab_size - 1)
        chosen.append(i)
    chosen.sort()
    return MaskedTokens(tokens=output, positions=chosen, labels=[tokens[i] for i in chosen])


def _whole_word_order(tokens: list[int], spec: MaskingSpec, rng: random.Random, num_to_predict: int) -> list[int]:
    """Positions to mask, in choice order: shuffled word groups, skipping any that would overshoot."""
    continuation = spec.is_continuation
    assert continuation is not None  # MaskingSpec requires it for whole-word masking
    groups: list[list[int]] = []
    for i, token in enumerate(tokens):
        if token in spec.special_ids:
            continue
        if groups and token < len(continuation) and continuation[token]:
            groups[-1].append(i)
        else:
            groups.append([i])
    rng.shuffle(groups)
    order: list[int] = []
    for group in groups:
        if len(order) >= num_to_predict:
            break
        if len(order) + len(group) > num_to_predict:
            continue
        order.extend(group)
    return order


def derive_seed(*keys: int) -> int:
    """A well-mixed 128-bit seed from integer keys, e.g. (seed, block, stream) or (seed, epoch, index).

    Used to seed one ``random.Random`` per unit of work, so results do not depend on which process does
    the work or in which order.
    """
    words = np.random.SeedSequence([int(k) for k in keys]).generate_state(4, dtype=np.uint32)
    return int.from_bytes(words.tobytes(), "little")


def static_masker(spec: MaskingSpec) -> Callable[[list[int], random.Random], tuple[list[int], list[int], list[int]]]:
    """``masker(tokens, rng) -> (tokens, positions, labels)`` for instance creation (masks baked in)."""

    def masker(tokens: list[int], rng: random.Random) -> tuple[list[int], list[int], list[int]]:
        out = mask_tokens(tokens, spec, rng)
        return out.tokens, out.positions, out.labels

    return masker


@dataclass(frozen=True)
class MaskingRate:
    """The masking rate of dynamic masking over a run: ``start`` at the first micro-batch, then linearly to
    ``end`` over ``horizon`` global micro-batches (and ``end`` after them); ``end`` None keeps ``start``.

    A pure function of the micro-batch's place in the run, so that a resumed run draws the same masks.
    """

    start: float
    """Rate of the first micro-batch."""
    end: float | None = None
    """Rate reached after ``horizon`` micro-batches; None: constant ``start``."""
    horizon: int = 1
    """Global micro-batches of the decay (the run's)."""

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if value is not None and not 0.0 < value <= 1.0:
                raise DataError(f"the masking rate must be in (0, 1], got {name} {value}")
        if self.horizon < 1:
            raise DataError(f"the masking-rate horizon must be at least 1 micro-batch, got {self.horizon}")

    @property
    def highest(self) -> float:
        """The largest rate of the run (sizes the prediction slots)."""
        return max(self.start, self.end if self.end is not None else self.start)

    def at(self, micro_batch: int) -> float:
        """The rate of global micro-batch ``micro_batch`` (0-based, counted from the start of training)."""
        if self.end is None:
            return self.start
        return self.at_share(micro_batch / self.horizon)

    def at_share(self, share: float) -> float:
        """The rate once ``share`` of the run is done (0 to 1): how a run on a time budget, whose length in
        micro-batches is not known in advance, follows the schedule."""
        if self.end is None:
            return self.start
        return self.start + (self.end - self.start) * min(max(share, 0.0), 1.0)
