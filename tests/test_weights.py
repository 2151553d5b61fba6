"""Checkpoint I/O: Hugging Face names and layout, round trips, cross-class loading, and bad input."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import cast

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from bertkit.checkpoint_files import read_state_dict, to_hf_state_dict
from bertkit.config import BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    EncoderLayer,
)
from bertkit.weights import load_model, save_pretrained

HEADS = [
    BertModel,
    BertForPreTraining,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertForQuestionAnswering,
]


def tiny(**overrides) -> BertConfig:
    values = dict(vocab_size=61, max_position_embeddings=16, num_labels=3)
    values.update(overrides)
    return BertConfig.preset("tiny", **values)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def inputs():
    ids = torch.randint(1, 61, (2, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    return ids, torch.zeros_like(ids), mask


def outputs(model, ids, types, mask) -> list[torch.Tensor]:
    out = model(ids, types, mask)
    return [v for v in vars(out).values() if isinstance(v, torch.Tensor)]


@pytest.mark.parametrize("cls", HEADS, ids=lambda c: c.__name__)
def test_round_trip_gives_identical_outputs(cls, tmp_path):
    model = cls(tiny()).eval()
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == [cls.__name__]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]  # no temporary files left
    loaded = load_model(tmp_path)  # class picked from architectures
    assert type(loaded) is cls and not loaded.training
    for a, b in zip(outputs(model, *inputs()), outputs(loaded, *inputs())):
        assert torch.equal(a, b)
    if isinstance(loaded, (BertForPreTraining, BertForMaskedLM)):
        assert loaded.mlm.decoder.weight is loaded.bert.embeddings.word_embeddings.weight


def test_saved_names_are_hugging_face_names(tmp_path):
    model = BertForPreTraining(tiny())
    save_pretrained(model, tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as f:
        keys = set(f.keys())
        assert f.metadata() == {"format": "pt"}
    H = 128
    assert "bert.encoder.layer.1.attention.self.query.weight" in keys
    assert "bert.embeddings.LayerNorm.gamma" not in keys and "bert.embeddings.LayerNorm.weight" in keys
    assert {
        "cls.predictions.bias",
        "cls.predictions.transform.LayerNorm.weight",
        "cls.seq_relationship.weight",
        "bert.pooler.dense.weight",
    } <= keys
    # the tied decoder is not stored twice (Hugging Face ties it on load)
    assert "cls.predictions.decoder.weight" not in keys
    assert not any(".layers." in k or "qkv" in k for k in keys)
    tensors = load_file(tmp_path / "model.safetensors")
    qkv = cast(EncoderLayer, model.bert.encoder.layers[1]).attention.qkv
    assert torch.equal(tensors["bert.encoder.layer.1.attention.self.query.weight"], qkv.weight[:H])
    assert torch.equal(tensors["bert.encoder.layer.1.attention.self.key.weight"], qkv.weight[H : 2 * H])
    assert torch.equal(tensors["bert.encoder.layer.1.attention.self.value.bias"], qkv.bias[2 * H :])
    # a bare BertModel is saved without the bert. prefix, as transformers.BertModel does
    assert all(not k.startswith("bert.") for k in to_hf_state_dict(BertModel(tiny())))


def test_encoder_checkpoint_into_head_initialises_head_with_notice(tmp_path, caplog):
    encoder = BertModel(tiny()).eval()
    save_pretrained(encoder, tmp_path)
    with caplog.at_level(logging.WARNING, logger="bertkit.weights"):
        model = cast(BertForSequenceClassification, load_model(tmp_path, BertForSequenceClassification))
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "classifier.weight" in notices[0] and "\n" not in notices[0]
    ids, types, mask = inputs()
    torch.testing.assert_close(
        model.bert(ids, types, mask).last_hidden_state, encoder(ids, types, mask).last_hidden_state, atol=0, rtol=0
    )


def test_head_checkpoint_into_encoder_ignores_head_with_notice(tmp_path, caplog):
    full = BertForPreTraining(tiny()).eval()
    save_pretrained(full, tmp_path)
    with caplog.at_level(logging.WARNING, logger="bertkit.weights"):
        encoder = load_model(tmp_path, BertModel)
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "ignored 7 weights" in notices[0]
    ids, types, mask = inputs()
    assert torch.equal(encoder(ids, types, mask).pooler_output, full.bert(ids, types, mask).pooler_output)


def test_prefix_variants_and_legacy_names(tmp_path):
    model = BertForMaskedLM(tiny()).eval()
    state = to_hf_state_dict(model)
    # old-style checkpoint: gamma/beta LayerNorm names, an explicit decoder weight and decoder.bias alias
    legacy = {}
    for k, v in state.items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        legacy[k] = v
    legacy["cls.predictions.decoder.weight"] = state["bert.embeddings.word_embeddings.weight"].clone()
    legacy["cls.predictions.decoder.bias"] = legacy.pop("cls.predictions.bias")
    legacy["bert.embeddings.position_ids"] = torch.arange(16)[None]
    tiny().save(tmp_path)
    save_file(legacy, tmp_path / "model.safetensors")
    loaded = load_model(tmp_path, BertForMaskedLM)
    for a, b in zip(outputs(model, *inputs()), outputs(loaded, *inputs())):
        assert torch.equal(a, b)
    # encoder keys without the bert. prefix load into a head class too
    bare = {k.removeprefix("bert."): v for k, v in state.items()}
    save_file(bare, tmp_path / "model.safetensors")
    loaded = load_model(tmp_path, BertForMaskedLM)
    assert torch.equal(outputs(loaded, *inputs())[0], outputs(model, *inputs())[0])


def test_pytorch_bin_is_read_with_weights_only(tmp_path):
    model = BertModel(tiny()).eval()
    tiny().save(tmp_path)
    torch.save(to_hf_state_dict(model), tmp_path / "pytorch_model.bin")
    loaded = load_model(tmp_path)
    assert torch.equal(outputs(loaded, *inputs())[0], outputs(model, *inputs())[0])


class _Evil:
    marker: Path

    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_pickle_with_code_is_refused_and_never_run(tmp_path):
    _Evil.marker = tmp_path / "pwned"
    tiny().save(tmp_path)
    import pickle

    with open(tmp_path / "pytorch_model.bin", "wb") as f:
        pickle.dump({"embeddings.word_embeddings.weight": _Evil()}, f)
    with pytest.raises(CheckpointError, match="refusing to unpickle") as err:
        load_model(tmp_path)
    assert "\n" not in str(err.value)
    assert not _Evil.marker.exists()
    with open(tmp_path / "weights.pkl", "wb") as f:
        pickle.dump({}, f)
    with pytest.raises(CheckpointError, match="not a supported weights file"):
        read_state_dict(tmp_path / "weights.pkl")


def test_truncated_and_missing_weights(tmp_path):
    model = BertModel(tiny())
    save_pretrained(model, tmp_path)
    path = tmp_path / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        load_model(tmp_path)
    state = to_hf_state_dict(model)
    del state["encoder.layer.1.output.dense.weight"]
    save_file(state, path)
    with pytest.raises(CheckpointError, match=r"lacks 1 encoder weights \(encoder.layer.1.output.dense.weight\)"):
        load_model(tmp_path)
    path.unlink()
    with pytest.raises(CheckpointError, match="no weights"):
        load_model(tmp_path)
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"")  # Google's TF1 release layout
    with pytest.raises(CheckpointError, match="TensorFlow"):
        load_model(tmp_path)


def test_config_that_does_not_match_the_weights(tmp_path):
    save_pretrained(BertModel(tiny()), tmp_path)
    with pytest.raises(CheckpointError, match="shape"):
        load_model(tmp_path, hidden_size=64, num_attention_heads=2, intermediate_size=256)
    with pytest.raises(CheckpointError, match="num_hidden_layers"):
        load_model(tmp_path, num_hidden_layers=1)
    with pytest.raises(CheckpointError, match="lacks"):
        load_model(tmp_path, num_hidden_layers=3)
    with pytest.raises(ConfigError, match="unknown config field"):
        load_model(tmp_path, hidden_sise=64)


def test_not_a_model_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="not a model directory"):
        load_model(tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nope")
    (tmp_path / "config.json").write_text("{not json")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError):
        load_model(tmp_path)


def test_label_count_change(tmp_path):
    save_pretrained(BertForSequenceClassification(tiny(id2label={0: "neg", 1: "pos"})), tmp_path)
    assert cast(BertForSequenceClassification, load_model(tmp_path)).config.id2label == {0: "neg", 1: "pos"}
    with pytest.raises(CheckpointError, match="num_labels"):
        load_model(tmp_path, num_labels=5)
    model = cast(BertForSequenceClassification, load_model(tmp_path, num_labels=5, ignore_mismatched_sizes=True))
    assert model.classifier.out_features == 5 and model.config.id2label is None


def test_overrides_and_explicit_head(tmp_path):
    save_pretrained(BertForPreTraining(tiny()), tmp_path)
    model = load_model(
        tmp_path, head="BertForTokenClassification", attn_implementation="eager", hidden_dropout_prob=0.0
    )
    assert isinstance(model, BertForTokenClassification)
    assert model.bert.attn_implementation == "eager" and model.config.hidden_dropout_prob == 0.0
    with pytest.raises(ConfigError, match="unknown model class"):
        load_model(tmp_path, head="GPT2")


def test_tokenizer_is_saved_alongside(tmp_path):
    class FakeTokenizer:
        def save_pretrained(self, directory):
            Path(directory, "vocab.txt").write_text("[PAD]\n")

    save_pretrained(BertModel(tiny()), tmp_path / "out", tokenizer=FakeTokenizer())
    assert sorted(os.listdir(tmp_path / "out")) == ["config.json", "model.safetensors", "vocab.txt"]


# ------------------------------------------------------------------------------------------ the model's own methods
@pytest.mark.parametrize("cls", [BertModel, BertForSequenceClassification], ids=lambda c: c.__name__)
def test_model_save_pretrained_and_from_pretrained_round_trip(cls, tmp_path):
    """``transformers``' way: the class loads and saves itself, in the layout ``load_model`` reads and writes."""
    model = cls(tiny()).eval()
    assert model.save_pretrained(tmp_path / "out") == tmp_path / "out"
    assert sorted(os.listdir(tmp_path / "out")) == ["config.json", "model.safetensors"]  # nothing temporary left
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [cls.__name__]
    saved = load_file(tmp_path / "out" / "model.safetensors")
    expected = to_hf_state_dict(model)  # Hugging Face names
    assert saved.keys() == expected.keys() and all(torch.equal(saved[k], expected[k]) for k in saved)
    loaded = cls.from_pretrained(tmp_path / "out")
    assert type(loaded) is cls and not loaded.training
    for a, b in zip(outputs(model, *inputs()), outputs(loaded, *inputs())):
        assert torch.equal(a, b)
    by_loader = load_model(tmp_path / "out")
    for a, b in zip(outputs(by_loader, *inputs()), outputs(loaded, *inputs())):
        assert torch.equal(a, b)


