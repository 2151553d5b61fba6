"""Retrieval data commands: ``retrieval from-squad`` (a BEIR folder from SQuAD JSON) and ``retrieval
mine-negatives`` (hard negatives for each anchor/positive pair). Measuring a model is ``evaluate --task
retrieval|sts`` (``cli/finetune.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bertkit.cli.options import ExampleLastCommand, config_options, lazy_command
from bertkit.cli.shared_options import (
    BatchOption,
    DeviceOption,
    FormatOption,
    HeaderOption,
    ModelOption,
    PassagePrefixOption,
    QueryPrefixOption,
    ThreadsOption,
    generated_command,
)
from bertkit.threads import use_threads

commands = typer.Typer(rich_markup_mode=None)
retrieval_app = typer.Typer(
    rich_markup_mode=None, help="Retrieval sets (BEIR folders) and hard negatives.", no_args_is_help=True
)
commands.add_typer(retrieval_app, name="retrieval")


@retrieval_app.command("from-squad", short_help="Build a BEIR folder from SQuAD JSON.", cls=ExampleLastCommand)
def from_squad_command(
    input: Annotated[str, typer.Option("--input", "-i", help="SQuAD-format JSON file.")],
    output: Annotated[str, typer.Option("--output", "-o", help="BEIR folder to write (replaced whole).")],
    split: Annotated[str, typer.Option(help="Name of the qrels file written, qrels/SPLIT.tsv.")] = "test",
) -> None:
    """Build a BEIR retrieval folder from a SQuAD JSON file: every paragraph is a passage (titled with its
    article), every question a query whose one relevant passage is its paragraph.

    \b
    Example:
      bertkit retrieval from-squad --input squad/dev.json \\
        --output beir/squad-dev
    """
    from bertkit.retrieval import write_squad_beir

    beir = write_squad_beir(input, output, split)
    print(f"wrote {beir.describe()} to {output}", file=sys.stderr)


# -------------------------------------------------------------------------------------- mine-negatives
def _mine_function() -> Callable[..., None]:
    from bertkit.retrieval import MiningConfig

    options = config_options([MiningConfig])
    return generated_command("retrieval mine-negatives", mine_negatives_command.__doc__, options, _run_mine)


def _run_mine(
    *,
    model: ModelOption,
    input: Annotated[
        str, typer.Option("--input", "-i", help="Pairs: anchor/positive (or query/passage) columns, any table format.")
    ],
    output: Annotated[str, typer.Option("--output", "-o", help="JSONL: anchor, positive, negative_1 ... negative_K.")],
    corpus: Annotated[
        str | None,
        typer.Option(
            help="More passages to draw negatives from: a BEIR folder, a .txt file (one per line) or a table with "
            "a text column (default: the positives only)."
        ),
    ] = None,
    anchor_column: Annotated[str | None, typer.Option(help="Column of the anchor (default: anchor, query...).")] = None,
    positive_column: Annotated[
        str | None, typer.Option(help="Column of the positive (default: positive, passage...).")
    ] = None,
    format: FormatOption = None,
    header: HeaderOption = None,
    query_prefix: QueryPrefixOption = "",
    passage_prefix: PassagePrefixOption = "",
    score_function: Annotated[str, typer.Option(help="cos | dot: how a passage is scored against an anchor.")] = "cos",
    batch_size: BatchOption = 32,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = None,
    **fields: Any,
) -> None:
    use_threads(threads)
    from bertkit.io import check_output_file
    from bertkit.retrieval import EmbeddingOptions, MiningConfig, mine_hard_negatives, read_corpus, read_pairs
    from bertkit.retrieval.vector_search import check_score_function

    check_output_file(output, example="negatives.jsonl")
    check_score_function(score_function)
    config = MiningConfig(**{k: v for k, v in fields.items() if v is not None})
    pairs = read_pairs(
        input, anchor_column=anchor_column, positive_column=positive_column, format=format, header=header
    )
    passages = read_corpus(corpus) if corpus else []
    options = EmbeddingOptions(
        query_prefix=query_prefix, passage_prefix=passage_prefix, batch_size=batch_size, score_function=score_function
    )
    result = mine_hard_negatives(model, pairs, output, config=config, corpus=passages, options=options, device=device)
    print(
        f"wrote {result.written:,} rows with {config.num_negatives} negatives each to {output} "
        f"(from {result.corpus:,} passages); {result.short:,} of {result.pairs:,} pairs got fewer and were left out",
        file=sys.stderr,
    )


@retrieval_app.command(
    "mine-negatives", short_help="Mine hard negatives for anchor/positive pairs.", cls=lazy_command(_mine_function)
)
def mine_negatives_command() -> None:
    """Mine hard negatives: for each (anchor, positive) pair, the passages an embedding model ranks closest to the
    anchor that are none of its positives, skipping the first --range-min, none beyond --range-max, each below
    the positive's score minus --margin. Writes JSON lines the embedding trainer reads.

    \b
    Example:
      bertkit retrieval mine-negatives --model ./minilm \\
        --input pairs.jsonl --output negatives.jsonl \\
        --num-negatives 3 --range-min 2 --margin 0.05
    """
