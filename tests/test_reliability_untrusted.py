"""Loading untrusted files never executes code.

A grep over the package proves there is no unpickling path (``pickle.load``, ``torch.load`` without
``weights_only=True``, ``np.load`` with pickles, ``yaml.load``, ``eval``/``exec``); then malicious
pickles offered as ``pytorch_model.bin``, as a checkpoint's ``trainer_state.pt`` and through the CLI are
refused with a ``CheckpointError`` while the payload's side effect never happens.
"""

from __future__ import annotations

import ast
import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from bertkit.cli import main
from bertkit.errors import CheckpointError

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bertkit"


def calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def keyword(node: ast.Call, name: str):
    for kw in node.keywords:
        if kw.arg == name:
            return ast.unparse(kw.value)
    return None


def test_the_package_has_no_unpickling_path():
    offences = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE)
        for node, name in calls(tree):
            line = f"{where}:{node.lineno}: {ast.unparse(node)[:80]}"
            if name in (
                "pickle.load",
                "pickle.loads",
                "pickle.Unpickler",
                "cPickle.load",
                "dill.load",
                "joblib.load",
                "marshal.loads",
                "shelve.open",
                "eval",
                "exec",
            ):
                offences.append(line)
            elif name.endswith("torch.load"):
                if keyword(node, "weights_only") != "True":
                    offences.append(line)
            elif (
                (name in ("np.load", "numpy.load") and keyword(node, "allow_pickle") not in (None, "False"))
                or name == "yaml.load"
                or name == "yaml.unsafe_load"
            ):
                offences.append(line)
        for node in ast.walk(tree):  # `from torch import load` and friends would hide a call from the grep
            if isinstance(node, ast.ImportFrom) and node.module in ("pickle", "torch", "dill", "joblib"):
                bad = {a.name for a in node.names} & {"load", "loads", "Unpickler"}
                if bad:
                    offences.append(f"{where}:{node.lineno}: from {node.module} import {', '.join(sorted(bad))}")
    assert not offences, "\n".join(offences)


def test_the_grep_would_catch_an_offence():
    tree = ast.parse("import torch\nx = torch.load(p)\ny = torch.load(p, weights_only=False)\nz = pickle.loads(b)")
    found = [
        name for node, name in calls(tree) if name.endswith("torch.load") and keyword(node, "weights_only") != "True"
    ]
    assert found == ["torch.load", "torch.load"]


class Payload:
    """Unpickling this runs ``os.system``: the file it touches proves that code ran."""

    def __init__(self, canary: Path):
        self.canary = canary

    def __reduce__(self):
        return (os.system, (f"touch {self.canary}",))


def malicious_model_dir(directory: Path, canary: Path, name: str = "pytorch_model.bin") -> Path:
    from bertkit.config import BertConfig

    directory.mkdir(parents=True, exist_ok=True)
    BertConfig.preset("tiny", vocab_size=32).save(directory)
    torch.save({"bert.embeddings.word_embeddings.weight": Payload(canary)}, directory / name)
    return directory


def test_malicious_pytorch_model_bin_is_refused(tmp_path):
    from bertkit.checkpoint_files import read_state_dict
    from bertkit.weights import load_model

    canary = tmp_path / "pwned"
    model_dir = malicious_model_dir(tmp_path / "evil", canary)
    for load in (lambda: load_model(model_dir), lambda: read_state_dict(model_dir / "pytorch_model.bin")):
        with pytest.raises(CheckpointError, match="refusing to unpickle"):
            load()
    assert not canary.exists()


def test_plain_pickle_and_renamed_pickles_are_refused(tmp_path):
    from bertkit.checkpoint_files import read_state_dict

    canary = tmp_path / "pwned"
    raw = tmp_path / "raw.bin"
    raw.write_bytes(pickle.dumps(Payload(canary)))  # a bare pickle, not torch's zip format
    with pytest.raises(CheckpointError):
        read_state_dict(raw)
    renamed = tmp_path / "model.pkl"
    renamed.write_bytes(raw.read_bytes())
    with pytest.raises(CheckpointError, match="not a supported weights file"):
        read_state_dict(renamed)
    fake = tmp_path / "model.safetensors"  # a pickle pretending to be safetensors
    fake.write_bytes(raw.read_bytes())
    with pytest.raises(CheckpointError):
        read_state_dict(fake)
    assert not canary.exists()


def test_malicious_trainer_state_is_refused_on_resume(tmp_path):
    from bertkit.training.checkpoint import MANIFEST, TRAINER_STATE, _sha256, load_checkpoint, save_checkpoint
    from training_helpers import ToyModel

    canary = tmp_path / "pwned"
    path = save_checkpoint(tmp_path / "run", 1, ToyModel(), {"step": 1})
    torch.save({"step": Payload(canary)}, path / TRAINER_STATE)
    manifest = json.loads((path / MANIFEST).read_text())  # an attacker rewrites the manifest too
    manifest["files"][TRAINER_STATE] = {
        "size": (path / TRAINER_STATE).stat().st_size,
        "sha256": _sha256(path / TRAINER_STATE),
    }
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError):
        load_checkpoint(path, ToyModel())
    assert not canary.exists()


@pytest.mark.parametrize("command", ["embed", "fill-mask", "classify", "export"])
def test_cli_refuses_a_malicious_model_with_exit_2(tmp_path, capsys, command):
    canary = tmp_path / "pwned"
    model_dir = str(malicious_model_dir(tmp_path / "evil", canary))
    (tmp_path / "in.txt").write_text("hello [MASK]\n")
    args = {
        "embed": [
            "embed",
            "--model",
            model_dir,
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "o.npy"),
        ],
        "fill-mask": ["fill-mask", "--model", model_dir, "hello [MASK]"],
        "classify": ["classify", "--model", model_dir, "hello"],
        "export": ["export", "onnx", "--model", model_dir, "--output", str(tmp_path / "m.onnx")],
    }[command]
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) >= 1 and err[-1].startswith("bertkit: error:"), err
    assert not canary.exists() and not (tmp_path / "o.npy").exists() and not (tmp_path / "m.onnx").exists()


def test_the_service_takes_no_paths_or_models_from_requests(tmp_path):
    """Requests carry texts and numbers only: every request schema forbids extra fields, none names a path,
    file, directory or model, and a request that tries gets 422 (the model is fixed at start-up)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bertkit.models.bert import BertForPreTraining
    from bertkit.serve import create_app
    from inference_helpers import make_tokenizer, save_model

    model = save_model(tmp_path / "model", BertForPreTraining, make_tokenizer(tmp_path / "tok"))
    client = TestClient(create_app(str(model)))
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    requests = {name: s for name, s in schemas.items() if name.endswith("Request")}
    assert requests
    for name, schema in requests.items():
        assert schema.get("additionalProperties") is False, name
        for field in schema.get("properties", {}):
            if (name, field) == ("OpenAIEmbeddingRequest", "model") or field == "truncation_direction":
                continue  # OpenAI's clients always send a model name (ignored); TEI's direction is left or right
            assert not any(word in field.lower() for word in ("path", "file", "dir", "model", "url")), (name, field)
    ignored = client.post("/v1/embeddings", json={"input": "the cat", "model": "/etc/passwd"})
    assert ignored.status_code == 200 and ignored.json()["model"] == str(model)  # the served model answers
    for extra in ({"model": "/etc/passwd"}, {"path": "/etc/passwd"}, {"model_dir": str(model)}):
        response = client.post("/fill-mask", json={"texts": ["the [MASK] sat"], **extra})
        assert response.status_code == 422, response.text
