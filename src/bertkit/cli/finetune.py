"""Fine-tuning commands: ``finetune`` (and its hyper-parameter ``--search``), ``evaluate`` and ``predict``.

``finetune``'s options are generated from ``FinetuneConfig`` and ``TrainConfig``; the task options (columns,
metric, labels), the config file and the search switches are declared here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bertkit.cli.console import print_json, show_library_warnings
from bertkit.cli.options import ExampleLastCommand, config_options, lazy_command, show_default
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
    QuantizeOption,
    TagColumnOption,
    TaskOption,
    TextColumnOption,
    generated_command,
    task_options,
)

if TYPE_CHECKING:  # the training package imports torch, which `bertkit --help` should not pay for
    from bertkit.training.finetune import FinetuneConfig

commands = typer.Typer(rich_markup_mode=None)


# --------------------------------------------------------------------------------------------- finetune
def _finetune_function() -> Callable[..., None]:
    from bertkit.training.config import TrainConfig
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.finetune_defaults import DEFAULTS, MAX_EPOCHS, MIN_UPDATES, SMALL_BATCH, SMALL_SET

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
    return generated_command("finetune", finetune_command.__doc__, options, _run_finetune)


def _run_finetune(
    *,
    config: ConfigFileOption = None,
    text_column: TextColumnOption = None,
    text_pair_column: PairColumnOption = None,
    label_column: LabelColumnOption = None,
    main_metric: Annotated[
        str | None,
        typer.Option(help="Metric that picks the best epoch (default: accuracy; regression pearson; ner, qa f1)."),
    ] = None,
    doc_stride: Annotated[
        int | None, typer.Option(help="qa: tokens between the starts of context windows (default: 128).")
    ] = None,
    tag_column: TagColumnOption = None,
    long_text: LongTextOption = None,
    max_query_length: MaxQueryLengthOption = None,
    label_names: Annotated[
        str | None,
        typer.Option(
            help="classification: names of the sorted labels, comma-separated, e.g. negative,positive for 0/1."
        ),
    ] = None,
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
    **fields: Any,
) -> None:
    from bertkit.training.finetune import FinetuneConfig, finetune

    show_library_warnings()
    given = task_options(
        text_column,
        text_pair_column,
        label_column,
        main_metric=main_metric,
        doc_stride=doc_stride,
        tag_column=tag_column,
        label_names=label_names,
        long_text=long_text,
        max_query_length=max_query_length,
    )
    finetune_config = FinetuneConfig.from_file(config, task_options=given, **fields)
    if search:
        _run_search(finetune_config, config, trials=search_trials, budget=search_budget)
        return
    if search_trials is not None or search_budget is not None:
        fail("--search-trials and --search-budget go with --search")
    result = finetune(finetune_config)
    if result.output is None:
        stopped_by_signal(
            result.train.signal,
            f"stopped by a signal at step {result.train.step}; continue with the same command plus --resume.",
        )
    if result.metrics:
        print_json(result.metrics)


def _run_search(config: FinetuneConfig, config_file: str | None, *, trials: int | None, budget: str | None) -> None:
    from bertkit.training.search import SearchConfig, search, search_table

    settings = (
        SearchConfig.from_file(config_file, trials=trials, budget=budget)
        if config_file
        else SearchConfig(trials=trials, budget=budget)
    )
    result = search(config, settings)
    if result.output is None:
        stopped_by_signal(
            result.signal, "stopped by a signal; continue the search with the same command plus --resume."
        )
    assert result.winner is not None
    print(search_table(result.runs, result.winner, result.main_metric), end="")


@commands.command(
    "finetune", short_help="Fine-tune for classification, regression, NER or QA.", cls=lazy_command(_finetune_function)
)
def finetune_command() -> None:
    """Fine-tune a BERT model for classification, regression, NER or SQuAD-style QA.

    \b
    Example:
      bertkit finetune --task classification --model ./minilm \\
        --train sst2/train.tsv --dev sst2/dev.tsv --output runs/sst2 \\
        --epochs 3 --lr 5e-5 --micro-batch-size 32
    """


# ------------------------------------------------------------------------------------- evaluate, predict
@commands.command("evaluate", short_help="Print a fine-tuned model's metrics on labelled data.", cls=ExampleLastCommand)
def evaluate_command(
    model: FinetunedModelOption,
    input: Annotated[
        str | None, typer.Option("--input", "-i", help="Labelled file in the task's format (required).")
    ] = None,
    task: TaskOption = None,
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
) -> None:
    """Print a fine-tuned model's metrics on a labelled file as JSON.

    \b
    Example:
      bertkit evaluate --model runs/sst2 --input sst2/dev.tsv
    """
    from bertkit.inference import evaluate_model

    if input is None:  # not required by typer, so that the message names the flag as every other does
        fail("give the labelled file to evaluate on with --input FILE")
    show_library_warnings()
    scores = evaluate_model(
        model,
        input,
        task=task,
        task_options=task_options(
            text_column,
            text_pair_column,
            label_column,
            tag_column=tag_column,
            long_text=long_text,
            max_query_length=max_query_length,
        ),
        max_seq_length=max_seq_length,
        batch_size=batch_size,
        device=device,
        predictions_dir=predictions,
        format=format,
        header=header,
        quantize=quantize,
        compile=compile,
        backend=backend,
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
) -> None:
    """Write one JSON line per input row, sentence or question, with the predicted label/tags/answer and scores.

    \b
    Example:
      bertkit predict --model runs/sst2 --input sst2/test.tsv \\
        --output predictions.jsonl
    """
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
