"""The BEIR folder layout (as MTEB and BEIR read it): reading one with every fault named, and writing one.

```
DIR/corpus.jsonl        {"_id": "d1", "title": "...", "text": "..."} per line (title may be absent or empty)
DIR/queries.jsonl       {"_id": "q1", "text": "..."} per line
DIR/qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score, after a header line; a score above 0 is relevant
```

Every fault is one ``DataError`` line naming the file (and line): a missing file with what the folder must hold,
a duplicate id, an empty query, a qrels id that is in neither file, a score that is no integer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertkit.errors import DataError
from bertkit.formats import read_text
from bertkit.formats.jsonl import json_lines
from bertkit.io import atomic_directory
from bertkit.notices import notice

LAYOUT = "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass(frozen=True)
class Passage:
    """One corpus document."""

    title: str
    text: str

    def joined(self) -> str:
        """The text a model embeds: ``title text`` (BEIR's and MTEB's join), or the text alone without a title."""
        return f"{self.title} {self.text}".strip() if self.title else self.text


@dataclass
class BeirSet:
    """A retrieval set: documents and queries by id, and the graded judgements of one split."""

    corpus: dict[str, Passage]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    """query id -> {corpus id: grade}."""
    split: str

    def describe(self) -> str:
        judged = sum(len(g) for g in self.qrels.values())
        return (
            f"{len(self.corpus):,} documents, {len(self.queries):,} queries, "
            f"{len(self.qrels):,} judged queries ({judged:,} judgements, split {self.split})"
        )


def read_beir(folder: str | os.PathLike, split: str | None = None) -> BeirSet:
    """The BEIR set in ``folder``, judged by ``qrels/<split>.tsv``. ``split`` ``None``: ``test``, else the only
    split there is (said once on stderr). Raises ``DataError`` (one line) on any fault."""
    root = Path(folder)
    if not root.is_dir():
        raise DataError(f"--data {root} is not a folder; {LAYOUT}")
    qrels_file = _qrels_file(root, split)
    corpus = read_corpus_file(root / "corpus.jsonl")
    queries: dict[str, str] = {}
    for query, obj, where in _records(root / "queries.jsonl"):
        text = _text(obj, "text", where)
        if not text.strip():
            raise DataError(f"{where}: query {query!r} has an empty text")
        queries[query] = text
    qrels = read_qrels(qrels_file, queries, corpus)
    return BeirSet(corpus, queries, qrels, qrels_file.stem)


def read_corpus_file(path: Path) -> dict[str, Passage]:
    """The passages of a corpus.jsonl by id."""
    return {doc: Passage(_text(obj, "title", where), _text(obj, "text", where)) for doc, obj, where in _records(path)}


def _qrels_file(root: Path, split: str | None) -> Path:
    folder = root / "qrels"
    present = sorted(p.stem for p in folder.glob("*.tsv")) if folder.is_dir() else []
    if not present:
        raise DataError(f"{root}: no qrels/<split>.tsv files; {LAYOUT}")
    if split is not None:
        if split not in present:
            raise DataError(f"{root}: no qrels/{split}.tsv; the splits are {', '.join(present)} (--split)")
        return folder / f"{split}.tsv"
    if "test" in present:
        return folder / "test.tsv"
    if len(present) == 1:
        notice(f"{root}: no qrels/test.tsv, so the only split there is, {present[0]}, is used")
        return folder / f"{present[0]}.tsv"
    raise DataError(f"{root}: no qrels/test.tsv; choose one of the splits {', '.join(present)} with --split")


def _records(path: Path) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(id, object, ``file:line``) of each line of a corpus or queries file; missing ids and duplicates refused."""
    if not path.is_file():
        raise DataError(f"{path}: no such file; {LAYOUT}")
    seen: set[str] = set()
    for number, obj in json_lines(read_text(path).splitlines(), path):
        where = f"{path}:{number}"
        raw = obj.get("_id")
        if raw is None or isinstance(raw, (dict, list)) or str(raw) == "":
            raise DataError(f'{where}: no "_id" field; each line needs an id')
        key = str(raw)
        if key in seen:
            raise DataError(f"{where}: duplicate _id {key!r}")
        seen.add(key)
        yield key, obj, where
    if not seen:
        raise DataError(f"{path}: the file holds no lines; {LAYOUT}")


def _text(obj: Mapping[str, Any], field: str, where: str) -> str:
    value = obj.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{where}: field {field!r} must be a string, got {type(value).__name__}")
    return value


def read_qrels(path: Path, queries: Mapping[str, str], corpus: Mapping[str, Passage]) -> dict[str, dict[str, int]]:
    """``query-id corpus-id score`` rows of a qrels TSV (its first line a header) with every id checked."""
    qrels: dict[str, dict[str, int]] = {}
    lines = read_text(path).splitlines()
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip("\r\n").split("\t")
        if not line.strip() or (number == 1 and not _is_int(fields[-1])):  # blank, or the header
            continue
        where = f"{path}:{number}"
        if len(fields) != 3:
            raise DataError(f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(fields)}")
        query, doc, score = (f.strip() for f in fields)
        if not _is_int(score):
            raise DataError(f"{where}: score {score!r} is not an integer (grades are 0, 1, 2...)")
        if query not in queries:
            raise DataError(f"{where}: query id {query!r} is not in queries.jsonl{_more(lines, number, 0, queries)}")
        if doc not in corpus:
            raise DataError(f"{where}: corpus id {doc!r} is not in corpus.jsonl{_more(lines, number, 1, corpus)}")
        if doc in qrels.setdefault(query, {}):
            raise DataError(f"{where}: duplicate judgement of {doc!r} for query {query!r}")
        qrels[query][doc] = int(score)
    if not qrels:
        raise DataError(f"{path}: no judgements; each line after the header is query-id, corpus-id, score")
    return qrels


def _more(lines: list[str], number: int, column: int, known: Mapping[str, Any]) -> str:
    """``" (4 unknown ids in all)"`` when the line ``number`` is not the only one with an unknown id there."""
    unknown = {
        fields[column].strip()
        for line in lines[number - 1 :]
        if len(fields := line.split("\t")) == 3 and fields[column].strip() not in known
    }
    return f" ({len(unknown)} unknown ids in all)" if len(unknown) > 1 else ""


def _is_int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()


def write_beir(
    folder: str | os.PathLike,
    corpus: Mapping[str, Passage],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    split: str = "test",
) -> Path:
    """Write a BEIR folder, atomically (the folder is whole or as it was)."""
    with atomic_directory(folder) as staging:
        with (staging / "corpus.jsonl").open("w", encoding="utf-8") as out:
            for doc, passage in corpus.items():
                out.write(json.dumps({"_id": doc, "title": passage.title, "text": passage.text}, ensure_ascii=False))
                out.write("\n")
        with (staging / "queries.jsonl").open("w", encoding="utf-8") as out:
            for query, text in queries.items():
                out.write(json.dumps({"_id": query, "text": text}, ensure_ascii=False) + "\n")
        (staging / "qrels").mkdir()
        with (staging / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as out:
            out.write("\t".join(QRELS_HEADER) + "\n")
            for query, grades in qrels.items():
                for doc, grade in grades.items():
                    out.write(f"{query}\t{doc}\t{grade}\n")
    return Path(folder)
