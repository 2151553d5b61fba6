"""A BEIR folder from SQuAD-format JSON: each question is a query whose one relevant document is its paragraph,
and every paragraph of the file is the corpus, titled with its article's title."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bertkit.errors import DataError
from bertkit.formats import read_text
from bertkit.retrieval.beir import BeirSet, Passage, write_beir


def beir_from_squad(squad: str | os.PathLike, split: str = "test") -> BeirSet:
    """The retrieval set of a SQuAD JSON file: documents ``p<article>-<paragraph>`` (1-based), queries by their
    SQuAD ids, each judged relevant (grade 1) to its own paragraph only."""
    data = _articles(Path(squad))
    corpus: dict[str, Passage] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for a, article in enumerate(data, start=1):
        title = str(article.get("title", "")).replace("_", " ")
        for p, paragraph in enumerate(article.get("paragraphs", []), start=1):
            doc = f"p{a}-{p}"
            corpus[doc] = Passage(title, str(paragraph.get("context", "")))
            for qa in paragraph.get("qas", []):
                query, text = str(qa.get("id", "")), str(qa.get("question", "")).strip()
                if not query or not text:
                    raise DataError(f"{squad}: article {a}, paragraph {p}: a question without an id or a text")
                if query in queries:
                    raise DataError(f"{squad}: duplicate question id {query!r} (article {a}, paragraph {p})")
                queries[query] = text
                qrels[query] = {doc: 1}
    if not queries:
        raise DataError(f"{squad}: no questions; give a SQuAD JSON file (data -> paragraphs -> qas)")
    return BeirSet(corpus, queries, qrels, split)


def _articles(path: Path) -> list[dict[str, Any]]:
    try:
        document = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); give a SQuAD JSON file") from None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list) or not all(isinstance(article, dict) for article in data):
        raise DataError(f'{path}: not SQuAD JSON (no "data" list of articles)')
    return data


def write_squad_beir(squad: str | os.PathLike, output: str | os.PathLike, split: str = "test") -> BeirSet:
    """Build the BEIR folder ``output`` from a SQuAD JSON file (see :func:`beir_from_squad`); the set it holds."""
    beir = beir_from_squad(squad, split)
    write_beir(output, beir.corpus, beir.queries, beir.qrels, split)
    return beir
