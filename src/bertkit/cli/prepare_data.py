"""``prepare-data``: its options are generated from ``PrepareConfig`` and the corpus options (``block_bytes`` as
``--block-mb``); the inputs and ``--quiet`` are ``PrepareRunOptions``, declared here."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from bertkit.cli.console import show_library_warnings
from bertkit.cli.options import ConfigOption, cli, config_options, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import corpus_config_options, generated_command, shared

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
    generated = [*options, *corpus_config_options(), block_mb]
    return generated_command(
        "prepare-data", prepare_data_command.__doc__, generated, PrepareRunOptions, _run_prepare_data
    )


@dataclass(kw_only=True)
class PrepareRunOptions:
    """The options of ``prepare-data`` that are no field of ``PrepareConfig``."""

    input: list[str] = field(metadata=cli("--input", "-i"))
    """Files, directories or globs (repeatable)."""
    keep_gutenberg_boilerplate: bool = shared("keep_gutenberg_boilerplate")
    quiet: bool = field(default=False, metadata=cli("--quiet", "-q"))
    """No progress bar."""
    threads: int | None = shared("threads")


def _run_prepare_data(options: PrepareRunOptions, fields: dict[str, Any]) -> None:
    from bertkit.jobs import prepare_data
    from bertkit.threads import use_threads

    count = use_threads(options.threads)
    if options.threads is not None and fields.get("workers") is None:  # --threads N: N worker processes too
        fields["workers"] = count

    show_library_warnings("bertkit: warning: ")
    for required in ("tokenizer", "output"):
        if fields.get(required) is None:
            fail(f"--{required} is required")
    keep = options.keep_gutenberg_boilerplate
    prepared = prepare_data(options.input, keep_gutenberg_boilerplate=keep, progress=not options.quiet, **fields)
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
