"""Retrieval metrics against a hand-worked example and against ``pytrec_eval`` (trec_eval itself) where installed."""

from __future__ import annotations

import math
import random

import pytest

from bertkit.errors import ConfigError
from bertkit.tasks.embedding import retrieval_metrics as rm

QRELS = {
    "q1": {"d1": 2, "d2": 1, "d3": 0},
    "q2": {"d5": 1},
    "q3": {"d1": 0},  # nothing relevant: skipped, as MTEB does
}
RUN = {
    "q1": {"d3": 0.9, "d1": 0.8, "d4": 0.7, "d2": 0.6},
    "q2": {"d5": 0.1, "d1": 0.5},
    "q3": {"d1": 1.0},
}


def test_worked_example():
    # q1 ranks d3 (0), d1 (2), d4 (-), d2 (1); q2 ranks d1 (-), d5 (1)
    ndcg_q1 = (2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3))
    ndcg_q2 = 1 / math.log2(3)
    scores = rm.retrieval_scores(QRELS, RUN)
    assert scores["ndcg@10"] == pytest.approx((ndcg_q1 + ndcg_q2) / 2)
    assert scores["mrr@10"] == pytest.approx(0.5)
    assert scores["recall@1"] == 0.0 and scores["recall@10"] == scores["recall@100"] == 1.0
    assert scores["map@100"] == pytest.approx(((1 / 2 + 2 / 4) / 2 + 1 / 2) / 2)
    assert set(rm.per_query(QRELS, RUN)) == {"q1", "q2"}


def test_cuts_and_a_query_the_run_lacks():
    scores = rm.retrieval_scores(QRELS, {"q1": RUN["q1"]}, ["ndcg@1", "mrr@1", "recall@2", "map@2", "precision@2"])
    # q2 retrieved nothing: zeros; q1's first document is not relevant
    assert scores["ndcg@1"] == scores["mrr@1"] == 0.0
    assert scores["recall@2"] == pytest.approx((1 / 2) / 2) and scores["precision@2"] == pytest.approx((1 / 2) / 2)
    assert scores["map@2"] == pytest.approx((1 / 2 / 2) / 2)


def test_ties_go_to_the_larger_doc_id_as_in_trec_eval():
    assert rm.ranked({"a": 1.0, "b": 1.0, "c": 0.5}) == ["b", "a", "c"]
    assert rm.ranked({"a10": 1.0, "a9": 1.0}) == ["a9", "a10"]  # compared as strings
    assert rm.reciprocal_rank_at(rm.ranked({"a": 1.0, "b": 1.0}), {"a": 1}, 10) == 0.5


def test_no_relevant_query_anywhere_gives_zeros_and_bad_names_are_refused():
    assert rm.retrieval_scores({"q": {"d": 0}}, {"q": {"d": 1.0}}) == dict.fromkeys(rm.DEFAULT_MEASURES, 0.0)
    for bad in ("ndcg", "ndcg@0", "bleu@10", "recall@x"):
        with pytest.raises(ConfigError, match="NAME@K"):
            rm.parse_measure(bad)


def _random_case(seed: int) -> tuple[dict, dict]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(12):
        judged = rng.sample(docs, rng.randint(1, 8))
        grades = {d: rng.choice([0, 1, 1, 2, 3]) for d in judged}
        grades[judged[0]] = max(1, grades[judged[0]])  # at least one relevant (trec_eval keeps the others too)
        qrels[f"q{q}"] = grades
        # scores on a coarse grid so that ties happen
        run[f"q{q}"] = {d: round(rng.random(), 1) for d in rng.sample(docs, rng.randint(5, 40))}
    return qrels, run


@pytest.mark.parametrize("seed", range(5))
def test_against_pytrec_eval(seed: int):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _random_case(seed)
    trec = {"ndcg_cut_10": "ndcg@10", "recall_1": "recall@1", "recall_10": "recall@10", "recall_100": "recall@100",
            "map_cut_100": "map@100", "map_cut_5": "map@5", "P_5": "precision@5", "recip_rank": "mrr@1000"}  # fmt: skip
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.1,10,100", "map_cut.5,100", "P.5",
                                                      "recip_rank"})  # fmt: skip
    theirs = evaluator.evaluate(run)
    ours = rm.per_query(qrels, run, list(trec.values()))
    for query, measures in theirs.items():
        for trec_name, name in trec.items():
            assert ours[query][name] == pytest.approx(measures[trec_name], abs=1e-12), (query, name)


def test_mrr_at_k_cuts_as_mteb_does():
    grades = {"d3": 1}
    ranking = [f"d{i}" for i in range(20)]
    assert rm.reciprocal_rank_at(ranking, grades, 10) == pytest.approx(1 / 4)
    assert rm.reciprocal_rank_at(ranking, grades, 3) == 0.0


def test_correlations_are_the_tasks_ones():
    assert rm.spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert rm.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
