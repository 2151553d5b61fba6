"""``demo``: its options are generated from ``DemoConfig`` (the fields a user is expected to change); the
corpora and the seeds, which are lists, are declared here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from bertkit.cli.options import config_options, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import generated_command, only_fields

commands = typer.Typer(rich_markup_mode=None)

_OPTIONS = (
    "labeled_train",
    "labeled_dev",
    "output",
    "model",
    "pretrain_time",
    "task_text",
    "finetune_examples",
    "finetune_epochs",
    "reference_model",
    "seed",
    "threads",
)


def _demo_function() -> Callable[..., None]:
    from bertkit.demo import DemoConfig

    options = config_options([DemoConfig], exclude=only_fields(DemoConfig, *_OPTIONS))
    return generated_command("demo", demo_command.__doc__, options, _run_demo)


def _run_demo(
    *,
    corpus: Annotated[
        list[str] | None,
        typer.Option(help="Raw text to pre-train on; repeat for several (default: data/corpus and data/books)."),
    ] = None,
    finetune_seeds: Annotated[
        str | None,
        typer.Option(help="Fine-tuning seeds, comma-separated; one run per seed and start (default: 1,2,3)."),
    ] = None,
    **fields: Any,
) -> None:
    from bertkit.demo import DemoConfig, run_demo

    chosen = {k: v for k, v in fields.items() if v is not None}
    for name in ("finetune_examples", "threads"):
        if chosen.get(name, 1) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1, got {chosen[name]}")
    if isinstance(chosen.get("reference_model"), str) and chosen["reference_model"].lower() == "none":
        chosen["reference_model"] = None
    if finetune_seeds is not None:
        chosen["finetune_seeds"] = _seeds(finetune_seeds)
    if corpus:
        chosen["corpus"] = tuple(corpus)
    run_demo(DemoConfig(**chosen))


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        fail(f"--finetune-seeds {text!r}: write integers separated by commas")
    if not seeds:
        fail("--finetune-seeds needs at least one seed")
    return seeds


@commands.command("demo", short_help="Run the end-to-end demo on the shipped data.", cls=lazy_command(_demo_function))
def demo_command() -> None:
    """Train a vocabulary, pre-train a small BERT on the shipped books, compare fill-mask and fine-tuning.

    \b
    Example:
      bertkit demo --output runs/demo --pretrain-time 12m \\
        --finetune-examples 1000 --finetune-seeds 1,2,3
    """
