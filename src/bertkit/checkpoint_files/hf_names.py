"""Hugging Face names: the explicit table between bertkit's parameter names and Hugging Face's.

bertkit's names are shorter, and Q/K/V are one fused projection here, so conversion is this table plus one
transform (split/concatenate Q, K, V on dim 0). The table knows the model classes by name only (as
``config.json``'s ``architectures`` does), so it sits below the model, which uses it to load and save itself.

A pre-LN model (``BertConfig.layer_norm_position == "pre"``) is written as ``transformers``' RoBERTa-PreLayerNorm,
which has its layout: its own names (``PRE_LN_*``), the prefix ``roberta_prelayernorm.``, and a second transform,
the position table behind ``position_offset`` rows (RoBERTa numbers positions from ``pad_token_id + 1``).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from bertkit.config import BertConfig

# (bertkit name, Hugging Face name), relative to BertModel. "{i}" is the layer index.
EMBEDDING_NAMES: list[tuple[str, str]] = [
    ("embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"),
    ("embeddings.position_embeddings.weight", "embeddings.position_embeddings.weight"),
    ("embeddings.token_type_embeddings.weight", "embeddings.token_type_embeddings.weight"),
    ("embeddings.layer_norm.weight", "embeddings.LayerNorm.weight"),
    ("embeddings.layer_norm.bias", "embeddings.LayerNorm.bias"),
]
LAYER_NAMES: list[tuple[str, str]] = [
    ("encoder.layers.{i}.attention.out.weight", "encoder.layer.{i}.attention.output.dense.weight"),
    ("encoder.layers.{i}.attention.out.bias", "encoder.layer.{i}.attention.output.dense.bias"),
    ("encoder.layers.{i}.attention_norm.weight", "encoder.layer.{i}.attention.output.LayerNorm.weight"),
    ("encoder.layers.{i}.attention_norm.bias", "encoder.layer.{i}.attention.output.LayerNorm.bias"),
    ("encoder.layers.{i}.ffn_in.weight", "encoder.layer.{i}.intermediate.dense.weight"),
    ("encoder.layers.{i}.ffn_in.bias", "encoder.layer.{i}.intermediate.dense.bias"),
    ("encoder.layers.{i}.ffn_out.weight", "encoder.layer.{i}.output.dense.weight"),
    ("encoder.layers.{i}.ffn_out.bias", "encoder.layer.{i}.output.dense.bias"),
    ("encoder.layers.{i}.ffn_norm.weight", "encoder.layer.{i}.output.LayerNorm.weight"),
    ("encoder.layers.{i}.ffn_norm.bias", "encoder.layer.{i}.output.LayerNorm.bias"),
]
# The one transform: bertkit's fused projection is Hugging Face's query, key and value stacked on dim 0.
FUSED_QKV_NAMES: list[tuple[str, tuple[str, ...]]] = [
    (
        "encoder.layers.{i}.attention.qkv." + p,
        tuple(f"encoder.layer.{{i}}.attention.self.{part}.{p}" for part in ("query", "key", "value")),
    )
    for p in ("weight", "bias")
]
POOLER_NAMES: list[tuple[str, str]] = [
    ("pooler.dense.weight", "pooler.dense.weight"),
    ("pooler.dense.bias", "pooler.dense.bias"),
]
_MLM_NAMES: list[tuple[str, str]] = [
    ("mlm.dense.weight", "cls.predictions.transform.dense.weight"),
    ("mlm.dense.bias", "cls.predictions.transform.dense.bias"),
    ("mlm.layer_norm.weight", "cls.predictions.transform.LayerNorm.weight"),
    ("mlm.layer_norm.bias", "cls.predictions.transform.LayerNorm.bias"),
    # mlm.decoder.weight is the word embedding matrix (tied), which Hugging Face does not store either; an
    # untied model's is added by `_with_decoder`.
    ("mlm.decoder.bias", "cls.predictions.bias"),
]
_CLASSIFIER_NAMES: list[tuple[str, str]] = [
    ("classifier.weight", "classifier.weight"),
    ("classifier.bias", "classifier.bias"),
]
# Head parameters (names at the top of the head class; identical in both naming schemes' prefixes).
HEAD_NAMES: dict[str, list[tuple[str, str]]] = {
    "BertModel": [],
    "BertForPreTraining": [
        *_MLM_NAMES,
        ("nsp.weight", "cls.seq_relationship.weight"),
        ("nsp.bias", "cls.seq_relationship.bias"),
    ],
    "BertForMaskedLM": _MLM_NAMES,
    "BertForSequenceClassification": _CLASSIFIER_NAMES,
    "BertForTokenClassification": _CLASSIFIER_NAMES,
    "BertForQuestionAnswering": [("qa_outputs.weight", "qa_outputs.weight"), ("qa_outputs.bias", "qa_outputs.bias")],
}
POSITIONS = "embeddings.position_embeddings.weight"
"""The position table's name (the same in both layouts; a pre-LN model's has ``position_offset`` more rows)."""
# A pre-LN model's names where RoBERTa-PreLayerNorm's differ from BERT's (the rest are BERT's).
PRE_LN_PREFIX = "roberta_prelayernorm."
PRE_LN_LAYER_NAMES: dict[str, str] = {
    "encoder.layers.{i}.attention_norm.weight": "encoder.layer.{i}.attention.LayerNorm.weight",
    "encoder.layers.{i}.attention_norm.bias": "encoder.layer.{i}.attention.LayerNorm.bias",
    "encoder.layers.{i}.ffn_norm.weight": "encoder.layer.{i}.intermediate.LayerNorm.weight",
    "encoder.layers.{i}.ffn_norm.bias": "encoder.layer.{i}.intermediate.LayerNorm.bias",
}
PRE_LN_FINAL_NAMES: list[tuple[str, str]] = [
    ("encoder.final_norm.weight", "LayerNorm.weight"),
    ("encoder.final_norm.bias", "LayerNorm.bias"),
]
_PRE_LN_MLM_NAMES: list[tuple[str, str]] = [
    ("mlm.dense.weight", "lm_head.dense.weight"),
    ("mlm.dense.bias", "lm_head.dense.bias"),
    ("mlm.layer_norm.weight", "lm_head.layer_norm.weight"),
    ("mlm.layer_norm.bias", "lm_head.layer_norm.bias"),
    ("mlm.decoder.bias", "lm_head.bias"),
]
PRE_LN_HEAD_NAMES: dict[str, list[tuple[str, str]]] = {
    **HEAD_NAMES,
    "BertForPreTraining": [*_PRE_LN_MLM_NAMES, *HEAD_NAMES["BertForPreTraining"][len(_MLM_NAMES) :]],
    "BertForMaskedLM": _PRE_LN_MLM_NAMES,
    # RoBERTa's classification head is BERT's pooler and classifier under other names: in evaluation
    # out_proj(tanh(dense(h[:, 0]))) is classifier(pooler(h)) (its extra dropout acts in training only).
    "BertForSequenceClassification": [
        ("bert.pooler.dense.weight", "classifier.dense.weight"),
        ("bert.pooler.dense.bias", "classifier.dense.bias"),
        ("classifier.weight", "classifier.out_proj.weight"),
        ("classifier.bias", "classifier.out_proj.bias"),
    ],
}
"""``HEAD_NAMES`` of a pre-LN model; the next-sentence head of ``BertForPreTraining`` keeps BERT's names."""
# Keys some Hugging Face checkpoints carry that hold nothing to load.
BUFFERS = {"embeddings.position_ids", "embeddings.token_type_ids"}
# Aliases of tied or duplicated tensors in older checkpoints.
_ALIASES = {"cls.predictions.decoder.bias": "cls.predictions.bias", "lm_head.decoder.bias": "lm_head.bias"}
_DECODER_WEIGHTS = {"cls.predictions.bias": "cls.predictions.decoder.weight", "lm_head.bias": "lm_head.decoder.weight"}
"""A masked-LM head's output bias -> where ``transformers`` stores its decoder matrix (an untied model's only)."""
TIED = set(_DECODER_WEIGHTS.values())
_ENCODER_PREFIXES = ("embeddings.", "encoder.", "pooler.")


