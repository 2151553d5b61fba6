"""The scores several task families share, defined as the benchmarks define them (GLUE's): accuracy, binary
F1, Matthews correlation, Pearson and Spearman correlation (numpy only), fractions in [0, 1] or correlations.

A family's own scores live in its folder: ``tasks.ner.metrics`` (``conlleval``'s entity scores, token scores
of tags that are not chunked) and ``tasks.qa.metrics`` (SQuAD's exact match and F1).
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Any

import numpy as np


def accuracy(predictions: Sequence, references: Sequence) -> float:
    """Fraction of predictions equal to their reference."""
    _check_lengths(predictions, references)
    return float(np.mean([p == r for p, r in zip(predictions, references)]))


def f1_binary(predictions: Sequence[Any], references: Sequence[Any], positive: Any = 1) -> float:
    """F1 of the ``positive`` class (GLUE's MRPC/QQP F1). 0.0 when there are no true positives."""
    _check_lengths(predictions, references)
    tp = sum(p == positive and r == positive for p, r in zip(predictions, references))
    fp = sum(p == positive and r != positive for p, r in zip(predictions, references))
    fn = sum(p != positive and r == positive for p, r in zip(predictions, references))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(predictions: Sequence, references: Sequence) -> float:
    """Matthews correlation coefficient, multi-class form (Gorodkin's R_K); 0.0 when undefined (CoLA's metric)."""
    _check_lengths(predictions, references)
    classes = sorted(set(predictions) | set(references), key=repr)
    index = {c: i for i, c in enumerate(classes)}
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    for p, r in zip(predictions, references):
        confusion[index[r], index[p]] += 1
    t = confusion.sum(axis=1)  # true occurrences per class
    p = confusion.sum(axis=0)  # predicted occurrences per class
    c = np.trace(confusion)
    s = confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return 0.0 if denominator == 0 else float((c * s - t @ p) / denominator)


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Pearson correlation; 0.0 when either side is constant (undefined)."""
    _check_lengths(x, y)
    a = np.asarray(x, dtype=np.float64) - np.mean(x)
    b = np.asarray(y, dtype=np.float64) - np.mean(y)
    denominator = np.sqrt((a @ a) * (b @ b))
    return 0.0 if denominator == 0 else float(a @ b / denominator)


def _average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their positions (as scipy's ``rankdata``)."""
    array = np.asarray(values, dtype=np.float64)
    order = np.argsort(array, kind="mergesort")
    ranks = np.empty(len(array), dtype=np.float64)
    sorted_values = array[order]
    start = 0
    while start < len(array):
        end = start
        while end + 1 < len(array) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation: Pearson on average ranks (ties handled as scipy does)."""
    _check_lengths(x, y)
    return pearson(_average_ranks(x), _average_ranks(y))


def _check_lengths(a: Sized, b: Sized) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} predictions but {len(b)} references")
    if not len(a):
        raise ValueError("no predictions to score")
