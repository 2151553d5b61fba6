"""Any tokenizer.json (here a tiny byte-level BPE built with the tokenizers library, as ModernBERT's is) against
transformers' PreTrainedTokenizerFast on the same files: ids, masks, offsets, decode, and the special tokens
taken from the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from bertkit.errors import TokenizerError
from bertkit.tokenizer import JsonTokenizer, Tokenizer

transformers = pytest.importorskip("transformers", reason="transformers is the reference tokenizer")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "ModernBERT reads 8,192 tokens; BERT reads 512.",
    "Ünïcode, émojis 🙂 and   spaces",
    "[MASK] is a special token written in the text.",
]


def bpe_directory(tmp_path: Path, specials: tuple[str, ...], config: dict | None = None) -> Path:
    """A byte-level BPE tokenizer.json trained on a few lines, with ``[CLS] A [SEP] (B [SEP])`` around the text
    (ModernBERT's layout) and the given special tokens; ``config`` is written as tokenizer_config.json."""
    cls, sep = specials[0], specials[1]
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    backend.train_from_iterator(TEXTS * 20, trainer)
    ids = {t: backend.token_to_id(t) for t in (cls, sep)}
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1", special_tokens=list(ids.items())
    )
    directory = tmp_path / "tok"
    directory.mkdir()
    backend.save(str(directory / "tokenizer.json"))
    if config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return directory


MODERNBERT_NAMES = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]",
                    "unk_token": "[UNK]", "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast"}  # fmt: skip


def test_a_bpe_tokenizer_json_encodes_as_transformers_does(tmp_path: Path) -> None:
    directory = bpe_directory(tmp_path, ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"), MODERNBERT_NAMES)
    ours = Tokenizer.from_pretrained(directory)
    assert isinstance(ours, JsonTokenizer)
    theirs = transformers.AutoTokenizer.from_pretrained(directory)
    mine = ours(TEXTS, TEXTS[::-1], padding=True, return_offsets_mapping=True)
    ref = theirs(TEXTS, TEXTS[::-1], padding=True, return_offsets_mapping=True)
    for key in ("input_ids", "attention_mask", "offset_mapping"):
        assert [list(map(tuple, r)) if key == "offset_mapping" else r for r in mine[key]] == [
            list(map(tuple, r)) if key == "offset_mapping" else r for r in ref[key]
        ], key
    first = mine["input_ids"][0]
    assert first[0] == ours.cls_id and ours.sep_id in first and ours.mask_id == theirs.mask_token_id
    assert ours.pad_id == theirs.pad_token_id and ours.model_max_length == 64
    assert ours.decode(first) == theirs.decode(first, skip_special_tokens=True)
    truncated = ours(TEXTS[0], max_length=6)["input_ids"]
    assert truncated == theirs(TEXTS[0], max_length=6, truncation=True)["input_ids"] and len(truncated) == 6


def test_special_tokens_come_from_the_files_and_save_back(tmp_path: Path) -> None:
    names = {"cls_token": "<s>", "sep_token": "</s>", "pad_token": "<pad>", "mask_token": "<mask>",
             "unk_token": {"content": "<unk>", "special": True}}  # fmt: skip
    directory = bpe_directory(tmp_path, ("<s>", "</s>", "<pad>", "<mask>", "<unk>"), names)
    ours = Tokenizer.from_pretrained(directory)
    assert isinstance(ours, JsonTokenizer)
    assert ours.specials == {"cls": "<s>", "sep": "</s>", "pad": "<pad>", "mask": "<mask>", "unk": "<unk>"}
    assert ours.special_ids == {ours.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "<mask>", "<unk>")}
    saved = tmp_path / "saved"
    ours.save_pretrained(saved)
    again = Tokenizer.from_pretrained(saved)
    assert again.fingerprint == ours.fingerprint
    theirs = transformers.AutoTokenizer.from_pretrained(saved)
    assert theirs(TEXTS)["input_ids"] == again(TEXTS)["input_ids"]
    assert theirs.mask_token == "<mask>" and theirs.pad_token_id == again.pad_id


def test_without_config_the_usual_names_are_found_and_a_missing_role_is_named(tmp_path: Path) -> None:
    directory = bpe_directory(tmp_path, ("[CLS]", "[SEP]", "[PAD]"))
    ours = Tokenizer.from_pretrained(directory / "tokenizer.json")
    assert ours.cls_id == ours.convert_tokens_to_ids("[CLS]")
    with pytest.raises(TokenizerError, match="no mask token"):
        _ = ours.mask_id
    (directory / "tokenizer_config.json").write_text(json.dumps({"mask_token": "[NOPE]"}))
    with pytest.raises(TokenizerError, match="not in the vocabulary"):
        Tokenizer.from_pretrained(directory)