@dataclass(frozen=True)
class Layout:
    """Where a model's tensors sit among Hugging Face names."""

    config: BertConfig
    """The encoder's config (its layer count sizes the table)."""
    prefix: str
    """Prefix of the encoder's names: ``bert.`` in a head, as in Hugging Face; empty for ``BertModel``."""
    pooler: bool
    head: list[tuple[str, str]]
    """The head's (bertkit, Hugging Face) names, from ``HEAD_NAMES``."""
    hf_prefix: str = ""
    """Prefix of the encoder's Hugging Face names when it differs from ``prefix`` (``roberta_prelayernorm.``)."""

    @property
    def saved_prefix(self) -> str:
        """Prefix of the encoder's names in the file."""
        return self.hf_prefix or self.prefix


def layout(model: nn.Module) -> Layout:
    """The ``Layout`` of a bertkit model (any class in ``HEAD_NAMES``); ``TypeError`` for any other module.
    Classes are known by name, so this table needs no import of the model (which imports it)."""
    name = type(model).__name__
    bert = model if name == "BertModel" else getattr(model, "bert", None)
    config = getattr(bert, "config", None)
    if name not in HEAD_NAMES or type(bert).__name__ != "BertModel" or not isinstance(config, BertConfig):
        raise TypeError(f"{name} is not a bertkit model")
    pooler = getattr(bert, "pooler", None) is not None
    head = _with_decoder(PRE_LN_HEAD_NAMES[name] if config.pre_layer_norm else HEAD_NAMES[name], config)
    if not config.pre_layer_norm:
        return Layout(config, "" if bert is model else "bert.", pooler, head)
    pooler = pooler and name != "BertForSequenceClassification"  # its pooler is RoBERTa's classifier.dense
    return Layout(config, "" if bert is model else "bert.", pooler, head, "" if bert is model else PRE_LN_PREFIX)


