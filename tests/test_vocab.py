"""Vocabulary extension (``bertkit tokenizer extend``): slots, initialisation, loading, refusals."""

from __future__ import annotations

import json
from typing import cast

import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.config import BertConfig
from bertkit.errors import ConfigError, TokenizerError
from bertkit.models.bert import BertForPreTraining, BertModel
from bertkit.tokenizer import Tokenizer
from bertkit.vocab import REPORT_NAME, extend_vocabulary, frequent_split_words, normalise_token
from bertkit.weights import load_model, save_pretrained

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "the",
    "a",
    "heart",
    "is",
    "big",
    "card",
    "cat",
    "dog",
    "run",
    "##s",
    "##io",
    "##my",
    "##o",
    "##path",
    "##y",
    "##ing",
    "##er",
    "m",
    "##e",
    "##d",
    "##i",
    "##c",
    "##a",
    "##l",
    "c",
    "a",
    "r",
    "d",
    "i",
    "o",
    "p",
    "t",
    "h",
    "y",
    "s",
    "e",
    "l",
    "g",
    "n",
    "u",
    "b",
    "f",
    ".",
]


def make_model(directory, cls=BertForPreTraining, unused: int = 3, padded_rows: int = 0):
    vocab = SPECIALS + [f"[unused{i}]" for i in range(unused)] + list(dict.fromkeys(WORDS))
    config = BertConfig.preset("tiny", vocab_size=len(vocab) + padded_rows, max_position_embeddings=32)
    torch.manual_seed(0)
    model = cls(config).eval()
    if cls is BertForPreTraining:
        with torch.no_grad():  # a non-zero MLM bias, so its initialisation is observable
            model.mlm.decoder.bias.copy_(torch.randn_like(model.mlm.decoder.bias))
    save_pretrained(model, directory, tokenizer=Tokenizer(vocab))
    return model


def test_tokens_fill_unused_slots_then_new_rows_with_the_mean_of_their_pieces(tmp_path):
    old = make_model(tmp_path / "m", unused=2)
    tok = Tokenizer.from_pretrained(tmp_path / "m")
    words = ["cardiomyopathy", "Medical", "dogs", "heart", "cats"]
    pieces = {w.lower(): tok.word_pieces(w.lower()) for w in words}
    assert pieces["cardiomyopathy"] == ["card", "##io", "##my", "##o", "##path", "##y"]

    report = extend_vocabulary(tmp_path / "m", tmp_path / "out", tokens=words)

    assert [(a.token, a.id) for a in report.added] == [
        ("cardiomyopathy", 5),
        ("medical", 6),
        ("dogs", tok.vocab_size),
        ("cats", tok.vocab_size + 1),
    ]
    assert report.already_known == ["heart"] and report.unused_slots_used == 2
    assert report.vocab_size_after == tok.vocab_size + 2
    new_tok = Tokenizer.from_pretrained(tmp_path / "out")
    assert new_tok.tokenize("The cardiomyopathy cats") == ["the", "cardiomyopathy", "cats"]
    assert new_tok.tokenize("heart") == ["heart"]  # the rest of the vocabulary keeps its ids
    assert {t: new_tok.vocab[t] for t in ["heart", "##s", "."]} == {t: tok.vocab[t] for t in ["heart", "##s", "."]}

    assert json.loads((tmp_path / "out" / "config.json").read_text())["vocab_size"] == tok.vocab_size + 2
    new = cast(BertForPreTraining, load_model(tmp_path / "out"))
    old_emb = old.bert.embeddings.word_embeddings.weight
    new_emb = new.bert.embeddings.word_embeddings.weight
    assert torch.equal(new_emb[: tok.vocab_size][7:], old_emb[7:])
    for entry in report.added:
        ids = [tok.vocab[p] for p in pieces[entry.token]]
        torch.testing.assert_close(new_emb[entry.id], old_emb[ids].mean(0))
        torch.testing.assert_close(new.mlm.decoder.bias[entry.id], old.mlm.decoder.bias[ids].mean(0))
    assert new.mlm.decoder.weight is new_emb  # still tied after growing
    files = load_file(tmp_path / "out" / "model.safetensors")
    assert files["cls.predictions.bias"].shape[0] == tok.vocab_size + 2
    saved = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    assert saved["added"][0]["pieces"] == pieces["cardiomyopathy"]