def test_wordpiece_files_stay_berts(tmp_path: Path) -> None:
    bert = Tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"])
    bert.save_pretrained(tmp_path / "bert")
    loaded = Tokenizer.from_pretrained(tmp_path / "bert" / "tokenizer.json")
    assert type(loaded) is Tokenizer and loaded.fingerprint == bert.fingerprint


# ------------------------------------------------------------------------------------ one framing everywhere
def test_a_tokenizer_json_without_a_post_processor_is_framed_as_every_path_frames(tmp_path: Path) -> None:
    """Without a post-processor in the file, ``tok(...)`` (and so ``bertkit.embed``) frames ``<s> A </s>`` and
    ``<s> A </s> B </s>`` as the fine-tuning features and pre-training data do; the file is saved as it was
    read, and keeps its fingerprint."""
    import numpy as np

    import bertkit
    from bertkit.features.pairs import build_pair
    from bertkit.models.bert import BertModel
    from bertkit.tokenizer.framing import framed, framing_processor
    from inference_helpers import save_model

    directory = bpe_directory(tmp_path, ("<s>", "</s>", "<pad>", "<mask>", "<unk>"))
    data = json.loads((directory / "tokenizer.json").read_text())
    data["post_processor"] = None
    (directory / "tokenizer.json").write_text(json.dumps(data))
    tok = Tokenizer.from_pretrained(directory)
    cls, sep = tok.cls_id, tok.sep_id
    a, b = tok.ids_batch(TEXTS[:2])
    assert tok(TEXTS[0])["input_ids"] == framed(a, None, cls, sep)[0] == build_pair(a, None, cls, sep)["input_ids"]
    pair = tok(TEXTS[0], TEXTS[1])
    assert (pair["input_ids"], pair["token_type_ids"]) == framed(a, b, cls, sep)

    saved = tmp_path / "saved"
    tok.save_pretrained(saved)
    assert json.loads((saved / "tokenizer.json").read_text())["post_processor"] is None
    assert Tokenizer.from_pretrained(saved).fingerprint == tok.fingerprint

    # bertkit.embed frames as the features do: the same vectors as with a file that frames explicitly
    bare = save_model(tmp_path / "bare", BertModel, tok)
    bare_vectors = bertkit.embed(TEXTS, str(bare))
    explicit = Backend.from_file(str(bare / "tokenizer.json"))
    explicit.post_processor = framing_processor("<s>", cls, "</s>", sep)
    explicit.save(str(bare / "tokenizer.json"))
    assert json.loads((bare / "tokenizer.json").read_text())["post_processor"] is not None
    np.testing.assert_array_equal(bertkit.embed(TEXTS, str(bare)), bare_vectors)


def test_tokenizer_train_kind_bpe_writes_files_transformers_reads_alike(tmp_path: Path) -> None:
    """``bertkit tokenizer train --kind bpe``: byte-level BPE with RoBERTa's special tokens at ids 0-4, framed
    ``<s> A </s>``; transformers' AutoTokenizer on the saved files gives the same ids, and nothing is unknown."""
    from bertkit.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 30) + "\n", encoding="utf-8")
    out = tmp_path / "bpe"
    assert main(["tokenizer", "train", "--kind", "bpe", "--input", str(corpus), "--vocab-size", "400",
                 "--min-frequency", "1", "--output", str(out)]) == 0  # fmt: skip
    tok = Tokenizer.from_pretrained(out)
    assert isinstance(tok, JsonTokenizer) and tok.spaces_are_tokens
    assert [tok.convert_ids_to_tokens(i) for i in range(5)] == ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    assert (tok.cls_id, tok.pad_id, tok.sep_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 4)
    texts, pairs = [*TEXTS, "never seen: ж 🙂"], [*TEXTS[::-1], "x"]
    ours = tok(texts, pairs)
    theirs = transformers.AutoTokenizer.from_pretrained(out)(texts, pairs)
    assert ours["input_ids"] == theirs["input_ids"]
    assert all(row[0] == 0 and row.count(2) == 2 and 3 not in row for row in ours["input_ids"])
    assert tok.decode(tok("Hello world")["input_ids"]) == "Hello world"


def test_tokenizer_train_kind_bpe_refuses_a_size_without_merges(tmp_path: Path, capsys) -> None:
    from bertkit.cli import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world\n", encoding="utf-8")
    code = main(["tokenizer", "train", "--kind", "bpe", "--input", str(corpus), "--vocab-size", "200",
                 "--output", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--vocab-size 200 leaves no room for merges" in err and err.count("\n") == 1
