"""Hard negatives for contrastive training: for each (anchor, positive) pair, the passages an embedding model
ranks closest to the anchor that are not among its positives.

The options are those of sentence-transformers' ``mine_hard_negatives``: candidates are the anchor's nearest
passages with its positives (every passage paired with that anchor) and the anchor's own text left out; the first
``range_min`` of them are skipped (likely unlabelled positives) and none past rank ``range_max`` is taken; a
``margin`` keeps only passages scoring below ``positive score - margin``, ``max_score`` only those at or below it.
The output is JSON lines ``{"anchor", "positive", "negative_1", ..., "negative_k"}``, the layout the embedding
trainer reads; a pair that gets fewer than k negatives is left out and counted.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertkit.errors import ConfigError, DataError
from bertkit.inference.loading import Loaded
from bertkit.io import atomic_open, check_output_file
from bertkit.notices import notice
from bertkit.retrieval.beir import Passage, read_corpus_file
from bertkit.retrieval.embedding import Embedder, EmbeddingOptions
from bertkit.retrieval.vector_search import ExactSearch
from bertkit.tasks.readers import pick_column, read_table
from bertkit.tasks.readers.report import ReadReport

ANCHOR_COLUMNS = ("anchor", "query", "question", "sentence1", "text")
POSITIVE_COLUMNS = ("positive", "passage", "document", "answer", "sentence2", "text_pair")
CORPUS_COLUMNS = ("text", "passage", "document", "positive", "sentence")


@dataclass
class MiningConfig:
    """Which negatives ``mine-negatives`` keeps for each (anchor, positive) pair."""

    num_negatives: int = 3
    """Negatives per pair (columns negative_1 ... negative_K)."""
    range_min: int = 0
    """Skip this many of the anchor's nearest non-positive passages (they are often unlabelled positives)."""
    range_max: int | None = None
    """Take no passage ranked beyond this among the non-positives (default: range-min + 10 x num-negatives)."""
    margin: float | None = None
    """Keep a passage only when it scores below the positive's score minus this (e.g. 0.1 for cosine)."""
    max_score: float | None = None
    """Keep a passage only when its score is at most this (e.g. 0.9 for cosine)."""

    def __post_init__(self) -> None:
        if self.num_negatives < 1:
            raise ConfigError(f"--num-negatives must be at least 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise ConfigError(f"--range-min must be 0 or more, got {self.range_min}")
        if self.range_max is not None and self.range_max < self.range_min + self.num_negatives:
            raise ConfigError(
                f"--range-max {self.range_max} leaves fewer than --num-negatives {self.num_negatives} ranks after "
                f"--range-min {self.range_min}; raise it to at least {self.range_min + self.num_negatives}"
            )

    @property
    def depth(self) -> int:
        """How many non-positive candidates each anchor needs."""
        return self.range_max if self.range_max is not None else self.range_min + 10 * self.num_negatives


@dataclass
class MiningResult:
    pairs: int
    """(anchor, positive) pairs read."""
    written: int
    """Rows written, each with ``num_negatives`` negatives."""
    short: int
    """Pairs that got fewer negatives, left out."""
    corpus: int
    """Distinct passages searched."""


def read_pairs(
    path: str | os.PathLike,
    *,
    anchor_column: str | None = None,
    positive_column: str | None = None,
    format: str | None = None,
    header: bool | None = None,
) -> list[tuple[str, str]]:
    """(anchor, positive) of each row of a table in any format the task readers take."""
    report = ReadReport(str(path), "")
    wanted = [c for c in (anchor_column, positive_column) if c and not c.isdigit()]
    columns, rows = read_table(
        path, format, header=header, names=[*wanted, *ANCHOR_COLUMNS, *POSITIVE_COLUMNS], report=report
    )
    anchor = pick_column(path, columns, anchor_column, ANCHOR_COLUMNS, "anchor")
    positive = pick_column(path, columns, positive_column, [c for c in POSITIVE_COLUMNS if c != anchor], "positive")
    pairs = []
    for row in rows:
        a, p = row.fields.get(anchor, ""), row.fields.get(positive, "")
        if not a.strip() or not p.strip():
            raise DataError(f"{row.where}: empty {'anchor' if not a.strip() else 'positive'}")
        pairs.append((a, p))
    notice(report.line())
    return pairs


def read_corpus(path: str | os.PathLike, format: str | None = None) -> list[str]:
    """Passages of a BEIR folder (``title text`` of corpus.jsonl), a ``.txt`` file (one per line) or a table
    (its ``text`` column)."""
    source = Path(path)
    if source.is_dir() and (source / "corpus.jsonl").exists():
        return [p.joined() for p in read_beir_corpus(source)]
    if source.suffix == ".txt" and format is None:
        if not source.is_file():
            raise DataError(f"--corpus {source}: no such file")
        return [line.strip() for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    columns, rows = read_table(source, format, names=CORPUS_COLUMNS)
    column = pick_column(source, columns, None, CORPUS_COLUMNS, "corpus text", required=False)
    if column is None:
        raise DataError(
            f"--corpus {source}: no passage column (looked for {', '.join(CORPUS_COLUMNS)}); columns are "
            f"{', '.join(columns)}; give a table with a text column, a .txt file or a BEIR folder"
        )
    return [row.fields[column] for row in rows if row.fields.get(column, "").strip()]


def read_beir_corpus(folder: Path) -> list[Passage]:
    """The passages of a BEIR folder's corpus.jsonl (its queries and qrels are not needed here)."""
    return list(read_corpus_file(folder / "corpus.jsonl").values())


def mine_hard_negatives(
    model: str | os.PathLike | Loaded,
    pairs: Sequence[tuple[str, str]],
    output: str | os.PathLike,
    *,
    config: MiningConfig | None = None,
    corpus: Sequence[str] = (),
    options: EmbeddingOptions | None = None,
    device: str | torch.device = "cpu",
    progress: bool = False,
) -> MiningResult:
    """Write hard negatives of ``pairs`` to ``output`` (JSON lines, atomically; see the module docstring).
    The passages searched are every positive, then ``corpus``, each distinct text once."""
    config = config or MiningConfig()
    options = options or EmbeddingOptions()
    check_output_file(output, example="negatives.jsonl")
    if not pairs:
        raise DataError("no (anchor, positive) pairs to mine negatives for")
    positives = list(dict.fromkeys(p for _, p in pairs))
    known = set(positives)
    passages = positives + [t for t in dict.fromkeys(corpus) if t not in known]
    position = {text: i for i, text in enumerate(passages)}
    anchors = {a: row for row, a in enumerate(dict.fromkeys(a for a, _ in pairs))}
    excluded: dict[str, set[int]] = {a: {position[a]} if a in position else set() for a in anchors}
    for anchor, positive in pairs:
        excluded[anchor].add(position[positive])
    embedder = Embedder(model, options, device)
    anchor_vectors = embedder(list(anchors), options.query_prefix, progress)
    most = max(len(e) for e in excluded.values())
    search = ExactSearch(anchor_vectors, min(len(passages), config.depth + most), options.score_function)
    kept = []  # the positives come first: their vectors are kept for the positives' scores
    for chunk in embedder.chunks(passages, options.passage_prefix, progress):
        kept.append(chunk[: max(0, len(positives) - search.seen)])
        search.add(chunk)
    embedder.tell()
    hits = search.hits()
    scores = _pair_scores(
        anchor_vectors[[anchors[a] for a, _ in pairs]],
        np.concatenate(kept)[[position[p] for _, p in pairs]],
        options.score_function,
    )
    rows, short = [], 0
    for (anchor, positive), positive_score in zip(pairs, scores):
        candidates = [(i, s) for i, s in hits.row(anchors[anchor]) if i not in excluded[anchor]]
        negatives = _negatives(candidates, float(positive_score), config)
        if len(negatives) < config.num_negatives:
            short += 1
            continue
        named = {f"negative_{n}": passages[i] for n, i in enumerate(negatives, start=1)}
        rows.append({"anchor": anchor, "positive": positive, **named})
    if not rows:
        raise DataError(
            f"none of the {len(pairs):,} pairs got {config.num_negatives} negatives from {len(passages):,} "
            f"passages; give a larger --corpus, or lower --num-negatives, --range-min or --margin"
        )
    with atomic_open(output) as out:
        out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    return MiningResult(len(pairs), len(rows), short, len(passages))


def _pair_scores(anchors: np.ndarray, positives: np.ndarray, score_function: str) -> np.ndarray:
    """The score of each anchor row with the positive row beside it."""
    a, p = torch.as_tensor(anchors), torch.as_tensor(positives)
    if score_function == "cos":
        a, p = torch.nn.functional.normalize(a, dim=-1), torch.nn.functional.normalize(p, dim=-1)
    return (a * p).sum(-1).numpy()


def _negatives(candidates: Sequence[tuple[int, float]], positive_score: float, config: MiningConfig) -> list[int]:
    """The first ``num_negatives`` candidates (best first, positives already out) within the rank range that
    pass the margin and the score cap."""
    chosen = []
    for index, score in candidates[config.range_min : config.depth]:
        if config.margin is not None and not score < positive_score - config.margin:
            continue
        if config.max_score is not None and score > config.max_score:
            continue
        chosen.append(index)
        if len(chosen) == config.num_negatives:
            break
    return chosen
