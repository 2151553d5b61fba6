"""An architecture added from outside the package: one module's classes and one ``Architecture`` record
registered, and bertkit pre-trains, fine-tunes, embeds, exports and serves it.

The toy architecture ``toy`` is a bag of words with positions: each token's vector is its embedding plus its
position's, mixed once with the mean of its sequence. It has an encoder, a masked-LM head and a sequence
classifier, no token types and no next-sentence head. Nothing in bertkit is told about it: pre-training,
fine-tuning, the loader, the exporter and the service find it through ``bertkit.models.registry``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import numpy as np
import pytest
import torch
from torch import Tensor, nn

import bertkit
from bertkit.checkpoint_files.named_layout import load_named_state, read_named_directory, write_named_directory
from bertkit.cli import main
from bertkit.config import CONFIG_NAME
from bertkit.data import open_dataset
from bertkit.errors import ConfigError
from bertkit.models import registry
from bertkit.models.architecture import Architecture
from bertkit.models.heads import (
    BertOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
    masked_lm,
    pool_tokens,
    problem_type,
    sequence_classification_loss,
)
from training_helpers import make_pretraining_dataset


# ------------------------------------------------------------------------------------------ the architecture
@dataclass
class ToyConfig:
    vocab_size: int = 64
    hidden_size: int = 16
    num_hidden_layers: int = 1
    num_attention_heads: int = 1
    max_position_embeddings: int = 64
    pad_token_id: int = 0
    num_labels: int = 2
    id2label: dict[int, str] | None = None
    problem_type: str | None = None
    architectures: list[str] | None = None
    tie_word_embeddings: bool = True
    type_vocab_size: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def label2id(self) -> dict[str, int] | None:
        return None if self.id2label is None else {v: k for k, v in self.id2label.items()}

    @classmethod
    def preset(cls, name: str) -> ToyConfig:
        return cls(hidden_size={"tiny": 16, "mini": 32}[name])

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**self.extra, **out, "model_type": "toy"}

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> ToyConfig:
        path = Path(path)
        data = json.loads((path / CONFIG_NAME if path.is_dir() else path).read_text(encoding="utf-8"))
        data.pop("model_type", None)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: data.pop(k) for k in list(data) if k in known}
        if values.get("id2label") is not None:
            values["id2label"] = {int(k): v for k, v in values["id2label"].items()}
        return cls(**values, extra=data)


class ToyPreTrained(nn.Module):
    config: ToyConfig

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike, *, ignore_mismatched_sizes: bool = False, **overrides: Any
    ) -> Self:
        config, state, weights = read_named_directory(path, ToyConfig.load, overrides)
        model = cls(config)
        load_toy_state(model, state, source=str(weights))
        return model.eval()

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        config = dataclasses.replace(self.config, architectures=[type(self).__name__])
        return write_named_directory(
            self, config, directory, {"decoder.weight"} if config.tie_word_embeddings else set()
        )

    def set_attention(self, name: str | None) -> None:
        if name not in (None, "sdpa"):
            raise ConfigError(f"the toy architecture has no attention to run through {name!r}")


class ToyModel(ToyPreTrained):
    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.positions = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.mix = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        output_hidden_states: bool = False,
        **_: Any,
    ) -> BertOutput:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        x = self.embeddings(input_ids) + self.positions(torch.arange(input_ids.shape[1], device=input_ids.device))
        weights = mask[..., None].to(x.dtype)
        context = (x * weights).sum(1, keepdim=True) / weights.sum(1, keepdim=True).clamp(min=1.0)
        out = self.norm(x + torch.tanh(self.mix(context))) * weights
        return BertOutput(out, None, (x, out) if output_hidden_states else None)


class ToyForMaskedLM(ToyPreTrained):
    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.model = ToyModel(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        if config.tie_word_embeddings:
            self.decoder.weight = self.model.embeddings.weight

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        masked_positions: Tensor | None = None,
        masked_labels: Tensor | None = None,
        labels: Tensor | None = None,
        **_: Any,
    ) -> MaskedLMOutput:
        hidden = self.model(input_ids, None, attention_mask).last_hidden_state
        if masked_positions is not None:
            hidden = hidden.gather(1, masked_positions[..., None].expand(-1, -1, hidden.shape[-1]))
        logits, loss, correct, count = masked_lm(self.decoder, hidden, masked_positions, masked_labels, labels)
        return MaskedLMOutput(loss, logits, correct, count)


class ToyForSequenceClassification(ToyPreTrained):
    def __init__(self, config: ToyConfig):
        super().__init__()
        self.config = config
        self.model = ToyModel(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        *,
        labels: Tensor | None = None,
        **_: Any,
    ) -> SequenceClassifierOutput:
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        pooled = pool_tokens(self.model(input_ids, None, mask).last_hidden_state, mask, "mean")
        logits = self.classifier(pooled)
        if labels is None:
            return SequenceClassifierOutput(None, logits)
        kind = problem_type(self.config.problem_type, self.config.num_labels, labels)
        return SequenceClassifierOutput(sequence_classification_loss(logits, labels, kind), logits)


ENCODER_PARTS = ("embeddings.", "positions.", "mix.", "norm.")


def load_toy_state(model: nn.Module, state: dict[str, Tensor], *, source: str = "", **_: Any) -> None:
    """Tensors by the model's own names (the encoder's under ``model.`` in a head): bertkit's named layout."""
    prefix = "" if isinstance(model, ToyModel) else "model."
    tied = {"decoder.weight"} if registry.config_of(model).tie_word_embeddings else set()
    load_named_state(model, state, prefix=prefix, encoder_parts=ENCODER_PARTS, tied=tied, source=source)


