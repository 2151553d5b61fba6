"""Punctuation restoration, the demo's syntactic task: the data builder and a short fine-tuning on its files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bertkit.data.punctuation import COMMA, NONE, PERIOD, QUESTION, book_windows, build_punctuation_data, tag_words
from bertkit.errors import DataError

ROOT = Path(__file__).resolve().parents[1]


def test_each_word_is_tagged_with_the_mark_that_followed_it():
    tagged = tag_words(
        "\u201cWell, Mr. Holmes\u2014what do you think?\u201d said he. \u201cI don\u2019t know!\u201d Yes; so"
    )
    assert tagged == [
        ("well", COMMA),
        ("mr", NONE),  # an abbreviation's period belongs to the word
        ("holmes", COMMA),  # a dash separates like a comma
        ("what", NONE),
        ("do", NONE),
        ("you", NONE),
        ("think", QUESTION),
        ("said", NONE),
        ("he", PERIOD),
        ("i", NONE),
        ("don't", NONE),  # the typographic apostrophe becomes ' and stays inside the word
        ("know", PERIOD),  # ! counts as a period
        ("yes", COMMA),  # ; counts as a comma
        ("so", NONE),
    ]


def test_a_mark_standing_alone_goes_to_the_word_before_it():
    assert tag_words("really ? yes , and -- no") == [
        ("really", QUESTION),
        ("yes", COMMA),
        ("and", COMMA),
        ("no", NONE),
    ]


def test_windows_skip_headings_and_drop_the_short_tail():
    paragraphs = ["CHAPTER I", "One two three. Four five six, seven eight nine ten eleven"]
    windows = book_windows(paragraphs, window_words=4)
    assert [[word for word, _ in w] for w in windows] == [
        ["one", "two", "three", "four"],
        ["five", "six", "seven", "eight"],
    ]
    assert windows[0][2] == ("three", PERIOD) and windows[1][1] == ("six", COMMA)


def _book(path: Path, sentences: int, seed_word: str) -> Path:
    text = "\n\n".join(
        f"The {seed_word} number {i} walked home, slowly. Did it rain on day {i}? It did not, said the {seed_word}."
        for i in range(sentences)
    )
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    return path


def test_the_builder_writes_disjoint_conll_splits_of_fixed_windows(tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    _book(books / "a.txt.gz", 300, "cat")
    _book(books / "b.txt.gz", 300, "dog")
    splits = build_punctuation_data([str(books)], tmp_path / "out", window_words=10, train_examples=50, dev_examples=20)
    assert (splits.train_examples, splits.dev_examples) == (50, 20)
    train = splits.train.read_text(encoding="utf-8").strip().split("\n\n")
    dev = splits.dev.read_text(encoding="utf-8").strip().split("\n\n")
    assert len(train) == 50 and len(dev) == 20
    assert all(len(block.splitlines()) == 10 for block in train + dev)
    assert not set(train) & set(dev)  # no window (the numbers make each one unique) is in both splits
    tags = {line.split()[1] for block in train for line in block.splitlines()}
    assert tags == {NONE, COMMA, PERIOD, QUESTION}
    assert sum(splits.tag_counts.values()) == 70 * 10
    again = build_punctuation_data(
        [str(books)], tmp_path / "again", window_words=10, train_examples=50, dev_examples=20
    )
    assert again.train.read_bytes() == splits.train.read_bytes()  # the same seed, the same files


def test_the_builder_refuses_text_without_enough_punctuation(tmp_path):
    (tmp_path / "empty.txt").write_text("TITLE\n\nAUTHOR\n", encoding="utf-8")
    with pytest.raises(DataError, match="too little punctuated text"):
        build_punctuation_data([str(tmp_path / "empty.txt")], tmp_path / "out")


@pytest.mark.skipif(not (ROOT / "data" / "punctuation").is_dir(), reason="the shipped punctuation books are absent")
def test_a_few_fine_tuning_steps_on_the_shipped_books_score_the_marks(tmp_path):
    from bertkit.config import BertConfig
    from bertkit.models.bert import BertForPreTraining
    from bertkit.tokenizer import Tokenizer
    from bertkit.training.finetune import FinetuneConfig, finetune
    from bertkit.weights import save_pretrained

    splits = build_punctuation_data(
        [str(ROOT / "data" / "punctuation")], tmp_path / "data", train_examples=64, dev_examples=16
    )
    words = [line.split()[0] for line in splits.train.read_text(encoding="utf-8").splitlines() if line]
    tokenizer = Tokenizer.train(iter([" ".join(words)]), vocab_size=300)
    config = BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id)
    save_pretrained(BertForPreTraining(config), tmp_path / "start", tokenizer=tokenizer)
    run = finetune(
        FinetuneConfig.from_options(
            task="ner",
            model=str(tmp_path / "start"),
            train_file=str(splits.train),
            dev_file=str(splits.dev),
            output=str(tmp_path / "tagger"),
            max_steps=4,
            micro_batch_size=16,
            lr=1e-3,
            max_seq_length=64,
            precision="fp32",
            progress=False,
        )
    )
    scores = run.evaluations[-1]
    for name in ("f1", "f1_COMMA", "f1_PERIOD", "support_COMMA", "support_PERIOD"):
        assert name in scores
    assert 0.0 <= scores["f1"] <= 1.0
    assert scores["support_COMMA"] > 0 and scores["support_PERIOD"] > 0
    id2label = BertConfig.load(tmp_path / "tagger").id2label
    assert id2label is not None
    labels = set(id2label.values())
    assert labels == {NONE, COMMA, PERIOD, QUESTION}
