"""What the pipelines accept as input: one text, a ``(text, text_pair)`` pair, or a list of them; checked once,
with a one-line error naming the bad input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bertkit.errors import BertkitError
from bertkit.inference.loading import Loaded
from bertkit.tokenizer import Encoding

TextInput = str | tuple[str, str]


def is_single(inputs: Any) -> bool:
    """Whether ``inputs`` is one input (a result comes back alone) rather than a list (a list comes back)."""
    return isinstance(inputs, (str, tuple))


def as_list(inputs: Any, what: str) -> list[Any]:
    if is_single(inputs):
        return [inputs]
    if not isinstance(inputs, Sequence):
        raise BertkitError(f"{what} must be a string or a list of strings, got {type(inputs).__name__}")
    return list(inputs)


def check_texts(texts: Sequence[Any], what: str = "text") -> None:
    for i, text in enumerate(texts):
        parts = text if isinstance(text, tuple) else (text,)
        if len(parts) > 2 or not all(isinstance(p, str) for p in parts):
            raise BertkitError(f"{what} {i} must be a string or a pair of strings, got {text!r:.60}")


def paired_texts(first: Any, second: Any, first_name: str, second_name: str) -> tuple[list[Any], list[Any]]:
    """Two inputs that go together (strings, or lists of equal length) as two checked lists of strings."""
    firsts, seconds = as_list(first, first_name), as_list(second, second_name)
    if len(firsts) != len(seconds):
        raise BertkitError(
            f"got {len(firsts)} {first_name}s but {len(seconds)} {second_name}s; give one of each per pair"
        )
    check_texts(firsts, first_name)
    check_texts(seconds, second_name)
    return firsts, seconds


def input_length(loaded: Loaded, max_length: int | None) -> int:
    """The caller's ``max_length``, else the model's (``Loaded.max_length``); never more than its positions."""
    return min(max_length or loaded.max_length, loaded.max_positions)


def encode(
    loaded: Loaded, texts: Sequence[TextInput], max_length: int | None, truncation: bool = True
) -> list[Encoding]:
    """Encodings of ``texts``; pairs are always cut to ``max_length``, single texts only with ``truncation``."""
    length = input_length(loaded, max_length)
    firsts = [t if isinstance(t, str) else t[0] for t in texts]
    pairs = [None if isinstance(t, str) else t[1] for t in texts]
    if any(p is not None for p in pairs):
        return [
            loaded.tokenizer.encode(a, b, max_length=length, truncation=truncation or b is not None)
            for a, b in zip(firsts, pairs)
        ]
    return list(loaded.tokenizer.encode_batch(firsts, max_length=length, truncation=truncation))
