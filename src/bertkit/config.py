"""BertConfig: the shape of a BERT network, readable from and writable to a Hugging Face ``config.json``."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.formats import read_text
from bertkit.io import atomic_write_text

CONFIG_NAME = "config.json"

# Google's 2020 compact models and the two paper sizes: (layers, hidden, heads). Intermediate is 4H.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

_ACTIVATIONS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu"}
LAYER_NORM_POSITIONS = ("post", "pre")
"""``BertConfig.layer_norm_position``: BERT's post-LN layers, or pre-LN ones."""
PRE_LN_MODEL_TYPE = "roberta-prelayernorm"
"""``model_type`` of a pre-LN model's ``config.json``: ``transformers``' RoBERTa-PreLayerNorm has its layout."""
BERT_ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
"""The attention paths of a BERT model (``BertConfig.attn_implementation``)."""


@dataclass
class BertConfig:
    """Hyperparameters of a BERT encoder and its heads. Field names match Hugging Face's ``BertConfig``."""

    vocab_size: int = 30522
    """Number of WordPiece ids; rows of the word embedding matrix (and of the masked-LM decoder)."""
    hidden_size: int = 768
    """Width H of every token representation."""
    num_hidden_layers: int = 12
    """Number of Transformer encoder layers L."""
    num_attention_heads: int = 12
    """Heads A per attention layer; ``hidden_size`` must be divisible by it."""
    intermediate_size: int = 3072
    """Inner width of the feed-forward block (4H in every released BERT)."""
    hidden_act: str = "gelu"
    """Feed-forward activation. ``gelu`` is the exact erf GELU used by BERT and Hugging Face."""
    hidden_dropout_prob: float = 0.1
    """Dropout after embeddings, attention output and feed-forward output."""
    attention_probs_dropout_prob: float = 0.1
    """Dropout on the attention probabilities."""
    max_position_embeddings: int = 512
    """Rows of the learned position embedding: the longest sequence the model accepts."""
    type_vocab_size: int = 2
    """Number of segment (token type) ids: 2 for sentence A / sentence B."""
    initializer_range: float = 0.02
    """Standard deviation of the normal initialisation of weights."""
    layer_norm_eps: float = 1e-12
    """LayerNorm epsilon everywhere (embeddings, layers, MLM transform), as TF's default in BERT."""
    pad_token_id: int = 0
    """Id of ``[PAD]``; its word-embedding row is zeroed at initialisation."""
    num_labels: int = 2
    """Outputs of a sequence/token classification head; 1 means regression (MSE)."""
    id2label: dict[int, str] | None = None
    """Label names of a fine-tuned head, index -> name. Saved in ``config.json``."""
    classifier_dropout: float | None = None
    """Dropout before a task head; ``None`` means ``hidden_dropout_prob``."""
    problem_type: str | None = None
    """``regression``, ``single_label_classification`` or ``multi_label_classification`` (HF names)."""
    architectures: list[str] | None = None
    """Head classes the weights were saved from, as in Hugging Face's ``config.json``."""
    attn_implementation: str | None = None
    """``sdpa`` (default when None: ``scaled_dot_product_attention``) or ``eager`` (by hand; same outputs)."""
    layer_norm_position: str = "post"
    """Where each layer's LayerNorms sit. ``post`` (BERT): after each residual add, ``LN(x + f(x))``. ``pre``
    (RoBERTa-PreLayerNorm's layout): before attention and before the feed-forward block, the residual around
    them, ``x + f(LN(x))``, and one final LayerNorm on the last layer's output; the embedding LayerNorm is kept in
    both. A ``pre`` model's ``config.json`` is ``transformers``' ``roberta-prelayernorm`` (see ``to_dict``)."""
    tie_word_embeddings: bool = True
    """Whether the masked-LM decoder is the word embedding matrix (BERT's tied output embedding) or a matrix of
    its own (``False``: saved as ``cls.predictions.decoder.weight``; ``transformers`` reads the same key of
    ``config.json``). Only a masked-LM head has a decoder: encoders and task heads are the same either way."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Keys of a loaded ``config.json`` that bertkit does not use; written back unchanged."""

    def __post_init__(self) -> None:
        if self.layer_norm_position not in LAYER_NORM_POSITIONS:
            raise ConfigError(
                f"layer_norm_position must be {' or '.join(map(repr, LAYER_NORM_POSITIONS))}, "
                f"got {self.layer_norm_position!r}"
            )
        for name in (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_labels",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads})"
            )
        if self.hidden_act not in _ACTIVATIONS:
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not supported; use one of {sorted(_ACTIVATIONS)}")
        if not isinstance(self.tie_word_embeddings, bool):
            raise ConfigError(f"tie_word_embeddings must be true or false, got {self.tie_word_embeddings!r}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")
        if self.attn_implementation not in (None, *BERT_ATTN_IMPLEMENTATIONS):
            raise ConfigError(f"attn_implementation must be 'sdpa' or 'eager', got {self.attn_implementation!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        if self.classifier_dropout is not None and not (
            isinstance(self.classifier_dropout, (int, float)) and 0.0 <= self.classifier_dropout < 1.0
        ):
            raise ConfigError(f"classifier_dropout must be None or in [0, 1), got {self.classifier_dropout!r}")
        if self.id2label is not None:
            try:
                self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            except (AttributeError, TypeError, ValueError):
                raise ConfigError(f"id2label must map label ids to names, got {self.id2label!r:.80}") from None
            self.num_labels = len(self.id2label)

    # ----------------------------------------------------------------------------------- derived values
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def label2id(self) -> dict[str, int] | None:
        return None if self.id2label is None else {v: k for k, v in self.id2label.items()}

    @property
    def pre_layer_norm(self) -> bool:
        """Whether the layers are pre-LN (``layer_norm_position == "pre"``)."""
        return self.layer_norm_position == "pre"

    @property
    def position_offset(self) -> int:
        """Rows in front of a pre-LN model's position table in ``config.json``'s layout: RoBERTa numbers the
        positions from ``pad_token_id + 1`` (0 for a post-LN model, whose layout is BERT's)."""
        return self.pad_token_id + 1 if self.pre_layer_norm else 0

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A named size (tiny, mini, small, medium, base, large) with intermediate size 4H."""
        if name not in PRESETS:
            raise ConfigError(f"unknown model preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values: dict[str, Any] = dict(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=4 * hidden
        )
        values.update(overrides)
        return cls(**values)

    def num_parameters(self, with_pooler: bool = True) -> int:
        """Parameters of the encoder (embeddings, layers, pooler), without any head."""
        h, i = self.hidden_size, self.intermediate_size
        emb = (self.vocab_size + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
        final_norm = 2 * h if self.pre_layer_norm else 0
        return emb + self.num_hidden_layers * layer + final_norm + (h * h + h if with_pooler else 0)

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token (forward + backward = 3x forward) of the encoder's matmuls.

        Counts the dense layers (2 FLOPs per multiply-add) and the two attention matmuls (QK^T and PV),
        which grow with ``seq_len``; embeddings, norms and softmax are negligible and left out.
        """
        h, i, n = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        dense = 2 * n * (4 * h * h + 2 * h * i)
        attention = 2 * n * 2 * seq_len * h
        return 3 * (dense + attention)

    # ---------------------------------------------------------------------------- Hugging Face JSON
    def to_dict(self) -> dict[str, Any]:
        """``config.json``'s object. A post-LN model's is Hugging Face's ``BertConfig``; a pre-LN model's is
        ``RobertaPreLayerNormConfig`` (``model_type: roberta-prelayernorm``, the position table ``position_offset``
        rows longer, ``architectures`` named as in ``transformers``), which ``from_dict`` reads back."""
        skip = {"extra", "layer_norm_position"}
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}
        out: dict[str, Any] = dict(self.extra)
        out.update({k: v for k, v in data.items() if v is not None})
        if self.tie_word_embeddings:  # the default: a tied model's file reads as it always did
            del out["tie_word_embeddings"]
        out["model_type"] = "bert"
        if self.pre_layer_norm:
            out["model_type"] = PRE_LN_MODEL_TYPE
            out["max_position_embeddings"] = self.max_position_embeddings + self.position_offset
            if self.architectures is not None:
                out["architectures"] = [PRE_LN_ARCHITECTURES.get(name, name) for name in self.architectures]
        if self.id2label is not None:
            out["id2label"] = {str(k): v for k, v in self.id2label.items()}
            out["label2id"] = self.label2id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BertConfig:
        data = dict(data)
        model_type = data.get("model_type", "bert")
        if model_type not in ("bert", PRE_LN_MODEL_TYPE):
            raise ConfigError(f"config has model_type {model_type!r}; bertkit reads BERT checkpoints only")
        if model_type == PRE_LN_MODEL_TYPE:
            data = _from_pre_ln_dict(data)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: data.pop(k) for k in list(data) if k in known}
        data.pop("label2id", None)
        # HF writes num_labels implicitly through id2label; older files carry neither.
        try:
            return cls(**values, extra=data)
        except TypeError as exc:  # a field with the wrong JSON type
            raise ConfigError(f"invalid config: {exc}") from None

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> BertConfig:
        """Read ``config.json`` from a file or a model directory (also accepts Google's ``bert_config.json``)."""
        return cls.from_dict(read_config_dict(path))

    @classmethod
    def resolve(cls, spec: str | os.PathLike) -> BertConfig:
        """A preset name, a ``config.json`` path or a model directory."""
        if isinstance(spec, str) and spec in PRESETS:
            return cls.preset(spec)
        return cls.load(spec)


