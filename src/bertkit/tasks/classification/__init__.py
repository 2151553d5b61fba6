"""The ``classification`` task family (and ``regression``, its one-output variant): labelled texts and text pairs.

``task`` reads tables, builds single or pair features (long texts truncated or windowed), and scores
accuracy, F1, MCC or Pearson/Spearman; ``pipeline`` runs a fine-tuned model on texts (``classify``, and a
cross-encoder's ``pair_scores``/``rerank``); ``FAMILY`` is what the registry knows of it.
"""

from __future__ import annotations

from bertkit.tasks.classification.options import ClassificationTaskOptions
from bertkit.tasks.classification.task import ClassificationExample, ClassificationPrediction, ClassificationTask
from bertkit.tasks.family import Family

FAMILY = Family(
    name="classification",
    task=ClassificationTask,
    head="BertForSequenceClassification",
    pipeline="classify",
    names={"classification": {"regression": False}, "regression": {"regression": True}},
    problem_types={"regression": "regression"},
    truncation_fix="raise --max-seq-length, or pass --long-text windows",
    options=ClassificationTaskOptions,
)

__all__ = ["FAMILY", "ClassificationExample", "ClassificationPrediction", "ClassificationTask"]
