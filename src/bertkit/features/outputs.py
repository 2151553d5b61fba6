"""A model's outputs into results, in numpy: pooling token vectors into one vector, joining the windows of a long
text, L2 normalisation, softmax and sigmoid.

Every engine's outputs go through these functions (PyTorch's tensors as numpy arrays, ONNX Runtime's as they
come), so ``embed``, ``classify`` and ``rerank`` give the same numbers from a checkpoint and from its ONNX export.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bertkit.features.windows import max_context


def as_float32(values: Any) -> np.ndarray:
    """``values`` (a numpy array, or a tensor of any engine on any device) as a float32 numpy array."""
    if not isinstance(values, np.ndarray) and hasattr(values, "detach"):  # a torch tensor, without importing torch
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def pool(hidden: np.ndarray, attention_mask: np.ndarray, pooling: str) -> np.ndarray:
    """Sentence vectors ``[N, H]`` of token vectors ``[N, L, H]``, as sentence-transformers' ``Pooling`` makes
    them: ``cls`` (the first token), ``max`` over real tokens (padding never wins) or ``mean`` over real tokens."""
    if pooling == "cls":
        return hidden[:, 0]
    mask = np.asarray(attention_mask)[..., None].astype(hidden.dtype)
    if pooling == "max":
        return np.where(mask > 0, hidden, np.finfo(hidden.dtype).min).max(axis=1)
    return (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their L2 norm (at least 1e-12, as ``torch.nn.functional.normalize``), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def join_windows(spans: Sequence[tuple[int, int]], states: Sequence[np.ndarray], pooling: str) -> np.ndarray:
    """One long text's vector (or token vectors, for ``none``) from its windows' token vectors ``[tokens, H]``
    (``[CLS] content [SEP]``; ``spans``: each window's ``(start, content length)`` in the text's content). Each
    token is taken from the window where it has the most context (as SQuAD does); ``cls`` averages the windows'
    ``[CLS]`` vectors and ``max`` takes the maximum over every token of every window."""
    if pooling == "cls":
        return np.mean([state[0] for state in states], axis=0)
    if pooling == "max":
        return np.concatenate(list(states)).max(axis=0)
    n_content = spans[-1][0] + spans[-1][1]
    best = max_context(n_content, spans)
    rows = [states[0][0]] + [states[best[t]][t - spans[best[t]][0] + 1] for t in range(n_content)] + [states[-1][-1]]
    tokens = np.stack(rows)
    return tokens.mean(axis=0) if pooling == "mean" else tokens


def sigmoid(values: Any) -> Any:
    """The logistic function, in float64."""
    return 1.0 / (1.0 + np.exp(-np.asarray(values, dtype=np.float64)))


def softmax(logits: Any) -> np.ndarray:
    """Probabilities over the last axis, in float64."""
    array = np.asarray(logits, dtype=np.float64)
    exp = np.exp(array - array.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)
