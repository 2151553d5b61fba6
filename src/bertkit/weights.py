"""Checkpoint I/O in the Hugging Face layout: ``config.json`` + ``model.safetensors`` with Hugging Face names.

bertkit's parameter names differ from Hugging Face's (shorter, and Q/K/V are one fused projection), so
conversion is the explicit name table below plus one transform (split/concatenate Q, K, V). Reading accepts
``model.safetensors`` (also sharded), or ``pytorch_model.bin`` through ``torch.load(weights_only=True)``:
nothing is ever unpickled. Google's TensorFlow checkpoints (``bert_model.ckpt``) are read too, without
TensorFlow (``bertkit.tf_checkpoint``), through a second small name table.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pickle
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from bertkit import quantize as quantization
from bertkit.compiling import compile_model
from bertkit.config import CONFIG_NAME, BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.hub import resolve_model
from bertkit.io import atomic_path
from bertkit.model import HEAD_CLASSES, BertModel
from bertkit.sentence_config import SentenceConfig, read_sentence_config, write_sentence_config
from bertkit.tf_checkpoint import checkpoint_index, read_tf_checkpoint
from bertkit.tokenizer import Tokenizer

logger = logging.getLogger("bertkit.weights")

SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
PYTORCH_INDEX = "pytorch_model.bin.index.json"

# ------------------------------------------------------------------------------------------ name table
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
    # mlm.decoder.weight is the word embedding matrix (tied); Hugging Face does not store it either.
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
# Keys some Hugging Face checkpoints carry that hold nothing to load.
_BUFFERS = {"embeddings.position_ids", "embeddings.token_type_ids"}
# Aliases of tied or duplicated tensors in older checkpoints.
_ALIASES = {"cls.predictions.decoder.bias": "cls.predictions.bias"}
_TIED = {"cls.predictions.decoder.weight"}
_ENCODER_PREFIXES = ("embeddings.", "encoder.", "pooler.")


# Google's TensorFlow names are Hugging Face's with "/" for "." and "layer_{i}" for "layer.{i}", except these
# whole names (the heads of run_pretraining.py, run_classifier.py and run_squad.py) and the leaf renames below.
TF_NAMES: dict[str, str] = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
}
# "kernel" is also transposed: TensorFlow stores a dense layer as [in, out], PyTorch as [out, in].
_TF_LEAVES = {"kernel": "weight", "gamma": "weight", "beta": "bias"}
# Optimizer slots and trainer bookkeeping (Google's AdamWeightDecayOptimizer, LAMB, loss scaling): not weights.
_TF_NOT_WEIGHTS = re.compile(
    r"(^|/)(adam_[mv]|lamb_[mv]|global_step|loss_scale|good_steps|bad_steps)$"
    r"|AdamWeightDecayOptimizer|(^|/)LAMB"
)


def encoder_names(config: BertConfig) -> list[tuple[str, str | tuple[str, ...]]]:
    """(bertkit, Hugging Face) names of every encoder tensor (no pooler) for ``config``, relative to BertModel.
    A tuple of Hugging Face names means the bertkit tensor is their concatenation on dim 0."""
    names: list[tuple[str, str | tuple[str, ...]]] = list(EMBEDDING_NAMES)
    for i in range(config.num_hidden_layers):
        for ours, parts in FUSED_QKV_NAMES:
            names.append((ours.format(i=i), tuple(t.format(i=i) for t in parts)))
        for ours, theirs in LAYER_NAMES:
            names.append((ours.format(i=i), theirs.format(i=i)))
    return names


def encoder_and_prefix(model: nn.Module) -> tuple[BertModel, str]:
    """The encoder inside ``model`` and the prefix of its names (``bert.`` in heads, as in Hugging Face)."""
    if isinstance(model, BertModel):
        return model, ""
    bert = getattr(model, "bert", None)
    if not isinstance(bert, BertModel):
        raise TypeError(f"{type(model).__name__} is not a bertkit model")
    return bert, "bert."


# ------------------------------------------------------------------------------------------ to HF
def to_hf_state_dict(model: nn.Module, params: dict[str, Tensor] | None = None) -> dict[str, Tensor]:
    """The model's tensors under Hugging Face names, as ``transformers`` would save the same class.
    ``params``: the tensors to rename, by bertkit name (default: the model's parameters)."""
    bert, prefix = encoder_and_prefix(model)
    if params is None:
        params = dict(model.named_parameters(remove_duplicate=False))
    out: dict[str, Tensor] = {}
    for ours, theirs in encoder_names(bert.config):
        tensor = params[prefix + ours].detach()
        if isinstance(theirs, tuple):
            for name, piece in zip(theirs, tensor.chunk(len(theirs), dim=0)):
                out[prefix + name] = piece
        else:
            out[prefix + theirs] = tensor
    if bert.pooler is not None:
        for ours, theirs in POOLER_NAMES:
            out[prefix + theirs] = params[prefix + ours].detach()
    for ours, theirs in HEAD_NAMES[type(model).__name__]:
        out[theirs] = params[ours].detach()
    # safetensors wants contiguous CPU tensors that share no memory (the Q/K/V chunks are views).
    return {name: t.to("cpu", copy=True).contiguous() for name, t in out.items()}


# ------------------------------------------------------------------------------------------ from HF
@dataclass
class LoadReport:
    """What ``load_hf_state_dict`` did, by Hugging Face name."""

    loaded: list[str] = field(default_factory=list)
    initialised: list[str] = field(default_factory=list)
    """Model tensors the checkpoint lacked (a fresh task head or pooler), left at their initial values."""
    ignored: list[str] = field(default_factory=list)
    """Checkpoint tensors this model has no place for (another class's head, buffers)."""


def _normalise(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Hugging Face names relative to BertModel for the encoder (``bert.`` dropped), head names as they are;
    the old ``LayerNorm.gamma/beta`` spelling becomes ``weight/bias``."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name.startswith("bert.") and name[5:].startswith(_ENCODER_PREFIXES):
            name = name[5:]
        if "LayerNorm." in name:
            name = name.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        out[name] = tensor
    for alias, name in _ALIASES.items():
        if alias in out:
            tensor = out.pop(alias)
            out.setdefault(name, tensor)  # when both are stored they are the same (tied) tensor
    return out


def _summary(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@torch.no_grad()
def load_hf_state_dict(
    model: nn.Module, state: dict[str, Tensor], *, ignore_mismatched_sizes: bool = False, source: str = "checkpoint"
) -> LoadReport:
    """Copy Hugging Face-named tensors into ``model`` (any bertkit class), with or without the ``bert.`` prefix.

    Missing or misshapen encoder tensors raise ``CheckpointError``; a missing task head or pooler is left
    freshly initialised, and tensors of other heads are ignored (both reported with one log line). With
    ``ignore_mismatched_sizes`` a head of another size (e.g. a different ``num_labels``) is re-initialised.
    """
    bert, prefix = encoder_and_prefix(model)
    params = dict(model.named_parameters(remove_duplicate=False))
    state = _normalise(state)
    report = LoadReport()
    used: set[str] = set()

    def copy(ours: str, tensor: Tensor, theirs: str) -> None:
        param = params[ours]
        if param.shape != tensor.shape:
            raise CheckpointError(
                f"{source}: {theirs} has shape {tuple(tensor.shape)} but the model expects {tuple(param.shape)}; "
                f"the config does not match the weights"
            )
        param.copy_(tensor)

    # Encoder: everything must be there.
    missing = []
    for ours, theirs in encoder_names(bert.config):
        names = theirs if isinstance(theirs, tuple) else (theirs,)
        absent = [n for n in names if n not in state]
        if absent:
            missing.extend(absent)
            continue
        tensor = torch.cat([state[n] for n in names], dim=0) if len(names) > 1 else state[names[0]]
        copy(prefix + ours, tensor, names[0] if len(names) == 1 else f"{names[0]}/key/value")
        used.update(names)
        report.loaded.extend(names)
    if missing:
        raise CheckpointError(
            f"{source} lacks {len(missing)} encoder weights ({_summary(missing)}); "
            f"it is truncated or not a BERT checkpoint for this config"
        )

    # Pooler and task head: each all or nothing, freshly initialised when absent.
    pooler = [(prefix + ours, theirs) for ours, theirs in POOLER_NAMES] if bert.pooler is not None else []
    for group, is_head in ((pooler, False), (HEAD_NAMES[type(model).__name__], True)):
        present = [theirs for _, theirs in group if theirs in state]
        if not present:
            report.initialised.extend(theirs for _, theirs in group)
            continue
        if len(present) != len(group):
            absent = [theirs for _, theirs in group if theirs not in state]
            raise CheckpointError(f"{source} has part of a head but lacks {_summary(absent)}; is it truncated?")
        mismatched = [(ours, theirs) for ours, theirs in group if params[ours].shape != state[theirs].shape]
        if mismatched and is_head and ignore_mismatched_sizes:
            report.initialised.extend(theirs for _, theirs in group)
            used.update(theirs for _, theirs in group)
            logger.warning(
                "%s: head weights %s have another size than the model's; they were re-initialised",
                type(model).__name__,
                _summary([t for _, t in mismatched]),
            )
            continue
        if mismatched and is_head:
            ours, theirs = mismatched[0]
            raise CheckpointError(
                f"{source}: {theirs} has shape {tuple(state[theirs].shape)} but the model expects "
                f"{tuple(params[ours].shape)}; pass a matching num_labels, or ignore_mismatched_sizes=True "
                f"to train a new head"
            )
        for ours, theirs in group:
            copy(ours, state[theirs], theirs)
            used.add(theirs)
            report.loaded.append(theirs)

    # Everything else: encoder-shaped leftovers mean the config is wrong; head leftovers are ignored.
    leftovers = [n for n in state if n not in used and n not in _BUFFERS and n not in _TIED]
    stray = [n for n in leftovers if n.startswith(("embeddings.", "encoder."))]
    if stray:
        raise CheckpointError(
            f"{source} has encoder weights the config does not describe ({_summary(stray)}); "
            f"does config.json (num_hidden_layers) match the weights?"
        )
    report.ignored = leftovers
    if report.initialised:
        logger.warning(
            "%s: %s not in %s; newly initialised, train before use",
            type(model).__name__,
            _summary(report.initialised),
            source,
        )
    if report.ignored:
        logger.warning(
            "%s: ignored %d weights the model does not use (%s)",
            type(model).__name__,
            len(report.ignored),
            _summary(report.ignored),
        )
    return report


# ------------------------------------------------------------------------------------------ from Google TF
def tf_to_hf_state_dict(variables: dict[str, np.ndarray]) -> dict[str, Tensor]:
    """Google TensorFlow BERT variables (``read_tf_checkpoint``) as Hugging Face-named tensors, optimizer
    state dropped, which ``load_hf_state_dict`` then loads like any other checkpoint."""
    if any(name.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for name in variables):
        raise CheckpointError(
            "this is a TF2 object-based checkpoint (TF Model Garden, Keras), whose names follow the "
            "Python objects, not BERT's scopes; bertkit reads Google's original name-based BERT "
            "checkpoints; export it to Hugging Face layout with transformers first"
        )
    out: dict[str, Tensor] = {}
    for name, value in variables.items():
        if _TF_NOT_WEIGHTS.search(name):
            continue
        tensor = torch.from_numpy(np.array(value))
        if name in TF_NAMES:
            out[TF_NAMES[name]] = tensor
            continue
        parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in name.split("/")]
        leaf = parts[-1]
        if leaf.endswith("_embeddings"):
            parts.append("weight")
        else:
            parts[-1] = _TF_LEAVES.get(leaf, leaf)
        if leaf == "kernel":
            tensor = tensor.T.contiguous()
        out[".".join(parts)] = tensor
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


# ------------------------------------------------------------------------------------------ files
def _read_safetensors(path: Path) -> dict[str, Tensor]:
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path} is not a readable safetensors file ({exc}); is it truncated?") from None


def _torch_reason(exc: Exception) -> str:
    """The informative line of torch.load's long multi-line error messages."""
    text = str(exc)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith(("Weights only load failed", "Check the documentation"))
    ]
    return (lines[0].split(". ")[0] if lines else type(exc).__name__)[:160]


