"""``pretrain``: its options are generated from ``PretrainConfig`` and ``TrainConfig``; what is no config
field (the config file, the resume switches) is ``PretrainRunOptions``, declared here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from bertkit.cli.options import cli, config_options, lazy_command
from bertkit.cli.program import stopped_by_signal
from bertkit.cli.shared_options import generated_command, shared

commands = typer.Typer(rich_markup_mode=None)


def _pretrain_function() -> Callable[..., None]:
    from bertkit.training.pretrain import PretrainConfig
    from bertkit.training.train_config import TrainConfig

    options = config_options([PretrainConfig, TrainConfig], flags={"output": ("--output", "-o")}, exclude={"resume"})
    return generated_command("pretrain", pretrain_command.__doc__, options, PretrainRunOptions, _run_pretrain)


@dataclass(kw_only=True)
class PretrainRunOptions:
    """The options of ``pretrain`` that are no field of its config."""

    config: str | None = shared("config")
    resume: bool = field(default=False, metadata=cli("--resume"))
    """Continue from the latest valid checkpoint in --output."""
    resume_from: str | None = field(default=None, metadata=cli("--resume-from"))
    """Continue from this checkpoint directory."""
    threads: int | None = shared("threads")


def _run_pretrain(options: PretrainRunOptions, fields: dict[str, Any]) -> None:
    from bertkit.jobs import pretrain

    result = pretrain(
        config=options.config,
        resume=options.resume,
        resume_from=options.resume_from,
        threads=options.threads,
        **fields,
    )
    if result.stop_reason == "signal":
        stopped_by_signal(
            result.signal,
            f"stopped by a signal at step {result.step}; checkpoint {result.checkpoint}. "
            "Continue with the same command plus --resume.",
        )


@commands.command(
    "pretrain",
    short_help="Pre-train BERT or ModernBERT (masked LM, + next sentence).",
    cls=lazy_command(_pretrain_function),
)
def pretrain_command() -> None:
    """Pre-train BERT (masked LM + next sentence, or masked LM only on --no-nsp data) or ModernBERT
    (--architecture modernbert, masked LM only) on a prepared dataset; resumable, multi-process with torchrun.

    \b
    Example:
      bertkit pretrain --data data/wiki128 --model-config mini \\
        --output runs/mini --global-batch-size 256 --micro-batch-size 64 \\
        --lr 1e-4 --warmup-steps 1000 --max-steps 20000 --save-every 1000 \\
        --eval-every 1000
      bertkit pretrain --data data/modern128 --recipe modern \\
        --architecture modernbert --model-config mini --output runs/modernbert \\
        --max-steps 20000
    """
