"""Instance creation: a hand-derived golden run with a scripted RNG, and statistics with a real one."""

from __future__ import annotations

import random
from typing import cast

import pytest

from bertkit.data.instances import create_instances, create_instances_from_document, truncate_seq_pair
from bertkit.data.masking import MaskingSpec, static_masker

CLS, SEP = 101, 102


class ScriptedRng:
    """Returns scripted values and records every call, so the expected instances follow by hand."""

    def as_random(self) -> random.Random:
        # Duck-typed: it answers the three methods the algorithm draws from, and fails on any other.
        return cast(random.Random, self)

    def __init__(self, script):
        self.script = list(script)
        self.calls = []

    def _next(self, kind):
        expected_kind, value = self.script.pop(0)
        assert expected_kind == kind, f"algorithm asked for {kind}, script has {expected_kind}"
        return value

    def random(self):
        self.calls.append("random")
        return self._next("random")

    def randint(self, a, b):
        self.calls.append(("randint", a, b))
        value = self._next("randint")
        assert a <= value <= b
        return value

    def shuffle(self, items):
        self.calls.append("shuffle")


# The golden corpus (docs/data.md, "Golden example"): sentences are lists of ids.
DOC0 = [[10, 11], [12, 13, 14], [15], [16, 17]]
DOC1 = [[20, 21, 22], [23]]
DOCS = [DOC0, DOC1]


def make(doc_index, script, max_seq_length=10):
    rng = ScriptedRng(script)
    out = create_instances_from_document(
        DOCS, doc_index, max_seq_length=max_seq_length, short_seq_prob=0.1, cls_id=CLS, sep_id=SEP, rng=rng.as_random()
    )
    assert not rng.script, "the algorithm used fewer draws than derived by hand"
    return out, rng.calls


def test_golden_actual_next_with_truncation_from_the_front():
    # target 7 (not short); the chunk grows to all 4 sentences (8 tokens); A = first 2 sentences;
    # B follows (0.7 >= 0.5); 8 > 7 so the longer side A loses its FIRST token (0.2 < 0.5).
    out, calls = make(0, [("random", 0.5), ("randint", 2), ("random", 0.7), ("random", 0.2)])
    assert calls == ["random", ("randint", 1, 3), "random", "random"]
    assert len(out) == 1
    inst = out[0]
    assert inst.tokens == [CLS, 11, 12, 13, 14, SEP, 15, 16, 17, SEP]
    assert inst.a_length == 4 and inst.is_random_next is False
    assert inst.segment_ids == [0] * 6 + [1] * 4


def test_golden_random_next_puts_unused_sentences_back():
    # A = sentence 0 only, B random (0.3 < 0.5) from doc 1 (first draw) starting at its sentence 0.
    # Sentences 1..3 of doc 0 are put back: the next chunk restarts at sentence 1 and is [12..17]
    # (6 tokens, ends the document): A = [12,13,14] + [15] (a_end 2), B = [16,17] follows (0.9).
    # Truncation: A+B of the first instance is 2 + 4 = 6 <= 7, no draw.
    script = [
        ("random", 0.5),
        ("randint", 1),
        ("random", 0.3),
        ("randint", 1),
        ("randint", 0),
        ("randint", 2),
        ("random", 0.9),
    ]
    out, calls = make(0, script)
    assert calls == [
        "random",
        ("randint", 1, 3),
        "random",
        ("randint", 0, 1),
        ("randint", 0, 1),
        ("randint", 1, 2),
        "random",
    ]
    assert [x.tokens for x in out] == [
        [CLS, 10, 11, SEP, 20, 21, 22, 23, SEP],
        [CLS, 12, 13, 14, 15, SEP, 16, 17, SEP],
    ]
    assert [x.is_random_next for x in out] == [True, False]
    assert [x.a_length for x in out] == [2, 4]


def test_golden_short_target_single_sentence_chunks_are_always_random_next():
    # 0.05 < 0.1: short target 3. Sentence [20,21,22] fills it alone: random next without a coin flip;
    # the random document is redrawn while it is the current one (1, then 0); B = doc0[2:] up to
    # target_b = 0 tokens, i.e. one sentence [15]. Then [23] (last) with B from doc0[0] until 2 tokens.
    script = [
        ("random", 0.05),
        ("randint", 3),
        ("randint", 1),
        ("randint", 0),
        ("randint", 2),
        ("randint", 0),
        ("randint", 0),
    ]
    out, calls = make(1, script)
    assert calls == [
        "random",
        ("randint", 2, 7),
        ("randint", 0, 1),
        ("randint", 0, 1),
        ("randint", 0, 3),
        ("randint", 0, 1),
        ("randint", 0, 3),
    ]
    assert [x.tokens for x in out] == [[CLS, 20, 21, 22, SEP, 15, SEP], [CLS, 23, SEP, 10, 11, SEP]]
    assert all(x.is_random_next and x.short_target for x in out)


