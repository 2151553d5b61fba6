"""TrainConfig: every knob of the shared training loop, typed, documented and validated, in groups.

Pre-training (:class:`bertkit.training.pretrain.PretrainConfig`) and fine-tuning
(:class:`bertkit.training.finetune.FinetuneConfig`) nest this dataclass as ``.train``. It nests one group per
concern (batch, duration, optimizer, schedule, precision, evaluation, checkpointing, logging, distributed), as
torchtitan's job config does; each group owns its fields' docstrings and checks (:mod:`bertkit.option_groups`
checks the ``Literal`` ones from their types). Each field is declared once: the CLI derives its flat options
and help from the fields (``bertkit.cli_options``), and :func:`read_config_file` fills them from TOML/YAML files
with the same rules for both commands.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bertkit.errors import ConfigError
from bertkit.formats import read_text
from bertkit.notices import notice
from bertkit.option_groups import (
    NOT_AN_OPTION,
    OptionGroup,
    above,
    at_least,
    between,
    check_numbers,
    flat,
    from_flat,
    leaves,
    option_names,
    replace_flat,
    to_flat,
)
from bertkit.training.optim import OptimizerName, ScheduleName
from bertkit.training.precision import PrecisionName

__all__ = [
    "NOT_AN_OPTION",
    "BatchConfig",
    "CheckpointConfig",
    "DistributedConfig",
    "DurationConfig",
    "EvaluationConfig",
    "LoggingConfig",
    "OptimizerConfig",
    "PrecisionConfig",
    "ScheduleConfig",
    "TrackingConfig",
    "TrainConfig",
    "option_names",
    "parse_duration",
    "read_config_file",
    "read_options_file",
    "split_options",
]

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)d)?\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*"
    r"(?:(\d+(?:\.\d+)?)s?)?\s*$"
)


def read_options_file(path: str | os.PathLike) -> dict[str, Any]:
    """The table of options in a TOML file (or YAML, with PyYAML), as parsed; callers map the keys.

    Shared by ``bertkit pretrain --config`` and ``bertkit finetune --config``: every way the file can be
    unreadable is one ``ConfigError``.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = read_text(path, ConfigError)
    try:
        if path.suffix in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise ConfigError("reading YAML needs PyYAML (pip install pyyaml), or write the file as TOML") from None
            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(f"cannot parse {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a table of options")
    return data


def parse_duration(value: str | float | None) -> float | None:
    """Seconds from ``3600``, ``"90m"``, ``"1h30m"``, ``"2d"``, ``"45s"``; ``None`` stays ``None``."""
    if value is None or isinstance(value, (int, float)):
        return None if value is None else float(value)
    match = _DURATION.match(value)
    if not value.strip() or match is None or not any(match.groups()):
        raise ConfigError(f"cannot read duration {value!r}; write e.g. 3600, 45s, 90m, 1h30m or 2d")
    d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return d * 86400 + h * 3600 + m * 60 + s


