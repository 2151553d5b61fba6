"""``bench_distill``'s data: the labelled subsets of each family, the unlabelled text, and the smoke inputs."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import smoke_inputs
from harness import SHARED

FAMILIES = {
    # name: (task, train, dev, main metric)
    "sst2": ("classification", "sst2/train.tsv", "sst2/dev.tsv", "accuracy"),
    "conll": ("ner", "conll2003/train.txt", "conll2003/valid.txt", "f1"),
    "squad_pairs": ("embedding", "squad/train.json", "squad/dev.json", "ndcg@10"),
}
UNLABELED_FAMILIES = ("sst2", "conll")  # the families whose first student may learn from unlabelled text


# ------------------------------------------------------------------------------------------ data
def subsets(family: str, work: Path, train_n: int, dev_n: int) -> tuple[Path, Path]:
    """The first ``train_n``/``dev_n`` rows of the family's files, written under ``work``."""
    _, train, dev, _ = FAMILIES[family]
    if family == "squad_pairs":
        return _pairs(SHARED / train, work / "train.jsonl", train_n), _pairs(SHARED / dev, work / "dev.jsonl", dev_n)
    if family == "conll":
        return _sentences(SHARED / train, work / "train.txt", train_n), _sentences(
            SHARED / dev, work / "dev.txt", dev_n
        )
    return _rows(SHARED / train, work / "train.tsv", train_n), _rows(SHARED / dev, work / "dev.tsv", dev_n)


def _rows(source: Path, target: Path, n: int, start: int = 0, labels: bool = True) -> Path:
    """Rows ``start`` to ``start + n`` of a seeded shuffle of a TSV's body, with its header; without ``labels``,
    the text column alone."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    body = lines[1:]
    random.Random(0).shuffle(body)
    rows = body[start : start + n]
    if not labels:
        rows = [row.split("\t")[0] + "\n" for row in rows]
    header = lines[0] if labels else lines[0].split("\t")[0] + "\n"
    text = "".join([header, *rows])
    if not target.is_file() or target.read_text(encoding="utf-8") != text:  # another run may be reading it
        target.write_text(text, encoding="utf-8")
    return target


def unlabeled_subset(work: Path, args: argparse.Namespace, family: str, smoke_train: Path | None = None) -> Path | None:
    """``--unlabeled-examples`` training sentences of ``family`` without their labels, from ``--unlabeled-from``
    (SST-2: in the seeded shuffle; CoNLL: in file order, the words alone) (default: after the student's and the
    teacher's subsets); smoke: the training file's sentences."""
    if not args.unlabeled_examples or family not in UNLABELED_FAMILIES:
        return None
    pick = _sentences if family == "conll" else _rows
    target = work / ("unlabeled.txt" if family == "conll" else "unlabeled.tsv")
    if smoke_train is not None:
        return pick(smoke_train, target, args.unlabeled_examples, labels=False)
    start = args.unlabeled_from
    if start is None:
        start = max(args.train_examples, args.teacher_examples or 0)
    return pick(SHARED / FAMILIES[family][1], target, args.unlabeled_examples, start, labels=False)


def _sentences(source: Path, target: Path, n: int, start: int = 0, labels: bool = True) -> Path:
    """Sentences ``start`` to ``start + n`` of a CoNLL file (``-DOCSTART-`` lines left out); without ``labels``,
    the words alone, one a line."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip() and "-DOCSTART-" not in b]
    kept = [b.strip("\n") for b in blocks[start : start + n]]
    if not labels:
        kept = ["\n".join(line.split()[0] for line in b.splitlines() if line.strip()) for b in kept]
    text = "\n\n".join(kept) + "\n\n"
    if not target.is_file() or target.read_text(encoding="utf-8") != text:  # another run may be reading it
        target.write_text(text, encoding="utf-8")
    return target


def _pairs(source: Path, target: Path, n: int) -> Path:
    """``n`` SQuAD questions with their paragraph (``anchor``/``positive`` rows), a seeded shuffle over every
    article; beside them (``.squad.json``) the first articles that hold ``n`` questions, for retrieval."""
    articles = json.loads(source.read_text(encoding="utf-8"))["data"]
    kept: list[dict[str, Any]] = []
    for article in articles:
        if sum(len(p["qas"]) for a in kept for p in a["paragraphs"]) >= n:
            break
        kept.append(article)
    target.with_suffix(".squad.json").write_text(json.dumps({"version": "1.1", "data": kept}), encoding="utf-8")
    rows = [
        {"anchor": q["question"], "positive": paragraph["context"]}
        for article in articles
        for paragraph in article["paragraphs"]
        for q in paragraph["qas"]
    ]
    random.Random(0).shuffle(rows)
    target.write_text("".join(json.dumps(r) + "\n" for r in rows[:n]), encoding="utf-8")
    return target


def smoke_data(work: Path) -> dict[str, tuple[Path, Path]]:
    train, dev = smoke_inputs.polarity_slice(work / "polarity", train=24, dev=12)
    conll = work / "ner.txt"
    conll.write_text("john NN O B-PER\nlives NN O O\nin NN O O\nparis NN O B-LOC\n\n" * 8, encoding="utf-8")
    squad = work / "squad.json"
    texts = [line.split("\t")[0] for line in train.read_text(encoding="utf-8").splitlines()[1:]]
    paragraphs = [
        {"context": t + " .", "qas": [{"id": f"q{i}", "question": t, "answers": []}]} for i, t in enumerate(texts)
    ]
    squad.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8"
    )
    pairs = _pairs(squad, work / "pairs.jsonl", len(texts))
    return {"sst2": (train, dev), "conll": (conll, conll), "squad_pairs": (pairs, pairs)}