def test_from_pretrained_checks_as_the_loader_does(tmp_path, caplog):
    save_pretrained(BertModel(tiny()), tmp_path)
    with caplog.at_level(logging.WARNING, logger="bertkit.weights"):
        head = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=4)
    assert head.classifier.out_features == 4
    notices = [r.getMessage() for r in caplog.records]
    assert len(notices) == 1 and "classifier.weight" in notices[0] and "newly initialised" in notices[0]
    head.save_pretrained(tmp_path / "head")
    with pytest.raises(CheckpointError, match="num_labels"):
        BertForSequenceClassification.from_pretrained(tmp_path / "head", num_labels=2)
    resized = BertForSequenceClassification.from_pretrained(
        tmp_path / "head", num_labels=2, ignore_mismatched_sizes=True
    )
    assert resized.classifier.out_features == 2
    with pytest.raises(CheckpointError, match="num_hidden_layers"):
        BertModel.from_pretrained(tmp_path, num_hidden_layers=1)
    with pytest.raises(ConfigError, match="unknown config field"):
        BertModel.from_pretrained(tmp_path, hidden_sise=64)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="not a model directory"):
        BertModel.from_pretrained(tmp_path / "empty")
    state = to_hf_state_dict(BertModel(tiny()))
    del state["encoder.layer.1.output.dense.weight"]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"lacks 1 encoder weights \(encoder.layer.1.output.dense.weight\)"):
        BertModel.from_pretrained(tmp_path)


def test_model_methods_leave_int8_checkpoints_to_the_loader(tmp_path):
    """An int8 model stores its weights with their scales, which only ``bertkit.weights`` writes and reads."""
    model = BertModel(tiny())
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "bertkit_quantization": {"scheme": "int8"}}))
    with pytest.raises(CheckpointError, match=r"int8-quantized weights; load it with bertkit\.load_model"):
        BertModel.from_pretrained(tmp_path)
    model.config.extra["bertkit_quantization"] = {"scheme": "int8"}
    with pytest.raises(CheckpointError, match=r"save it with bertkit\.save_pretrained"):
        model.save_pretrained(tmp_path / "out")