# ------------------------------------------------------------------------------------------ groups
@dataclass
class BatchConfig(OptionGroup):
    """How many sequences make a forward pass and an update."""

    micro_batch_size: int = field(default=32, metadata=at_least(1))
    """Sequences per forward/backward pass on one process."""
    global_batch_size: int | None = field(default=None, metadata=at_least(1))
    """Sequences per optimizer update over all processes and accumulation steps. Must be a multiple of
    ``micro_batch_size x world_size``; gradient accumulation is derived from it."""
    grad_accum_steps: int | None = field(default=None, metadata=at_least(1))
    """Micro-batches accumulated per update on each process; give this or ``global_batch_size`` (default 1)."""
    batch_warmup_steps: int = field(default=0, metadata=at_least(0))
    """Batch-size warmup (Cramming, ModernBERT): over the first N updates the batch grows linearly from one
    micro-batch per process to the full global batch, by accumulating fewer micro-batches; 0: off."""
    batch_warmup_ratio: float | None = field(default=None, metadata=between(0, 1, high_open=True))
    """Batch-size warmup over this share of the run instead of a number of updates: on a time budget
    (``max_time`` alone) the share of the budget spent, as Cramming's budget-aware ramp."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_warmup_ratio is not None and self.batch_warmup_steps:
            raise ConfigError("give --batch-warmup-steps or --batch-warmup-ratio, not both")
        if self.global_batch_size is not None and self.grad_accum_steps is not None:
            raise ConfigError(
                "give --global-batch-size or --grad-accum-steps, not both (one is derived from the other)"
            )

    def accumulation(self, world_size: int = 1) -> int:
        """Micro-batches per update on each process, derived for ``world_size`` processes."""
        if self.global_batch_size is None:
            return self.grad_accum_steps or 1
        per_update = self.micro_batch_size * world_size
        if self.global_batch_size % per_update:
            raise ConfigError(
                f"global_batch_size {self.global_batch_size} is not a multiple of micro_batch_size x processes "
                f"= {self.micro_batch_size} x {world_size}; change one of them"
            )
        return self.global_batch_size // per_update

    def warmup(self, total_steps: int) -> int:
        """Updates of batch-size warmup in a run of ``total_steps`` updates."""
        if self.batch_warmup_ratio is not None:
            return int(self.batch_warmup_ratio * total_steps)
        return self.batch_warmup_steps

    def accumulation_at(self, step: int, world_size: int = 1, total_steps: int | None = None) -> int:
        """Micro-batches per process for the update with index ``step`` (0-based) of a run of ``total_steps``
        updates (a ``batch_warmup_ratio`` needs it), batch-size warmup included."""
        full = self.accumulation(world_size)
        warmup = self.warmup(total_steps or 0)
        if step >= warmup:
            return full
        return max(1, math.ceil(full * (step + 1) / warmup))

    def micro_batches(self, steps: int, world_size: int = 1) -> int:
        """Micro-batches per process that a run of ``steps`` updates consumes, batch-size warmup included."""
        ramp = min(steps, self.warmup(steps))
        ramped = sum(self.accumulation_at(step, world_size, steps) for step in range(ramp))
        return ramped + (steps - ramp) * self.accumulation(world_size)


@dataclass
class DurationConfig(OptionGroup):
    """When the run ends: updates, wall-clock time or epochs, whichever comes first."""

    max_steps: int | None = field(default=None, metadata=at_least(1))
    """Optimizer updates to run. With ``max_time`` alone, the schedule is stretched over the time budget."""
    max_time: float | None = field(default=None, metadata=above(0, cli_type=str))
    """Wall-clock budget in seconds (or ``"8h"``, ``"90m"``), summed over resumed runs."""
    epochs: float | None = field(default=None, metadata=above(0))
    """Passes over the training data. With ``max_steps`` too, the run ends at whichever comes first, and its stop
    reason (``epochs`` or ``max_steps``) says which."""
    max_steps_from: Literal["max_steps", "epochs"] = field(default="max_steps", metadata=NOT_AN_OPTION)
    """What ``max_steps`` stands for, reported as the stop reason when the run reaches it: ``max_steps``, or
    ``epochs`` when :meth:`TrainConfig.for_epoch` found that the epochs end the run first."""

    def __post_init__(self) -> None:
        self.max_time = parse_duration(self.max_time)  # "8h" -> seconds, then checked as a number
        super().__post_init__()
        if self.max_steps is None and self.max_time is None and self.epochs is None:
            raise ConfigError("set --max-steps, --max-time or --epochs: the run needs an end")


@dataclass
class OptimizerConfig(OptionGroup):
    """How gradients become an update."""

    name: OptimizerName = field(default="adamw", metadata=flat("optimizer"))
    """``adamw`` (decoupled weight decay, eps 1e-6) or ``lamb`` (layer-wise trust ratio, large batches)."""
    lr: float = field(default=1e-4, metadata=above(0))
    """Peak learning rate (after warmup)."""
    weight_decay: float = field(default=0.01, metadata=at_least(0))
    """Decoupled weight decay; biases and LayerNorm parameters are excluded."""
    adam_beta1: float = field(default=0.9, metadata=between(0, 1, high_open=True))
    """First-moment decay of Adam/LAMB."""
    adam_beta2: float = field(default=0.999, metadata=between(0, 1, high_open=True))
    """Second-moment decay of Adam/LAMB."""
    adam_eps: float = field(default=1e-6, metadata=above(0))
    """Adam/LAMB epsilon (BERT uses 1e-6, not PyTorch's 1e-8)."""
    clip_grad_norm: float | None = field(default=1.0, metadata=at_least(0))
    """Clip the global gradient norm to this value; ``None`` or 0 disables clipping."""


@dataclass
class ScheduleConfig(OptionGroup):
    """The learning rate over the run: warmup, then the schedule's decay."""

    name: ScheduleName = field(default="linear", metadata=flat("schedule"))
    """``linear`` (Google BERT: warmup, and a linear decay to 0 that starts at step 0), ``poly`` (decays from the
    end of the warmup, as transformers; ``schedule_power`` 1 is linear), ``cosine``, ``constant``, ``wsd``
    (warmup, flat, a linear decay over the last ``decay_ratio``) or ``onecycle`` (a cosine up from 1/25 of the
    peak over the warmup, then a cosine down to 0)."""
    power: float = field(default=1.0, metadata=flat("schedule_power", **above(0)))
    """Exponent of the ``poly`` schedule (NVIDIA's LAMB recipe uses 0.5)."""
    warmup_steps: int | None = field(default=None, metadata=at_least(0))
    """Updates of linear warmup; give this or ``warmup_ratio``."""
    warmup_ratio: float | None = field(default=None, metadata=between(0, 1, high_open=True))
    """Warmup as a fraction of ``max_steps`` (e.g. 0.1 for fine-tuning, 0.01 for pre-training)."""
    decay_ratio: float = field(default=0.2, metadata=between(0, 1, low_open=True))
    """Share of the updates at the end of a ``wsd`` (warmup-stable-decay) schedule that decay linearly to 0."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.warmup_steps is not None and self.warmup_ratio is not None:
            raise ConfigError("give --warmup-steps or --warmup-ratio, not both")

    def warmup(self, total_steps: int) -> int:
        """Warmup updates for a run of ``total_steps``."""
        if self.warmup_steps is not None:
            return self.warmup_steps
        return int((self.warmup_ratio or 0) * total_steps)


@dataclass
class PrecisionConfig(OptionGroup):
    """The numbers the model computes in."""

    mode: PrecisionName = field(default="auto", metadata=flat("precision"))
    """``fp32``, ``bf16`` (autocast), ``fp16`` (autocast + loss scaling, CUDA only) or ``auto`` (bf16 on a
    GPU that supports it, else fp32)."""


@dataclass
class EvaluationConfig(OptionGroup):
    """When the evaluation callback runs, and which result is the best model."""

    eval_every: int = field(default=0, metadata=at_least(0))
    """Run the evaluation callback every N updates (0: only at the end, if a callback is given)."""
    eval_each_epoch: bool = True
    """With a finite batch source, also evaluate when an epoch ends (fine-tuning)."""
    best_metric: str | None = None
    """Evaluation metric that selects the best model (exported to ``output_dir/best``), e.g. ``accuracy``."""
    best_mode: Literal["max", "min"] = "max"
    """``max`` if a larger ``best_metric`` is better (accuracy, F1), ``min`` for losses."""

    def is_better(self, value: float, best: float | None) -> bool:
        """Whether ``value`` of ``best_metric`` beats the ``best`` so far."""
        return best is None or (value > best if self.best_mode == "max" else value < best)


@dataclass
class CheckpointConfig(OptionGroup):
    """When checkpoints are written, how many stay, and where a run continues from."""

    save_every: int = field(default=0, metadata=at_least(0))
    """Write a checkpoint every N updates (0: only at the end and on SIGTERM/SIGINT)."""
    keep_last: int = field(default=3, metadata=at_least(1))
    """Checkpoints kept on disk; older ones are deleted after a new one is complete."""
    resume: str | None = None
    """``auto``: continue from the latest valid checkpoint in ``output_dir`` if any; a path: from that
    checkpoint; ``None``: start fresh (an existing checkpoint in ``output_dir`` is then an error)."""


@dataclass
class LoggingConfig(OptionGroup):
    """What the run reports, and how often."""

    log_every: int = field(default=10, metadata=at_least(1))
    """Log training metrics every N updates (JSONL, TensorBoard, the progress display)."""
    progress: bool = True
    """Show progress on stderr (main process only): a bar in a terminal, a plain line every 30 s when
    redirected to a file or a CI log."""
    plot: bool = True
    """Write ``curves.png`` at the end (needs ``matplotlib``; skipped with a notice if absent)."""
    peak_flops: float | None = field(default=None, metadata=above(0))
    """Peak FLOP/s of one device, the MFU denominator. Default: pre-training takes the GPU's datasheet dense peak
    at the run's precision (the measured matmul peak on a CPU or an unlisted GPU); fine-tuning logs no MFU."""


TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "plots"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
}
"""Each ``--report-to`` tracker: the package it needs and the extra that installs it."""


