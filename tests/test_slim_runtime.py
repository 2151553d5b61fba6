"""Export folders run without torch: `bertkit export onnx --output DIR` of a tiny BERT and a tiny ModernBERT (each
head, float32, and an int8 encoder), then embed, classify, tag, answer, rerank and `bertkit serve` in a process
where importing torch fails, each answer compared with the PyTorch path on the checkpoint (1e-5 for float32; for
int8, ONNX Runtime's int8 graph of the checkpoint, `--backend onnxruntime --quantize int8`)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime", reason="the onnx extra (onnxruntime) is not installed")
pytest.importorskip("onnx", reason="the export extra (onnx) is not installed")
pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")

import httpx

from bertkit import inference
from bertkit.cli import main
from bertkit.models import (
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
)
from bertkit.models.bert import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertkit.sentence_config import SentenceConfig
from bertkit.serve import create_app
from bertkit.tokenizer import Tokenizer
from bertkit.weights import save_pretrained
from inference_helpers import tiny_config
from test_backends import assert_close
from test_modernbert_toolkit import tiny_config as modernbert_config
from test_tokenizer_json import MODERNBERT_NAMES, bpe_directory

FLOAT32 = 1e-5
TEXTS = ["the cat sat on the mat", "john smith lives in paris", "hello world , hello again and again"]
LONG = " ".join(["the cat sat on the mat and john smith lives in paris"] * 30)
QUESTION, CONTEXT = "who lives in paris", "the cat sat on the mat . john smith lives in paris ."

BLOCK_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
from bertkit.cli import main
code = main(sys.argv[1:])
assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules), "torch was imported"
sys.exit(code)
"""
"""Runs ``bertkit`` with torch made unimportable, as on an install of ``bertkit[onnx]`` alone."""

HEADS: dict[str, tuple[type, type, dict[str, Any]]] = {
    "encoder": (BertModel, ModernBertModel, {}),
    "classifier": (BertForSequenceClassification, ModernBertForSequenceClassification, {"id2label": {0: "neg", 1: "pos"}}),
    "reranker": (BertForSequenceClassification, ModernBertForSequenceClassification, {"num_labels": 1, "problem_type": "regression"}),
    "tagger": (BertForTokenClassification, ModernBertForTokenClassification, {"id2label": {0: "O", 1: "B-PER", 2: "I-PER"}}),
    "qa": (BertForQuestionAnswering, ModernBertForQuestionAnswering, {}),
}  # fmt: skip