def _read_pytorch(path: Path) -> dict[str, Tensor]:
    # weights_only=True: tensors and plain containers only; any other pickled object is refused, never run.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's pickle-protocol notes; our error below says what matters
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path} holds pickled objects other than tensors ({_torch_reason(exc)}); refusing to unpickle it, "
            f"convert it to safetensors with a trusted tool"
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint ({_torch_reason(exc)}); is it truncated?"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise CheckpointError(f"{path} is not a state dict of named tensors")
    return state


def _read_sharded(index: Path, reader: Callable[[Path], dict[str, Tensor]]) -> dict[str, Tensor]:
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{index} is not a valid shard index ({exc})") from None
    state: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = index.parent / shard
        if not shard_path.is_file():
            raise CheckpointError(f"{index} lists shard {shard}, which is missing")
        state.update(reader(shard_path))
    return state


def weights_file(directory: Path) -> Path | None:
    """The weights file of a model directory: safetensors first, then PyTorch, then a TensorFlow checkpoint's
    ``.index`` file; None if there is none."""
    for name in (SAFETENSORS_NAME, SAFETENSORS_INDEX, PYTORCH_NAME, PYTORCH_INDEX):
        if (directory / name).is_file():
            return directory / name
    return checkpoint_index(directory)


def read_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """Tensors of a weights file or model directory, under Hugging Face names: ``*.safetensors`` (or its shard
    index), ``pytorch_model.bin``/``*.bin``/``*.pt`` read with ``weights_only=True``, or a Google TensorFlow
    checkpoint (``bert_model.ckpt`` prefix or its ``.index``). Other files are refused."""
    path = Path(path)
    if not path.exists():  # .../bert_model.ckpt, Google's way to name a checkpoint, is no file itself
        path = checkpoint_index(path) or path
    if path.is_dir():
        found = weights_file(path)
        if found is None:
            raise CheckpointError(f"{path} has no {SAFETENSORS_NAME} or {PYTORCH_NAME}; is it a model directory?")
        path = found
    if not path.is_file():
        raise CheckpointError(f"weights file {path} does not exist")
    name = path.name
    if name.endswith(".safetensors"):
        return _read_safetensors(path)
    if name.endswith(".safetensors.index.json"):
        return _read_sharded(path, _read_safetensors)
    if name.endswith(".bin.index.json"):
        return _read_sharded(path, _read_pytorch)
    if name.endswith((".bin", ".pt", ".pth")):
        return _read_pytorch(path)
    if name.endswith(".index"):
        return tf_to_hf_state_dict(read_tf_checkpoint(path))
    raise CheckpointError(
        f"{path} is not a supported weights file; use model.safetensors, pytorch_model.bin or a TensorFlow "
        f"checkpoint (pickles are never loaded)"
    )


