"""``demo``: its options are generated from ``DemoConfig``, the fields a user is expected to change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from bertkit.cli.options import ConfigOption, config_options, field_docs, help_text, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import NoOptions, generated_command, only_fields

commands = typer.Typer(rich_markup_mode=None)

_OPTIONS = (
    "labeled_train",
    "labeled_dev",
    "output",
    "model",
    "pretrain_time",
    "recipe",
    "task_text",
    "finetune_examples",
    "finetune_epochs",
    "reference_model",
    "seed",
    "threads",
)


def _demo_function() -> Callable[..., None]:
    from bertkit.demo import DemoConfig

    docs = field_docs(DemoConfig)
    seeds = ",".join(str(seed) for seed in DemoConfig.finetune_seeds)
    options = [
        *config_options([DemoConfig], exclude=only_fields(DemoConfig, *_OPTIONS, "corpus", "finetune_seeds")),
        # the two tuple fields: a repeated option, and a comma-separated one
        ConfigOption("corpus", ("--corpus",), list[str], help_text(docs.get("corpus", "")) + " Repeat for several."),
        ConfigOption(
            "finetune_seeds",
            ("--finetune-seeds",),
            str,
            help_text(docs.get("finetune_seeds", "")) + f" Comma-separated (default: {seeds}).",
        ),
    ]
    return generated_command("demo", demo_command.__doc__, options, NoOptions, _run_demo)


def _run_demo(_: NoOptions, fields: dict[str, Any]) -> None:
    from bertkit.demo import DemoConfig, run_demo

    chosen = {k: v for k, v in fields.items() if v is not None}
    if chosen.get("reference_model", "").lower() == "none":
        chosen["reference_model"] = None
    if "finetune_seeds" in chosen:
        chosen["finetune_seeds"] = _seeds(chosen["finetune_seeds"])
    if chosen.get("corpus"):
        chosen["corpus"] = tuple(chosen["corpus"])
    else:
        chosen.pop("corpus", None)
    print(run_demo(DemoConfig(**chosen)).read_text(encoding="utf-8"))  # the report is the command's output


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
