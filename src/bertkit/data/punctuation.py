"""Punctuation restoration as word tagging: labeled data built from punctuated prose.

The input of the task is lower-cased text with its punctuation removed, as a speech recogniser writes it;
each word's label is the punctuation that followed it in the original: nothing, a comma, a period or a
question mark. This is how punctuation-restoration sets are made (from transcripts or books), and it needs
syntax: where a clause ends, whether a sentence asks.

The files are CoNLL columns (``word tag``, a blank line between examples) that ``--task ner`` reads. Tags
are ``O``, ``S-COMMA``, ``S-PERIOD``, ``S-QUESTION``: the ``S-`` (single-word chunk) prefix makes the
task's entity-level scores exactly the usual metric of punctuation restoration, precision, recall and F1 of
the punctuation classes, micro-averaged with "no punctuation" left out (``f1``), and per class
(``f1_COMMA``...).

Marks are mapped as in the IWSLT punctuation sets: ``, ; :`` and dashes to a comma; ``. !`` to a period;
``?`` to a question mark. A period that ends a common abbreviation (``Mr.``) is part of the word, not a
label. Examples are windows of consecutive words of one book, cut without regard to sentence ends, as a
transcript stream is; the windows of each book are split into contiguous runs, and whole runs go to the
dev split, so no passage is in both.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bertkit.data.corpus import CorpusOptions, CorpusStats, expand_inputs, read_documents
from bertkit.errors import DataError
from bertkit.io import atomic_write_text

NONE, COMMA, PERIOD, QUESTION = "O", "S-COMMA", "S-PERIOD", "S-QUESTION"
TAGS = (NONE, COMMA, PERIOD, QUESTION)

ABBREVIATIONS = frozenset({"mr", "mrs", "dr", "st", "messrs", "mme", "mlle", "jr", "sr", "vs", "etc"})
"""Words whose final period is part of the word, not the end of a sentence."""

_DASHES = re.compile(r"--+|[\u2013\u2014\u2015]")  # -- and en/em dashes separate words, like a comma
_WORD = re.compile(r"[0-9a-z]+(?:'[0-9a-z]+)*")


@dataclass
class PunctuationSplits:
    """What :func:`build_punctuation_data` wrote."""

    train: Path
    dev: Path
    train_examples: int
    dev_examples: int
    tag_counts: dict[str, int]
    """Tags over both splits."""


def tag_words(paragraph: str) -> list[tuple[str, str]]:
    """``(word, tag)`` for each word of a paragraph: lower-cased, punctuation removed, the tag naming the
    punctuation that followed the word. Marks before the first word are dropped."""
    text = _DASHES.sub(" , ", paragraph.replace("\u2019", "'").replace("\u2018", "'").lower())
    tagged: list[tuple[str, str]] = []
    for token in text.split():
        words = _WORD.findall(token)
        if not words:  # a mark standing alone ("," from a dash, "?" after a space): it follows the last word
            if tagged:
                tagged[-1] = (tagged[-1][0], _stronger(tagged[-1][1], _mark_tag(token, "")))
            continue
        for word in words[:-1]:  # "and/or", "o'clock-ish": pieces joined without space, no mark between
            tagged.append((word, NONE))
        last = words[-1]
        tail = token[token.rfind(last) + len(last) :]
        tagged.append((last, _mark_tag(tail, last)))
    return tagged


def _mark_tag(tail: str, word: str) -> str:
    if "?" in tail:
        return QUESTION
    if "!" in tail or ("." in tail and not (word in ABBREVIATIONS and tail.startswith("."))):
        return PERIOD
    if any(mark in tail for mark in ",;:"):
        return COMMA
    return NONE


def _stronger(a: str, b: str) -> str:
    """Of two marks after one word, the one a reader keeps: a question over a period over a comma."""
    return max(a, b, key=TAGS.index)


def book_windows(paragraphs: Iterable[str], window_words: int) -> list[list[tuple[str, str]]]:
    """A book's words in order, cut into windows of ``window_words`` (the last, shorter one dropped).

    Paragraphs without any sentence mark (titles, chapter headings, tables) are left out."""
    stream: list[tuple[str, str]] = []
    for paragraph in paragraphs:
        words = tag_words(paragraph)
        if any(tag in (PERIOD, QUESTION) for _, tag in words):
            stream.extend(words)
    return [stream[i : i + window_words] for i in range(0, len(stream) - window_words + 1, window_words)]


def build_punctuation_data(
    inputs: list[str],
    output: str | Path,
    *,
    window_words: int = 30,
    train_examples: int = 2000,
    dev_examples: int = 500,
    dev_share: float = 0.2,
    run_windows: int = 20,
    seed: int = 0,
) -> PunctuationSplits:
    """Write ``output/train.conll`` and ``output/dev.conll`` from punctuated books (files or directories,
    compressed or not; Gutenberg licence text is dropped by the corpus reader).

    Each file is one book; its windows are grouped into runs of ``run_windows`` consecutive windows, a
    ``dev_share`` of the runs (drawn with ``seed``) goes to dev, and ``train_examples``/``dev_examples``
    windows are drawn from each pool (all of them where the pool is smaller).
    """
    if window_words < 2:
        raise DataError(f"window_words must be at least 2, got {window_words}")
    if not 0.0 < dev_share < 1.0:
        raise DataError(f"dev_share must be between 0 and 1, got {dev_share}")
    rng = random.Random(seed)
    pools: dict[str, list[list[tuple[str, str]]]] = {"train": [], "dev": []}
    stats = CorpusStats()
    for path in expand_inputs(inputs):
        paragraphs = [
            text for doc in read_documents([path], CorpusOptions(format="prose"), stats) for text in doc.texts
        ]
        windows = book_windows(paragraphs, window_words)
        for start in range(0, len(windows), run_windows):
            split = "dev" if rng.random() < dev_share else "train"
            pools[split].extend(windows[start : start + run_windows])
    if not pools["train"] or not pools["dev"]:
        raise DataError(f"{', '.join(inputs)}: too little punctuated text for a train and a dev split")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    counts = dict.fromkeys(TAGS, 0)
    written: dict[str, list[list[tuple[str, str]]]] = {}
    for split, wanted in (("train", train_examples), ("dev", dev_examples)):
        pool = pools[split]
        written[split] = rng.sample(pool, min(wanted, len(pool)))
        atomic_write_text(out / f"{split}.conll", "".join(_conll(written[split])))
        for window in written[split]:
            for _, tag in window:
                counts[tag] += 1
    return PunctuationSplits(
        train=out / "train.conll",
        dev=out / "dev.conll",
        train_examples=len(written["train"]),
        dev_examples=len(written["dev"]),
        tag_counts=counts,
    )


def _conll(windows: list[list[tuple[str, str]]]) -> Iterator[str]:
    for window in windows:
        for word, tag in window:
            yield f"{word} {tag}\n"
        yield "\n"
