"""Google TensorFlow checkpoints: the tensor-bundle reader, the TF name table, and `bertkit convert`.

The fixture in ``tests/fixtures/tf_bert`` was written by TensorFlow itself, and its ``expected.npz`` holds
the outputs of ``transformers`` after its own (TensorFlow-based) conversion read the same files; see
``make_fixture.py`` there. No TensorFlow is needed to run these tests.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.checkpoint_files import infer_architecture, read_state_dict, read_tf_checkpoint, tf_to_hf_state_dict
from bertkit.cli import main as cli
from bertkit.errors import CheckpointError
from bertkit.tokenizer import Tokenizer
from bertkit.weights import load_model

FIXTURE = Path(__file__).parent / "fixtures" / "tf_bert"
_spec = importlib.util.spec_from_file_location("make_tf_fixture", FIXTURE / "make_fixture.py")
assert _spec is not None and _spec.loader is not None
fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture)  # numpy only at import; TensorFlow is imported inside its main()

INPUTS = dict(
    input_ids=torch.tensor(fixture.INPUT_IDS),
    token_type_ids=torch.tensor(fixture.TOKEN_TYPE_IDS),
    attention_mask=torch.tensor(fixture.ATTENTION_MASK),
)
REAL = np.array(fixture.ATTENTION_MASK, dtype=bool)  # compare outputs at real tokens; padding rows are noise


def copy_fixture(tmp_path: Path) -> Path:
    target = tmp_path / "google"
    shutil.copytree(FIXTURE, target, ignore=shutil.ignore_patterns("*.py", "*.npz", "__pycache__"))
    return target


def test_reader_returns_every_tensor_exactly():
    tensors = read_tf_checkpoint(FIXTURE / "model.ckpt")
    expected = fixture.variables()
    assert sorted(tensors) == sorted(expected)
    for name, value in expected.items():
        assert tensors[name].dtype == value.dtype and tensors[name].shape == value.shape, name
        np.testing.assert_array_equal(tensors[name], value, err_msg=name)
    assert tensors["global_step"].item() == 1000


@pytest.mark.parametrize("where", ["directory", "prefix", "index file"])
def test_google_checkpoint_loads_with_the_outputs_of_transformers(where):
    path = {"directory": FIXTURE, "prefix": FIXTURE / "model.ckpt", "index file": FIXTURE / "model.ckpt.index"}[where]
    model = load_model(path)
    assert type(model).__name__ == "BertForPreTraining"  # the heads in the checkpoint decide, not the config
    expected = np.load(FIXTURE / "expected.npz")
    with torch.no_grad():
        out = model(**INPUTS, output_hidden_states=True)
    np.testing.assert_allclose(out.mlm_logits.numpy()[REAL], expected["prediction_logits"][REAL], atol=2e-5)
    np.testing.assert_allclose(out.nsp_logits.numpy(), expected["seq_relationship_logits"], atol=2e-5)
    np.testing.assert_allclose(out.hidden_states[-1].numpy()[REAL], expected["last_hidden_state"][REAL], atol=2e-5)


def test_optimizer_slots_and_step_are_not_weights():
    state = read_state_dict(FIXTURE)
    assert not [name for name in state if "adam" in name or "step" in name]
    assert state["bert.encoder.layer.1.attention.self.query.weight"].shape == (16, 16)
    # TensorFlow's [in, out] kernel is transposed to PyTorch's [out, in].
    kernel = fixture.variables()["bert/encoder/layer_0/intermediate/dense/kernel"]
    np.testing.assert_array_equal(state["bert.encoder.layer.0.intermediate.dense.weight"].numpy(), kernel.T)


def test_fine_tuned_heads_of_googles_scripts_are_recognised():
    base = {name: value for name, value in fixture.variables().items() if not name.startswith("cls/")}
    classifier = tf_to_hf_state_dict(
        base | {"output_weights": np.zeros((3, 16), np.float32), "output_bias": np.zeros(3, np.float32)}
    )
    assert infer_architecture(classifier) == ("BertForSequenceClassification", 3)
    squad = tf_to_hf_state_dict(
        base
        | {"cls/squad/output_weights": np.zeros((2, 16), np.float32), "cls/squad/output_bias": np.zeros(2, np.float32)}
    )
    assert infer_architecture(squad) == ("BertForQuestionAnswering", None)
    assert infer_architecture(tf_to_hf_state_dict(base)) == ("BertModel", None)
    with pytest.raises(CheckpointError, match="TF2 object-based"):
        tf_to_hf_state_dict({"encoder/layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE": np.zeros(2)})


def test_convert_writes_a_hugging_face_directory(tmp_path):
    transformers = pytest.importorskip("transformers")
    out = tmp_path / "converted"
    assert cli(["convert", "--model", str(FIXTURE), "--output", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["BertForPreTraining"] and config["model_type"] == "bert"
    assert (out / "vocab.txt").read_text().split() == (FIXTURE / "vocab.txt").read_text().split()
    theirs = transformers.BertForPreTraining.from_pretrained(out).eval()
    with torch.no_grad():
        logits = theirs(**INPUTS).prediction_logits.numpy()
    np.testing.assert_allclose(logits[REAL], np.load(FIXTURE / "expected.npz")["prediction_logits"][REAL], atol=2e-5)
    assert cli(["convert", "--model", str(FIXTURE), "--output", str(FIXTURE)]) == 2  # never over its source


def test_damaged_checkpoints_fail_with_one_clear_error(tmp_path):
    google = copy_fixture(tmp_path)
    index, data = google / "model.ckpt.index", google / "model.ckpt.data-00000-of-00001"
    good_index, good_data = index.read_bytes(), data.read_bytes()

    index.write_bytes(good_index[:-10])
    with pytest.raises(CheckpointError, match="not a readable TensorFlow checkpoint index"):
        load_model(google)
    index.write_bytes(good_index)
    data.write_bytes(good_data[: len(good_data) // 2])
    with pytest.raises(CheckpointError, match="not where the index says"):
        load_model(google)
    data.unlink()
    with pytest.raises(CheckpointError, match=r"model\.ckpt\.data-00000-of-00001, which is missing"):
        load_model(google)

    # Random damage to the index: a clear CheckpointError, or a checkpoint that still reads; nothing else.
    data.write_bytes(good_data)
    rng = random.Random(0)
    for _ in range(300):
        damaged = bytearray(good_index)
        for _ in range(rng.randint(1, 8)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        index.write_bytes(bytes(damaged))
        with contextlib.suppress(CheckpointError):
            read_tf_checkpoint(google)


def test_casing_of_a_bare_vocabulary_follows_the_vocabulary(tmp_path):
    words = ["the", "cat", "The", "Cat", "Paris", "London", "##s", "a", "A", "Mr", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    cased = Tokenizer.from_pretrained(tmp_path)
    assert not cased.lowercase
    assert cased.encode("The Cat").tokens[1:3] == ["The", "Cat"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    assert Tokenizer.from_pretrained(tmp_path).lowercase  # an explicit setting wins
    assert Tokenizer.from_pretrained(FIXTURE).lowercase  # an all-lower-case vocabulary stays uncased