PRE_LN_ARCHITECTURES: dict[str, str] = {
    "BertModel": "RobertaPreLayerNormModel",
    "BertForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "BertForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
    "BertForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "BertForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
}
"""bertkit's class -> ``transformers``' class of the same role for a pre-LN model. ``BertForPreTraining`` has
none (RoBERTa has no next-sentence head); its name stays, and ``transformers`` reads its masked-LM part."""


def _from_pre_ln_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A ``roberta-prelayernorm`` ``config.json`` object as ``BertConfig``'s fields: pre-LN, the position table
    without the rows RoBERTa keeps in front of it, bertkit's class names."""
    back = {theirs: ours for ours, theirs in PRE_LN_ARCHITECTURES.items()}
    del data["model_type"]
    data["layer_norm_position"] = "pre"
    pad = data.get("pad_token_id", 1)
    if isinstance(data.get("max_position_embeddings"), int) and isinstance(pad, int):
        data["max_position_embeddings"] -= pad + 1
    if isinstance(data.get("architectures"), list):
        data["architectures"] = [back.get(name, name) for name in data["architectures"]]
    return data


def read_config_dict(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object of ``config.json`` in a model directory (or Google's ``bert_config.json``), or of a file."""
    path = Path(path)
    if path.is_dir():
        candidates = [path / CONFIG_NAME, path / "bert_config.json"]
        found = next((c for c in candidates if c.is_file()), None)
        if found is None:
            raise ConfigError(f"{path} has no config.json; is it a model directory?")
        path = found
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = json.loads(read_text(path, ConfigError))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return data


def model_type_of(path: str | os.PathLike) -> str:
    """The architecture a model directory (or ``config.json``) describes: its ``model_type``, ``bert`` when absent
    (Google's ``bert_config.json``). ``modernbert`` is built by ``bertkit.models.modernbert``."""
    return str(read_config_dict(path).get("model_type", "bert"))


# ModernBERT sizes: (layers, hidden, heads, intermediate). base and large are answerdotai's ModernBERT-base/-large;
# the smaller ones keep ModernBERT's deep-and-narrow shape (intermediate 1.5H), each with a global layer every three.
MODERNBERT_PRESETS: dict[str, tuple[int, int, int, int]] = {
    "tiny": (3, 128, 2, 192),
    "mini": (6, 256, 4, 384),
    "small": (6, 512, 8, 768),
    "medium": (12, 512, 8, 768),
    "base": (22, 768, 12, 1152),
    "large": (28, 1024, 16, 2624),
}

_MODERNBERT_ACTIVATIONS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu"}


@dataclass
class ModernBertConfig:
    """Hyperparameters of a ModernBERT encoder and its heads. Field names and defaults match ``transformers``'
    ``ModernBertConfig`` (ModernBERT-base), so ``config.json`` reads and writes both ways."""

    vocab_size: int = 50368
    """Rows of the token embedding (tied to the masked-LM decoder)."""
    hidden_size: int = 768
    """Width H of every token representation."""
    intermediate_size: int = 1152
    """Width of the GeGLU feed-forward; its input projection ``Wi`` has twice as many outputs (value and gate)."""
    num_hidden_layers: int = 22
    """Number of pre-norm layers."""
    num_attention_heads: int = 12
    """Heads per attention layer; ``hidden_size`` must be divisible by it."""
    hidden_activation: str = "gelu"
    """Activation of the GeGLU feed-forward (``gelu`` is the exact erf GELU)."""
    max_position_embeddings: int = 8192
    """Longest input the model is meant for (rotary positions have no table; this bounds inputs)."""
    initializer_range: float = 0.02
    """Standard deviation of the truncated-normal initialisation."""
    initializer_cutoff_factor: float = 2.0
    """The truncated normal is cut at this many standard deviations."""
    norm_eps: float = 1e-5
    """LayerNorm epsilon."""
    norm_bias: bool = False
    """Whether LayerNorms have a bias."""
    pad_token_id: int = 50283
    """Id of the padding token."""
    eos_token_id: int = 50282
    bos_token_id: int = 50281
    cls_token_id: int = 50281
    sep_token_id: int = 50282
    global_rope_theta: float = 160000.0
    """Rotary base of the global-attention layers."""
    attention_bias: bool = False
    """Whether ``Wqkv`` and the attention's ``Wo`` have biases."""
    attention_dropout: float = 0.0
    """Dropout on the attention probabilities and the attention output."""
    global_attn_every_n_layers: int = 3
    """Layer i attends globally when ``i % n == 0``, locally (sliding window) otherwise."""
    local_attention: int = 128
    """Sliding window of the local layers: a token sees ``local_attention // 2`` tokens on each side."""
    local_rope_theta: float | None = 10000.0
    """Rotary base of the local layers; None uses ``global_rope_theta``."""
    embedding_dropout: float = 0.0
    mlp_bias: bool = False
    """Whether the feed-forward's ``Wi`` and ``Wo`` have biases."""
    mlp_dropout: float = 0.0
    decoder_bias: bool = True
    """Whether the masked-LM decoder has an output bias."""
    classifier_pooling: str = "cls"
    """Sentence vector of the sequence-classification head: ``cls`` (first token) or ``mean`` (real tokens)."""
    classifier_dropout: float = 0.0
    classifier_bias: bool = False
    """Whether the prediction head's dense layer has a bias."""
    classifier_activation: str = "gelu"
    """Activation of the prediction head (before the classifier or decoder)."""
    sparse_prediction: bool = False
    """transformers' option to return masked-LM logits at labelled positions only (bertkit always does, given labels)."""
    sparse_pred_ignore_index: int = -100
    num_labels: int = 2
    """Outputs of a classification head; 1 means regression (MSE)."""
    id2label: dict[int, str] | None = None
    """Label names of a fine-tuned head, index -> name."""
    problem_type: str | None = None
    """``regression``, ``single_label_classification`` or ``multi_label_classification``."""
    architectures: list[str] | None = None
    """Head classes the weights were saved from."""
    tie_word_embeddings: bool = True
    """The masked-LM decoder shares the token embedding matrix."""
    attn_implementation: str | None = None
    """bertkit's attention path (``bertkit.models.modernbert.ATTN_IMPLEMENTATIONS``); None picks per device."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Keys of a loaded ``config.json`` that bertkit does not use; written back unchanged."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "global_attn_every_n_layers", "local_attention", "num_labels"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads or (self.hidden_size // self.num_attention_heads) % 2:
            raise ConfigError(
                f"hidden_size ({self.hidden_size}) must be num_attention_heads ({self.num_attention_heads}) times "
                f"an even head size (rotary positions rotate pairs)"
            )
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in _MODERNBERT_ACTIVATIONS:
                raise ConfigError(
                    f"{name} {getattr(self, name)!r} is not supported; use one of {sorted(_MODERNBERT_ACTIVATIONS)}"
                )
        if self.classifier_pooling not in ("cls", "mean"):
            raise ConfigError(f"classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ConfigError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")
        if self.extra.get("rope_scaling"):
            raise ConfigError("rope_scaling is not supported for ModernBERT; bertkit implements the default rotary")
        if self.id2label is not None:
            try:
                self.id2label = {int(k): str(v) for k, v in self.id2label.items()}
            except (AttributeError, TypeError, ValueError):
                raise ConfigError(f"id2label must map label ids to names, got {self.id2label!r:.80}") from None
            self.num_labels = len(self.id2label)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def label2id(self) -> dict[str, int] | None:
        return None if self.id2label is None else {v: k for k, v in self.id2label.items()}

    @property
    def hidden_dropout_prob(self) -> float:
        """The MLP dropout, under BERT's name (for code that reads either config)."""
        return self.mlp_dropout

    @property
    def type_vocab_size(self) -> int:
        """ModernBERT has no segment embedding; inputs carry one segment."""
        return 1

    def is_global(self, layer: int) -> bool:
        """Whether layer ``layer`` attends over the whole sequence (else within the sliding window)."""
        return layer % self.global_attn_every_n_layers == 0

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModernBertConfig:
        """A named size (``MODERNBERT_PRESETS``: tiny ... base, large)."""
        if name not in MODERNBERT_PRESETS:
            raise ConfigError(f"unknown ModernBERT preset {name!r}; choose one of {', '.join(MODERNBERT_PRESETS)}")
        layers, hidden, heads, inner = MODERNBERT_PRESETS[name]
        values: dict[str, Any] = dict(
            num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads, intermediate_size=inner
        )
        values.update(overrides)
        return cls(**values)

    def num_parameters(self) -> int:
        """Parameters of the encoder (embedding, layers, final norm), without any head."""
        h, i, n = self.hidden_size, self.intermediate_size, self.num_hidden_layers
        norm = h * (2 if self.norm_bias else 1)
        attn = 4 * h * h + (4 * h if self.attention_bias else 0)
        mlp = 3 * h * i + ((2 * i + h) if self.mlp_bias else 0)
        # embedding + its norm, n layers (layer 0 has no attention norm), the final norm
        return self.vocab_size * h + norm + n * (attn + mlp + 2 * norm) - norm + norm

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token (3x forward) of the encoder's matmuls, local layers at their window."""
        h, i = self.hidden_size, self.intermediate_size
        dense = 2 * self.num_hidden_layers * (4 * h * h + 3 * h * i)
        spans = [
            seq_len if self.is_global(n) else min(seq_len, self.local_attention + 1)
            for n in range(self.num_hidden_layers)
        ]
        return 3 * (dense + sum(2 * 2 * s * h for s in spans))

    def to_dict(self) -> dict[str, Any]:
        data = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("extra", "attn_implementation")
        }
        out: dict[str, Any] = dict(self.extra)
        out.update({k: v for k, v in data.items() if v is not None or k == "local_rope_theta"})
        out["model_type"] = "modernbert"
        if self.id2label is not None:
            out["id2label"] = {str(k): v for k, v in self.id2label.items()}
            out["label2id"] = self.label2id
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModernBertConfig:
        data = dict(data)
        model_type = data.pop("model_type", "modernbert")
        if model_type != "modernbert":
            raise ConfigError(f"config has model_type {model_type!r}, not 'modernbert'")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: data.pop(k) for k in list(data) if k in known}
        data.pop("label2id", None)
        try:
            return cls(**values, extra=data)
        except TypeError as exc:
            raise ConfigError(f"invalid config: {exc}") from None

    def save(self, directory: str | os.PathLike) -> Path:
        path = Path(directory) / CONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> ModernBertConfig:
        """Read ``config.json`` from a file or a model directory."""
        return cls.from_dict(read_config_dict(path))


AnyConfig = BertConfig | ModernBertConfig
"""The config of any architecture bertkit builds."""


def load_config(path: str | os.PathLike) -> AnyConfig:
    """The config of a model directory (or ``config.json``), of the class its ``model_type`` names."""
    data = read_config_dict(path)
    if data.get("model_type") == "modernbert":
        return ModernBertConfig.from_dict(data)
    return BertConfig.from_dict(data)
