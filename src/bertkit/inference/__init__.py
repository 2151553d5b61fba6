"""Running a trained model: the inference loader (``load``), and the pipelines a user calls on it.

``load(path)`` restores a model directory with its tokenizer, its task (label names, options) and the length it
was fine-tuned with (``loading``); load once, call many times. Every pipeline takes a model directory or a
``Loaded`` model and runs it through the one runner (``bertkit.features.runner``: inputs sorted by length so that
batches carry little padding, results back in the caller's order) under ``torch.inference_mode()``. A single
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
from bertkit.inference.files import evaluate_model, load_finetuned, predict
from bertkit.inference.finetuned import answer, classify, pair_scores, rerank, tag
from bertkit.inference.loading import PIPELINES, Loaded, Settings, checkpoint_tensor_names, load
from bertkit.inference.pretraining import MASK_PATTERN, MaskCandidate, fill_mask, next_sentence
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
