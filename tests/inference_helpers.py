"""Small models and a hand-written vocabulary for the inference, serve, web and export tests (no ../shared)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from bertkit.config import BertConfig
from bertkit.tokenizer import Tokenizer
from bertkit.weights import save_pretrained

SPECIALS = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = """
the a an of in on and to is was it i he she they we you what where who when did does do live lives lived
paris france capital city john smith new york usa george washington mount vernon virginia led continental
army cat sat mat went home then slept good bad great movie film hello world play un cafe zoe river long
very this that story about there once upon time king queen castle quick brown fox jumps over lazy dog
""".split()
PIECES = ["##s", "##ed", "##ing", "##able", "##ly", "##er"]
PUNCTUATION = list(".,!?;:'\"()[]-")
VOCAB = SPECIALS + PUNCTUATION + sorted(set(WORDS)) + PIECES


def make_tokenizer(directory: Path) -> Tokenizer:
    """An uncased WordPiece tokenizer over ``VOCAB`` (ids fixed by the list order)."""
    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("".join(token + "\n" for token in VOCAB), encoding="utf-8")
    return Tokenizer.from_vocab(vocab, lowercase=True)


def tiny_config(tokenizer: Tokenizer, **overrides) -> BertConfig:
    values = dict(
        vocab_size=tokenizer.vocab_size,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return BertConfig.preset("tiny", **values)


def save_model(directory: Path, cls: type, tokenizer: Tokenizer, seed: int = 0, **overrides) -> Path:
    """A random-init ``cls`` (a bertkit model class) saved with ``tokenizer`` in Hugging Face layout."""
    torch.manual_seed(seed)
    model = cls(tiny_config(tokenizer, **overrides)).eval()
    save_pretrained(model, directory, tokenizer=tokenizer)
    return directory


def write_squad(path: Path, contexts: Sequence[tuple[str, Sequence[tuple[str, str | None]]]]) -> Path:
    """A SQuAD v1.1 file of ``(context, [(question, answer or None), ...])``; ids are ``q<context><question>``."""
    paragraphs = [
        {
            "context": context,
            "qas": [
                {
                    "id": f"q{i}{j}",
                    "question": question,
                    "answers": [] if answer is None else [{"text": answer, "answer_start": context.index(answer)}],
                }
                for j, (question, answer) in enumerate(qas)
            ],
        }
        for i, (context, qas) in enumerate(contexts)
    ]
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}), "utf-8")
    return path


def polarity_setup(root: Path, copies: int) -> dict[str, Path]:
    """A tiny random-init encoder and a TSV of ``4 x copies`` polarity sentences (pos/neg) to fine-tune it on."""
    from bertkit.models.bert import BertModel

    model = save_model(root / "model", BertModel, make_tokenizer(root / "tok"))
    rows = [("good movie", "pos"), ("bad film", "neg"), ("a good story", "pos"), ("very bad", "neg")] * copies
    (root / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
    return {"model": model, "train": root / "train.tsv"}
