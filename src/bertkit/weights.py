"""Load and save whole models: ``load_model`` (with int8 quantization and compilation for inference),
``save_pretrained`` (with the tokenizer and sentence-transformers files) and ``convert_checkpoint``.

The name tables and the files themselves live one floor down, in ``bertkit.checkpoint_files`` (Hugging Face
and Google TF names, safetensors, ``pytorch_model.bin`` read tensors-only, TensorFlow checkpoints read without
TensorFlow), where the model's own ``from_pretrained``/``save_pretrained`` reach them too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any, cast

from torch import nn

from bertkit import quantize as quantization
from bertkit.checkpoint_files import (
    load_hf_state_dict,
    read_pretrained,
    read_weights,
    to_hf_state_dict,
    write_pretrained,
)
from bertkit.compiling import compile_model
from bertkit.config import BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.hub import resolve_model
from bertkit.io import atomic_write_text
from bertkit.models import registry
from bertkit.models.architecture import Architecture
from bertkit.models.bert import HEAD_CLASSES, BertModel
from bertkit.sentence_config import SentenceConfig, read_sentence_config, write_sentence_config
from bertkit.tokenizer import TOKENIZER_CONFIG_NAME, Tokenizer

__all__ = [
    "convert_checkpoint",
    "declare_inputs",
    "encoder_and_prefix",
    "load_model",
    "load_weights",
    "save_pretrained",
]

logger = logging.getLogger("bertkit.weights")


def encoder_and_prefix(model: nn.Module) -> tuple[nn.Module, str]:
    """The encoder inside ``model`` and the prefix of its names (``bert.`` in BERT's heads, as in Hugging Face)."""
    architecture = registry.of_model(model)
    if architecture is None:
        raise TypeError(f"{type(model).__name__} is not a bertkit model")
    encoder = architecture.encoder_of(model)
    return encoder, "" if encoder is model else architecture.encoder_attribute + "."


def save_pretrained(
    model: nn.Module, directory: str | os.PathLike, tokenizer: Any = None, *, sentence: SentenceConfig | None = None
) -> Path:
    """Write ``config.json`` (``model_type: bert``, ``architectures: [<class>]``) and ``model.safetensors``
    under Hugging Face names, each atomically, plus ``tokenizer.save_pretrained(directory)`` when given.

    ``sentence`` (e.g. ``SentenceConfig("mean", normalize=True, max_seq_length=256)``) also writes the
    sentence-transformers files (``modules.json``...), so the directory loads in ``SentenceTransformer`` as it
    is and ``embed`` uses that pooling by default; its ``max_seq_length`` defaults to the model's positions."""
    architecture = registry.require(model)
    if quantization.is_quantized(model):  # int8 weights with their scales beside them (see bertkit.quantize)
        tensors = quantization.split_packed(to_hf_state_dict(model, quantization.packed_parameters(model)))
        directory = write_pretrained(model, directory, tensors)
    else:
        directory = cast(Any, model).save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
        declare_inputs(directory, architecture)
    if sentence is not None:
        config = registry.config_of(architecture.encoder_of(model))
        length = sentence.max_seq_length or config.max_position_embeddings
        write_sentence_config(directory, dataclasses.replace(sentence, max_seq_length=length), config.hidden_size)
    return Path(directory)


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
    architecture = registry.of_directory(path)
    if not architecture.int8:  # read by its own classes, in float
        if quantize_scheme:
            raise ConfigError(
                f"int8 quantization is for BERT models; run a {architecture.title} model in float32 or bfloat16"
            )
        model = _load_float(architecture, path, head, ignore_mismatched_sizes, config_overrides)
        return compile_model(model, frozen=True) if compile else model
    pretrained = read_pretrained(path, config_overrides)
    cls = _resolve_head(head, pretrained.config)
    pretrained.check_sizes()
    model = cls(pretrained.config)
    state, saved_scheme = pretrained.state, pretrained.quantization
    if saved_scheme:
        quantization.check_scheme(saved_scheme)
        quantization.prepare_packed(model)
        state = quantization.join_packed(state, str(pretrained.weights))
    load_hf_state_dict(model, state, ignore_mismatched_sizes=ignore_mismatched_sizes, source=str(pretrained.weights))
    if saved_scheme:
        quantization.finish_packed(model, saved_scheme)
    elif quantize_scheme:
        quantization.quantize_model(model, quantize_scheme)
    model.eval()
    return compile_model(model, frozen=True) if compile else model


def load_weights(model: nn.Module, directory: str | os.PathLike) -> None:
    """Copy the weights of a model directory (``config.json`` + weights, as ``save_pretrained`` writes it) into
    ``model`` in place, by the checkpoint's names, for any architecture."""
    registry.require(model).load_state(model, read_weights(directory), source=str(directory))


def declare_inputs(directory: str | os.PathLike, architecture: Architecture) -> None:
    """Name the inputs of an architecture without token types in the directory's ``tokenizer_config.json``
    (``model_input_names``), as answerdotai's ModernBERT checkpoints do, so that ``transformers``' tokenizer (and
    sentence-transformers through it) passes no ``token_type_ids``, which such a model refuses. Nothing for an
    architecture that takes them, or without a ``tokenizer_config.json``."""
    path = Path(directory) / TOKENIZER_CONFIG_NAME
    if architecture.token_types or not path.is_file():
        return
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise CheckpointError(f"{path} is not valid JSON") from None
    wanted = list(architecture.onnx_inputs)
    if isinstance(config, dict) and config.get("model_input_names") != wanted:
        config["model_input_names"] = wanted
        atomic_write_text(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def _load_float(
    architecture: Architecture,
    path: str | os.PathLike,
    head: str | type | None,
    ignore_mismatched_sizes: bool,
    overrides: dict[str, Any],
) -> nn.Module:
    """``load_model`` of an architecture without int8 checkpoints: its class for ``head`` loads itself."""
    directory = resolve_model(path)
    directory = directory if directory.is_dir() else directory.parent
    config = architecture.config_class.load(directory)
    cls = architecture.class_for(head, getattr(config, "architectures", None))
    model = cast(Any, cls).from_pretrained(directory, ignore_mismatched_sizes=ignore_mismatched_sizes, **overrides)
    return cast(nn.Module, model).eval()


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