def test_padded_embedding_rows_are_used_before_growing(tmp_path):
    make_model(tmp_path / "m", cls=BertModel, unused=0, padded_rows=3)
    tok = Tokenizer.from_pretrained(tmp_path / "m")
    report = extend_vocabulary(tmp_path / "m", tmp_path / "out", tokens=["dogs", "cats"], use_unused=False)
    assert [a.id for a in report.added] == [tok.vocab_size, tok.vocab_size + 1]
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["vocab_size"] == tok.vocab_size + 3  # the padded matrix already had the rows
    encoder = cast(BertModel, load_model(tmp_path / "out"))
    assert encoder.embeddings.word_embeddings.weight.shape[0] == tok.vocab_size + 3


def test_no_use_unused_appends_and_keeps_unused_tokens(tmp_path):
    make_model(tmp_path / "m", unused=2)
    tok = Tokenizer.from_pretrained(tmp_path / "m")
    report = extend_vocabulary(tmp_path / "m", tmp_path / "out", tokens=["dogs"], use_unused=False)
    assert report.added[0].id == tok.vocab_size and report.unused_slots_used == 0
    assert Tokenizer.from_pretrained(tmp_path / "out").convert_ids_to_tokens(5) == "[unused0]"


def test_corpus_words_ranked_by_the_tokens_they_save():
    tok = Tokenizer(SPECIALS + list(dict.fromkeys(WORDS)))
    texts = ["The cardiomyopathy, the cardiomyopathy."] * 3 + ["dogs cats dogs 1234 dogs"] * 2 + ["cards"]
    picked = frequent_split_words(tok, texts, max_words=10, min_frequency=2)
    # cardiomyopathy: 6 x 5 extra pieces; dogs: 6 x 1; cats: 2 x 1; numbers and words seen once are left out
    assert [(a.token, a.count) for a in picked] == [("cardiomyopathy", 6), ("dogs", 6), ("cats", 2)]
    assert [a.token for a in frequent_split_words(tok, texts, max_words=1, min_frequency=2)] == ["cardiomyopathy"]