def save_pretrained(
    model: nn.Module, directory: str | os.PathLike, tokenizer: Any = None, *, sentence: SentenceConfig | None = None
) -> Path:
    """Write ``config.json`` (``model_type: bert``, ``architectures: [<class>]``) and ``model.safetensors``
    under Hugging Face names, each atomically, plus ``tokenizer.save_pretrained(directory)`` when given.

    ``sentence`` (e.g. ``SentenceConfig("mean", normalize=True, max_seq_length=256)``) also writes the
    sentence-transformers files (``modules.json``...), so the directory loads in ``SentenceTransformer`` as it
    is and ``embed`` uses that pooling by default; its ``max_seq_length`` defaults to the model's positions."""
    bert, _ = encoder_and_prefix(model)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if quantization.is_quantized(model):  # int8 weights with their scales beside them (see bertkit.quantize)
        tensors = quantization.split_packed(to_hf_state_dict(model, quantization.packed_parameters(model)))
    else:
        tensors = to_hf_state_dict(model)
    with atomic_path(directory / SAFETENSORS_NAME) as tmp:
        save_file(tensors, tmp, metadata={"format": "pt"})  # transformers refuses files without "format"
    config = dataclasses.replace(bert.config, architectures=[type(model).__name__])
    if type(model).__name__ == "BertForQuestionAnswering" and config.num_labels != 2:
        # transformers sizes qa_outputs by num_labels and needs 2 (start, end)
        config = dataclasses.replace(config, num_labels=2, id2label=None)
    config.save(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    if sentence is not None:
        length = sentence.max_seq_length or config.max_position_embeddings
        write_sentence_config(directory, dataclasses.replace(sentence, max_seq_length=length), config.hidden_size)
    return directory


def _resolve_head(head: str | type | None, config: BertConfig) -> type[nn.Module]:
    if isinstance(head, type):
        return head
    if head is None:
        names = config.architectures or ["BertModel"]
        known = [n for n in names if n in HEAD_CLASSES]
        if not known:
            logger.warning("architectures %s are not bertkit classes; loading the encoder as BertModel", names)
            return BertModel
        return HEAD_CLASSES[known[0]]
    if head not in HEAD_CLASSES:
        raise ConfigError(f"unknown model class {head!r}; choose one of {', '.join(HEAD_CLASSES)}")
    return HEAD_CLASSES[head]


def _apply_overrides(config: BertConfig, overrides: dict[str, Any]) -> BertConfig:
    known = {f.name for f in dataclasses.fields(BertConfig)} - {"extra"}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"unknown config field(s) {', '.join(unknown)}; see bertkit.BertConfig")
    overrides = dict(overrides)
    # id2label fixes num_labels in BertConfig; a new label count drops the old names.
    if (
        "num_labels" in overrides
        and "id2label" not in overrides
        and config.id2label is not None
        and len(config.id2label) != overrides["num_labels"]
    ):
        overrides["id2label"] = None
    return dataclasses.replace(config, **overrides)