@dataclass
class TrackingConfig(OptionGroup):
    """Where the run is reported besides ``metrics.jsonl``: TensorBoard, MLflow, Weights & Biases."""

    report_to: list[str] | None = field(default=None, metadata={"cli_type": list[str]})
    """Trackers that receive the run, as the Hugging Face Trainer's ``report_to``: ``tensorboard``, ``mlflow``,
    ``wandb``, ``all`` (every one installed) or ``none``; repeat the flag or separate names with commas.
    Default: TensorBoard events in the output folder, when tensorboard is installed."""
    run_name: str | None = None
    """Name of the tracked run; default: the output folder's name."""
    run_group: str | None = None
    """Group of related runs: the W&B group and the MLflow tag ``bertkit.group`` (``--search`` groups its runs
    under the search's name)."""
    tracking_uri: str | None = None
    """MLflow server or store (``http://127.0.0.1:5000``, ``file:/path/mlruns``); default: ``MLFLOW_TRACKING_URI``,
    else MLflow's own default."""
    experiment: str | None = None
    """MLflow experiment; default: ``MLFLOW_EXPERIMENT_NAME``, else ``bertkit``."""
    project: str | None = None
    """W&B project; default: ``WANDB_PROJECT``, else ``bertkit`` (``WANDB_MODE=offline`` keeps the run on disk)."""
    tags: list[str] | None = field(default=None, metadata={"cli_type": list[str]})
    """Tags of the tracked run, ``key=value`` or a bare word; repeat the flag or separate tags with commas."""
    log_model: bool = False
    """Also send the final model folder to MLflow and W&B as an artifact (off: models are large)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.report_to = _names(self.report_to) if self.report_to is not None else None
        self.tags = _names(self.tags, lower=False) if self.tags is not None else None
        for name in self.report_to or ():
            if name not in (*TRACKERS, "all", "none"):
                raise ConfigError(f"unknown --report-to {name!r}; choose tensorboard, mlflow, wandb, all or none")
        if "none" in (self.report_to or ()) and len(self.report_to or ()) > 1:
            raise ConfigError("--report-to none goes alone; leave it out to report to the others")
        for name in self.trackers() if self.report_to is not None else ():
            package, extra = TRACKERS[name]
            if importlib.util.find_spec(package) is None:
                raise ConfigError(
                    f"--report-to {name} needs the {package} package: pip install 'bertkit[{extra}]' "
                    f"(or drop {name} from --report-to)"
                )

    def trackers(self) -> tuple[str, ...]:
        """The trackers this run reports to (``all`` resolved to the installed ones; default TensorBoard)."""
        names = self.report_to if self.report_to is not None else ["tensorboard"]
        if "all" in names:
            installed = [name for name, (package, _) in TRACKERS.items() if importlib.util.find_spec(package)]
            names = [*names, *installed]
        return tuple(name for name in TRACKERS if name in names)


def _names(values: str | list[str], lower: bool = True) -> list[str]:
    """``"a,b"`` or ``["a", "b,c"]`` as ``["a", "b", "c"]``."""
    items = [values] if isinstance(values, str) else list(values)
    names = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    return [name.lower() for name in names] if lower else names


@dataclass
class DistributedConfig(OptionGroup):
    """Where the model trains, and how processes share it."""

    device: str | None = None
    """``cpu``, ``cuda``, ``cuda:1``...; default: this process's GPU if there is one, else CPU."""
    fsdp: bool = False
    """Shard parameters, gradients and optimizer state over the processes (FSDP2) instead of replicating them
    (DDP): for models whose training state does not fit one device. Checkpoints stay full and portable."""
    ddp_find_unused_parameters: bool = False
    """Let DistributedDataParallel tolerate parameters without gradients (e.g. a pooler a head ignores)."""


