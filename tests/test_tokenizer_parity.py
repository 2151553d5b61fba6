"""Token-id parity with the reference ``transformers.BertTokenizer`` (the slow, pure-Python algorithm).

Real data (SST-2 dev, CoNLL-2003 valid, SQuAD dev contexts and questions, Gutenberg books) with the real
bert-base-uncased vocabulary; every Unicode code point, classed and normalised by the reference's rules
and a sample of them through both tokenizers. Reads ``../shared/data``; skips without it.
"""

from __future__ import annotations

import csv
import json
import re
import unicodedata
from pathlib import Path

import pytest

from bertkit.tokenizer import Tokenizer
from bertkit.tokenizer.normalization import char_classes

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
    sentences: list[str] = []
    words: list[str] = []
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


# ------------------------------------------------------------------------------------------ every code point
# The reference decides each character's fate with a few per-character rules; bertkit hands the same rules to
# ``tokenizers`` as regex classes and normalisers. Both are compared over every code point, once, directly;
# then a sample of code points in context goes through both full tokenizers.
CODE_POINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]  # lone surrogates are no text
OPTIONS = [
    {"lowercase": True},
    {"lowercase": False},
    {"lowercase": False, "strip_accents": True, "tokenize_chinese_chars": False},
]
OPTION_IDS = ["uncased", "cased", "cased-strip-nocjk"]


def members(regex_class: str) -> set[int]:
    """The code points of a regex class, read from the text bertkit hands to the ``tokenizers`` regex engine."""
    found: set[int] = set()
    for first, last in re.findall(r"\\x\{([0-9A-F]+)\}(?:-\\x\{([0-9A-F]+)\})?", regex_class):
        found.update(range(int(first, 16), int(last or first, 16) + 1))
    return found


def reference_set(rule) -> set[int]:
    return {c for c in CODE_POINTS if rule(chr(c))}


def test_every_code_point_is_classed_as_the_reference_classes_it():
    from transformers.models.bert.tokenization_bert import BasicTokenizer, _is_control, _is_punctuation, _is_whitespace

    classes = char_classes()
    deleted = reference_set(lambda ch: ch in "\x00\ufffd" or _is_control(ch))
    assert members(classes.delete) == deleted
    # A space in the reference: what it maps to " " or what str.split then splits on, if not deleted first.
    spaces = reference_set(lambda ch: _is_whitespace(ch) or ch.isspace()) - deleted
    assert members(classes.space) | {0x20} == spaces
    punctuation = reference_set(_is_punctuation)
    assert members(classes.punctuation) == punctuation
    cjk = {c for c in CODE_POINTS if BasicTokenizer()._is_chinese_char(c)}
    assert members(classes.punctuation_or_cjk) == punctuation | cjk
    assert members(classes.nonspacing_marks) == reference_set(lambda ch: unicodedata.category(ch) == "Mn")


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_every_code_point_is_normalised_as_the_reference_normalises_it(options):
    """NFC, case and accents, character by character: each code point kept (neither deleted nor a space) between
    newlines, which neither side composes, reorders or changes case across, in one call each."""
    from transformers.models.bert.tokenization_bert import BasicTokenizer

    ours = Tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], **options)
    reference = BasicTokenizer(do_lower_case=options["lowercase"], strip_accents=options.get("strip_accents"))
    classes = char_classes()
    dropped = members(classes.delete) | members(classes.space)
    kept = [chr(c) for c in CODE_POINTS if c not in dropped and c != 0x20]
    text = "\n".join(kept)
    # BasicTokenizer.tokenize's steps on one token, applied to all of them at once
    expected = unicodedata.normalize("NFC", text)
    if options["lowercase"]:
        expected = expected.lower()
    if (options["lowercase"] and options.get("strip_accents") is not False) or options.get("strip_accents"):
        expected = reference._run_strip_accents(expected)
    got = ours.backend.normalizer.normalize_str(text).split(" ")  # the newlines are spaces by then
    want = expected.split("\n")
    assert len(got) == len(want) == len(kept)
    differ = [(f"U+{ord(ch):04X}", g, w) for ch, g, w in zip(kept, got, want) if g != w]
    assert not differ, f"{len(differ)} code points normalise differently, first: {differ[:5]}"


def code_points_in_context(step: int) -> list[str]:
    """Every ``step``-th code point in context (after a letter, before an uppercase letter, twice per word), in
    space-separated chunks so the slow tokenizer is called a few times rather than once per code point."""
    cps = CODE_POINTS[::step]
    return [" ".join(f"x{chr(c)}Ab{chr(c)}" for c in cps[i : i + 2000]) for i in range(0, len(cps), 2000)]


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_a_sample_of_code_points_through_both_tokenizers(options):
    ours = Tokenizer.from_vocab(VOCAB, **options)
    slow = transformers.BertTokenizer(
        str(VOCAB), do_lower_case=options["lowercase"], strip_accents=options.get("strip_accents"),
        tokenize_chinese_chars=options.get("tokenize_chinese_chars", True),
    )  # fmt: skip
    # a step prime to the block sizes, so that every block and every offset within a block is visited
    assert_same_ids(ours, slow, code_points_in_context(101))