def _with_decoder(head: list[tuple[str, str]], config: BertConfig) -> list[tuple[str, str]]:
    """``head`` with the masked-LM decoder's own matrix where it is not the word embeddings (an untied model:
    ``transformers`` stores it under the decoder's name then)."""
    bias = dict(head).get("mlm.decoder.bias")
    if config.tie_word_embeddings or bias is None:
        return head
    return [*head, ("mlm.decoder.weight", _DECODER_WEIGHTS[bias])]


def encoder_names(config: BertConfig) -> list[tuple[str, str | tuple[str, ...]]]:
    """(bertkit, Hugging Face) names of every encoder tensor (no pooler) for ``config``, relative to BertModel.
    A tuple of Hugging Face names means the bertkit tensor is their concatenation on dim 0."""
    names: list[tuple[str, str | tuple[str, ...]]] = list(EMBEDDING_NAMES)
    renamed = PRE_LN_LAYER_NAMES if config.pre_layer_norm else {}
    for i in range(config.num_hidden_layers):
        for ours, parts in FUSED_QKV_NAMES:
            names.append((ours.format(i=i), tuple(t.format(i=i) for t in parts)))
        for ours, theirs in LAYER_NAMES:
            names.append((ours.format(i=i), renamed.get(ours, theirs).format(i=i)))
    if config.pre_layer_norm:
        names.extend(PRE_LN_FINAL_NAMES)
    return names


def normalise_names(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Hugging Face names relative to BertModel for the encoder (``bert.`` or ``roberta_prelayernorm.`` dropped),
    head names as they are; the old ``LayerNorm.gamma/beta`` spelling becomes ``weight/bias``."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name.startswith("bert.") and name[5:].startswith(_ENCODER_PREFIXES):
            name = name[5:]
        elif name.startswith(PRE_LN_PREFIX) and name[len(PRE_LN_PREFIX) :].startswith(
            (*_ENCODER_PREFIXES, "LayerNorm.")
        ):
            name = name[len(PRE_LN_PREFIX) :]
        if "LayerNorm." in name:
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[name] = tensor
    for alias, name in _ALIASES.items():
        if alias in out:
            tensor = out.pop(alias)
            out.setdefault(name, tensor)  # when both are stored they are the same (tied) tensor
    return out


def infer_architecture(state: dict[str, Tensor]) -> tuple[str, int | None]:
    """The model class a checkpoint's tensors describe (for checkpoints without ``architectures``, like
    Google's), and the label count of its classifier (None when it has none)."""
    if "qa_outputs.weight" in state:
        return "BertForQuestionAnswering", None
    if "classifier.weight" in state:
        return "BertForSequenceClassification", int(state["classifier.weight"].shape[0])
    if "cls.predictions.bias" in state:
        return ("BertForPreTraining" if "cls.seq_relationship.weight" in state else "BertForMaskedLM"), None
    return "BertModel", None
