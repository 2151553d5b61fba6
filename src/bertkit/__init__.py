"""bertkit: BERT from scratch on PyTorch. The public Python API, re-exported (nothing is defined here but
the lazy lookup, ``resolve_export``, which the packages that re-export lazily share).

Names are resolved on first use, so ``import bertkit`` is cheap and data-preparation worker processes
that import ``bertkit.data`` do not pay for torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # configuration and errors
    "BertConfig": "bertkit.config",
    "PRESETS": "bertkit.config",
    "BertkitError": "bertkit.errors",
    "ConfigError": "bertkit.errors",
    "TokenizerError": "bertkit.errors",
    "CheckpointError": "bertkit.errors",
    "DataError": "bertkit.errors",
    # tokenizer
    "Tokenizer": "bertkit.tokenizer",
    "Encoding": "bertkit.tokenizer",
    "collate_encodings": "bertkit.tokenizer",
    "extend_vocabulary": "bertkit.vocab",
    # model and checkpoints
    "BertModel": "bertkit.models.bert",
    "BertForPreTraining": "bertkit.models.bert",
    "BertForMaskedLM": "bertkit.models.bert",
    "BertForSequenceClassification": "bertkit.models.bert",
    "BertForTokenClassification": "bertkit.models.bert",
    "BertForQuestionAnswering": "bertkit.models.bert",
    "load_model": "bertkit.weights",
    "save_pretrained": "bertkit.weights",
    "convert_checkpoint": "bertkit.weights",
    "SentenceConfig": "bertkit.sentence_config",
    "resolve_model": "bertkit.hub",
    "read_tf_checkpoint": "bertkit.checkpoint_files",
    # pre-training data
    "PrepareConfig": "bertkit.data",
    "prepare_dataset": "bertkit.data",
    "open_dataset": "bertkit.data",
    "PretrainingLoader": "bertkit.data",
    # training
    "TrainConfig": "bertkit.training",
    "train": "bertkit.training",
    # the command's jobs as Python functions (the same options, under the same names)
    "prepare_data": "bertkit.jobs",
    "pretrain": "bertkit.jobs",
    "finetune": "bertkit.jobs",
    "distill": "bertkit.jobs",
    "evaluate": "bertkit.jobs",
    "tokenize": "bertkit.jobs",
    "predict": "bertkit.inference",
    # fine-tuning tasks
    "get_task": "bertkit.tasks",
    # inference pipelines
    "load": "bertkit.inference",
    "embed": "bertkit.inference",
    "fill_mask": "bertkit.inference",
    "next_sentence": "bertkit.inference",
    "classify": "bertkit.inference",
    "tag": "bertkit.inference",
    "answer": "bertkit.inference",
    "attentions": "bertkit.inference",
    # embedding models: retrieval and similarity
    "evaluate_retrieval": "bertkit.retrieval",
    "evaluate_sts": "bertkit.retrieval",
    "mine_hard_negatives": "bertkit.retrieval",
    "read_beir": "bertkit.retrieval",
}

__all__ = sorted(_EXPORTS)


def resolve_export(package: str, namespace: dict[str, Any], homes: Mapping[str, str], name: str) -> Any:
    """A package's ``__getattr__``: ``name`` imported from its module in ``homes`` and kept in ``namespace`` (the
    package's globals), so that importing the package costs nothing until a name is used."""
    module = homes.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    namespace[name] = getattr(importlib.import_module(module), name)
    return namespace[name]


def __getattr__(name: str) -> Any:
    value = resolve_export("bertkit", globals(), _EXPORTS, name)
    if _EXPORTS[name] == "bertkit.jobs":  # the options each job takes, listed in its signature and docstring
        value = globals()[name] = importlib.import_module("bertkit.jobs").with_option_signature(value)
    return value


def __dir__() -> list[str]:
    """The public names and the module's dunders, not the helpers this file imports or defines (``importlib``, ``resolve_export``)."""
    return sorted({name for name in globals() if name.startswith("__")} | set(_EXPORTS))
