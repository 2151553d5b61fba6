"""A model directory as a whole, in Hugging Face's layout: ``config.json`` and the weights read together, with
the checks that catch a config that does not describe its weights, and written back. The model's own
``from_pretrained``/``save_pretrained`` and ``bertkit.weights`` (which adds quantization, compilation, the
tokenizer) both build on this."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from bertkit.checkpoint_files.hf_files import PYTORCH_NAME, SAFETENSORS_NAME, write_safetensors
from bertkit.checkpoint_files.hf_names import infer_architecture, layout, normalise_names
from bertkit.checkpoint_files.reading import read_state_dict, weights_file
from bertkit.checkpoint_files.state_dicts import to_hf_state_dict
from bertkit.checkpoint_files.tf_files import checkpoint_index
from bertkit.config import CONFIG_NAME, BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.hub import is_hub_id, resolve_model
from bertkit.notices import notice

QUANTIZATION_KEY = "bertkit_quantization"
"""``config.json`` key of a quantized checkpoint: ``{"scheme": "int8", ...}`` (see ``bertkit.quantize``)."""


@dataclass
class Pretrained:
    """A model directory read: its config (overrides applied) and its tensors under Hugging Face names."""

    directory: Path
    weights: Path
    config: BertConfig
    state: dict[str, Tensor]

    @property
    def quantization(self) -> str | None:
        """The scheme a quantized checkpoint was saved with (``"int8"``); None for float weights."""
        scheme = (self.config.extra.get(QUANTIZATION_KEY) or {}).get("scheme")
        return str(scheme) if scheme else None

    def check_sizes(self) -> None:
        """A config that lies about sizes would otherwise allocate its model (terabytes) before any check; small
        mismatches are left to ``load_hf_state_dict``, which names the missing or misshapen tensors."""
        needed, held = self.config.num_parameters(with_pooler=False), sum(t.numel() for t in self.state.values())
        if needed > 2 * held + 1_000_000:
            raise CheckpointError(
                f"{self.directory / CONFIG_NAME} describes {needed:,} encoder parameters but {self.weights} holds "
                f"only {held:,}; the config does not match the weights"
            )


def read_pretrained(path: str | os.PathLike, config_overrides: dict[str, Any] | None = None) -> Pretrained:
    """Read a Hugging Face-layout directory (or a weights file next to its config.json, or a hub id, see
    ``bertkit.hub``); ``config_overrides`` replace config fields. A config without ``architectures`` (Google's
    ``bert_config.json``) gets them from the tensors: the heads that were trained, and their label count."""
    directory, weights = _locate(resolve_model(path))
    config = BertConfig.load(directory)
    if config.pre_layer_norm:
        notice(
            f"{directory} is a pre-LN BERT (layer_norm_position 'pre': LayerNorm before attention and the "
            f"feed-forward block, a final LayerNorm; transformers' RoBERTa-PreLayerNorm layout)"
        )
    state = read_state_dict(weights)
    if not config.architectures:
        architecture, num_labels = infer_architecture(normalise_names(state))
        config = dataclasses.replace(config, architectures=[architecture])
        if num_labels is not None and num_labels != config.num_labels:
            config = dataclasses.replace(config, num_labels=num_labels, id2label=None)
    return Pretrained(directory, weights, apply_overrides(config, config_overrides or {}), state)


def check_pretrained(path: str | os.PathLike) -> None:
    """The checks of :func:`read_pretrained` that read no weights: ``path`` is a model directory (or a weights
    file next to its config.json) with a config that parses. A hub id not yet downloaded passes unchecked."""
    if isinstance(path, str) and is_hub_id(path) and not Path(path).exists():
        return
    directory, _ = _locate(Path(path))
    BertConfig.load(directory)


def _locate(path: Path) -> tuple[Path, Path]:
    """The model directory and the weights file of ``path`` (either of them)."""
    if not path.exists():  # .../bert_model.ckpt, Google's way to name a checkpoint, is no file itself
        path = checkpoint_index(path) or path
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    directory = path if path.is_dir() else path.parent
    weights = weights_file(path) if path.is_dir() else path
    if not (directory / CONFIG_NAME).is_file() and not (directory / "bert_config.json").is_file():
        if path.is_file():  # a data file given as the model: say so, not that its folder is no model
            raise CheckpointError(
                f"{path} is a file, not a model: give a model directory (its {CONFIG_NAME} and weights) "
                "or a weights file inside one"
            )
        raise CheckpointError(f"{directory} is not a model directory: it has no {CONFIG_NAME}")
    if weights is None:
        if (directory / "tf_model.h5").is_file():
            raise CheckpointError(
                f"{directory} holds Keras weights (tf_model.h5), which bertkit does not read; "
                f"convert them with transformers (BertForPreTraining.from_pretrained(..., from_tf=True))"
            )
        raise CheckpointError(f"{directory} has a config but no weights ({SAFETENSORS_NAME} or {PYTORCH_NAME})")
    return directory, weights


def apply_overrides(config: BertConfig, overrides: dict[str, Any]) -> BertConfig:
    """``config`` with ``overrides`` (BertConfig field names) replaced; unknown names raise ``ConfigError``."""
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


def pre_ln_refusal(config: BertConfig, class_name: str) -> str | None:
    """Why a model cannot be written in ``transformers``' layout, or None. A pre-LN model is written as
    RoBERTa-PreLayerNorm, whose masked-LM head always applies erf GELU where bertkit's applies ``hidden_act``."""
    has_mlm = class_name in ("BertForMaskedLM", "BertForPreTraining")
    if config.pre_layer_norm and has_mlm and config.hidden_act != "gelu":
        return (
            f"a pre-LN {class_name} with hidden_act {config.hidden_act!r} has no transformers class to read it "
            f"(RoBERTa-PreLayerNorm's masked-LM head always uses 'gelu'); use hidden_act 'gelu'"
        )
    return None


def write_pretrained(model: nn.Module, directory: str | os.PathLike, tensors: dict[str, Tensor] | None = None) -> Path:
    """Write ``config.json`` (``model_type: bert``, ``architectures: [<class>]``) and ``model.safetensors``
    under Hugging Face names, each atomically. ``tensors``: Hugging Face-named tensors to write instead of
    ``to_hf_state_dict(model)`` (a quantized model's int8 weights and scales)."""
    config = layout(model).config
    refusal = pre_ln_refusal(config, type(model).__name__)
    if refusal:
        raise CheckpointError(refusal)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    write_safetensors(to_hf_state_dict(model) if tensors is None else tensors, directory / SAFETENSORS_NAME)
    config = dataclasses.replace(config, architectures=[type(model).__name__])
    if type(model).__name__ == "BertForQuestionAnswering" and config.num_labels != 2:
        # transformers sizes qa_outputs by num_labels and needs 2 (start, end)
        config = dataclasses.replace(config, num_labels=2, id2label=None)
    config.save(directory)
    return directory
