"""Running a trained model: the inference loader (``load``), and the pipelines a user calls on it.

``load(path)`` restores a model directory with its tokenizer, its task (label names, options) and the length it
was fine-tuned with (``loading``); load once, call many times. Every pipeline takes a model directory or a
``Loaded`` model and runs it through the one runner (``bertkit.features.runner``: inputs sorted by length so that
batches carry little padding, results back in the caller's order) under ``torch.inference_mode()`` (an export folder: ONNX Runtime, no torch). A single
input (a string, or a pair) gives a single result; a list gives a list.

- ``encoder_outputs``: ``embed`` (``embed_settings``: the one rule for its defaults; ``embed_token_ids``; Matryoshka
  ``truncate_dimensions``) and ``attentions``, on any model;
- ``pretraining``: ``fill_mask`` and ``next_sentence``, on the pre-training heads;
- ``finetuned``: ``classify``, ``tag``, ``answer`` and ``rerank`` (``pair_scores``: a cross-encoder's scores), on
  fine-tuned heads: each loads the model and runs its family's pipeline (``tasks/<family>/pipeline.py``), with
  the task's post-processing;
- ``files``: ``predict`` and ``evaluate_model`` on a whole file in the task's format (``bertkit predict``).

A pipeline refuses, with one clear line, a model that has no trained weights for its head (fill-mask on an
encoder without an MLM head, say).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bertkit import resolve_export

if TYPE_CHECKING:  # resolved on first use (``__getattr__``), so that an export folder runs without torch
    from bertkit.features.runner import MODEL_INPUTS, length_sorted_batches
    from bertkit.inference.encoder_outputs import (
        AttentionMaps,
        EmbedSettings,
        attentions,
        embed,
        embed_settings,
        embed_token_ids,
        parse_layers,
        truncate_dimensions,
    )
    from bertkit.inference.exported import Exported, load_exported
    from bertkit.inference.files import evaluate_model, load_finetuned, predict
    from bertkit.inference.finetuned import answer, classify, pair_scores, rerank, tag
    from bertkit.inference.loading import PIPELINES, Loaded, checkpoint_tensor_names
    from bertkit.inference.opening import load
    from bertkit.inference.pretraining import MASK_PATTERN, MaskCandidate, fill_mask, next_sentence
    from bertkit.inference.settings import Settings
    from bertkit.tasks.classification.pipeline import Ranked
    from bertkit.tasks.ner.pipeline import Entity, TaggedWord, TagResult, word_spans
    from bertkit.tasks.pipeline import TextInput
    from bertkit.tasks.qa.pipeline import Answer

__all__ = [
    "MASK_PATTERN",
    "MODEL_INPUTS",
    "PIPELINES",
    "Answer",
    "AttentionMaps",
    "EmbedSettings",
    "Entity",
    "Exported",
    "Loaded",
    "MaskCandidate",
    "Ranked",
    "Settings",
    "TagResult",
    "TaggedWord",
    "TextInput",
    "answer",
    "attentions",
    "checkpoint_tensor_names",
    "classify",
    "embed",
    "embed_settings",
    "embed_token_ids",
    "evaluate_model",
    "fill_mask",
    "length_sorted_batches",
    "load",
    "load_exported",
    "load_finetuned",
    "next_sentence",
    "pair_scores",
    "parse_layers",
    "predict",
    "rerank",
    "tag",
    "truncate_dimensions",
    "word_spans",
]

_HOMES = {
    "MASK_PATTERN": "bertkit.inference.pretraining",
    "MODEL_INPUTS": "bertkit.features.runner",
    "PIPELINES": "bertkit.inference.loading",
    "Answer": "bertkit.tasks.qa.pipeline",
    "AttentionMaps": "bertkit.inference.encoder_outputs",
    "EmbedSettings": "bertkit.inference.encoder_outputs",
    "Entity": "bertkit.tasks.ner.pipeline",
    "Exported": "bertkit.inference.exported",
    "Loaded": "bertkit.inference.loading",
    "MaskCandidate": "bertkit.inference.pretraining",
    "Ranked": "bertkit.tasks.classification.pipeline",
    "Settings": "bertkit.inference.settings",
    "TagResult": "bertkit.tasks.ner.pipeline",
    "TaggedWord": "bertkit.tasks.ner.pipeline",
    "TextInput": "bertkit.tasks.pipeline",
    "answer": "bertkit.inference.finetuned",
    "attentions": "bertkit.inference.encoder_outputs",
    "checkpoint_tensor_names": "bertkit.inference.loading",
    "classify": "bertkit.inference.finetuned",
    "embed": "bertkit.inference.encoder_outputs",
    "embed_settings": "bertkit.inference.encoder_outputs",
    "embed_token_ids": "bertkit.inference.encoder_outputs",
    "evaluate_model": "bertkit.inference.files",
    "fill_mask": "bertkit.inference.pretraining",
    "length_sorted_batches": "bertkit.features.runner",
    "load": "bertkit.inference.opening",
    "load_exported": "bertkit.inference.exported",
    "load_finetuned": "bertkit.inference.files",
    "next_sentence": "bertkit.inference.pretraining",
    "pair_scores": "bertkit.inference.finetuned",
    "parse_layers": "bertkit.inference.encoder_outputs",
    "predict": "bertkit.inference.files",
    "rerank": "bertkit.inference.finetuned",
    "tag": "bertkit.inference.finetuned",
    "truncate_dimensions": "bertkit.inference.encoder_outputs",
    "word_spans": "bertkit.tasks.ner.pipeline",
}


def __getattr__(name: str) -> Any:
    return resolve_export(__name__, globals(), _HOMES, name)
