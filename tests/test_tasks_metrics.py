"""Metrics against hand-computed values (and scipy/sklearn where installed)."""

import math

import numpy as np
import pytest

from bertkit.tasks import metrics
from bertkit.tasks.ner import metrics as ner_metrics
from bertkit.tasks.qa import metrics as qa_metrics

# ------------------------------------------------------------------------------------------------ GLUE


def test_accuracy_and_binary_f1_by_hand():
    assert metrics.accuracy([1, 0, 1, 1], [1, 1, 1, 0]) == 0.5
    # tp=1 fp=1 fn=1 -> 2/(2+1+1)
    assert metrics.f1_binary([1, 1, 0, 0], [1, 0, 1, 0]) == 0.5
    assert metrics.f1_binary(["no", "no"], ["yes", "no"], positive="yes") == 0.0
    with pytest.raises(ValueError):
        metrics.accuracy([1], [1, 0])


def test_matthews_by_hand():
    # tp=2 fp=1 tn=1 fn=0: (2*1 - 1*0) / sqrt(3*2*2*1)
    assert metrics.matthews_corrcoef([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(2 / math.sqrt(12))
    assert metrics.matthews_corrcoef([1, 0, 1, 0], [1, 1, 0, 0]) == 0.0
    assert metrics.matthews_corrcoef([1, 1, 1], [1, 1, 1]) == 0.0  # undefined -> 0, as sklearn
    assert metrics.matthews_corrcoef([0, 1, 0], [1, 0, 1]) == pytest.approx(-1.0)


def test_pearson_spearman_by_hand():
    # dx=[-1,0,1], dy=[-7/3,-1/3,8/3]: 5 / sqrt(2 * 114/9)
    assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(5 / math.sqrt(2 * 114 / 9))
    # ranks [1, 2.5, 2.5, 4] vs [1, 3, 2, 4]: 4.5 / sqrt(4.5 * 5)
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0


def test_against_scipy_and_sklearn():
    stats = pytest.importorskip("scipy.stats")
    skm = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, 200).astype(float)  # many ties
    y = x + rng.normal(0, 2, 200)
    assert metrics.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-12)
    assert metrics.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-12)
    for k in (2, 3):
        p, r = rng.integers(0, k, 300).tolist(), rng.integers(0, k, 300).tolist()
        assert metrics.matthews_corrcoef(p, r) == pytest.approx(skm.matthews_corrcoef(r, p), abs=1e-12)
    p, r = rng.integers(0, 2, 300).tolist(), rng.integers(0, 2, 300).tolist()
    assert metrics.f1_binary(p, r) == pytest.approx(skm.f1_score(r, p), abs=1e-12)


# ------------------------------------------------------------------------------------------ conlleval


@pytest.mark.parametrize(
    "tags, chunks",
    [
        # IOB2
        (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
        (["B-PER", "B-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
        # IOB1: I- starts a chunk after O or another type; B- only separates adjacent same-type chunks
        (["I-PER", "I-PER", "B-PER", "O", "I-LOC"], [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5)]),
        # BIOES
        (
            ["S-PER", "S-PER", "B-ORG", "I-ORG", "E-ORG", "O", "S-LOC"],
            [("PER", 0, 1), ("PER", 1, 2), ("ORG", 2, 5), ("LOC", 6, 7)],
        ),
        # a type change ends a chunk even inside I- tags; a chunk runs to the sentence end
        (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),
        (["O", "O"], []),
    ],
)
def test_conlleval_chunks(tags, chunks):
    assert ner_metrics.get_entities(tags) == chunks


def test_entity_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-MISC"]]
    # pred chunks: PER(0,1) LOC(3,4) ORG(0,1) MISC(1,2); gold: PER(0,2) LOC(3,4) ORG(0,1); correct: LOC, ORG
    s = ner_metrics.entity_scores(pred, gold)
    assert s["precision"] == pytest.approx(2 / 4)
    assert s["recall"] == pytest.approx(2 / 3)
    assert s["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert s["accuracy"] == pytest.approx(4 / 6)
    assert s["f1_PER"] == 0.0 and s["f1_LOC"] == 1.0 and s["precision_MISC"] == 0.0
    assert s["support_PER"] == 1.0 and s["support_MISC"] == 0.0


def test_entity_scores_schemes_agree():
    """The same entities written in IOB1, IOB2 and BIOES score identically."""
    iob2 = [["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]
    iob1 = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
    bioes = [["B-PER", "E-PER", "S-PER", "O", "S-LOC"]]
    for other in (iob1, bioes):
        assert ner_metrics.get_entities(other[0]) == ner_metrics.get_entities(iob2[0])
    assert ner_metrics.entity_scores(iob2, iob2)["f1"] == 1.0


# ---------------------------------------------------------------------------------------------- SQuAD


def test_squad_normalization_and_scores_by_hand():
    assert qa_metrics.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert qa_metrics.normalize_answer("an  apple") == "apple"
    assert qa_metrics.normalize_answer("theater") == "theater"  # articles only as whole words
    assert qa_metrics.squad_exact("an apple", "Apple.") == 1.0
    # "cat sat on mat" vs "cat on mat": P = 3/4, R = 1
    assert qa_metrics.squad_f1("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)
    assert qa_metrics.squad_f1("", "", version="1.1") == 0.0
    assert qa_metrics.squad_f1("", "", version="2.0") == 1.0
    assert qa_metrics.squad_f1("the", "", version="2.0") == 1.0  # both normalise to nothing
    assert qa_metrics.squad_f1("", "cat", version="2.0") == 0.0


def test_squad_v11_max_over_answers_and_missing_predictions():
    answers = {"q1": ["Denver Broncos", "Broncos"], "q2": ["Santa Clara"], "q3": ["1990"]}
    predictions = {"q1": "the Broncos", "q2": "Santa Clara, California"}  # q3 missing: scores 0
    s = qa_metrics.squad_evaluate(predictions, answers, version="1.1")
    assert s["exact_match"] == pytest.approx(100 / 3)
    # q1 exact; q2: "santa clara california" vs "santa clara" = 2*(2/3*1)/(2/3+1) = 0.8
    assert s["f1"] == pytest.approx(100 * (1 + 0.8) / 3)


def test_squad_v2_scores_and_threshold_search_by_hand():
    answers = {"q1": ["Denver Broncos"], "q2": []}
    s = qa_metrics.squad_evaluate({"q1": "Broncos", "q2": ""}, answers, version="2.0")
    assert s["exact"] == 50.0
    assert s["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert s["HasAns_f1"] == pytest.approx(200 / 3) and s["NoAns_exact"] == 100.0 and s["total"] == 2
    # threshold search on the best non-null answers: q2 predicts a span, so only a threshold that nulls q2
    # (between 0.5 and 0.9) keeps q1's 2/3 and gains q2's 1.
    s = qa_metrics.squad_evaluate(
        {"q1": "Broncos", "q2": "Denver"},
        answers,
        version="2.0",
        na_probs={"q1": 0.5, "q2": 0.9},
        na_prob_threshold=0.7,
    )
    assert s["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2)  # q2's odds 0.9 > 0.7: counted as no answer
    assert s["best_f1"] == pytest.approx(100 * (2 / 3 + 1) / 2) and s["best_f1_thresh"] == 0.5
    assert s["best_exact"] == 50.0 and s["best_exact_thresh"] == 0.0
