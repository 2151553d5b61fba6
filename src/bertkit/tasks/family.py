"""What a task family tells the rest of bertkit about itself: the record each ``tasks/<family>/`` folder exports
as ``FAMILY`` and ``tasks.registry`` lists.

Fine-tuning reads its defaults and whether they are sized to the data; the loader reads which head it trains,
which pipeline runs that head and at what length; ``make_task`` reads the other command-line names it answers
to (``regression`` is classification with one output). Nothing outside a family's folder names the family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bertkit.tasks.base import Task
from bertkit.tasks.pipeline import LoadedModel


@dataclass(frozen=True)
class Family:
    """One task family: its name, its ``Task`` class and what fine-tuning, loading and serving need of it."""

    name: str
    """Command-line name (``--task``) and the name a fine-tuned model keeps of its task."""
    task: type
    """The ``Task`` class; its dataclass fields are the family's options."""
    head: str
    """Hugging Face class name of the model the family fine-tunes (``BertForSequenceClassification``)."""
    pipeline: str | None = None
    """The inference pipeline that runs a fine-tuned model of this family (``classify``); ``None``: none."""
    restores_from_head: bool = True
    """Whether a saved model of class ``head`` is this family's when its config names no task (not for a bare
    encoder, which is every model's)."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    """Fine-tuning defaults over the ``all`` row of ``training.finetune_defaults.DEFAULTS``."""
    fixed_recipe: bool = False
    """Run :attr:`defaults` as they are on any training set (never sized to the data)."""
    default_length: int | None = None
    """Input length when a model saved none (``None``: the model's full length)."""
    names: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Command-line names and the options each sets: the family's own name sets them as defaults (options
    given win), another name (``regression``) sets them always."""
    problem_types: Mapping[str, str] = field(default_factory=dict)
    """``config.problem_type`` -> the name a saved model without a task record is restored as."""
    truncation_fix: str = "raise --max-seq-length"
    """What the user does about examples cut at ``max_seq_length``, in the line ``featurize`` reports."""
    truncation_line: Callable[[Task, int, int, int], str] | None = None
    """``(task, cut, examples, max_seq_length) -> line`` where the family cuts something else (QA: questions)."""
    options: type | None = None
    """The dataclass of the family's command-line options: ``bertkit finetune`` generates a flag from each field
    (its docstring the help; ``metadata["cli_flags"]`` other declarations), and the values given reach the task
    as its options (the dataclass's ``__post_init__`` may normalise them)."""
    run: Callable[[list[str], LoadedModel, int], list[Any]] | None = None
    """The family's own pipeline, for a :attr:`pipeline` name bertkit has no endpoint of: ``(texts, loaded model,
    batch size) -> one JSON-able result per text``. A model of the family runs it, and ``bertkit serve`` answers
    ``POST /<pipeline>`` with ``{"texts": [...]}`` through it as ``{"results": [...]}``."""

    @property
    def trains_encoder(self) -> bool:
        """Whether the family fine-tunes the bare encoder (head ``BertModel``) rather than a head on it: it keeps
        no label names in the model, and a teacher distilled for it runs as the encoder."""
        return self.head == "BertModel"

    @property
    def tags_tokens(self) -> bool:
        """Whether the family's head labels every token (``BertForTokenClassification``), so that a text without
        labels is a row of ignored labels rather than one."""
        return self.head == "BertForTokenClassification"

    def all_names(self) -> tuple[str, ...]:
        """Every command-line name of the family, its own first."""
        return (self.name, *(name for name in self.names if name != self.name))


@dataclass
class CommonTaskOptions:
    """The command-line options every task family takes."""

    main_metric: str | None = None
    """Metric that picks the best epoch (default: accuracy; regression pearson; ner, qa f1; embedding ndcg@10,
    cosent spearman)."""
