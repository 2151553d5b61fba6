"""The inference loader: a model directory becomes a ``Loaded`` model with its tokenizer, its task and the settings
it was fine-tuned with, and knows which pipelines it can run.

A fine-tuned model's ``config.json`` holds what ``bertkit finetune`` used (``bertkit_finetune``: the task, its
options such as ``doc_stride`` or ``long_text``, and ``max_seq_length``) besides the label names
(``id2label``). Every way of running the model (the pipelines, ``bertkit predict``/``evaluate``, the HTTP
service) reads them from here, so the same text gets the same prediction whichever way it comes in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from bertkit.backends import choose_backend, use_backend
from bertkit.checkpoint_files.reading import tensor_names
from bertkit.compiling import compile_model
from bertkit.config import BertConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.hub import resolve_model
from bertkit.inference.settings import Settings, input_limit, task_of_head
from bertkit.models import registry
from bertkit.notices import notice
from bertkit.quantize import is_quantized
from bertkit.sentence_config import SentenceConfig, read_sentence_config
from bertkit.tasks import Task
from bertkit.tasks.family import Family
from bertkit.tasks.registry import head_family, named
from bertkit.tokenizer import Tokenizer
from bertkit.weights import load_model

PIPELINES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    # pipeline: (model classes that have the head, Hugging Face tensor names that must be in the checkpoint,
    #            what the head is called in messages)
    "fill_mask": (
        ("BertForMaskedLM", "BertForPreTraining"),
        ("cls.predictions.transform.dense.weight", "cls.predictions.bias"),
        "a masked-LM head",
    ),
    "next_sentence": (("BertForPreTraining",), ("cls.seq_relationship.weight",), "a next-sentence head"),
    "classify": (("BertForSequenceClassification",), ("classifier.weight",), "a sequence-classification head"),
    "tag": (("BertForTokenClassification",), ("classifier.weight",), "a token-classification head"),
    "answer": (("BertForQuestionAnswering",), ("qa_outputs.weight",), "a question-answering head"),
}
"""What each head pipeline needs; ``embed`` and ``attention`` (``attentions()``) work with any model."""


PRE_LN_HEAD_TENSORS = {
    "fill_mask": ("lm_head.dense.weight", "lm_head.bias"),
    "classify": ("classifier.out_proj.weight",),
}
"""The same for a pre-LN BERT, saved in RoBERTa-PreLayerNorm's layout (``bertkit.checkpoint_files.hf_names``)."""


def head_name(model: torch.nn.Module) -> str | None:
    """The Hugging Face class name of a model (``BertForSequenceClassification``...); for a subclass, that of
    the nearest bertkit class it derives from. A ModernBERT class answers with the BERT class of the same role
    (``ModernBertForTokenClassification`` -> ``BertForTokenClassification``): the head, tasks and pipelines
    are the same."""
    return registry.role_of(model)


def restore_task(model: torch.nn.Module, settings: Settings) -> Task | None:
    """The task of the model's head, configured with ``settings`` and the label names of its config; ``None``
    for a model without a task head (an encoder, a pre-training model)."""
    return task_of_head(head_name(model), type(model).__name__, cast(BertConfig, model.config), settings)


