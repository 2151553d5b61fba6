"""Masking: ratios over >100k tokens, specials never chosen, caps, rounding, whole words."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bertkit.data.masking import MaskingSpec, continuation_table, mask_tokens
from bertkit.errors import DataError

PAD, CLS, SEP, MASK = 0, 101, 102, 103
VOCAB = 30522


def spec(**kw):
    return MaskingSpec(mask_id=MASK, vocab_size=VOCAB, special_ids=frozenset({PAD, CLS, SEP}), **kw)


def instance(rng, length):
    a = rng.randint(1, length - 4)
    body = [rng.randrange(1000, VOCAB) for _ in range(length - 3)]
    return [CLS, *body[:a], SEP, *body[a:], SEP]


def test_ratios_over_100k_tokens():
    rng = random.Random(0)
    s = spec(max_predictions_per_seq=20)
    selected = total = masked = kept = replaced = 0
    for _ in range(1000):
        tokens = instance(rng, 128)
        out = mask_tokens(tokens, s, rng)
        total += len(tokens)
        selected += len(out.positions)
        assert out.positions == sorted(out.positions) and len(set(out.positions)) == len(out.positions)
        assert out.labels == [tokens[i] for i in out.positions]
        for i in out.positions:
            assert tokens[i] not in (CLS, SEP, PAD)
            if out.tokens[i] == MASK:
                masked += 1
            elif out.tokens[i] == tokens[i]:
                kept += 1
            else:
                replaced += 1
        unselected = set(range(len(tokens))) - set(out.positions)
        assert all(out.tokens[i] == tokens[i] for i in unselected)
    assert total >= 100_000
    assert selected / total == pytest.approx(0.15, abs=0.01)
    assert masked / selected == pytest.approx(0.8, abs=0.01)
    assert kept / selected == pytest.approx(0.1, abs=0.01)
    assert replaced / selected == pytest.approx(0.1, abs=0.01)


def test_count_uses_bankers_rounding_and_cap():
    rng = random.Random(1)
    # 10 tokens * 0.15 = 1.5 -> 2; 30 * 0.15 = 4.5 -> 4 (round half to even, as the original);
    # 4 tokens * 0.15 = 0.6 -> 1; 200 tokens -> 30, capped at 20.
    for length, expected in ((10, 2), (30, 4), (4, 1), (200, 20)):
        out = mask_tokens(instance(rng, length) if length > 4 else [CLS, 5000, SEP, 6000], spec(), rng)
        assert len(out.positions) == expected


def test_padding_and_specials_are_never_selected():
    rng = random.Random(2)
    s = spec(masked_lm_prob=1.0, max_predictions_per_seq=64)
    tokens = [CLS, 2000, 2001, SEP, 2002, SEP, PAD, PAD, PAD]
    for _ in range(50):
        out = mask_tokens(tokens, s, rng)
        assert sorted(out.positions) == [1, 2, 4]


def test_whole_word_masking_keeps_words_together():
    vocab = {
        "[PAD]": PAD,
        "[CLS]": CLS,
        "[SEP]": SEP,
        "[MASK]": MASK,
        "play": 2000,
        "##ing": 2001,
        "##s": 2002,
        "run": 2003,
        "the": 2004,
    }
    table = continuation_table(vocab, VOCAB)
    s = spec(whole_word_mask=True, is_continuation=table, max_predictions_per_seq=20)
    # words: the | play ##ing | run ##s | the | play ##s ##ing
    body = [2004, 2000, 2001, 2003, 2002, 2004, 2000, 2002, 2001]
    words = [[1], [2, 3], [4, 5], [6], [7, 8, 9]]
    tokens = [CLS, *body, SEP]
    rng = random.Random(3)
    sizes = []
    for _ in range(300):
        out = mask_tokens(tokens, s, rng)
        chosen = set(out.positions)
        for word in words:
            assert chosen.isdisjoint(word) or chosen.issuperset(word)
        sizes.append(len(chosen))
    # round(11 * 0.15) = 2: exactly 2 tokens, from one 2-piece word or two 1-piece words
    assert set(sizes) == {2}


def test_same_rng_state_same_masks_and_explicit_rng_only():
    tokens = instance(random.Random(4), 100)
    a = mask_tokens(tokens, spec(), random.Random(9))
    random.seed(123)  # the global RNG must not matter
    b = mask_tokens(tokens, spec(), random.Random(9))
    assert a == b


def test_invalid_settings_raise_data_error():
    with pytest.raises(DataError):
        spec(masked_lm_prob=1.5)
    with pytest.raises(DataError):
        spec(whole_word_mask=True)
    assert continuation_table({"##a": 3, "b": 1}).tolist() == [False, False, False, True]
    assert isinstance(continuation_table({"a": 0}), np.ndarray)