class ToyTraceable(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, ...]:
        out = self.model(input_ids, None, attention_mask)
        return (out.last_hidden_state,) if isinstance(self.model, ToyModel) else (out.logits,)


TOY = Architecture(
    name="toy",
    title="Toy",
    config_class=ToyConfig,
    base=ToyPreTrained,
    classes={
        "BertModel": ToyModel,
        "BertForMaskedLM": ToyForMaskedLM,
        "BertForSequenceClassification": ToyForSequenceClassification,
    },
    encoder_attribute="model",
    load_state=load_toy_state,
    traceable=ToyTraceable,
    onnx_inputs=("input_ids", "attention_mask"),
    token_types=False,
    attention_probabilities=False,
    flops_per_token=lambda config, seq_len, masked: 6.0 * 2 * config.hidden_size**2,
    pretraining_config=lambda config, tok, fresh: (
        dataclasses.replace(config, vocab_size=tok["vocab_size"], pad_token_id=tok["pad_id"]) if fresh else config
    ),
    presets=("tiny", "mini"),
)


# ------------------------------------------------------------------------------------------ the journey
@pytest.fixture
def toy() -> Iterator[Architecture]:
    registry.register(TOY)
    yield TOY
    registry.unregister("toy")


def test_the_record_answers_for_its_models_configs_and_directories(toy, tmp_path):
    model = ToyForSequenceClassification(ToyConfig())
    assert registry.of_model(model) is toy and registry.role_of(model) == "BertForSequenceClassification"
    assert registry.encoder_of(model) is model.model and registry.of_config(model.config) is toy
    assert registry.role_named("ToyForMaskedLM") == "BertForMaskedLM"
    model.save_pretrained(tmp_path)
    assert registry.of_directory(tmp_path) is toy
    assert toy.class_for("BertForPreTraining") is ToyForMaskedLM  # no next-sentence head: masked LM alone
    with pytest.raises(ConfigError, match="unknown Toy class 'BertForQuestionAnswering'"):
        toy.class_for("BertForQuestionAnswering")


def test_pretrain_finetune_embed_export_and_serve_a_registered_architecture(toy, tokenizer, tmp_path, capsys):
    from bertkit.training.pretrain import build_config, build_model, pretrain

    vocab = tokenizer.vocab_size
    data = make_pretraining_dataset(
        tmp_path / "data", n_train=16, n_eval=4, seq=16, vocab=vocab, nsp=False, masking="dynamic"
    )
    options = dict(data=str(data), output=str(tmp_path / "run"), architecture="toy", model_config="tiny",
                   micro_batch_size=4, global_batch_size=4, max_steps=3, lr=1e-2, warmup_steps=1, log_every=1,
                   save_every=2, eval_every=3, eval_batches=1, progress=False, tensorboard=False, plot=False,
                   peak_flops=1e12, recipe="modern")  # fmt: skip
    config = build_config(options)
    assert str(config.architecture) == "toy"  # a registered name, beside the flag's built-in choices
    assert isinstance(build_model(config, open_dataset(str(data))), ToyForMaskedLM)
    result = pretrain(config)
    assert result.step == 3
    final = tmp_path / "run" / "final"
    saved = json.loads((final / "config.json").read_text())
    assert saved["model_type"] == "toy" and saved["architectures"] == ["ToyForMaskedLM"]
    tokenizer.save_pretrained(final)

    # fine-tune: the classification family's head is the toy's sequence classifier
    rows = ["good movie\tpositive", "bad film\tnegative", "great story\tpositive", "awful plot\tnegative"] * 4
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    tuned = tmp_path / "tuned"
    quiet = tmp_path / "quiet.toml"
    quiet.write_text("[train]\ntensorboard = false\nplot = false\n")
    args = ["finetune", "--config", quiet, "--task", "classification", "--model", final, "--train", train,
            "--output", tuned, "--epochs", "1", "--micro-batch-size", "4", "--max-seq-length", "32", "--no-progress"]  # fmt: skip
    code = main([str(a) for a in args])
    assert code == 0, capsys.readouterr().err
    assert json.loads((tuned / "config.json").read_text())["architectures"] == ["ToyForSequenceClassification"]

    # embed with the pre-trained encoder, classify with the fine-tuned head
    from bertkit.inference import load

    loaded = load(final)
    assert registry.role_of(loaded.model) == "BertForMaskedLM" and "attention" not in loaded.pipelines
    vectors = np.asarray(bertkit.embed(["good movie", "bad film"], model=str(final)))
    assert vectors.shape == (2, 16) and np.isfinite(vectors).all()

    # export to ONNX: the graph takes the record's inputs and gives the PyTorch logits
    from bertkit.export import export_onnx, input_names, verify_onnx
    from bertkit.weights import load_model

    classifier = load_model(tuned)
    assert isinstance(classifier, ToyForSequenceClassification) and input_names(classifier) == toy.onnx_inputs
    onnx = export_onnx(classifier, tmp_path / "toy.onnx")
    assert verify_onnx(classifier, onnx) < 1e-4

    # serve it, in-process
    from fastapi.testclient import TestClient

    from bertkit.serve import ServeLimits, create_app

    with TestClient(create_app(tuned, ServeLimits())) as client:
        response = client.post("/classify", json={"texts": ["good movie", "bad film"]})
        info = client.get("/info").json()
    assert response.status_code == 200, response.text
    assert [set(r["probabilities"]) for r in response.json()["results"]] == [{"positive", "negative"}] * 2
    assert "classify" in info["pipelines"]