def slim(*args: Any, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``bertkit ARGS`` in a fresh process whose torch imports fail."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH, *map(str, args)], capture_output=True, text=True, timeout=300
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module", params=["bert", "modernbert"])
def models(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> dict:
    """Checkpoints of every head and their export folders (the encoder also int8), for one architecture."""
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "modernbert":
        names = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
        tokenizer = Tokenizer.from_pretrained(bpe_directory(root, names, MODERNBERT_NAMES))
    out: dict[str, Path] = {}
    for seed, (name, (bert, modernbert, fields)) in enumerate(HEADS.items()):
        torch.manual_seed(seed)
        if request.param == "bert":
            model = bert(tiny_config(tokenizer, **fields))
        else:
            model = modernbert(modernbert_config(tokenizer, **fields))
        sentence = SentenceConfig("mean", normalize=True, max_seq_length=48) if name == "encoder" else None
        out[name] = save_pretrained(model.eval(), root / name, tokenizer, sentence=sentence)
        out[f"{name}-onnx"] = root / f"{name}-onnx"
        assert main(["export", "onnx", "--model", str(out[name]), "--output", str(out[f"{name}-onnx"])]) == 0
    out["encoder-int8"] = root / "encoder-int8"
    assert (
        main(
            [
                "export",
                "onnx",
                "--model",
                str(out["encoder"]),
                "--output",
                str(out["encoder-int8"]),
                "--quantize",
                "int8",
            ]
        )
        == 0
    )
    return out


def json_lines(done: subprocess.CompletedProcess[str]) -> list[Any]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------ the commands
@pytest.mark.parametrize(
    "options",
    [[], ["--long-text", "windows", "--window-stride", "16", "--max-length", "32"], ["--dimensions", "16"]],
    ids=["sentence-files", "windows", "matryoshka"],
)
def test_embed_without_torch_equals_the_checkpoint(models: dict, tmp_path: Path, options: list[str]) -> None:
    texts = [*TEXTS, LONG]
    slim("embed", "--model", models["encoder-onnx"], "-o", tmp_path / "slim.npy", *options, *texts)
    assert main(["embed", "--model", str(models["encoder"]), "-o", str(tmp_path / "torch.npy"), *options, *texts]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "slim.npy"), np.load(tmp_path / "torch.npy"), atol=FLOAT32)


def test_int8_export_equals_onnxruntime_int8_of_the_checkpoint(models: dict, tmp_path: Path) -> None:
    """The same quantizer on the same graph: the int8 folder gives what `--backend onnxruntime --quantize int8`
    gives on the checkpoint; both stay near float32 (the int8 bound of test_backends)."""
    slim("embed", "--model", models["encoder-int8"], "-o", tmp_path / "slim.npy", *TEXTS)
    int8 = inference.load(models["encoder"], backend="onnxruntime", quantize="int8")
    np.testing.assert_allclose(np.load(tmp_path / "slim.npy"), inference.embed(TEXTS, int8), atol=FLOAT32)
    vectors, exact = np.load(tmp_path / "slim.npy"), inference.embed(TEXTS, models["encoder"])
    assert ((vectors * exact).sum(1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(exact, axis=1)).min() > 0.98


def test_classify_tag_answer_without_torch_equal_the_checkpoint(models: dict) -> None:
    for command, model, args in [
        ("classify", "classifier", TEXTS),
        ("tag", "tagger", TEXTS),
        ("answer", "qa", ["-q", QUESTION, "-c", CONTEXT, "--top-k", "3"]),
    ]:
        got = json_lines(slim(command, "--model", models[f"{model}-onnx"], "--json", *args))
        want = json_lines(subprocess.run([sys.executable, "-m", "bertkit", command, "--model", models[model],
                                          "--json", *args], capture_output=True, text=True, check=True))  # fmt: skip
        assert_close(got, want, FLOAT32)


def test_predict_without_torch_equals_the_checkpoint(models: dict, tmp_path: Path) -> None:
    data = tmp_path / "data.tsv"
    data.write_text("text\tlabel\n" + "".join(f"{t}\tneg\n" for t in TEXTS), encoding="utf-8")
    slim("predict", "--model", models["classifier-onnx"], "--input", data, "--output", tmp_path / "slim.jsonl")
    assert (
        main(["predict", "--model", str(models["classifier"]), "--input", str(data), "-o", str(tmp_path / "t.jsonl")])
        == 0
    )
    got, want = (
        [json.loads(line) for line in (tmp_path / name).read_text().splitlines()] for name in ("slim.jsonl", "t.jsonl")
    )
    assert_close(got, want, FLOAT32)


def test_rerank_in_python_without_torch_equals_the_checkpoint(models: dict) -> None:
    script = (
        BLOCK_TORCH.split("from bertkit.cli")[0]
        + "import json\nfrom bertkit.inference import rerank\n"
        + f"ranked = rerank({QUESTION!r}, {TEXTS!r}, {str(models['reranker-onnx'])!r})\n"
        + "print(json.dumps([[r.index, r.score] for r in ranked]))\n"
        + "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    want = [[r.index, r.score] for r in inference.rerank(QUESTION, TEXTS, models["reranker"])]
    assert_close(json.loads(done.stdout), want, FLOAT32)


def test_a_training_command_without_torch_names_the_extra(models: dict) -> None:
    done = slim("finetune", "--model", models["encoder"], "--task", "classification", "--train", "x.tsv", check=False)
    assert done.returncode == 2 and "pip install 'bertkit[train]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_export_refuses_what_it_cannot_run(models: dict) -> None:
    done = slim("classify", "--model", models["encoder-onnx"], "hello", check=False)
    assert done.returncode == 2 and "cannot classify" in done.stderr
    done = slim("embed", "--model", models["encoder-onnx"], "--quantize", "int8", "hello", check=False)
    assert done.returncode == 2 and "export it again with --quantize int8" in done.stderr


def test_embed_with_torch_installed_takes_the_same_runtime(models: dict) -> None:
    """An export folder loads as an ``Exported`` even where torch is installed: the same code everywhere."""
    loaded = inference.load(models["encoder-onnx"], backend="onnxruntime")
    assert isinstance(loaded, inference.Exported) and type(loaded.model).__module__ == "bertkit.inference.exported"


# ------------------------------------------------------------------------------------------ serve
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(port: int, path: str, body: dict) -> Any:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def torch_answer(app: Any, path: str, body: dict) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return (await client.post(path, json=body)).json()

    return asyncio.run(go())


def serving(folder: Path, port: int) -> subprocess.Popen[str]:
    """``bertkit serve`` of ``folder`` without torch, once ready."""
    server = subprocess.Popen(
        [sys.executable, "-c", BLOCK_TORCH, "serve", "--model", str(folder), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=2) as ready:
                if ready.status == 200:
                    return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError(f"the slim server did not get ready: {server.communicate()[1][-2000:]}")


ROUTES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "encoder": [
        ("/embed", {"texts": TEXTS}),
        ("/embed", {"inputs": TEXTS}),  # text-embeddings-inference's body
        ("/v1/embeddings", {"input": TEXTS, "dimensions": 16}),
        ("/embed_all", {"inputs": TEXTS[:1]}),
    ],
    "classifier": [("/classify", {"texts": TEXTS}), ("/predict", {"inputs": TEXTS})],
    "reranker": [("/rerank", {"query": QUESTION, "texts": TEXTS})],
    "tagger": [("/tag", {"texts": TEXTS})],
    "qa": [("/answer", {"inputs": [{"question": QUESTION, "context": CONTEXT}], "top_k": 2})],
}
"""Each model's routes, bertkit's and text-embeddings-inference's, with a body."""


@pytest.mark.parametrize("model", list(ROUTES))
def test_serve_without_torch_answers_as_the_checkpoint(models: dict, model: str) -> None:
    port = free_port()
    server = serving(models[f"{model}-onnx"], port)
    try:
        app = create_app(models[model])
        for path, body in ROUTES[model]:
            got, want = post(port, path, body), torch_answer(app, path, body)
            if path == "/v1/embeddings":
                got.pop("model"), want.pop("model")
            assert_close(got, want, FLOAT32)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as metrics:
            assert b"bertkit_requests_total" in metrics.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/info", timeout=10) as info:
            assert json.loads(info.read())["backend"] == "onnxruntime"
    finally:
        server.terminate()  # SIGTERM: the drain, then exit 0
        assert server.wait(timeout=60) == 0, server.communicate()[1][-2000:]


def test_serve_without_torch_keeps_keys_and_limits(models: dict) -> None:
    port = free_port()
    env_key = {**os.environ, "BERTKIT_API_KEY": "secret"}
    server = subprocess.Popen(
        [sys.executable, "-c", BLOCK_TORCH, "serve", "--model", str(models["classifier-onnx"]), "--port", str(port),
         "--max-items", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env_key,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=2).close()
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(1)
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(port, "/classify", {"texts": TEXTS[:1]})
        assert refused.value.code == 401
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/classify",
            json.dumps({"texts": TEXTS}).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer secret"},
        )
        with pytest.raises(urllib.error.HTTPError) as too_many:
            urllib.request.urlopen(request, timeout=30)
        assert too_many.value.code in (413, 422)
    finally:
        server.terminate()
        server.wait(timeout=60)
