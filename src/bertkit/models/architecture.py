"""What the rest of bertkit knows of an architecture: one ``Architecture`` record, registered in
``bertkit.models.registry``. Training, export, loading, inference and the tasks ask the record (its classes
by role, its ONNX inputs, what it supports) and never test a model's type.

Roles are Hugging Face's BERT class names (``BertModel``, ``BertForMaskedLM``...): a task asks for the role
it fine-tunes, and each architecture names its own class for it (``ModernBertForTokenClassification`` for
``BertForTokenClassification``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from bertkit.errors import ConfigError

ROLES = (
    "BertModel",
    "BertForPreTraining",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertForQuestionAnswering",
)
"""Every role a class can play; the roles' names are BERT's Hugging Face classes."""
ONNX_OUTPUTS: dict[str, tuple[str, ...]] = {
    "BertModel": ("last_hidden_state", "pooler_output"),
    "BertForPreTraining": ("mlm_logits", "nsp_logits"),
    "BertForMaskedLM": ("logits",),
    "BertForSequenceClassification": ("logits",),
    "BertForTokenClassification": ("logits",),
    "BertForQuestionAnswering": ("start_logits", "end_logits"),
}
"""A graph's outputs by role, in order (those of the role's output class the model fills)."""


@dataclass(frozen=True)
class Architecture:
    """One architecture: its config, its classes by role, its checkpoint layout, its graph, what it supports."""

    name: str
    """``model_type`` in ``config.json`` (``bert``, ``modernbert``), and ``bertkit pretrain --architecture``."""
    title: str
    """How messages name it (``BERT``, ``ModernBERT``)."""
    config_class: Any
    """Its config dataclass: ``load(directory)``, ``preset(name)``, ``save(directory)``, and the fields the
    toolkit reads (``vocab_size``, ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``max_position_embeddings``,
    ``pad_token_id``, ``num_labels``, ``id2label``/``label2id``, ``problem_type``, ``architectures``,
    ``tie_word_embeddings``, and ``extra``: the other ``config.json`` keys, bertkit's task settings among them)."""
    base: type[nn.Module]
    """The class every model of the architecture derives from; each class loads and saves itself
    (``from_pretrained(path, ignore_mismatched_sizes=..., **config_overrides)``, ``save_pretrained(directory)``)
    and runs the attention it is asked for (``set_attention(name)``)."""
    classes: Mapping[str, type[nn.Module]]
    """Its class for each role it has (a role it lacks: ``class_for`` says so)."""
    encoder_attribute: str
    """Where a head keeps its encoder (``bert``, ``model``)."""
    load_state: Callable[..., Any]
    """``(model, state, *, source)``: copy a state dict under the checkpoint's names into a built model."""
    traceable: Callable[[nn.Module], nn.Module]
    """The model's inference forward as a module of ``onnx_inputs`` only, for the ONNX exporter."""
    onnx_inputs: tuple[str, ...] = ("input_ids", "token_type_ids", "attention_mask")
    """The inputs of its ONNX graph, in order; also what its tokenizer files declare it takes."""
    hf_names: Mapping[str, Any] | None = None
    """Its heads' tables of bertkit name -> Hugging Face name, where the two differ (None: the same names)."""
    tf_names: Any = None
    """Google TensorFlow name -> Hugging Face name, for an architecture Google released (None: no TF files)."""
    attention_implementations: tuple[str, ...] = ("sdpa", "eager")
    """The values its config's ``attn_implementation`` (``--attn-implementation``) takes."""
    tokenizers: tuple[str, ...] = ("wordpiece", "bpe", "unigram")
    """The tokenizer kinds it takes (every kind ``bertkit.tokenizer`` reads, unless limited)."""
    head_tensors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Tensors a checkpoint holds for a pipeline's head, where they differ from BERT's
    (``bertkit.inference.loading.PIPELINES``)."""
    nsp: bool = False
    """Whether it has a next-sentence head (``BertForPreTraining``)."""
    pre_ln: bool = False
    """Whether its config can put LayerNorm before each block (``layer_norm_position``)."""
    token_types: bool = True
    """Whether it takes ``token_type_ids`` (a segment embedding)."""
    attention_probabilities: bool = True
    """Whether it can return its attention probabilities (the ``attention`` pipeline)."""
    int8: bool = False
    """Whether ``bertkit.quantize`` quantizes it (torchao int8) and its checkpoints can hold int8 weights."""
    int8_reduce_range: bool = False
    """Whether its ONNX int8 weights keep to 7 bits (onnxruntime's u8 x s8 kernels saturate without VNNI)."""
    flops_per_token: Callable[[Any, int, float], float] | None = None
    """``(config, seq_len, masked per sequence)`` -> training FLOPs per token; None: BERT's count."""
    pretraining_config: Callable[[Any, Mapping[str, Any], bool], Any] | None = None
    """``(config, a prepared dataset's tokenizer ids and size, whether the model is fresh)`` -> the config to
    pre-train (the tokenizer's size and ids); None: the config as it is."""
    with_dropout: Callable[[Any, float], Any] | None = None
    """``(config, p)`` -> the config with every dropout at ``p``."""
    presets: tuple[str, ...] = ()
    """Size names its ``config_class.preset`` takes."""

    def class_for(self, head: str | type | None, architectures: list[str] | None = None) -> type[nn.Module]:
        """Its class for ``head`` (a role, its own class name, or a class: taken as it is); None: the first of
        ``architectures`` (``config.json``) that it knows, else its encoder. Pre-training without NSP: masked LM."""
        if isinstance(head, type):
            return head
        own = {cls.__name__: cls for cls in self.classes.values()}
        if head is None:
            known = [n for n in architectures or [] if n in own or n in self.classes]
            head = known[0] if known else "BertModel"
        if head in own:
            return own[head]
        if head == "BertForPreTraining" and head not in self.classes:
            head = "BertForMaskedLM"  # an architecture without NSP pre-trains with masked LM only
        if head not in self.classes:
            raise ConfigError(
                f"unknown {self.title} class {head!r}; choose one of {', '.join(c.__name__ for c in own.values())}"
            )
        return self.classes[head]

    def role_of(self, model: nn.Module) -> str | None:
        """The role of ``model``'s class (or of the nearest of its classes it derives from)."""
        for cls in type(model).__mro__:
            for role, own in self.classes.items():
                if own is cls:
                    return role
        return None

    def encoder_of(self, model: nn.Module) -> nn.Module:
        """The encoder inside a head (the model itself for the encoder)."""
        if isinstance(model, self.classes["BertModel"]):
            return model
        encoder = getattr(model, self.encoder_attribute, None)
        if not isinstance(encoder, nn.Module):
            raise TypeError(f"{type(model).__name__} has no {self.title} encoder")
        return encoder

    def onnx_outputs(self, model: nn.Module) -> tuple[str, ...]:
        """The outputs of ``model``'s graph: its role's, without a pooler output it was built without."""
        role = self.role_of(model)
        names = ONNX_OUTPUTS.get(role or "", ())
        if "pooler_output" in names and getattr(model, "pooler", None) is None:
            names = tuple(n for n in names if n != "pooler_output")
        return names
