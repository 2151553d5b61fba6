"""The service's limits: how much one request may ask, and how requests are batched."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bertkit.errors import ConfigError


@dataclass
class ServeLimits:
    """Caps on requests (answered 413 or 422 with a one-line reason) and the batching knobs."""

    max_body_bytes: int = 1_000_000
    """Largest request body; larger ones get 413 before they are parsed."""
    max_items: int = 2048
    """Texts (or pairs, or questions) in one request: OpenAI's embeddings API takes 2,048, so a client written
    for it sends its batches unchanged. Memory stays bounded by the body size and the token budget of each
    forward pass (``max_batch_tokens``), not by this count."""
    max_chars: int = 10_000
    """Characters of one text; a question-answering context or a text to tag may have ``max_long_chars``."""
    max_long_chars: int = 100_000
    max_tokens: int | None = None
    """WordPiece tokens of one input with its ``[CLS]``/``[SEP]``; None: the model's maximum (512). Texts to
    tag and question contexts are windowed instead, up to ``max_long_tokens``."""
    max_long_tokens: int = 8192
    max_top_k: int = 50
    max_mask_candidates: int = 2_000
    """[MASK] tokens x ``top_k`` over one fill-mask request: each candidate carries the whole filled-in
    text, so a few texts full of masks would otherwise make an answer of gigabytes."""
    attention_max_tokens: int = 128
    """Tokens of a text whose attention maps are returned (the answer grows with the square)."""
    batch_size: int = 32
    """Inputs per forward pass."""
    max_batch_tokens: int = 4096
    """Padded tokens per forward pass (inputs x the longest of them): the batcher groups inputs of similar
    length so that a long text does not pad a batch of short ones; one input longer than this runs alone."""
    batch_window_ms: float = 5.0
    """How long the batcher waits for more requests after the first one arrives."""
    max_batch_items: int = 128
    """Inputs gathered from concurrent requests into one pipeline call."""
    request_timeout_s: float = 30.0
    """A request not answered by then gets 504 and its queued work is dropped."""
    max_queue: int = 1024
    """Requests waiting for the model; more get 503 with ``Retry-After`` at once. A request is also refused so
    when the inputs waiting would take the model over half of ``request_timeout_s``, so that overload
    answers 503 at once rather than 504 later."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is not None and value <= 0:
                raise ConfigError(f"serve limit {name} must be positive, got {value}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
