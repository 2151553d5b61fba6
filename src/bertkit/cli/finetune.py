"""Fine-tuning commands: ``finetune`` (and its hyper-parameter ``--search``), ``evaluate`` and ``predict``.

``finetune``'s options are generated from ``FinetuneConfig`` and ``TrainConfig``, and the task options from
each family's options dataclass (``tasks/<family>/options.py``); the config file and the search switches are
declared here.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from bertkit.cli.console import print_json, show_library_warnings
from bertkit.cli.options import ConfigOption, cli, config_options, lazy_command, show_default
from bertkit.cli.program import fail, stopped_by_signal
from bertkit.cli.shared_options import (
    EngineOptions,
    generated_command,
    options_command,
    shared,
    task_options,
    threads_for,
)
from bertkit.option_groups import OptionGroup, at_least, to_flat
from bertkit.threads import use_threads

if TYPE_CHECKING:  # the training package imports torch, which `bertkit --help` should not pay for
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.hyperparameter_search import Runner

commands = typer.Typer(rich_markup_mode=None)


# --------------------------------------------------------------------------------------------- finetune
def _finetune_function() -> Callable[..., None]:
    from bertkit.tasks.registry import FAMILIES
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.finetune_defaults import DEFAULTS, MAX_EPOCHS, MIN_UPDATES, SMALL_BATCH, SMALL_SET
    from bertkit.training.train_config import TrainConfig

    # the defaults table, e.g. "5e-05; qa 3e-05": the default for every task, then each task's own
    shown = {
        name: "; ".join(
            [show_default(value)]
            + [f"{task} {show_default(row[name])}" for task, row in DEFAULTS.items() if task != "all" and name in row]
        )
        for name, value in DEFAULTS["all"].items()
    }
    # what the user leaves unset is sized to the training set (finetune_defaults.size_to_data): say how
    shown["micro_batch_size"] += f"; at most {SMALL_BATCH} below {SMALL_SET:,} training examples"
    shown["epochs"] += f"; raised, up to {MAX_EPOCHS}, until the run makes {MIN_UPDATES:,} updates"
    fixed = " or ".join(f"--task {name}" for name, family in FAMILIES.items() if family.fixed_recipe)
    for name in ("micro_batch_size", "epochs"):
        shown[name] += f"; never resized for {fixed}" if fixed else ""
    options = config_options(
        [FinetuneConfig, TrainConfig],
        exclude={"best_metric", "best_mode"},
        defaults=shown,
        flags={
            "task": ("--task", "-t"),
            "model": ("--model", "-m"),
            "train_file": ("--train",),
            "dev_file": ("--dev",),
            "output": ("--output", "-o"),
            "group_by_length": ("--group-by-length/--random-batches",),
        },
    )
    return generated_command(
        "finetune", finetune_command.__doc__, options + task_config_options(), TrainingRunOptions, run_training
    )


def task_config_options() -> list[ConfigOption]:
    """The task families' options (``tasks.registry.option_classes``: each family's options dataclass), one flag
    a field; the values given reach the task through ``tasks.registry.given_task_options``."""
    from bertkit.tasks.registry import option_classes

    classes = option_classes()
    flags = {
        f.name: f.metadata["cli_flags"] for cls in classes for f in dataclasses.fields(cls) if "cli_flags" in f.metadata
    }
    return config_options(classes, flags=flags)


@dataclass(kw_only=True)
class TrainingRunOptions:
    """The options of ``finetune`` (and ``distill``) that are no field of its config: the config file, the
    search, the threads."""

    config: str | None = shared("config")
    search: bool = field(default=False, metadata=cli("--search"))
    """Run the BERT paper's grid (batch 16, 32; lr 5e-5, 3e-5, 2e-5; 2-4 epochs), or the config file's [search]
    table, and keep the best run on --dev; --resume continues a killed search."""
    search_trials: int | None = field(default=None, metadata=at_least(1))
    """With --search: sample this many points with optuna (TPE) instead of the whole grid."""
    search_budget: str | None = None
    """With --search: wall-clock limit (30m, 2h); the best run so far wins when it ends."""
    threads: int | None = shared("threads")


def run_training(options: TrainingRunOptions, fields: dict[str, Any], run: Runner | None = None) -> None:
    """``finetune`` (or ``run``, distillation's) on the config the parsed ``options`` and generated ``fields``
    describe, or the search over it with ``--search``; prints the dev metrics."""
    from bertkit.jobs import finetune_config as build_config
    from bertkit.tasks.registry import given_task_options, task_option_names
    from bertkit.training.finetune import finetune

    use_threads(options.threads)
    show_library_warnings()
    given = given_task_options({name: fields.pop(name) for name in task_option_names() if name in fields})
    finetune_config = build_config(config=options.config, task_options=given, **fields)
    if options.search:
        _run_search(finetune_config, options, run=run)
        return
    if options.search_trials is not None or options.search_budget is not None:
        fail("--search-trials and --search-budget go with --search")
    result = (run or finetune)(finetune_config)
    if result.output is None:
        stopped_by_signal(
            result.train.signal,
            f"stopped by a signal at step {result.train.step}; continue with the same command plus --resume.",
        )
    if result.metrics:
        print_json(result.metrics)


def _run_search(config: FinetuneConfig, options: TrainingRunOptions, *, run: Runner | None) -> None:
    from bertkit.training.hyperparameter_search import SearchConfig, search, search_table

    trials, budget = options.search_trials, options.search_budget
    settings = (
        SearchConfig.from_file(options.config, trials=trials, budget=budget)
        if options.config
        else SearchConfig(trials=trials, budget=budget)
    )
    result = search(config, settings, run=run)
    if result.output is None:
        stopped_by_signal(
            result.signal, "stopped by a signal; continue the search with the same command plus --resume."
        )
    assert result.winner is not None
    print(search_table(result.runs, result.winner, result.main_metric), end="")


@commands.command(
    "finetune",
    short_help="Fine-tune for classification, regression, NER, QA or sentence embeddings.",
    cls=lazy_command(_finetune_function),
)
def finetune_command() -> None:
    """Fine-tune a BERT model for classification, regression, NER, SQuAD-style QA or sentence embeddings
    (--task embedding: anchor/positive[/negative...] pairs, or scored sentence1/sentence2/score pairs; the
    output is a sentence-transformers directory).

    \b
    Example:
      bertkit finetune --task classification --model ./minilm \\
        --train sst2/train.tsv --dev sst2/dev.tsv --output runs/sst2 \\
        --epochs 3 --lr 5e-5 --micro-batch-size 32
      bertkit finetune --task embedding --model ./minilm \\
        --train pairs.jsonl --dev dev_pairs.jsonl --output runs/retriever \\
        --micro-batch-size 256 --cache-mini-batch-size 32
    """


# ------------------------------------------------------------------------------------- evaluate, predict
@dataclass(kw_only=True)
class ReadingOptions(OptionGroup):
    """How ``evaluate`` and ``predict`` read a labelled file and feed it to a fine-tuned model."""

    long_text: str | None = shared("long_text")
    max_query_length: int | None = shared("max_query_length")
    format: str | None = shared("format")
    header: bool | None = shared("header")
    max_seq_length: int | None = shared("max_seq_length")
    batch_size: int = shared("feature_batch_size")


@dataclass(kw_only=True)
class EvaluateOptions:
    """``bertkit evaluate``."""

    model: str = field(metadata=cli("--model", "-m"))
    """Fine-tuned model directory (retrieval, sts: any embedding model, or a hub id)."""
    input: str | None = field(default=None, metadata=cli("--input", "-i"))
    """Labelled file in the task's format (required; retrieval: a BEIR folder)."""
    data: str | None = field(default=None, metadata=cli("--data", hidden=True))
    """The same as --input."""
    task: str | None = field(default=None, metadata=cli("--task", "-t"))
    """classification | regression | ner | qa (default: the model's); retrieval (a BEIR folder) or sts (scored
    sentence pairs) to measure an embedding model."""
    output: str | None = field(default=None, metadata=cli("--output", "-o"))
    """Also write the metrics to this JSON file."""
    split: str | None = None
    """retrieval: the qrels/SPLIT.tsv to judge by (default: test, else the only one)."""
    query_prefix: str = shared("query_prefix")
    passage_prefix: str = shared("passage_prefix")
    ann: bool = field(default=False, metadata=cli("--ann"))
    """retrieval: search an approximate HNSW index (faiss) and report its recall against exact."""
    text_column: str | None = shared("text_column")
    text_pair_column: str | None = shared("text_pair_column")
    label_column: str | None = shared("label_column")
    tag_column: str | None = shared("tag_column")
    reading: ReadingOptions = field(default_factory=ReadingOptions)
    predictions: str | None = field(default=None, metadata=cli("--predictions"))
    """Also write the task's prediction files here."""
    device: str = shared("device")
    engine: EngineOptions = field(default_factory=EngineOptions)


@options_command(commands, "evaluate", EvaluateOptions, short_help="Print a model's metrics on labelled data.")
def evaluate_command(o: EvaluateOptions) -> None:
    """Print a fine-tuned model's metrics on a labelled file as JSON; with --task retrieval or sts, an embedding
    model's retrieval metrics on a BEIR folder (nDCG@10, MRR@10, recall@1/10/100, MAP@100) or its Spearman and
    Pearson correlations on scored sentence pairs.

    \b
    Example:
      bertkit evaluate --model runs/sst2 --input sst2/dev.tsv
    """
    use_threads(o.engine.threads)
    from bertkit.jobs import evaluate

    input = o.input or o.data
    if input is None:  # not required by typer, so that the message names the flag as every other does
        fail("give the labelled file to evaluate on with --input FILE")
    show_library_warnings()
    given = to_flat(o)
    for name in ("model", "input", "data", "threads"):
        del given[name]
    if o.task in ("retrieval", "sts"):  # the reading options of a fine-tuned model's task go to no model
        for name in ("tag_column", "long_text", "max_query_length"):
            del given[name]
    print_json(evaluate(o.model, input, **given))


@dataclass(kw_only=True)
class PredictOptions:
    """``bertkit predict``."""

    model: str = shared("finetuned_model")
    input: str = field(metadata=cli("--input", "-i"))
    """File in the task's format (labels, if any, are ignored)."""
    output: str = field(metadata=cli("--output", "-o"))
    """JSONL file: one prediction per input, with scores."""
    task: str | None = shared("task")
    text_column: str | None = shared("text_column")
    text_pair_column: str | None = shared("text_pair_column")
    reading: ReadingOptions = field(default_factory=ReadingOptions)
    device: str = shared("device")
    engine: EngineOptions = field(default_factory=EngineOptions)


@options_command(
    commands, "predict", PredictOptions, short_help="Write a fine-tuned model's predictions as JSON lines."
)
def predict_command(o: PredictOptions) -> None:
    """Write one JSON line per input row, sentence or question, with the predicted label/tags/answer and scores.

    \b
    Example:
      bertkit predict --model runs/sst2 --input sst2/test.tsv \\
        --output predictions.jsonl
    """
    threads_for(o.model, o.engine.threads)
    from bertkit.inference import predict

    show_library_warnings()
    count = predict(
        o.model,
        o.input,
        o.output,
        task=o.task,
        task_options=task_options(
            o.text_column,
            o.text_pair_column,
            None,
            long_text=o.reading.long_text,
            max_query_length=o.reading.max_query_length,
        ),
        max_seq_length=o.reading.max_seq_length,
        batch_size=o.reading.batch_size,
        device=o.device,
        format=o.reading.format,
        header=o.reading.header,
        **o.engine.loading(),
    )
    print(f"wrote {count} predictions to {o.output}", file=sys.stderr)
