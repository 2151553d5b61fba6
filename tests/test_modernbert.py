"""ModernBERT against transformers' ModernBertFor* on small random configs: every head and attention path on
padded batches longer than the local window, the training loss and gradients, and checkpoints both ways."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bertkit.config import ModernBertConfig, load_config, model_type_of
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models import modernbert as mb

transformers = pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT parity")

SIZES: dict[str, Any] = dict(
    vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=2,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, local_attention=8,
)  # fmt: skip
HEADS = ["ModernBertModel", "ModernBertForMaskedLM", "ModernBertForSequenceClassification",
         "ModernBertForTokenClassification", "ModernBertForQuestionAnswering"]  # fmt: skip
TOL = 1e-5


def reference(head: str, tmp_path: Path, seed: int = 0, **overrides: Any) -> tuple[torch.nn.Module, Path]:
    """A random transformers model of class ``head``, saved under ``tmp_path``."""
    torch.manual_seed(seed)
    config = transformers.ModernBertConfig(**{**SIZES, **overrides}, attn_implementation="sdpa")
    model = getattr(transformers, head)(config).eval()
    # Non-trivial norms, so that a misplaced norm or bias shows.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.uniform_(0.5, 1.5)
    directory = tmp_path / head
    model.save_pretrained(directory)
    return model, directory


def batch(seed: int = 1, length: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    """Three right-padded rows: full, longer than the window, shorter than it."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, SIZES["vocab_size"], (3, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 25:] = 0
    mask[2, 5:] = 0
    ids[mask == 0] = SIZES["pad_token_id"]
    return ids, mask


def outputs(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor, head: str) -> list[torch.Tensor]:
    """The outputs to compare, at real tokens only where they are per token (padded ones are free)."""
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask)
    real = mask.bool()
    if head == "ModernBertForSequenceClassification":
        return [out.logits]
    if head == "ModernBertForQuestionAnswering":
        return [out.start_logits[real], out.end_logits[real]]
    if head == "ModernBertModel":
        return [out.last_hidden_state[real]]
    return [out.logits[real]]


def assert_close(ours: list[torch.Tensor], theirs: list[torch.Tensor]) -> None:
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("head", HEADS)
def test_every_head_equals_transformers_on_a_padded_batch(head: str, tmp_path: Path) -> None:
    theirs, directory = reference(head, tmp_path, classifier_pooling="mean")
    ours = mb.MODERNBERT_CLASSES[head].from_pretrained(directory)
    ids, mask = batch()
    assert_close(outputs(ours, ids, mask, head), outputs(theirs, ids, mask, head))


@pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
@pytest.mark.parametrize("path", ["sdpa", "flex", "blocked"])
def test_every_attention_path_equals_transformers(path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    theirs, directory = reference("ModernBertForMaskedLM", tmp_path)
    ours = mb.ModernBertForMaskedLM.from_pretrained(directory)
    if path == "blocked":  # the long-sequence local path, in blocks of 4 queries on these 40 tokens
        monkeypatch.setattr(mb, "LOCAL_BLOCK", 4)
    ours.set_attention("sdpa" if path == "blocked" else path)
    ids, mask = batch()
    assert_close(outputs(ours, ids, mask, "ModernBertForMaskedLM"), outputs(theirs, ids, mask, "ModernBertForMaskedLM"))


def test_cls_pooling_and_the_global_every_two_layers(tmp_path: Path) -> None:
    head = "ModernBertForSequenceClassification"
    theirs, directory = reference(head, tmp_path, classifier_pooling="cls", global_attn_every_n_layers=2,
                                  local_rope_theta=500.0, num_labels=3)  # fmt: skip
    ours = mb.ModernBertForSequenceClassification.from_pretrained(directory)
    ids, mask = batch(seed=2)
    assert_close(outputs(ours, ids, mask, head), outputs(theirs, ids, mask, head))


def test_left_padding_gives_the_vectors_of_the_unpadded_sequence(tmp_path: Path) -> None:
    _, directory = reference("ModernBertModel", tmp_path)
    ours = mb.ModernBertModel.from_pretrained(directory)
    ids, _ = batch()
    row = ids[:1, :20]
    left = torch.cat([torch.zeros(1, 5, dtype=torch.long), row], dim=1)
    left_mask = torch.cat([torch.zeros(1, 5, dtype=torch.long), torch.ones_like(row)], dim=1)
    with torch.no_grad():
        alone = ours(row).last_hidden_state
        padded = ours(left, attention_mask=left_mask).last_hidden_state
    torch.testing.assert_close(padded[:, 5:], alone, atol=TOL, rtol=TOL)
    assert padded[:, :5].abs().max() == 0


def test_training_loss_and_gradients_equal_transformers(tmp_path: Path) -> None:
    theirs, directory = reference("ModernBertForMaskedLM", tmp_path)
    ours = mb.ModernBertForMaskedLM.from_pretrained(directory)
    ids, mask = batch()
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    labels[0, 30] = ids[0, 30]
    loss_theirs = theirs(input_ids=ids, attention_mask=mask, labels=labels).loss
    out = ours(ids, attention_mask=mask, labels=labels)
    assert out.loss is not None and out.mlm_count == 4
    torch.testing.assert_close(out.loss, loss_theirs, atol=TOL, rtol=TOL)
    loss_theirs.backward()
    out.loss.backward()
    for name in ("model.layers.1.attn.Wqkv.weight", "model.layers.3.mlp.Wi.weight", "head.dense.weight"):
        ours_grad = dict(ours.named_parameters())[name].grad
        theirs_grad = dict(theirs.named_parameters())[name].grad
        assert ours_grad is not None and theirs_grad is not None
        torch.testing.assert_close(ours_grad, theirs_grad, atol=1e-6, rtol=1e-4)


def test_what_bertkit_saves_transformers_loads_with_the_same_outputs(tmp_path: Path) -> None:
    config = ModernBertConfig(**SIZES, num_labels=3, id2label={0: "a", 1: "b", 2: "c"})
    for head in HEADS:
        ours = mb.MODERNBERT_CLASSES[head](config).eval()
        directory = ours.save_pretrained(tmp_path / head)
        theirs = getattr(transformers, head).from_pretrained(directory, attn_implementation="sdpa").eval()
        ids, mask = batch(seed=3)
        assert_close(outputs(ours, ids, mask, head), outputs(theirs, ids, mask, head))
        saved = json.loads((directory / "config.json").read_text())
        assert saved["model_type"] == "modernbert" and saved["architectures"] == [head]


def test_a_head_loads_an_encoder_checkpoint_and_the_encoder_a_head_checkpoint(tmp_path: Path, caplog: Any) -> None:
    theirs, directory = reference("ModernBertForMaskedLM", tmp_path)
    encoder = mb.ModernBertModel.from_pretrained(directory)  # the head's tensors ignored
    ids, mask = batch()
    with torch.no_grad():
        expected = theirs.get_submodule("model")(input_ids=ids, attention_mask=mask).last_hidden_state[mask.bool()]
        got = encoder(ids, attention_mask=mask).last_hidden_state[mask.bool()]
    torch.testing.assert_close(got, expected, atol=TOL, rtol=TOL)
    bare = encoder.save_pretrained(tmp_path / "bare")
    classifier = mb.ModernBertForSequenceClassification.from_pretrained(bare, num_labels=4)
    assert classifier.classifier.out_features == 4
    assert "newly initialised" in caplog.text


def test_config_round_trips_and_is_told_apart_from_bert(tmp_path: Path) -> None:
    _, directory = reference("ModernBertForMaskedLM", tmp_path, local_rope_theta=None)
    assert model_type_of(directory) == "modernbert"
    config = load_config(directory)
    assert isinstance(config, ModernBertConfig) and config.local_rope_theta is None
    assert config.extra["transformers_version"]  # unknown keys kept and written back
    again = ModernBertConfig.from_dict(config.to_dict())
    assert again == config
    assert transformers.ModernBertConfig.from_dict(config.to_dict()).local_attention == SIZES["local_attention"]


def test_bad_configs_and_checkpoints_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="classifier_pooling"):
        ModernBertConfig(**SIZES, classifier_pooling="max")
    with pytest.raises(ConfigError, match="even head size"):
        ModernBertConfig(**{**SIZES, "hidden_size": 30, "num_attention_heads": 10})
    with pytest.raises(ConfigError, match="rope_scaling"):
        ModernBertConfig.from_dict({**SIZES, "rope_scaling": {"rope_type": "yarn"}})
    _, directory = reference("ModernBertModel", tmp_path)
    with pytest.raises(CheckpointError, match="does not describe"):
        mb.ModernBertModel.from_pretrained(directory, num_hidden_layers=2)
    with pytest.raises(CheckpointError, match="lacks encoder weight"):
        mb.ModernBertModel.from_pretrained(directory, num_hidden_layers=5)
    with pytest.raises(ConfigError, match="not supported for ModernBERT"):
        mb.ModernBertModel(ModernBertConfig(**SIZES, attn_implementation="eager"))


def test_gradient_checkpointing_gives_the_same_gradients() -> None:
    config = ModernBertConfig(**SIZES)
    torch.manual_seed(0)
    model = mb.ModernBertForMaskedLM(config).train()
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids, -100)
    grads = []
    for enabled in (False, True):
        model.zero_grad()
        model.model.gradient_checkpointing_enable(enabled)
        loss = model(ids, attention_mask=mask, labels=labels).loss
        assert loss is not None
        loss.backward()
        grad = dict(model.named_parameters())["model.layers.0.attn.Wqkv.weight"].grad
        assert grad is not None
        grads.append(grad.clone())
    torch.testing.assert_close(grads[0], grads[1])
