"""Token-id parity with the reference ``transformers.BertTokenizer`` (the slow, pure-Python algorithm).

Real data (SST-2 dev, CoNLL-2003 valid, SQuAD dev contexts and questions, Gutenberg books) with the real
bert-base-uncased vocabulary, and every Unicode code point. Reads ``../shared/data``; skips without it.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bertkit.tokenizer import Tokenizer

transformers = pytest.importorskip("transformers", reason="parity tests need transformers (dev extra)")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
VOCAB = DATA / "bert_vocab" / "vocab.txt"
pytestmark = pytest.mark.skipif(not VOCAB.is_file(), reason=f"shared data not found at {DATA}")


@pytest.fixture(scope="module")
def ours() -> Tokenizer:
    return Tokenizer.from_vocab(VOCAB)


@pytest.fixture(scope="module")
def slow():
    return transformers.BertTokenizer(str(VOCAB))


def sst2_dev() -> list[str]:
    with open(DATA / "sst2" / "dev.tsv", encoding="utf-8", newline="") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]


def conll_valid() -> list[str]:
    sentences, words = [], []
    for line in (DATA / "conll2003" / "valid.txt").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if words:
                sentences.append(" ".join(words))
            words = []
        elif not line.startswith("-DOCSTART-"):
            words.append(line.split(" ")[0])
    if words:
        sentences.append(" ".join(words))
    return sentences


def squad_texts() -> list[str]:
    """Every context and question of the official SQuAD v1.1 dev set (split here into train.json + dev.json)."""
    texts = []
    for name in ("train.json", "dev.json"):
        for article in json.loads((DATA / "squad" / name).read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                texts.append(paragraph["context"])
                texts += [qa["question"] for qa in paragraph["qas"]]
    return texts


def gutenberg_sample(total_chars: int = 2_000_000) -> list[str]:
    """About ``total_chars`` of paragraphs, an equal share from each book's body (header/footer stripped)."""
    books = sorted((DATA / "gutenberg" / "books").glob("*.txt"))
    share = total_chars // len(books)
    paragraphs = []
    for book in books:
        text = book.read_text(encoding="utf-8")
        start, end = text.find("*** START OF"), text.find("*** END OF")
        body = text[text.find("\n", start) + 1 : end] if start >= 0 and end > start else text
        taken = 0
        for para in body.split("\n\n"):
            if taken >= share:
                break
            if para.strip():
                paragraphs.append(para)
                taken += len(para)
    return paragraphs


def assert_same_ids(ours: Tokenizer, slow, texts: list[str]) -> None:
    got = ours.ids_batch(texts)
    mismatches = [(t, g) for t, g in zip(texts, got) if g != slow.convert_tokens_to_ids(slow.tokenize(t))]
    assert not mismatches, f"{len(mismatches)} of {len(texts)} differ; first: {mismatches[0][0][:200]!r}"


def test_sst2_dev(ours, slow):
    texts = sst2_dev()
    assert len(texts) == 872
    assert_same_ids(ours, slow, texts)


def test_conll_valid(ours, slow):
    texts = conll_valid()
    assert len(texts) == 3250
    assert_same_ids(ours, slow, texts)


@pytest.mark.slow
def test_squad_dev_contexts_and_questions(ours, slow):
    assert_same_ids(ours, slow, squad_texts())


@pytest.mark.slow
def test_gutenberg_2mb(ours, slow):
    texts = gutenberg_sample()
    assert sum(map(len, texts)) >= 1_900_000
    assert_same_ids(ours, slow, texts)


def all_code_points(lo: int, hi: int) -> list[str]:
    """Every code point in [lo, hi) in context (after a letter, before an uppercase letter, twice per word), in
    space-separated chunks so the slow tokenizer is called a few hundred times rather than a million."""
    cps = [c for c in range(lo, hi) if not 0xD800 <= c <= 0xDFFF]
    return [" ".join(f"x{chr(c)}Ab{chr(c)}" for c in cps[i : i + 2000]) for i in range(0, len(cps), 2000)]


@pytest.mark.parametrize("options", [{"lowercase": True}, {"lowercase": False}], ids=["uncased", "cased"])
def test_every_bmp_code_point(options):
    ours = Tokenizer.from_vocab(VOCAB, **options)
    slow = transformers.BertTokenizer(str(VOCAB), do_lower_case=options["lowercase"])
    assert_same_ids(ours, slow, all_code_points(0, 0x10000))


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{"lowercase": True}, {"lowercase": False, "strip_accents": True, "tokenize_chinese_chars": False}],
    ids=["uncased", "cased-strip-nocjk"],
)
def test_every_code_point_above_bmp(options):
    ours = Tokenizer.from_vocab(VOCAB, **options)
    slow = transformers.BertTokenizer(
        str(VOCAB), do_lower_case=options["lowercase"], strip_accents=options.get("strip_accents"),
        tokenize_chinese_chars=options.get("tokenize_chinese_chars", True),
    )  # fmt: skip
    assert_same_ids(ours, slow, all_code_points(0x10000, 0x110000))