# ------------------------------------------------------------------------------------------ the config
@dataclass(kw_only=True)
class TrainConfig:
    """Options of :func:`bertkit.training.loop.train`, shared by pre-training and fine-tuning, in groups.

    Code reads ``config.optimizer.lr``; users name options flat (``--lr``, ``lr = 5e-5``), and
    :meth:`from_options` builds the groups from flat names.
    """

    output_dir: Path = field(default=Path("runs/train"), metadata=NOT_AN_OPTION)
    """Where checkpoints (``checkpoint-<step>/``), ``metrics.jsonl``, TensorBoard events and plots go."""
    batch: BatchConfig = field(default_factory=BatchConfig)
    """Micro-batch, global batch and accumulation."""
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    """Optimizer, learning rate, weight decay, Adam moments, gradient clipping."""
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    """Learning-rate schedule and warmup."""
    duration: DurationConfig
    """When the run ends (required: a run needs an end)."""
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    """fp32, bf16, fp16 or auto."""
    seed: int = 42
    """Seed of model init, dropout and every generator the loop owns; process ``r`` uses ``seed + r``."""
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    """When to evaluate, and which result is the best model."""
    checkpointing: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpoint cadence, how many to keep, and resume."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Log cadence, progress display, curves, the MFU peak."""
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    """Experiment trackers (TensorBoard, MLflow, W&B), the run's name, group and tags."""
    max_bad_steps: int = field(default=10, metadata=at_least(1))
    """Consecutive updates with a non-finite loss or gradient that stop the run (each one is skipped)."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Device, and DDP or FSDP over processes."""
    compile: bool = False
    """Run the model through ``torch.compile`` (symbolic batch and sequence sizes, so varying lengths reuse
    one graph): fuses the small element-wise kernels; the first steps pay the compilation (tens of seconds)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=NOT_AN_OPTION)
    """Free-form values stored with checkpoints (e.g. the data directory), for humans."""

    def __post_init__(self) -> None:
        self.output_dir = Path(self.output_dir)
        check_numbers(self)

    # ------------------------------------------------------------------------------ flat options
    @classmethod
    def from_options(cls, **options: Any) -> TrainConfig:
        """A config from flat options, as the command line and config files name them (``lr=5e-5``)."""
        return from_flat(cls, _known(options))

    def with_options(self, **options: Any) -> TrainConfig:
        """This config with the flat ``options`` changed (``with_options(lr=3e-5)``), checked again."""
        return replace_flat(self, _known(options))

    def to_dict(self) -> dict[str, Any]:
        """Flat values only (strings, numbers, lists, dicts): safe for JSON and ``weights_only`` loading."""
        out = to_flat(self)
        out["output_dir"] = str(self.output_dir)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """The inverse of :meth:`to_dict`."""
        return cls.from_options(**data)

    # ------------------------------------------------------------------------------ derived values
    def accumulation(self, world_size: int = 1) -> int:
        """Micro-batches per update on each process (:meth:`BatchConfig.accumulation`)."""
        return self.batch.accumulation(world_size)

    def for_epoch(self, micro_batches: int, world_size: int = 1) -> TrainConfig:
        """This config with ``epochs`` turned into updates, for an epoch of ``micro_batches`` per process.

        ``max_steps`` becomes the smaller of the two limits and ``max_steps_from`` says which one it is, so the
        run ends at whichever comes first and reports it. Without ``epochs`` the config is returned as it is.
        """
        duration = self.duration
        if duration.epochs is None:
            return self
        by_epochs = max(1, math.ceil(duration.epochs * micro_batches / self.accumulation(world_size)))
        if duration.max_steps is not None and duration.max_steps <= by_epochs:
            return self.with_options(max_steps_from="max_steps")
        return self.with_options(max_steps=by_epochs, max_steps_from="epochs")


def _known(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` if every key is a training option; else a ``ConfigError`` naming the closest one."""
    known = [leaf.name for leaf in leaves(TrainConfig)]
    options = _without_tensorboard_key(options)
    for key in options:
        if key not in known:
            raise ConfigError(f"unknown training option {key!r}{_did_you_mean(key, known)}")
    return options