def test_corpus_extension_through_the_cli(tmp_path, capsys):
    make_model(tmp_path / "m")
    (tmp_path / "corpus.txt").write_text("The cats run. The cats run. The dogs run.\n" * 30, encoding="utf-8")
    code = main(
        [
            "tokenizer",
            "extend",
            "--model",
            str(tmp_path / "m"),
            "--corpus",
            str(tmp_path / "corpus.txt"),
            "--max-new-tokens",
            "1",
            "--output",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "cats (id 5) was cat ##s, seen 60 times" in err and "added 1 token(s)" in err
    assert Tokenizer.from_pretrained(tmp_path / "out").tokenize("cats") == ["cats"]


def test_tokens_are_normalised_like_text_and_unsplittable_ones_refused():
    tok = Tokenizer(SPECIALS + list(dict.fromkeys(WORDS)))
    assert normalise_token(tok, " Éclair ") == "eclair"
    assert normalise_token(tok, "##Ing") == "##ing"
    for bad in ["foo-bar", "two words", "[MASK]", "", "##"]:
        with pytest.raises(TokenizerError, match="cannot be one vocabulary entry"):
            normalise_token(tok, bad)


def test_bad_requests_fail_cleanly_and_write_nothing(tmp_path, capsys):
    make_model(tmp_path / "m")
    with pytest.raises(ConfigError, match="nothing to add"):
        extend_vocabulary(tmp_path / "m", tmp_path / "out")
    with pytest.raises(ConfigError, match="is the model directory itself"):
        extend_vocabulary(tmp_path / "m", tmp_path / "m", tokens=["dogs"])
    (tmp_path / "words.txt").write_text("dogs\nhot dog\n", encoding="utf-8")
    code = main(
        [
            "tokenizer",
            "extend",
            "-m",
            str(tmp_path / "m"),
            "--tokens",
            str(tmp_path / "words.txt"),
            "-o",
            str(tmp_path / "out"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "'hot dog' cannot be one vocabulary entry" in err and len(err.strip().splitlines()) == 1
    code = main(
        [
            "tokenizer",
            "extend",
            "-m",
            str(tmp_path / "nowhere"),
            "--tokens",
            str(tmp_path / "words.txt"),
            "-o",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "words.txt"]


def test_extended_model_loads_in_transformers_with_the_same_ids_and_outputs(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency ([dev])")
    make_model(tmp_path / "m", unused=1)
    extend_vocabulary(tmp_path / "m", tmp_path / "out", tokens=["cardiomyopathy", "dogs", "cats"])
    ours_tok = Tokenizer.from_pretrained(tmp_path / "out")
    theirs_tok = transformers.BertTokenizerFast.from_pretrained(tmp_path / "out")
    slow = transformers.BertTokenizer.from_pretrained(tmp_path / "out")
    text = "The dogs and cats: cardiomyopathy is big."
    ids = ours_tok.encode(text).ids
    assert ids == theirs_tok(text)["input_ids"] == slow(text)["input_ids"]
    assert {ours_tok.vocab[w] for w in ["cardiomyopathy", "dogs", "cats"]} <= set(ids)
    theirs = transformers.BertForPreTraining.from_pretrained(tmp_path / "out").eval()
    ours = load_model(tmp_path / "out")
    batch = torch.tensor([ids])
    with torch.no_grad():
        torch.testing.assert_close(ours(batch).mlm_logits, theirs(batch).prediction_logits, atol=1e-5, rtol=1e-5)


def test_domain_adaptation_flow_extend_prepare_pretrain(tmp_path, capsys):
    make_model(tmp_path / "m", unused=3)
    lines = [
        "the cats run to the dogs.",
        "a big cat is a cat.",
        "the dogs run.",
        "",
        "the heart is big.",
        "the cats and the dogs run.",
        "a dog is a dog.",
        "",
    ]
    (tmp_path / "corpus.txt").write_text("\n".join(lines * 20) + "\n", encoding="utf-8")
    assert (
        main(
            [
                "tokenizer",
                "extend",
                "-m",
                str(tmp_path / "m"),
                "--corpus",
                str(tmp_path / "corpus.txt"),
                "--max-new-tokens",
                "2",
                "-o",
                str(tmp_path / "ext"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "prepare-data",
                "--input",
                str(tmp_path / "corpus.txt"),
                "--tokenizer",
                str(tmp_path / "ext"),
                "--output",
                str(tmp_path / "data"),
                "--max-seq-length",
                "24",
                "--dupe-factor",
                "1",
                "--eval-fraction",
                "0",
                "--workers",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "pretrain",
                "--data",
                str(tmp_path / "data"),
                "--init-from",
                str(tmp_path / "ext"),
                "--output",
                str(tmp_path / "run"),
                "--max-steps",
                "2",
                "--micro-batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    added = json.loads((tmp_path / "ext" / REPORT_NAME).read_text())["added"]
    final = Tokenizer.from_pretrained(tmp_path / "run" / "final")
    assert [a["token"] for a in added] == ["dogs", "cats"]  # 60 and 40 occurrences
    assert final.tokenize("the cats") == ["the", "cats"] and final.vocab["cats"] == added[1]["id"]
    # The data must be prepared with the extended tokenizer: the original one is refused.
    assert (
        main(
            [
                "pretrain",
                "--data",
                str(tmp_path / "data"),
                "--init-from",
                str(tmp_path / "m"),
                "--output",
                str(tmp_path / "run2"),
                "--max-steps",
                "1",
                "--micro-batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "another tokenizer" in capsys.readouterr().err
