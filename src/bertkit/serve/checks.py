"""The limits on one request's inputs (:class:`ServeLimits`), checked after parsing and before any model work.

Too much (inputs, characters, tokens, fill-mask candidates) is a 413; blank text or an out-of-range ``top_k``
is a 422. Each refusal names the input and the limit, so the client knows what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bertkit.serve.errors import Problem
from bertkit.serve.limits import ServeLimits
from bertkit.tokenizer import Tokenizer


class RequestChecks:
    """Checks of one request against ``limits``; ``max_tokens`` is the model's length in tokens."""

    def __init__(self, limits: ServeLimits, tokenizer: Tokenizer, max_tokens: int):
        self.limits = limits
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.on_tokens: Callable[[int], None] | None = None
        """Called with the tokens of each request's inputs once they pass (the metrics' token count)."""

    def count(self, items: Sequence[Any], what: str = "texts") -> None:
        if len(items) > self.limits.max_items:
            raise Problem(
                413,
                f"{len(items)} {what} in one request; this server takes at most "
                f"{self.limits.max_items}: split the request",
            )

    def chars(self, texts: Sequence[str], what: str = "text", limit: int | None = None) -> None:
        limit = limit or self.limits.max_chars
        for i, text in enumerate(texts):
            if not text.strip():
                raise Problem(422, f"{what} {i} is blank: give some text")
            if len(text) > limit:
                raise Problem(413, f"{what} {i} is {len(text)} characters; this server takes at most {limit}")

    def tokens(
        self,
        texts: Sequence[str | tuple[str, str]],
        what: str = "text",
        limit: int | None = None,
        special: int | None = None,
        hint: str = "shorten it",
    ) -> list[int]:
        """Inputs with their special tokens must fit ``limit`` (default: the model's length); their lengths."""
        limit = limit or self.max_tokens
        flat = [part for t in texts for part in ((t,) if isinstance(t, str) else t)]
        ids = self.tokenizer.ids_batch(flat)
        cursor, counts = 0, []
        for i, text in enumerate(texts):
            parts = 1 if isinstance(text, str) else 2
            count = sum(len(ids[cursor + k]) for k in range(parts)) + (special if special is not None else parts + 1)
            cursor += parts
            if count > limit:
                raise Problem(413, f"{what} {i} is {count} tokens; this server takes at most {limit}: {hint}")
            counts.append(count)
        self._counted(counts)
        return counts

    def encoded(
        self, texts: Sequence[str], what: str = "text", limit: int | None = None, hint: str = "shorten it"
    ) -> list[list[int]]:
        """Token ids of each text with its ``[CLS]`` and ``[SEP]``, which must fit ``limit`` tokens (default: the
        model's length; 0: any length). Run it off the event loop (``Service.off_loop``)."""
        limit = self.max_tokens if limit is None else limit
        cls_id, sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        rows = [[cls_id, *ids, sep_id] for ids in self.tokenizer.ids_batch(texts)]
        for i, row in enumerate(rows):
            if limit and len(row) > limit:
                raise Problem(413, f"{what} {i} is {len(row)} tokens; this server takes at most {limit}: {hint}")
        self._counted([len(row) for row in rows])
        return rows

    def _counted(self, counts: Sequence[int]) -> None:
        if self.on_tokens is not None:
            self.on_tokens(sum(counts))

    def token_ids(self, rows: Sequence[Sequence[int]], vocab_size: int, limit: int | None = None) -> list[int]:
        """Token-id inputs: ids in the vocabulary (422) and at most ``limit`` of them (413); their lengths."""
        limit = limit or self.max_tokens
        for i, row in enumerate(rows):
            if len(row) > limit:
                raise Problem(413, f"token ids {i} are {len(row)} tokens; this server takes at most {limit}")
            if max(row) >= vocab_size:
                raise Problem(
                    422, f"token ids {i} hold {max(row)}; the model's vocabulary has ids 0 to {vocab_size - 1}"
                )
        counts = [len(row) for row in rows]
        self._counted(counts)
        return counts

    def dimensions(self, dimensions: int | None, width: int) -> None:
        if dimensions is not None and dimensions > width:
            raise Problem(
                422, f"dimensions is {dimensions}; the model's vectors have {width}: ask for at most that", "dimensions"
            )

    def no_prompt(self, prompt_name: str | None) -> None:
        if prompt_name is not None:
            raise Problem(
                422,
                f"prompt_name {prompt_name!r} is not supported: bertkit models have no prompts; put any prefix in "
                f"the text itself",
                "prompt_name",
            )

    def top_k(self, top_k: int) -> None:
        if top_k > self.limits.max_top_k:
            raise Problem(422, f"top_k is {top_k}; this server gives at most {self.limits.max_top_k}")

    def masks(self, texts: Sequence[str], top_k: int) -> None:
        """Every text has a [MASK]; ``top_k`` and the candidates over all masks are within the limits."""
        from bertkit.inference.pretraining import MASK_PATTERN  # fill-mask runs on a checkpoint (torch)

        for i, text in enumerate(texts):
            if not MASK_PATTERN.search(text):
                raise Problem(422, f"text {i} has no [MASK] to fill")
        self.top_k(top_k)
        candidates = sum(len(MASK_PATTERN.findall(text)) for text in texts) * top_k
        if candidates > self.limits.max_mask_candidates:
            raise Problem(
                413,
                f"{candidates} [MASK] candidates asked ([MASK] tokens x top_k); this server "
                f"gives at most {self.limits.max_mask_candidates} per request: send fewer masks",
            )
