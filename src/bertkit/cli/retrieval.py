"""Retrieval data commands: ``retrieval from-squad`` (a BEIR folder from SQuAD JSON) and ``retrieval
mine-negatives`` (hard negatives for each anchor/positive pair). Measuring a model is ``evaluate --task
retrieval|sts`` (``cli/finetune.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from bertkit.cli.options import cli, config_options, lazy_command
from bertkit.cli.shared_options import generated_command, options_command, shared
from bertkit.threads import use_threads

commands = typer.Typer(rich_markup_mode=None)
retrieval_app = typer.Typer(
    rich_markup_mode=None, help="Retrieval sets (BEIR folders) and hard negatives.", no_args_is_help=True
)
commands.add_typer(retrieval_app, name="retrieval")


@dataclass(kw_only=True)
class FromSquadOptions:
    """``bertkit retrieval from-squad``."""

    input: str = field(metadata=cli("--input", "-i"))
    """SQuAD-format JSON file."""
    output: str = field(metadata=cli("--output", "-o"))
    """BEIR folder to write (replaced whole)."""
    split: str = "test"
    """Name of the qrels file written, qrels/SPLIT.tsv."""


@options_command(retrieval_app, "from-squad", FromSquadOptions, short_help="Build a BEIR folder from SQuAD JSON.")
def from_squad_command(o: FromSquadOptions) -> None:
    """Build a BEIR retrieval folder from a SQuAD JSON file: every paragraph is a passage (titled with its
    article), every question a query whose one relevant passage is its paragraph.

    \b
    Example:
      bertkit retrieval from-squad --input squad/dev.json \\
        --output beir/squad-dev
    """
    from bertkit.retrieval import write_squad_beir

    beir = write_squad_beir(o.input, o.output, o.split)
    print(f"wrote {beir.describe()} to {o.output}", file=sys.stderr)


# -------------------------------------------------------------------------------------- mine-negatives
def _mine_function() -> Callable[..., None]:
    from bertkit.retrieval import MiningConfig

    options = config_options([MiningConfig])
    return generated_command(
        "retrieval mine-negatives", mine_negatives_command.__doc__, options, MineOptions, _run_mine
    )


@dataclass(kw_only=True)
class MineOptions:
    """The options of ``retrieval mine-negatives`` besides what to mine (``MiningConfig``)."""

    model: str = shared("model")
    input: str = field(metadata=cli("--input", "-i"))
    """Pairs: anchor/positive (or query/passage) columns, any table format."""
    output: str = field(metadata=cli("--output", "-o"))
    """JSONL: anchor, positive, negative_1 ... negative_K."""
    corpus: str | None = None
    """More passages to draw negatives from: a BEIR folder, a .txt file (one per line) or a table with a text
    column (default: the positives only)."""
    anchor_column: str | None = None
    """Column of the anchor (default: anchor, query...)."""
    positive_column: str | None = None
    """Column of the positive (default: positive, passage...)."""
    format: str | None = shared("format")
    header: bool | None = shared("header")
    query_prefix: str = shared("query_prefix")
    passage_prefix: str = shared("passage_prefix")
    score_function: str = "cos"
    """cos | dot: how a passage is scored against an anchor."""
    batch_size: int = shared("batch_size")
    device: str = shared("device")
    threads: int | None = shared("threads")


def _run_mine(o: MineOptions, fields: dict[str, Any]) -> None:
    use_threads(o.threads)
    from bertkit.io import check_output_file
    from bertkit.retrieval import EmbeddingOptions, MiningConfig, mine_hard_negatives, read_corpus, read_pairs
    from bertkit.retrieval.vector_search import check_score_function

    check_output_file(o.output, example="negatives.jsonl")
    check_score_function(o.score_function)
    config = MiningConfig(**{k: v for k, v in fields.items() if v is not None})
    pairs = read_pairs(
        o.input, anchor_column=o.anchor_column, positive_column=o.positive_column, format=o.format, header=o.header
    )
    passages = read_corpus(o.corpus) if o.corpus else []
    options = EmbeddingOptions(
        query_prefix=o.query_prefix,
        passage_prefix=o.passage_prefix,
        batch_size=o.batch_size,
        score_function=o.score_function,
    )
    output = o.output
    result = mine_hard_negatives(
        o.model, pairs, output, config=config, corpus=passages, options=options, device=o.device
    )
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
