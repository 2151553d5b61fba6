"""Fine-tuning task families: reading their files, features, post-processing and metrics.

Each family is a folder, ``tasks/<family>/``, that owns everything about it and exports its record as ``FAMILY``
(``tasks.family.Family``): ``classification`` (also regression), ``ner``, ``qa`` (SQuAD v1.1/v2.0) and
``embedding``. ``tasks.registry`` is the one table of families; ``get_task(name, **options)`` returns a fresh
task object with the uniform ``Task`` interface (``tasks.base``: its data side, output side and training
answers). ``tasks.prepare`` reads a file into examples and features with the lines the user reads about them.
A family's folder also holds its scores (``metrics``; the shared ones in ``tasks.metrics``) and its inference
pipeline (``pipeline``, on the ``tasks.pipeline.LoadedModel`` the loader above gives it).
"""

from __future__ import annotations

from bertkit.tasks.base import Featurized, Read, Task
from bertkit.tasks.batching import LengthGroupedBatchSampler
from bertkit.tasks.classification import ClassificationExample, ClassificationPrediction, ClassificationTask
from bertkit.tasks.labels import LabelMap
from bertkit.tasks.ner import NerExample, NerPrediction, NerTask, read_conll
from bertkit.tasks.qa import QuestionAnsweringTask, SquadExample, SquadPredictions, read_squad
from bertkit.tasks.registry import CONFIG_KEY, FAMILIES, family, get_task, make_task, register, task_names

__all__ = [
    "CONFIG_KEY",
    "FAMILIES",
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
    "family",
    "get_task",
    "make_task",
    "read_conll",
    "read_squad",
    "register",
    "task_names",
]
