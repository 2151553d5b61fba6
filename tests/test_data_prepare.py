"""End to end: corpus -> shards with the real Tokenizer; determinism across workers and jobs; the CLI."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from bertkit.data import PrepareConfig, prepare_dataset, verify
from bertkit.data.loader import PretrainingDataset, PretrainingLoader
from bertkit.errors import ConfigError, DataError

WORDS = (
    "the cat dog sat ran on a mat house tree big small red blue green fast slow man woman child "
    "walked talked saw heard over under near far river hill road town"
).split()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from bertkit.tokenizer import Tokenizer

    root = tmp_path_factory.mktemp("tok")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS, "##s", "##ed"]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    out = root / "saved"
    Tokenizer.from_vocab(root / "vocab.txt").save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    for f in range(3):
        paragraphs = []
        for _ in range(60):
            sentences = [
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))).capitalize() + "."
                for _ in range(rng.randint(1, 4))
            ]
            text = " ".join(sentences)
            # hard-wrap as a book would be
            paragraphs.append("\n".join(text[i : i + 60] for i in range(0, len(text), 60)))
        (root / f"book{f}.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    (root / "lines.txt").write_text(
        "".join(
            "".join(f"Sentence {w} here.\n".replace("Sentence", rng.choice(WORDS)) for w in rng.sample(WORDS, 5)) + "\n"
            for _ in range(40)
        ),
        encoding="utf-8",
    )
    return root


def config(corpus, tokenizer_dir, output, **kw):
    base: dict[str, Any] = dict(
        inputs=[str(corpus)],
        output=str(output),
        tokenizer=str(tokenizer_dir),
        max_seq_length=32,
        dupe_factor=2,
        seed=11,
        workers=1,
        block_bytes=3000,
        eval_fraction=0.2,
    )
    base.update(kw)
    return PrepareConfig(**base)


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("block-*"))}


def test_prepare_then_load(corpus, tokenizer_dir, tmp_path):
    meta = prepare_dataset(config(corpus, tokenizer_dir, tmp_path / "d"), progress=False)
    assert meta["complete"] and len(meta["blocks"]) > 3
    assert meta["splits"]["train"]["num_instances"] > 100 and meta["splits"]["eval"]["num_instances"] > 0
    assert meta["corpus_stats"]["prose_files"] == 3 and meta["corpus_stats"]["line_files"] == 1
    assert verify(tmp_path / "d") == []
    ds = PretrainingDataset(tmp_path / "d")
    for i in range(len(ds)):
        item = ds[i]
        assert len(item["input_ids"]) <= 32 and 0 < len(item["masked_positions"]) <= 5
    batch = next(iter(PretrainingLoader(tmp_path / "d", batch_size=16)))
    assert batch["input_ids"].shape[0] == 16 and batch["masked_positions"].shape == (16, 5)


def test_byte_identical_across_worker_counts_and_jobs(corpus, tokenizer_dir, tmp_path):
    prepare_dataset(config(corpus, tokenizer_dir, tmp_path / "one"), progress=False)
    prepare_dataset(config(corpus, tokenizer_dir, tmp_path / "two", workers=2), progress=False)
    reference = files(tmp_path / "one")
    assert reference and files(tmp_path / "two") == reference
    # Two independent jobs into one directory merge by listing; incomplete until both ran.
    first = prepare_dataset(
        config(corpus, tokenizer_dir, tmp_path / "jobs", num_shards=2, shard_index=1), progress=False
    )
    assert not first["complete"]
    second = prepare_dataset(
        config(corpus, tokenizer_dir, tmp_path / "jobs", num_shards=2, shard_index=0), progress=False
    )
    assert second["complete"] and files(tmp_path / "jobs") == reference
    # Another seed gives other data; other settings cannot be mixed into the same directory.
    prepare_dataset(config(corpus, tokenizer_dir, tmp_path / "seed", seed=12), progress=False)
    assert files(tmp_path / "seed") != reference
    with pytest.raises(DataError, match="other settings"):
        prepare_dataset(config(corpus, tokenizer_dir, tmp_path / "one", dupe_factor=3), progress=False)


def test_dynamic_and_whole_word_datasets(corpus, tokenizer_dir, tmp_path):
    prepare_dataset(
        config(corpus, tokenizer_dir, tmp_path / "dyn", masking="dynamic", whole_word_mask=True), progress=False
    )
    ds = PretrainingDataset(tmp_path / "dyn")
    assert ds.spec is not None
    assert ds.dynamic and ds.spec.whole_word_mask
    assert not (tmp_path / "dyn" / "block-000000.train.masked_positions.npy").exists()
    a, b = ds[(0, 1)], ds[(1, 1)]
    assert len(a["masked_positions"]) > 0 and (
        a["masked_positions"].tolist() != b["masked_positions"].tolist()
        or a["input_ids"].tolist() != b["input_ids"].tolist()
    )


def test_bad_options_and_inputs(corpus, tokenizer_dir, tmp_path):
    with pytest.raises(DataError):
        config(corpus, tokenizer_dir, tmp_path / "x", masking="sometimes")
    with pytest.raises(ConfigError, match="--max-seq-length must be >= 5, got 4"):
        config(corpus, tokenizer_dir, tmp_path / "x", max_seq_length=4)
    with pytest.raises(DataError, match="does not exist"):
        prepare_dataset(config(tmp_path / "nope", tokenizer_dir, tmp_path / "x"), progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("")
    with pytest.raises(DataError, match="no usable text"):
        prepare_dataset(config(empty, tokenizer_dir, tmp_path / "y"), progress=False)


def test_cli_exit_codes(corpus, tokenizer_dir, tmp_path, capsys):
    from bertkit.cli import main

    args = [
        "prepare-data",
        "--input",
        str(corpus),
        "--tokenizer",
        str(tokenizer_dir),
        "--output",
        str(tmp_path / "cli"),
        "--max-seq-length",
        "32",
        "--dupe-factor",
        "1",
        "--workers",
        "1",
        "--quiet",
    ]
    assert main(args) == 0
    assert "train" in capsys.readouterr().err
    assert main([*args[:-1], "--masking", "sometimes", "--quiet"]) == 2
    assert (
        main(
            [
                "prepare-data",
                "--input",
                str(tmp_path / "missing"),
                "--tokenizer",
                str(tokenizer_dir),
                "--output",
                str(tmp_path / "z"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "bertkit: error:" in err and "does not exist" in err


def test_split_documents_holds_out_runs_of_long_documents():
    import random

    from bertkit.data.prepare import split_documents

    long_doc = [[i] for i in range(1000)]  # 1000 one-token "sentences"
    short_doc = [[5000], [5001]]
    parts = split_documents([long_doc, short_doc], fraction=0.3, unit=100, rng=random.Random(3))
    held = [s[0] for doc in parts["eval"] for s in doc]
    kept = [s[0] for doc in parts["train"] for s in doc]
    assert parts["eval"], "a single long document must still yield held-out runs"
    assert all(len(doc) <= 100 for doc in parts["eval"])
    assert sorted(held + kept) == [*range(1000), 5000, 5001]  # nothing lost, nothing shared
    for doc in parts["train"]:  # train documents are runs of consecutive sentences: no gap inside
        ids = [s[0] for s in doc]
        assert ids == list(range(ids[0], ids[0] + len(ids))) or ids == [5000, 5001]


def test_split_documents_short_documents_draw_once_each():
    import random

    from bertkit.data.prepare import split_documents

    docs = [[[i]] for i in range(2000)]
    parts = split_documents(docs, fraction=0.25, unit=256, rng=random.Random(0))
    assert len(parts["eval"]) + len(parts["train"]) == 2000
    assert abs(len(parts["eval"]) / 2000 - 0.25) < 0.03


def test_a_small_gzip_corpus_without_eval_instances_is_warned_about(tokenizer_dir, tmp_path, capsys, caplog):
    """The default --eval-fraction holds out nothing of a few paragraphs: prepare-data says so, with the flags
    that change it (and says nothing when --eval-fraction 0 asked for no eval split)."""
    import gzip

    from bertkit.cli import main

    text = "\n\n".join("The cat sat on a mat. The dog ran near the river." for _ in range(6)) + "\n"
    (tmp_path / "small.txt.gz").write_bytes(gzip.compress(text.encode()))
    args = ["prepare-data", "-i", tmp_path / "small.txt.gz", "--tokenizer", tokenizer_dir, "--max-seq-length", "32"]
    args += ["--workers", "1", "--quiet", "--seed", "1"]
    assert main([str(a) for a in [*args, "--output", tmp_path / "out"]]) == 0
    said = caplog.text + capsys.readouterr().err
    assert "+ 0 eval instances" in said
    assert "the eval split holds no instances" in said and "raise --eval-fraction" in said, said
    caplog.clear()
    assert main([str(a) for a in [*args, "--output", tmp_path / "none", "--eval-fraction", "0"]]) == 0
    assert "the eval split holds no instances" not in caplog.text + capsys.readouterr().err
