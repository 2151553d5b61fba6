"""``prepare-data``: its options are generated from ``PrepareConfig`` and the corpus options (``block_bytes`` as
``--block-mb``); the inputs and ``--quiet`` are declared here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bertkit.cli.console import show_library_warnings
from bertkit.cli.options import ConfigOption, config_options, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import (
    KeepBoilerplateOption,
    ThreadsOption,
    corpus_config_options,
    generated_command,
)

commands = typer.Typer(rich_markup_mode=None)


def _prepare_data_function() -> Callable[..., None]:
    from bertkit.data import PrepareConfig

    options = config_options(
        [PrepareConfig],
        exclude={"block_bytes"},
        flags={"tokenizer": ("--tokenizer", "-t"), "output": ("--output", "-o")},
    )
    # block_bytes, given in MB
    default_mb = PrepareConfig.block_bytes / (1 << 20)
    help = f"MB of text per block (unit of parallelism and of random-next sampling) (default: {default_mb:g})."
    block_mb = ConfigOption("block_mb", ("--block-mb",), float, help)
    return generated_command(
        "prepare-data", prepare_data_command.__doc__, [*options, *corpus_config_options(), block_mb], _run_prepare_data
    )


def _run_prepare_data(
    *,
    input: Annotated[list[str], typer.Option("--input", "-i", help="Files, directories or globs (repeatable).")],
    keep_gutenberg_boilerplate: KeepBoilerplateOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    threads: ThreadsOption = None,
    **fields: Any,
) -> None:
    from bertkit.jobs import prepare_data
    from bertkit.threads import use_threads

    count = use_threads(threads)
    if threads is not None and fields.get("workers") is None:  # --threads N: N worker processes too
        fields["workers"] = count

    show_library_warnings("bertkit: warning: ")
    for required in ("tokenizer", "output"):
        if fields.get(required) is None:
            fail(f"--{required} is required")
    prepared = prepare_data(input, keep_gutenberg_boilerplate=keep_gutenberg_boilerplate, progress=not quiet, **fields)
    print(prepared.summary(), file=sys.stderr)


@commands.command(
    "prepare-data",
    short_help="Turn a corpus into MLM+NSP pre-training shards.",
    cls=lazy_command(_prepare_data_function),
)
def prepare_data_command() -> None:
    """Turn a raw corpus into sharded, memory-mapped MLM+NSP pre-training data (BERT's algorithm, all cores).

    \b
    Example:
      bertkit prepare-data --input data/books \\
        --tokenizer ./tok --output ./data128 --max-seq-length 128 \\
        --dupe-factor 5 --masking static --seed 1 --workers 8
    """
