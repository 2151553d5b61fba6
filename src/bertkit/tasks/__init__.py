"""Fine-tuning task families: reading their files, features, post-processing and metrics.

``get_task(name, **options)`` returns a fresh task object with the uniform ``Task`` interface
(see ``bertkit.tasks.base``): ``classification`` (also regression), ``ner`` and ``qa`` (SQuAD v1.1/v2.0).
The names, the key a fine-tuned model keeps its task under and ``make_task`` are in ``tasks.registry``;
``tasks.prepare`` reads a file into examples and features with the lines the user reads about them.
"""

from __future__ import annotations

from bertkit.tasks.base import Featurized, Read, Task
from bertkit.tasks.batching import LengthGroupedBatchSampler
from bertkit.tasks.classification import ClassificationExample, ClassificationPrediction, ClassificationTask
from bertkit.tasks.labels import LabelMap
from bertkit.tasks.ner import NerExample, NerPrediction, NerTask, read_conll
from bertkit.tasks.qa import QuestionAnsweringTask, SquadExample, SquadPredictions, read_squad
from bertkit.tasks.registry import CONFIG_KEY, HEAD_TO_TASK, TASK_NAMES, TASKS, get_task, make_task

__all__ = [
    "CONFIG_KEY",
    "HEAD_TO_TASK",
    "TASKS",
    "TASK_NAMES",
    "ClassificationExample",
    "ClassificationPrediction",
    "ClassificationTask",
    "Featurized",
    "LabelMap",
    "LengthGroupedBatchSampler",
    "NerExample",
    "NerPrediction",
    "NerTask",
    "QuestionAnsweringTask",
    "Read",
    "SquadExample",
    "SquadPredictions",
    "Task",
    "get_task",
    "make_task",
    "read_conll",
    "read_squad",
]
