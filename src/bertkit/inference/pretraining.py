"""Pipelines on the pre-training heads: ``fill_mask`` (the masked-LM head) and ``next_sentence`` (the NSP head)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertkit.errors import BertkitError
from bertkit.features import Feature
from bertkit.features.pairs import build_pair, truncate_pair
from bertkit.features.runner import run_batches
from bertkit.inference.loading import Loaded
from bertkit.inference.opening import for_pipeline
from bertkit.tasks.pipeline import as_list, check_texts, input_length, is_single, paired_texts

# ------------------------------------------------------------------------------------------ fill-mask
MASK_PATTERN = re.compile(r"\[mask\]", re.IGNORECASE)
"""Where a user typed ``[MASK]`` (any case: an uncased model cannot tell, and users type ``[mask]``)."""


@dataclass
class MaskCandidate:
    """One prediction for one ``[MASK]``."""

    token: str
    """The WordPiece as in the vocabulary (``##ing`` continues the word before it)."""
    token_id: int
    score: float
    """Probability under the model (softmax over the whole vocabulary)."""
    text: str
    """What the candidate writes in place of the mask (``ing`` for ``##ing``)."""
    sequence: str
    """The input text with this mask replaced by ``text`` (other masks left as they are)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _vocab_filters(loaded: Loaded) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks over the model's vocabulary: tokens never proposed (specials, ``[unused]``, ids the
    tokenizer lacks), and word continuations (``##``)."""
    if "vocab_filters" not in loaded.cache:
        size = loaded.config.vocab_size
        excluded = torch.ones(size, dtype=torch.bool)
        continuation = torch.zeros(size, dtype=torch.bool)
        for token, index in loaded.tokenizer.vocab.items():
            if index >= size:
                continue
            bracketed = token.startswith("[") and token.endswith("]") and len(token) > 2
            excluded[index] = bracketed or not token.strip()
            continuation[index] = token.startswith("##") and len(token) > 2
        loaded.cache["vocab_filters"] = (excluded, continuation)
    return loaded.cache["vocab_filters"]


def _mask_features(loaded: Loaded, texts: Sequence[str], max_length: int) -> list[Feature]:
    """``[CLS] text [SEP]`` with the mask id at every typed ``[MASK]``.

    Each stretch between masks is tokenized on its own: BERT splits words at ``[`` and ``]`` anyway, so
    the ids equal a tokenization that keeps ``[MASK]`` whole, whatever the tokenizer does with the string.
    """
    tokenizer = loaded.tokenizer
    pieces = [MASK_PATTERN.split(text) for text in texts]
    flat = tokenizer.ids_batch([p for parts in pieces for p in parts])
    features: list[Feature] = []
    cursor = 0
    for i, (text, parts) in enumerate(zip(texts, pieces)):
        if len(parts) == 1:
            raise BertkitError(f"text {i} has no [MASK] to fill: {text[:60]!r}")
        ids, positions = [tokenizer.cls_id], []
        part_ids = flat[cursor : cursor + len(parts)]
        cursor += len(parts)
        for n, stretch in enumerate(part_ids):
            if n:
                positions.append(len(ids))
                ids.append(tokenizer.mask_id)
            ids.extend(stretch)
        ids.append(tokenizer.sep_id)
        if len(ids) > max_length:
            raise BertkitError(
                f"text {i} is {len(ids)} tokens with [CLS] and [SEP], more than the model's "
                f"{max_length}; shorten it around the [MASK]"
            )
        spans = [m.span() for m in MASK_PATTERN.finditer(text)]
        features.append(
            {
                "input_ids": ids,
                "token_type_ids": [0] * len(ids),
                "attention_mask": [1] * len(ids),
                "masked_positions": positions,
                "spans": spans,
                "text": text,
            }
        )
    return features


@torch.inference_mode()
def fill_mask(
    texts: str | Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    top_k: int = 5,
    batch_size: int = 32,
    whole_words: bool = True,
) -> Any:
    """The ``top_k`` most likely tokens for every ``[MASK]`` in each text.

    Returns, per text, one list per mask (in text order) of ``MaskCandidate`` (best first). Masks are filled
    independently, in one forward pass. ``whole_words``: a mask that stands as its own word gets only
    word-start tokens, a mask glued to the end of a word (``un[MASK]``) only continuations (``##...``), so
    every candidate reads as text; special and ``[unused]`` tokens are never proposed.
    """
    if top_k < 1:
        raise BertkitError(f"--top-k (top_k) must be at least 1, got {top_k}")
    loaded = for_pipeline("fill_mask", model)
    items = as_list(texts, "texts")
    check_texts(items)
    features = _mask_features(loaded, items, loaded.max_length)
    excluded, continuation = _vocab_filters(loaded)

    def forward(inputs: dict[str, torch.Tensor], chunk: list[dict[str, Any]]) -> torch.Tensor:
        width = max(len(f["masked_positions"]) for f in chunk)
        positions = torch.tensor(
            [f["masked_positions"] + [0] * (width - len(f["masked_positions"])) for f in chunk],
            device=inputs["input_ids"].device,
        )
        out = loaded.model(**inputs, masked_positions=positions)  # the vocabulary projection runs on masks only
        logits = out.mlm_logits if hasattr(out, "mlm_logits") else out.logits
        return logits.float().softmax(-1)  # [B, P, V]

    def unbatch(probs: torch.Tensor, inputs: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
        return list(probs.cpu())

    rows = run_batches(
        loaded.model, features, unbatch, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id, forward=forward
    )
    results = []
    for feature, probs in zip(features, rows):
        text = feature["text"]
        per_mask = []
        for m, (start, end) in enumerate(feature["spans"]):
            allowed = ~excluded
            if whole_words:
                glued = start > 0 and text[start - 1].isalnum()
                allowed = allowed & (continuation if glued else ~continuation)
            scores = probs[m].masked_fill(~allowed, -1.0)
            best = scores.topk(min(top_k, int(allowed.sum()))).indices.tolist()
            candidates = []
            for index in best:
                token = loaded.tokenizer.convert_ids_to_tokens([index])[0]
                written = token.removeprefix("##")
                candidates.append(
                    MaskCandidate(token, index, float(probs[m, index]), written, text[:start] + written + text[end:])
                )
            per_mask.append(candidates)
        results.append(per_mask)
    return results[0] if is_single(texts) else results


# ------------------------------------------------------------------------------------------ next sentence
@torch.inference_mode()
def next_sentence(
    first: str | Sequence[str],
    second: str | Sequence[str],
    model: str | os.PathLike | Loaded,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
) -> float | list[float]:
    """Probability that ``second`` follows ``first`` (BERT's next-sentence head, class 0 = "is next").

    Strings give one probability, equal-length lists one per pair. Pairs longer than the model are cut
    with Google's rule (drop the last token of the longer side).
    """
    loaded = for_pipeline("next_sentence", model)
    firsts, seconds = paired_texts(first, second, "first sentence", "second sentence")
    room = input_length(loaded, max_length) - 3
    tokenizer = loaded.tokenizer
    ids = tokenizer.ids_batch(firsts + seconds)
    features = []
    for a, b in zip(ids[: len(firsts)], ids[len(firsts) :]):
        features.append(build_pair(*truncate_pair(a, b, room), tokenizer.cls_id, tokenizer.sep_id))

    def forward(inputs: dict[str, torch.Tensor], chunk: list) -> torch.Tensor:
        return loaded.model(**inputs).nsp_logits.float().softmax(-1)[:, 0]

    probs = run_batches(
        loaded.model,
        features,
        lambda out, inputs: out.tolist(),
        batch_size=batch_size,
        pad_id=loaded.tokenizer.pad_id,
        forward=forward,
    )
    return probs[0] if isinstance(first, str) else probs