# ------------------------------------------------------------------------------------------ the loaded model
@dataclass
class Loaded:
    """A model and the tokenizer saved with it, ready for inference (eval mode), with its task and settings."""

    model: torch.nn.Module
    tokenizer: Tokenizer
    checkpoint_names: frozenset[str] | None = None
    """Tensor names (Hugging Face's) in the checkpoint the model came from; None when unknown (the model was
    built in memory), in which case every head of the model's class counts as trained."""
    settings: Settings | None = None
    """How the model is run; by default what its config saved (nothing, for a model that was not fine-tuned)."""
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    directory: Path | None = None
    """The model directory it was loaded from (None when built in memory): where its sentence-transformers
    files are read."""

    def __post_init__(self) -> None:
        if self.settings is None:
            self.settings = Settings.saved(self.config)

    @property
    def config(self) -> BertConfig:
        return cast(BertConfig, self.model.config)

    @property
    def max_positions(self) -> int:
        """The longest input the model can take at all (its position embeddings)."""
        return self.config.max_position_embeddings

    @property
    def max_length(self) -> int:
        """The length inputs are cut (or windowed) to: the ``max_seq_length`` the model was fine-tuned with,
        else its head's default (QA: 384), else the model's full length; never more than its positions."""
        assert self.settings is not None
        return input_limit(head_name(self.model), self.settings, self.max_positions)

    @property
    def sentence_config(self) -> SentenceConfig | None:
        """The checkpoint's sentence-transformers settings (pooling, normalisation, length: ``embed``'s
        defaults); None for a model without ``modules.json``."""
        if "sentence" not in self.cache:
            self.cache["sentence"] = read_sentence_config(self.directory) if self.directory else None
        config: SentenceConfig | None = self.cache["sentence"]
        return config

    @property
    def task(self) -> Task:
        """The task of the model's head with its label names and saved options (restored on first use, so
        that a model whose config lacks labels still embeds); a ``BertkitError`` for a model without one."""
        if "task" not in self.cache:
            assert self.settings is not None
            self.cache["task"] = restore_task(self.model, self.settings)
        if self.cache["task"] is None:
            raise BertkitError(
                f"the model is a {type(self.model).__name__}, which has no task head; "
                f"fine-tune it first with `bertkit finetune`"
            )
        task: Task = self.cache["task"]
        return task

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def encoder(self) -> torch.nn.Module:
        """The ``BertModel`` inside the head (or the model itself; a ModernBERT head's ``ModernBertModel``)."""
        return registry.encoder_of(self.model)

    def own_family(self) -> Family | None:
        """The task family of the model: that of the task it was fine-tuned (or is run) as, else its head's."""
        assert self.settings is not None
        return named(self.settings.task) or head_family(head_name(self.model))

    def supports(self, pipeline: str) -> bool:
        """Whether the model has a trained head for ``pipeline`` (``embed`` and ``attention``: always; a family's
        own pipeline, ``Family.run``: a model of that family)."""
        architecture = registry.require(self.model)
        if pipeline == "attention" and not architecture.attention_probabilities:
            return False  # ModernBERT never forms attention probabilities
        if pipeline in ("embed", "attention"):
            return True
        if pipeline not in PIPELINES:
            own = self.own_family()
            return own is not None and own.run is not None and own.pipeline == pipeline
        classes, names, _ = PIPELINES[pipeline]
        if head_name(self.model) not in classes:
            return False
        if pipeline in architecture.head_tensors:
            names = architecture.head_tensors[pipeline]
        elif getattr(self.model.config, "pre_layer_norm", False):
            names = PRE_LN_HEAD_TENSORS.get(pipeline, names)
        return self.checkpoint_names is None or all(name in self.checkpoint_names for name in names)

    @property
    def pipelines(self) -> list[str]:
        """Pipelines this model can run, e.g. ``["fill_mask", "next_sentence", "embed", "attention"]``."""
        own = self.own_family()
        theirs = [own.pipeline] if own is not None and own.run is not None and own.pipeline else []
        return [p for p in dict.fromkeys((*PIPELINES, "embed", "attention", *theirs)) if self.supports(p)]

    def require(self, pipeline: str) -> None:
        """Raise a one-line ``BertkitError`` when the model cannot run ``pipeline``."""
        if self.supports(pipeline):
            return
        kind = type(self.model).__name__
        if pipeline not in PIPELINES:
            reason = f"it is a {kind}, and its task family has no pipeline of that name"
        elif self.checkpoint_names is not None and kind in PIPELINES[pipeline][0]:
            reason = f"its checkpoint has no trained weights for {PIPELINES[pipeline][2]}"
        else:
            classes, _, what = PIPELINES[pipeline]
            reason = f"it is a {kind}; {pipeline.replace('_', '-')} needs {what} ({' or '.join(classes)})"
        usable = ", ".join(p.replace("_", "-") for p in self.pipelines)
        raise BertkitError(f"this model cannot {pipeline.replace('_', '-')}: {reason}. It supports: {usable}")


def checkpoint_tensor_names(path: str | os.PathLike) -> frozenset[str]:
    """Names of the tensors in a model directory's weights (read from the file header, not the data)."""
    # Encoder names may carry the head's ``bert.`` prefix; head names never do.
    return frozenset(n.removeprefix("bert.") for n in tensor_names(path))


def load(
    path: str | os.PathLike,
    head: str | None = None,
    device: str | torch.device = "cpu",
    *,
    task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    max_seq_length: int | None = None,
    quantize: str | None = None,
    compile: bool | None = None,
    backend: str | None = None,
) -> Loaded:
    """Load a model directory (Hugging Face layout) with its tokenizer and saved settings, in eval mode.

    ``head`` names the class to build (e.g. ``"BertModel"``, ``"BertForMaskedLM"``); by default the one
    recorded in ``config.json``. ``task``, ``task_options`` and ``max_seq_length`` override what the model
    was fine-tuned with. ``path`` may also be a Hugging Face hub id (``org/name@revision``, see ``bertkit.hub``).

    ``quantize="int8"``: the encoder's linear layers in int8 (``bertkit.quantize``; a checkpoint saved int8
    is int8 anyway). ``compile``: ``torch.compile`` the model (``bertkit.compiling``); ``None`` compiles an
    int8 model only, where it pays (torchao's int8 kernels are slower than float32 uncompiled).

    ``backend``: ``torch``, ``onnxruntime`` or ``openvino`` (the forward runs an ONNX export, int8 with
    ``quantize``, made and cached on first use) or ``auto``/``None``: torch, but int8 on a CPU where torchao's int8 is slow runs
    through ONNX Runtime, or in float32 (``bertkit.backends.choose_backend``; a one-line notice says which).
    """
    path = resolve_model(path)
    choice = choose_backend(backend, quantize, device)
    if choice.note:
        notice(choice.note)
    onnx = choice.backend != "torch"
    if onnx and compile:
        raise ConfigError(f"--compile is for --backend torch; --backend {choice.backend} optimises the graph itself")
    model = load_model(path, head=head, quantize=None if onnx else choice.quantize).to(device).eval()
    if onnx:
        if is_quantized(model):
            raise ConfigError(f"{path} holds torchao int8 weights, which run on --backend torch only")
        use_backend(model, choice.backend, choice.quantize)
    elif compile or (compile is None and is_quantized(model)):
        compile_model(model, frozen=True)
    tokenizer = Tokenizer.from_pretrained(path)
    config = cast(BertConfig, model.config)
    if tokenizer.vocab_size > config.vocab_size:
        raise BertkitError(
            f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
            f"{config.vocab_size} embeddings; the tokenizer files belong to another model"
        )
    settings = Settings.saved(config).override(task=task, task_options=task_options, max_seq_length=max_seq_length)
    return Loaded(model, tokenizer, checkpoint_tensor_names(path), settings, directory=path if path.is_dir() else None)
