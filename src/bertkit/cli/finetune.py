"""Fine-tuning commands: ``finetune`` (and its hyper-parameter ``--search``), ``evaluate`` and ``predict``.

``finetune``'s options are generated from ``FinetuneConfig`` and ``TrainConfig``, and the task options from
each family's options dataclass (``tasks/<family>/options.py``); the config file and the search switches are
declared here.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bertkit.cli.console import print_json, show_library_warnings
from bertkit.cli.options import ConfigOption, ExampleLastCommand, config_options, lazy_command, show_default
from bertkit.cli.program import fail, stopped_by_signal
from bertkit.cli.shared_options import (
    BackendOption,
    CompileOption,
    ConfigFileOption,
    DeviceOption,
    FeatureBatchOption,
    FinetunedModelOption,
    FormatOption,
    HeaderOption,
    LabelColumnOption,
    LongTextOption,
    MaxQueryLengthOption,
    MaxSeqLengthOption,
    PairColumnOption,
    PassagePrefixOption,
    QuantizeOption,
    QueryPrefixOption,
    TagColumnOption,
    TaskOption,
    TextColumnOption,
    ThreadsOption,
    generated_command,
    task_options,
)
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
    return generated_command("finetune", finetune_command.__doc__, options + task_config_options(), _run_finetune)


def task_config_options() -> list[ConfigOption]:
    """The task families' options (``tasks.registry.option_classes``: each family's options dataclass), one flag
    a field; the values given reach the task through ``tasks.registry.given_task_options``."""
    from bertkit.tasks.registry import option_classes

    classes = option_classes()
    flags = {
        f.name: f.metadata["cli_flags"] for cls in classes for f in dataclasses.fields(cls) if "cli_flags" in f.metadata
    }
    return config_options(classes, flags=flags)


def _run_finetune(
    *,
    config: ConfigFileOption = None,
    search: Annotated[
        bool,
        typer.Option(
            "--search",
            help="Run the BERT paper's grid (batch 16, 32; lr 5e-5, 3e-5, 2e-5; 2-4 epochs), or the config "
            "file's [search] table, and keep the best run on --dev; --resume continues a killed search.",
        ),
    ] = False,
    search_trials: Annotated[
        int | None,
        typer.Option(help="With --search: sample this many points with optuna (TPE) instead of the whole grid."),
    ] = None,
    search_budget: Annotated[
        str | None,
        typer.Option(help="With --search: wall-clock limit (30m, 2h); the best run so far wins when it ends."),
    ] = None,
    threads: ThreadsOption = None,
    **fields: Any,
) -> None:
    given = dict(locals())
    run_training(given, given.pop("fields"))


def run_training(options: dict[str, Any], fields: dict[str, Any], run: Runner | None = None) -> None:
    """``finetune`` (or ``run``, distillation's) on the config the parsed ``options`` (``_run_finetune``'s own)
    and generated ``fields`` describe, or the search over it with ``--search``; prints the dev metrics."""
    from bertkit.jobs import finetune_config as build_config
    from bertkit.tasks.registry import given_task_options, task_option_names
    from bertkit.training.finetune import finetune

    use_threads(options.pop("threads", None))
    show_library_warnings()
    config, search = options.pop("config"), options.pop("search")
    search_trials, search_budget = options.pop("search_trials"), options.pop("search_budget")
    given = given_task_options({name: fields.pop(name) for name in task_option_names() if name in fields})
    finetune_config = build_config(config=config, task_options=given, **fields)
    if search:
        _run_search(finetune_config, config, trials=search_trials, budget=search_budget, run=run)
        return
    if search_trials is not None or search_budget is not None:
        fail("--search-trials and --search-budget go with --search")
    result = (run or finetune)(finetune_config)
    if result.output is None:
        stopped_by_signal(
            result.train.signal,
            f"stopped by a signal at step {result.train.step}; continue with the same command plus --resume.",
        )
    if result.metrics:
        print_json(result.metrics)


def _run_search(
    config: FinetuneConfig, config_file: str | None, *, trials: int | None, budget: str | None, run: Runner | None
) -> None:
    from bertkit.training.hyperparameter_search import SearchConfig, search, search_table

    settings = (
        SearchConfig.from_file(config_file, trials=trials, budget=budget)
        if config_file
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
EvaluateModelOption = Annotated[
    str,
    typer.Option(
        "--model", "-m", help="Fine-tuned model directory (retrieval, sts: any embedding model, or a hub id)."
    ),
]
EvaluateInputOption = Annotated[
    str | None,
    typer.Option("--input", "-i", help="Labelled file in the task's format (required; retrieval: a BEIR folder)."),
]
EvaluateTaskOption = Annotated[
    str | None,
    typer.Option(
        "--task",
        "-t",
        help="classification | regression | ner | qa (default: the model's); retrieval (a BEIR folder) or "
        "sts (scored sentence pairs) to measure an embedding model.",
    ),
]
SplitOption = Annotated[
    str | None, typer.Option(help="retrieval: the qrels/SPLIT.tsv to judge by (default: test, else the only one).")
]
AnnOption = Annotated[
    bool,
    typer.Option(
        "--ann", help="retrieval: search an approximate HNSW index (faiss) and report its recall against exact."
    ),
]


@commands.command("evaluate", short_help="Print a model's metrics on labelled data.", cls=ExampleLastCommand)
def evaluate_command(
    model: EvaluateModelOption,
    input: EvaluateInputOption = None,
    data: Annotated[str | None, typer.Option("--data", hidden=True, help="The same as --input.")] = None,
    task: EvaluateTaskOption = None,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="Also write the metrics to this JSON file.")
    ] = None,
    split: SplitOption = None,
    query_prefix: QueryPrefixOption = "",
    passage_prefix: PassagePrefixOption = "",
    ann: AnnOption = False,
    text_column: TextColumnOption = None,
    text_pair_column: PairColumnOption = None,
    label_column: LabelColumnOption = None,
    tag_column: TagColumnOption = None,
    long_text: LongTextOption = None,
    max_query_length: MaxQueryLengthOption = None,
    format: FormatOption = None,
    header: HeaderOption = None,
    max_seq_length: MaxSeqLengthOption = None,
    batch_size: FeatureBatchOption = 64,
    predictions: Annotated[
        str | None, typer.Option("--predictions", help="Also write the task's prediction files here.")
    ] = None,
    device: DeviceOption = "cpu",
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
    backend: BackendOption = None,
    threads: ThreadsOption = None,
) -> None:
    """Print a fine-tuned model's metrics on a labelled file as JSON; with --task retrieval or sts, an embedding
    model's retrieval metrics on a BEIR folder (nDCG@10, MRR@10, recall@1/10/100, MAP@100) or its Spearman and
    Pearson correlations on scored sentence pairs.

    \b
    Example:
      bertkit evaluate --model runs/sst2 --input sst2/dev.tsv
    """
    use_threads(threads)
    from bertkit.jobs import evaluate

    input = input or data
    if input is None:  # not required by typer, so that the message names the flag as every other does
        fail("give the labelled file to evaluate on with --input FILE")
    show_library_warnings()
    columns: dict[str, object] = dict(text_column=text_column, text_pair_column=text_pair_column)
    columns |= dict(label_column=label_column)
    if task not in ("retrieval", "sts"):  # the reading options of a fine-tuned model's task
        columns |= dict(tag_column=tag_column, long_text=long_text, max_query_length=max_query_length)
    scores = evaluate(
        model,
        input,
        task=task,
        output=output,
        split=split,
        query_prefix=query_prefix,
        passage_prefix=passage_prefix,
        ann=ann,
        format=format,
        header=header,
        max_seq_length=max_seq_length,
        batch_size=batch_size,
        predictions=predictions,
        device=device,
        quantize=quantize,
        compile=compile,
        backend=backend,
        **columns,
    )
    print_json(scores)


@commands.command("predict", short_help="Write a fine-tuned model's predictions as JSON lines.", cls=ExampleLastCommand)
def predict_command(
    model: FinetunedModelOption,
    input: Annotated[
        str, typer.Option("--input", "-i", help="File in the task's format (labels, if any, are ignored).")
    ],
    output: Annotated[str, typer.Option("--output", "-o", help="JSONL file: one prediction per input, with scores.")],
    task: TaskOption = None,
    text_column: TextColumnOption = None,
    text_pair_column: PairColumnOption = None,
    long_text: LongTextOption = None,
    max_query_length: MaxQueryLengthOption = None,
    format: FormatOption = None,
    header: HeaderOption = None,
    max_seq_length: MaxSeqLengthOption = None,
    batch_size: FeatureBatchOption = 64,
    device: DeviceOption = "cpu",
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
    backend: BackendOption = None,
    threads: ThreadsOption = None,
) -> None:
    """Write one JSON line per input row, sentence or question, with the predicted label/tags/answer and scores.

    \b
    Example:
      bertkit predict --model runs/sst2 --input sst2/test.tsv \\
        --output predictions.jsonl
    """
    use_threads(threads)
    from bertkit.inference import predict

    show_library_warnings()
    count = predict(
        model,
        input,
        output,
        task=task,
        task_options=task_options(
            text_column, text_pair_column, None, long_text=long_text, max_query_length=max_query_length
        ),
        max_seq_length=max_seq_length,
        batch_size=batch_size,
        device=device,
        format=format,
        header=header,
        quantize=quantize,
        compile=compile,
        backend=backend,
    )
    print(f"wrote {count} predictions to {output}", file=sys.stderr)
