"""``bertkit distill``: a fine-tuned teacher into a smaller student (``bertkit.training.distill``).

The options are ``finetune``'s (generated from ``FinetuneConfig`` and ``TrainConfig``, the task options and
``--search`` declared in ``cli.finetune``) with ``--model`` replaced by those of ``DistillConfig``
(``--teacher``, ``--student``, the loss weights, ``--unlabeled``), and ``finetune``'s own options
(``TrainingRunOptions``: ``--config``, ``--search``, ``--threads``). The task, its options and the sequence
length default to the teacher's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import typer

from bertkit.cli import finetune as finetune_cli
from bertkit.cli.options import config_options, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import generated_command

commands = typer.Typer(rich_markup_mode=None)


def _distill_function() -> Callable[..., None]:
    from bertkit.training.distill import DistillConfig
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.train_config import TrainConfig

    options = config_options(
        [DistillConfig, FinetuneConfig, TrainConfig],
        exclude={"best_metric", "best_mode", "model"},
        defaults={"task": "the teacher's", "max_seq_length": "the teacher's"},
        flags={
            "teacher": ("--teacher",),
            "student": ("--student",),
            "unlabeled_file": ("--unlabeled",),
            "task": ("--task", "-t"),
            "train_file": ("--train",),
            "dev_file": ("--dev",),
            "output": ("--output", "-o"),
            "group_by_length": ("--group-by-length/--random-batches",),
        },
    )
    task_options = finetune_cli.task_config_options()
    return generated_command(
        "distill", distill_command.__doc__, options + task_options, finetune_cli.TrainingRunOptions, _run_distill
    )


def _run_distill(options: finetune_cli.TrainingRunOptions, given: dict[str, Any]) -> None:
    from bertkit.jobs import distill_settings
    from bertkit.training.distill import distill

    teacher = given.pop("teacher", None)
    if teacher is None:
        fail("--teacher is required: the fine-tuned model to distil")
    settings = distill_settings(teacher, given)
    finetune_cli.run_training(options, given, functools.partial(distill, settings=settings))


@commands.command(
    "distill",
    short_help="Distil a fine-tuned model into a smaller, faster student.",
    cls=lazy_command(_distill_function),
)
def distill_command() -> None:
    """Distil a fine-tuned teacher (classification, regression, NER, QA, or a sentence-embedding model) into a
    student: --student 3 keeps 3 of the teacher's layers (spread from first to last), --student mini is a
    narrower preset initialised at random, --student DIR any model with the teacher's vocabulary. The student
    learns the teacher's soft targets at --temperature and the labels with weight --alpha (embeddings: the
    teacher's vectors); --hidden-weight and --attention-weight add TinyBERT's layer transfer. The output is an
    ordinary fine-tuned model directory (predict, evaluate, serve, export, --quantize int8).

    \b
    Example:
      bertkit distill --teacher runs/sst2 --student 3 \\
        --train sst2/train.tsv --dev sst2/dev.tsv --output runs/sst2-3l --epochs 2
    """
