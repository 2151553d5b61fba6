"""Models by hub id: a cache directory in the Hugging Face layout, built here from a tiny saved model; never
the network (``HF_HUB_OFFLINE=1`` throughout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import bertkit
from bertkit.cli import main
from bertkit.errors import CheckpointError
from bertkit.hub import is_hub_id, resolve_model
from bertkit.models.bert import BertModel
from inference_helpers import make_tokenizer, save_model

pytest.importorskip("huggingface_hub", reason="the hub extra (huggingface_hub) is not installed")

MAIN, OTHER = "a" * 40, "b" * 40


def add_snapshot(cache: Path, repo: str, commit: str, model: Path, ref: str | None = None) -> Path:
    """``model``'s files as snapshot ``commit`` of ``repo`` in ``cache`` (``ref`` points at it)."""
    repo_dir = cache / ("models--" + repo.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / commit
    shutil.copytree(model, snapshot)
    if ref:
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        (repo_dir / "refs" / ref).write_text(commit)
    return snapshot


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    tokenizer = make_tokenizer(root / "tok")
    first = save_model(root / "first", BertModel, tokenizer, seed=1)
    second = save_model(root / "second", BertModel, tokenizer, seed=2)
    cache = root / "cache"
    add_snapshot(cache, "org/name", MAIN, first, ref="main")
    add_snapshot(cache, "org/name", OTHER, second, ref="v2")
    add_snapshot(cache, "plain", MAIN, first, ref="main")
    return {"first": first, "second": second, "cache": cache}


@pytest.fixture(autouse=True)
def offline_cache(models, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(models["cache"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_hub_ids_and_paths_are_told_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    for name in (
        "bert-base-uncased",
        "org/name",
        "org/name@v2",
        "org/name@" + MAIN,
        "sentence-transformers/all-MiniLM-L6-v2",
    ):
        assert is_hub_id(name), name
    for name in ("/abs/model", "./model", "a/b/c", "vocab.txt", "runs/final", "models/bert_model.ckpt", "x--y"):
        assert not is_hub_id(name), name
    # an existing local path always wins, even one that looks like a hub id
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert resolve_model("org/name") == Path("org/name")
    assert resolve_model(tmp_path / "missing") == tmp_path / "missing"  # the caller says it does not exist


def test_embed_by_name_equals_embed_of_the_directory(models):
    texts = ["the cat sat on the mat", "paris is the capital of france"]
    expected = bertkit.embed(texts, models["first"], pooling="mean")
    assert resolve_model("org/name").parent.name == "snapshots"
    np.testing.assert_allclose(bertkit.embed(texts, "org/name", pooling="mean"), expected, atol=1e-6)
    np.testing.assert_allclose(bertkit.embed(texts, "plain", pooling="mean"), expected, atol=1e-6)
    assert bertkit.load_model("org/name").config.hidden_size == bertkit.load_model(models["first"]).config.hidden_size


def test_revision_picks_a_branch_or_a_commit(models):
    texts = ["the quick brown fox"]
    second = bertkit.embed(texts, models["second"])
    first = bertkit.embed(texts, models["first"])
    assert not np.allclose(first, second)
    np.testing.assert_allclose(bertkit.embed(texts, "org/name@v2"), second, atol=1e-6)
    np.testing.assert_allclose(bertkit.embed(texts, f"org/name@{OTHER}"), second, atol=1e-6)
    np.testing.assert_allclose(bertkit.embed(texts, "org/name@main"), first, atol=1e-6)


def test_offline_and_not_cached_is_one_line(tmp_path):
    for name in ("org/missing", "org/name@v3"):
        with pytest.raises(CheckpointError, match="not in the Hugging Face cache \\(HF_HUB_OFFLINE is set\\)"):
            bertkit.load(name)


def test_cli_takes_hub_ids(models, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text("the cat sat on the mat\nhello world\n")
    out = tmp_path / "v.npy"
    code = main(["embed", "--model", "org/name@v2", "--input", str(lines), "--output", str(out), "--pooling", "mean"])
    assert code == 0
    np.testing.assert_allclose(
        np.load(out),
        bertkit.embed(["the cat sat on the mat", "hello world"], models["second"], pooling="mean"),
        atol=1e-6,
    )
    capsys.readouterr()
    assert main(["tokenize", "--model", "org/name", "--json", "hello world"]) == 0
    assert '"hello"' in capsys.readouterr().out
    assert main(["convert", "--model", "org/name", "--output", str(tmp_path / "converted")]) == 0
    assert (tmp_path / "converted" / "model.safetensors").is_file()
    capsys.readouterr()
    code = main(["embed", "--model", "org/missing", "--input", str(lines), "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "org/missing" in err and "HF_HUB_OFFLINE" in err


def test_without_huggingface_hub_the_error_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_hub(name, *args, **kwargs):
        if name.startswith("huggingface_hub"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(CheckpointError, match=r"pip install 'bertkit\[hub\]'"):
        resolve_model("org/name")


def test_finetune_and_predict_take_hub_ids(models, tmp_path, capsys):
    train = tmp_path / "train.tsv"
    rows = [("the movie was good", 1), ("a bad film", 0), ("good story", 1), ("bad king", 0)] * 4
    train.write_text("sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
    output = tmp_path / "fine"
    args = ["finetune", "--task", "classification", "--model", "org/name@v2", "--train", str(train)]
    assert main([*args, "--output", str(output), "--epochs", "1", "--no-progress"]) == 0
    add_snapshot(models["cache"], "org/fine", "c" * 40, output, ref="main")
    predictions = tmp_path / "predictions.jsonl"
    args = ["predict", "--model", "org/fine", "--input", str(train), "--output", str(predictions)]
    assert main(args) == 0, capsys.readouterr().err
    assert len(predictions.read_text().splitlines()) == len(rows)


def test_pretrain_init_from_and_tokenizer_extend_take_hub_ids(models, tmp_path, capsys):
    from bertkit.training.pretrain import PretrainConfig

    config = PretrainConfig(data=str(tmp_path), output=str(tmp_path / "run"), init_from="org/name@v2")
    assert config.init_from == str(resolve_model("org/name@v2")) and Path(config.init_from).is_dir()
    words = tmp_path / "words.txt"
    words.write_text("zebra\n")
    args = ["tokenizer", "extend", "--model", "org/name", "--tokens", str(words), "--output", str(tmp_path / "ext")]
    assert main(args) == 0, capsys.readouterr().err
    assert "zebra" in (tmp_path / "ext" / "vocab.txt").read_text()


def test_prepare_data_and_the_demo_take_hub_ids(models, tmp_path, capsys):
    from bertkit.data import PrepareConfig, prepare_dataset
    from bertkit.demo import reference_checkpoint

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat.\nthe dog sat on the log.\n\na bird flew over the tree.\nit sang.\n")
    by_name = prepare_dataset(PrepareConfig(inputs=[str(corpus)], output=str(tmp_path / "a"), tokenizer="org/name"))
    by_path = prepare_dataset(
        PrepareConfig(inputs=[str(corpus)], output=str(tmp_path / "b"), tokenizer=str(models["first"]))
    )
    assert by_name is not None and by_path is not None
    assert (tmp_path / "a" / "tokenizer" / "vocab.txt").read_bytes() == (models["first"] / "vocab.txt").read_bytes()
    assert reference_checkpoint("org/name@v2") == str(resolve_model("org/name@v2"))