def test_truncate_seq_pair_trims_longer_side_b_on_ties():
    a, b = [1, 2, 3], [4, 5, 6]
    rng = ScriptedRng([("random", 0.9), ("random", 0.1)])
    truncate_seq_pair(a, b, 4, rng.as_random())
    # tie -> B loses its last (0.9); then A (3 > 2) loses its first (0.1)
    assert a == [2, 3] and b == [4, 5]


def test_one_document_corpus_and_single_sentence_documents_do_not_crash():
    docs = [[[5, 6, 7]]]
    rng = random.Random(0)
    out = create_instances(docs, max_seq_length=8, short_seq_prob=0.1, dupe_factor=3, cls_id=CLS, sep_id=SEP, rng=rng)
    assert len(out) == 3 and all(x.is_random_next for x in out)
    # A sentence far longer than max_seq_length is truncated, never overflows.
    out = create_instances(
        [[list(range(1000, 1500))], [[7, 8]]],
        max_seq_length=16,
        short_seq_prob=0.0,
        dupe_factor=2,
        cls_id=CLS,
        sep_id=SEP,
        rng=random.Random(1),
    )
    assert out and all(len(x.tokens) <= 16 and x.a_length >= 1 and len(x.tokens) - x.a_length - 3 >= 1 for x in out)


def synthetic_corpus(seed, num_docs, sentences=(20, 60)):
    rng = random.Random(seed)
    return [
        [[rng.randrange(1000, 30000) for _ in range(rng.randint(5, 40))] for _ in range(rng.randint(*sentences))]
        for _ in range(num_docs)
    ]


def test_statistics_random_next_segments_and_lengths():
    # Long documents and no short targets: single-sentence chunks (where B must be random, see
    # docs/data.md "NSP balance") are rare, so the share of random B is the coin's 0.5.
    docs = synthetic_corpus(1, 40, sentences=(200, 300))
    spec = MaskingSpec(mask_id=103, vocab_size=30522, special_ids=frozenset({0, CLS, SEP}), max_predictions_per_seq=20)
    instances = create_instances(
        docs,
        max_seq_length=128,
        short_seq_prob=0.0,
        dupe_factor=1,
        cls_id=CLS,
        sep_id=SEP,
        rng=random.Random(7),
        masker=static_masker(spec),
    )
    tokens = sum(len(x.tokens) for x in instances)
    assert tokens > 100_000
    random_next = sum(x.is_random_next for x in instances) / len(instances)
    assert abs(random_next - 0.5) <= 0.02, random_next
    for x in instances:
        assert len(x.tokens) <= 128
        assert x.tokens[0] == CLS and x.tokens[x.a_length + 1] == SEP and x.tokens[-1] == SEP
        assert SEP not in x.tokens[1 : x.a_length + 1] and x.a_length >= 1 and len(x.tokens) - x.a_length - 3 >= 1
        first_sep = x.tokens.index(SEP)
        assert x.segment_ids == [0] * (first_sep + 1) + [1] * (len(x.tokens) - first_sep - 1)
        assert 0 < len(x.masked_positions) <= 20 and CLS not in x.masked_labels and SEP not in x.masked_labels


def test_short_target_is_drawn_once_per_document_and_pass():
    docs = synthetic_corpus(2, 50)
    rng = random.Random(3)
    short = []
    for i in range(3000):
        out = create_instances_from_document(
            docs, i % len(docs), max_seq_length=128, short_seq_prob=0.1, cls_id=CLS, sep_id=SEP, rng=rng
        )
        assert len({x.short_target for x in out}) == 1
        short.append(out[0].short_target)
    assert sum(short) / len(short) == pytest.approx(0.1, abs=0.02)


def test_same_seed_same_instances():
    docs = synthetic_corpus(2, 20)

    def run(seed):
        rng = random.Random(seed)
        return create_instances(
            docs, max_seq_length=64, short_seq_prob=0.1, dupe_factor=2, cls_id=CLS, sep_id=SEP, rng=rng
        )

    a, b, c = run(5), run(5), run(6)
    assert [x.tokens for x in a] == [x.tokens for x in b]
    assert [x.tokens for x in a] != [x.tokens for x in c]
