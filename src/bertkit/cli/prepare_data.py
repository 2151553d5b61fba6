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
    corpus_config_options,
    corpus_options,
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
    **fields: Any,
) -> None:
    from bertkit.data import PrepareConfig, prepare_dataset

    show_library_warnings("bertkit: warning: ")
    block_mb = fields.pop("block_mb")
    corpus = corpus_options(keep_gutenberg_boilerplate, fields)
    options = {k: v for k, v in fields.items() if v is not None}
    for required in ("tokenizer", "output"):
        if required not in options:
            fail(f"--{required} is required")
    if block_mb is not None:
        options["block_bytes"] = max(1, int(block_mb * (1 << 20)))
    config = PrepareConfig(inputs=input, corpus=corpus, **options)
    meta = prepare_dataset(config, progress=not quiet)
    train, held = meta["splits"]["train"], meta["splits"]["eval"]
    state = "complete" if meta["complete"] else f"{len(meta['blocks'])} of {meta['expected_blocks']} blocks so far"
    print(
        f"wrote {train['num_instances']} train + {held['num_instances']} eval instances "
        f"({train['num_tokens'] + held['num_tokens']} tokens) to {config.output} ({state})",
        file=sys.stderr,
    )


@commands.command(
    "prepare-data",
    short_help="Turn a corpus into MLM+NSP pre-training shards.",
    cls=lazy_command(_prepare_data_function),
)
def prepare_data_command() -> None:
    """Turn a raw corpus into sharded, memory-mapped MLM+NSP pre-training data (BERT's algorithm, all cores).

    \b
    Example:
      bertkit prepare-data --input ../shared/data/gutenberg/books \\
        --tokenizer ./tok --output ./data128 --max-seq-length 128 \\
        --dupe-factor 5 --masking static --seed 1 --workers 8
    """