def load_model(
    path: str | os.PathLike,
    head: str | type | None = None,
    *,
    ignore_mismatched_sizes: bool = False,
    quantize: str | None = None,
    compile: bool = False,
    **config_overrides: Any,
) -> nn.Module:
    """Build and load a model from a Hugging Face-layout directory (or a weights file next to its config.json).

    ``head`` is a bertkit class or its name (``"BertForSequenceClassification"``...); None picks the first of
    ``config.architectures``. ``config_overrides`` replace config fields. The model is returned in eval mode,
    as ``transformers`` does; call ``.train()`` to fine-tune. ``path`` may also be a Hugging Face hub id
    (``org/name@revision``, see ``bertkit.hub``).

    ``quantize="int8"`` returns the model quantized for inference (``bertkit.quantize``); a checkpoint saved
    quantized loads quantized whatever ``quantize`` says. ``compile=True`` compiles it for inference, its weights
    frozen into the graph (``bertkit.compiling``; to train compiled, use ``TrainConfig.compile``).
    """
    quantize_scheme = quantization.check_scheme(quantize)
    path = resolve_model(path)
    if not path.exists():  # .../bert_model.ckpt, Google's way to name a checkpoint, is no file itself
        path = checkpoint_index(path) or path
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    directory = path if path.is_dir() else path.parent
    weights = weights_file(path) if path.is_dir() else path
    if not (directory / CONFIG_NAME).is_file() and not (directory / "bert_config.json").is_file():
        raise CheckpointError(f"{directory} is not a model directory: it has no {CONFIG_NAME}")
    if weights is None:
        if (directory / "tf_model.h5").is_file():
            raise CheckpointError(
                f"{directory} holds Keras weights (tf_model.h5), which bertkit does not read; "
                f"convert them with transformers (BertForPreTraining.from_pretrained(..., from_tf=True))"
            )
        raise CheckpointError(f"{directory} has a config but no weights ({SAFETENSORS_NAME} or {PYTORCH_NAME})")
    config = BertConfig.load(directory)
    state = read_state_dict(weights)
    if not config.architectures:  # Google's bert_config.json: the tensors say which heads were trained
        architecture, num_labels = infer_architecture(_normalise(state))
        config = dataclasses.replace(config, architectures=[architecture])
        if num_labels is not None and num_labels != config.num_labels:
            config = dataclasses.replace(config, num_labels=num_labels, id2label=None)
    config = _apply_overrides(config, config_overrides)
    cls = _resolve_head(head, config)
    # A config that lies about sizes would otherwise allocate its model (terabytes) before any check; small
    # mismatches are left to load_hf_state_dict, which names the missing or misshapen tensors.
    needed, held = config.num_parameters(with_pooler=False), sum(t.numel() for t in state.values())
    if needed > 2 * held + 1_000_000:
        raise CheckpointError(
            f"{directory / CONFIG_NAME} describes {needed:,} encoder parameters but {weights} holds "
            f"only {held:,}; the config does not match the weights"
        )
    model = cls(config)
    saved_scheme = (config.extra.get(quantization.CONFIG_KEY) or {}).get("scheme")
    if saved_scheme:
        quantization.check_scheme(saved_scheme)
        quantization.prepare_packed(model)
        state = quantization.join_packed(state, str(weights))
    load_hf_state_dict(model, state, ignore_mismatched_sizes=ignore_mismatched_sizes, source=str(weights))
    if saved_scheme:
        quantization.finish_packed(model, saved_scheme)
    elif quantize_scheme:
        quantization.quantize_model(model, quantize_scheme)
    model.eval()
    return compile_model(model, frozen=True) if compile else model


def convert_checkpoint(
    source: str | os.PathLike,
    output: str | os.PathLike,
    head: str | type | None = None,
    *,
    sentence: SentenceConfig | None = None,
) -> nn.Module:
    """Rewrite a checkpoint bertkit reads (Google's TensorFlow release, ``pytorch_model.bin``, shards) as a
    Hugging Face-layout directory: ``config.json``, ``model.safetensors`` and the tokenizer files. Returns the model.
    ``sentence`` writes sentence-transformers files (see ``save_pretrained``); by default the source's are kept."""
    source, output = resolve_model(source), Path(output)
    directory = source if source.is_dir() else source.parent
    if output.resolve() == directory.resolve():
        raise CheckpointError(f"output {output} is the source directory; write the converted model somewhere else")
    model = load_model(source, head)
    sentence = sentence or read_sentence_config(directory)
    if sentence is not None and sentence.unsupported:
        raise CheckpointError(
            f"{directory}/modules.json has {', '.join(sentence.unsupported)}, which bertkit does not write; "
            f"give --sentence-transformers POOLING to describe the converted model's sentence vectors"
        )
    save_pretrained(model, output, Tokenizer.from_pretrained(directory), sentence=sentence)
    return model
