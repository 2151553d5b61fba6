"""What a resume may change: the options a run was started with, recorded beside its checkpoints and compared
with those a resume is given (``pretrain``, ``finetune`` and ``distill`` alike).

A run writes its options, flat as the flags name them, to ``run_options.json`` in its checkpoint directory. A
resume that finds that file compares: an option that defines the run (the model, the data, the learning rate,
the recipe, the masking, the temperature...) must not change, since the checkpoint's weights, optimizer state
and data position only mean something under the options that made them; such a change is refused in one line
naming each option with its old and new value. The options in :data:`MAY_CHANGE` (how long the run goes, how
often it logs, evaluates and saves, where it reports and where it runs) may change, and each change is logged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.io import atomic_write_text
from bertkit.notices import notice
from bertkit.option_groups import flag

RUN_OPTIONS = "run_options.json"
"""The file in a run's checkpoint directory that holds the options it was started (or last resumed) with."""

MAY_CHANGE: frozenset[str] = frozenset(
    {
        # how long the run goes (the schedule and a decaying masking rate stretch over the new length)
        "max_steps",
        "max_time",
        "epochs",
        "early_stopping_patience",
        # how often it logs, evaluates and saves, and how much it keeps
        "log_every",
        "progress",
        "plot",
        "peak_flops",
        "eval_every",
        "eval_each_epoch",
        "eval_batches",
        "eval_batch_size",
        "save_every",
        "keep_last",
        # where it reports
        "report_to",
        "run_name",
        "run_group",
        "tracking_uri",
        "experiment",
        "project",
        "tags",
        "log_model",
        # where and how fast it runs
        "device",
        "num_workers",
        "compile",
    }
)
"""Options a resume may change (docs/pretraining.md and docs/finetuning.md list them); each change is logged."""

NOT_COMPARED: frozenset[str] = frozenset({"output_dir", "extra", "max_steps_from", "resume", "overwrite", "sized"})
"""Values the entry point derives or that say how to start rather than what the run is."""


def run_options(config: Any, **more: Any) -> dict[str, Any]:
    """The options of ``config`` (a ``PretrainConfig`` or ``FinetuneConfig``: its ``to_dict()`` with the
    training options and the task options flattened in) and ``more`` (distillation's), flat and JSON-safe."""
    own = config.to_dict()
    flat = {key: value for key, value in own.items() if key not in ("train", "task_options")}
    flat.update(own["train"])
    flat.update(own.get("task_options") or {})
    flat.update(more)
    plain: dict[str, Any] = json.loads(json.dumps(flat, default=str))
    return {key: value for key, value in plain.items() if key not in NOT_COMPARED}


def check_resumed_options(directory: Path, options: Mapping[str, Any]) -> None:
    """Compare ``options`` with those recorded in ``directory`` (a run being resumed): refuse a change that
    alters the run, naming each option with its old and new value; log the changes :data:`MAY_CHANGE` allows.
    A directory without the record (a run of an older bertkit) is resumed unchecked."""
    saved = _read(Path(directory) / RUN_OPTIONS)
    if saved is None:
        return
    changed = {
        name: (saved.get(name), options.get(name))
        for name in sorted(set(saved) | set(options))
        if name not in NOT_COMPARED and saved.get(name) != options.get(name)
    }
    refused = [name for name in changed if name not in MAY_CHANGE]
    if refused:
        listed = ", ".join(_change(name, *changed[name]) for name in refused)
        raise ConfigError(
            f"--resume continues the run in {directory} with the options it was started with, but {listed}; "
            f"give the run's options again, or start a new run with another --output"
        )
    for name, (old, new) in changed.items():
        notice(f"resuming with {_change(name, old, new)}")


def record_options(directory: Path, options: Mapping[str, Any]) -> None:
    """Write ``options`` as the run's record in ``directory`` (the main process, when the run starts)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / RUN_OPTIONS, json.dumps(dict(options), indent=1, sort_keys=True) + "\n")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) else None


def _change(name: str, old: Any, new: Any) -> str:
    """``--lr 0.0001 -> 0.005``."""
    return f"{flag(name)} {_show(old)} -> {_show(new)}"


def _show(value: Any) -> str:
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ",".join(str(item) for item in value) or "(none)"
    return str(value)
