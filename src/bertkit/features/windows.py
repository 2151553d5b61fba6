"""Overlapping windows over a text longer than the model, and the window that sees each token best.

SQuAD's context windows, classification's ``--long-text windows`` and ``embed``'s long texts share them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def window_starts(length: int, width: int, stride: int) -> list[int]:
    """Starts of windows of ``width`` items covering ``length`` items, ``stride`` apart.

    Google BERT's doc-span loop: the stride is the step between window starts (not the overlap), and the
    last window ends exactly where the items end. ``window_starts(10, 4, 3) == [0, 3, 6]``.
    """
    if width < 1 or stride < 1:
        raise ValueError(f"window width and stride must be positive, got {width} and {stride}")
    starts, start = [], 0
    while True:
        starts.append(start)
        if start + width >= length:
            return starts
        start += min(width, stride)


def max_context(n_tokens: int, spans: Sequence[tuple[int, int]]) -> list[int]:
    """For each of ``n_tokens`` tokens, the window (index into ``spans`` of ``(start, length)``) where
    ``min(left, right) + 0.01 * length`` is largest; ties go to the earlier window, as in Google's
    ``_check_is_max_context``."""
    best = [0] * n_tokens
    best_score = [-math.inf] * n_tokens
    for number, (start, length) in enumerate(spans):
        for t in range(start, start + length):
            score = min(t - start, start + length - 1 - t) + 0.01 * length
            if score > best_score[t]:
                best[t], best_score[t] = number, score
    return best
