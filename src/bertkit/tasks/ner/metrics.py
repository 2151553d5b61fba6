"""The tagging family's scores, defined as the benchmarks define them.

- Chunked tags (NER): entity-level precision/recall/F1 with the chunk logic of CoNLL's ``conlleval`` script
  (exact span and type; IOB1, IOB2, IOE and BIOES tags all decode through the same start/end-of-chunk rules).
- Tags that are not chunked (parts of speech): token accuracy, per-tag precision/recall/F1 and their macro mean.

Scores are fractions in [0, 1].
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable, Sequence

Chunk = tuple[str, int, int]
"""An entity: (type, first word index, last word index + 1)."""


def _split_tag(tag: str) -> tuple[str, str]:
    """``B-PER`` -> (``B``, ``PER``); ``O`` -> (``O``, ``""``). A bare type without prefix counts as ``I``."""
    if tag in ("O", ""):
        return "O", ""
    if len(tag) >= 2 and tag[1] in "-_" and tag[0] in "BIESO[]":
        return tag[0], tag[2:]
    return "I", tag


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's endOfChunk: does a chunk end between the previous word and this one?"""
    return (
        prev_tag in ("E", "S", "]")
        or (prev_tag == "B" and tag in ("B", "S", "O"))
        or (prev_tag == "I" and tag in ("B", "S", "O"))
        or (prev_tag not in ("O", ".") and prev_type != type_)
    )


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval's startOfChunk: does a chunk start at this word?"""
    return (
        tag in ("B", "S", "[")
        or (prev_tag in ("E", "S", "O") and tag in ("E", "I"))
        or (tag not in ("O", ".") and prev_type != type_)
    )


def get_entities(tags: Sequence[str]) -> list[Chunk]:
    """Entity chunks of one sentence's tags, decoded exactly as ``conlleval`` does.

    Works for IOB1 (``I-X`` starts a chunk unless it continues one of the same type), IOB2 (``B-X`` starts),
    IOE and BIOES (``E-X``/``S-X`` end a chunk). ``["B-PER", "I-PER", "O", "I-LOC"]`` gives
    ``[("PER", 0, 2), ("LOC", 3, 4)]``.
    """
    chunks: list[Chunk] = []
    prev_tag, prev_type = "O", ""
    start: int | None = None
    for i, raw in enumerate([*tags, "O"]):  # the sentinel closes a chunk at the sentence end
        tag, type_ = _split_tag(raw)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.append((prev_type, start, i))
            start = None
        if _start_of_chunk(prev_tag, tag, prev_type, type_) and i < len(tags):
            start = i
        prev_tag, prev_type = tag, type_
    return chunks


def entity_scores(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> dict[str, float]:
    """conlleval's scores over sentences of tags: entity-level precision, recall, F1 and token accuracy.

    An entity counts as correct only if its type, first and last word all match. Per-type figures come as
    ``precision_PER``, ``recall_PER``, ``f1_PER``, ``support_PER`` (gold count).
    """
    correct: collections.Counter[str] = collections.Counter()
    n_pred: collections.Counter[str] = collections.Counter()
    n_gold: collections.Counter[str] = collections.Counter()
    tokens = tokens_correct = 0
    for sentence_pred, sentence_gold in zip(predicted, gold, strict=True):
        if len(sentence_pred) != len(sentence_gold):
            raise ValueError(f"sentence with {len(sentence_gold)} gold tags got {len(sentence_pred)} predictions")
        pred_chunks, gold_chunks = set(get_entities(sentence_pred)), set(get_entities(sentence_gold))
        for chunk in pred_chunks:
            n_pred[chunk[0]] += 1
        for chunk in gold_chunks:
            n_gold[chunk[0]] += 1
        for chunk in pred_chunks & gold_chunks:
            correct[chunk[0]] += 1
        tokens += len(sentence_gold)
        tokens_correct += sum(p == g for p, g in zip(sentence_pred, sentence_gold))

    def prf(c: int, p: int, g: int) -> tuple[float, float, float]:
        precision = c / p if p else 0.0
        recall = c / g if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    scores: dict[str, float] = {}
    precision, recall, f1 = prf(sum(correct.values()), sum(n_pred.values()), sum(n_gold.values()))
    scores.update(precision=precision, recall=recall, f1=f1, accuracy=tokens_correct / tokens if tokens else 0.0)
    for type_ in sorted(set(n_pred) | set(n_gold)):
        p, r, f = prf(correct[type_], n_pred[type_], n_gold[type_])
        scores.update(
            {f"precision_{type_}": p, f"recall_{type_}": r, f"f1_{type_}": f, f"support_{type_}": float(n_gold[type_])}
        )
    return scores


_CHUNK_TAG = re.compile(r"[BIESLU]-.+")


def is_chunked(tags: Iterable[str]) -> bool:
    """Whether tags are chunk tags (IOB1, IOB2, IOE, BIOES/BILOU: ``O`` or a ``B-``/``I-``/``E-``/``S-`` prefix
    on a type), so that entities and their F1 mean something; ``NOUN`` or ``VBZ`` are one label per word."""
    return all(tag == "O" or _CHUNK_TAG.fullmatch(tag) for tag in tags)


def token_scores(predicted: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> dict[str, float]:
    """Word-level scores of tags that are not chunked (parts of speech): ``accuracy`` (the headline),
    ``macro_f1`` over the gold tags, and per tag ``precision_NOUN``, ``recall_NOUN``, ``f1_NOUN`` and
    ``support_NOUN`` (gold words), each word counted once, as scikit-learn's ``classification_report`` does."""
    pairs = [
        (p, g)
        for sentence_pred, sentence_gold in zip(predicted, gold, strict=True)
        for p, g in zip(sentence_pred, _same_length(sentence_pred, sentence_gold), strict=True)
    ]
    n_pred = collections.Counter(p for p, _ in pairs)
    n_gold = collections.Counter(g for _, g in pairs)
    correct = collections.Counter(g for p, g in pairs if p == g)
    scores: dict[str, float] = {"accuracy": sum(correct.values()) / len(pairs) if pairs else 0.0}
    per_tag_f1 = []
    for tag in sorted(set(n_pred) | set(n_gold)):
        precision = correct[tag] / n_pred[tag] if n_pred[tag] else 0.0
        recall = correct[tag] / n_gold[tag] if n_gold[tag] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        if n_gold[tag]:
            per_tag_f1.append(f1)
        scores.update(
            {
                f"precision_{tag}": precision,
                f"recall_{tag}": recall,
                f"f1_{tag}": f1,
                f"support_{tag}": float(n_gold[tag]),
            }
        )
    scores["macro_f1"] = sum(per_tag_f1) / len(per_tag_f1) if per_tag_f1 else 0.0
    return scores


def _same_length(predicted: Sequence[str], gold: Sequence[str]) -> Sequence[str]:
    if len(predicted) != len(gold):
        raise ValueError(f"sentence with {len(gold)} gold tags got {len(predicted)} predictions")
    return gold