def _without_tensorboard_key(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with a ``tensorboard`` key (config files and saved run configs that predate ``report_to``
    being the one switch) read as ``report_to``: ``tensorboard = false`` is ``report_to`` without tensorboard,
    said in one line; ``true`` was the default and changes nothing."""
    out = dict(options)
    if "tensorboard" not in out or out.pop("tensorboard"):
        return out
    asked = _names(out["report_to"]) if out.get("report_to") is not None else ["tensorboard"]
    if "all" in asked:
        asked = [name for name, (package, _) in TRACKERS.items() if importlib.util.find_spec(package)]
    kept = [name for name in asked if name not in ("tensorboard", "all")]
    out["report_to"] = kept or ["none"]
    notice(f"tensorboard = false is read as report_to = {out['report_to']} (report_to is the one tracker switch)")
    return out


# ------------------------------------------------------------------------------------------ options
_OTHER_NAMES = {
    "learning_rate": "lr",
    "num_train_epochs": "epochs",
    "num_epochs": "epochs",
    "per_device_train_batch_size": "micro_batch_size",
    "train_batch_size": "global_batch_size",
    "batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "grad_accum_steps",
    "max_grad_norm": "clip_grad_norm",
    "lr_scheduler_type": "schedule",
    "adam_epsilon": "adam_eps",
    "num_warmup_steps": "warmup_steps",
    "max_seq_len": "max_seq_length",
    "logging_steps": "log_every",
    "save_steps": "save_every",
    "eval_steps": "eval_every",
}
"""Keys other trainers (Hugging Face's ``TrainingArguments``, Google's BERT flags) spell differently."""


def _did_you_mean(key: str, known: Iterable[str]) -> str:
    names = list(known)
    if _OTHER_NAMES.get(key) in names:
        return f" (did you mean {_OTHER_NAMES[key]!r}?)"
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def split_options(options: Mapping[str, Any], cls: type, *, source: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """Flat options as ``(fields of cls, TrainConfig fields)``; a name in both belongs to ``cls``.

    An unknown key is a ``ConfigError`` naming it and the closest known one (``source`` prefixes it).
    """
    own_names = [name for name in option_names(cls) if name != "train"]
    train_names = option_names(TrainConfig)
    own: dict[str, Any] = {}
    train: dict[str, Any] = {}
    for key, value in _without_tensorboard_key(options).items():
        if key in own_names:
            own[key] = value
        elif key in train_names:
            train[key] = value
        else:
            prefix = f"{source}: " if source else ""
            raise ConfigError(f"{prefix}unknown option {key!r}{_did_you_mean(key, own_names + train_names)}")
    return own, train


def read_config_file(path: str | os.PathLike, cls: type) -> dict[str, Any]:
    """Flat options for ``cls`` (a config that nests a :class:`TrainConfig` as ``train``) from a TOML/YAML file:
    the one config-file reader of every command (``read_config_file(path, PretrainConfig)``,
    ``read_config_file(path, FinetuneConfig)``).

    Keys are the dataclass fields (``-`` and ``_`` alike); training options may sit at the top or in a
    ``[train]`` (or ``[train_options]``) table, which wins. Dict-valued fields (``task_options``) stay tables.
    ``cls.FILE_ALIASES``, where the class has it, maps short keys to fields (``dev`` -> ``dev_file``; a string
    ``train`` is then ``train_file``); tables named in ``cls.FILE_SECTIONS`` belong to another reader and are
    left out. Unknown keys are an error naming the closest known one.
    """
    aliases: Mapping[str, str] = getattr(cls, "FILE_ALIASES", {})
    sections: tuple[str, ...] = getattr(cls, "FILE_SECTIONS", ())
    data = {k.replace("-", "_"): v for k, v in read_options_file(path).items() if k not in sections}
    tables = [data.pop(name) for name in ("train", "train_options") if isinstance(data.get(name), Mapping)]
    flat = {aliases.get(key, key): value for key, value in data.items()}
    for table in tables:  # a key in a table wins over the same key at the top
        flat.update({k.replace("-", "_"): v for k, v in table.items()})
    flat = _without_tensorboard_key(flat)
    split_options(flat, cls, source=str(path))  # unknown keys are an error now, before anything runs
    return flat
