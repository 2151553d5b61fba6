"""TrainConfig: every knob of the shared training loop, typed, documented and validated.

Pre-training (:class:`bertkit.training.pretrain.PretrainConfig`) and fine-tuning
(:class:`bertkit.training.finetune.FinetuneConfig`) nest this dataclass as ``.train``. Each field is declared
once, with its docstring: the CLI derives its options and help from the fields (``bertkit.cli_options``), and
:func:`read_config_file` fills them from TOML/YAML files with the same rules for both commands.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertkit.errors import ConfigError
from bertkit.formats import read_text
from bertkit.training.optim import OPTIMIZERS, SCHEDULES

PRECISIONS = ("auto", "fp32", "bf16", "fp16")

NOT_AN_OPTION = {"option": False}
"""Field metadata of values the entry point derives (``output_dir``...): neither a CLI flag nor a file key."""

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


@dataclass
class TrainConfig:
    """Options of :func:`bertkit.training.loop.train`, shared by pre-training and fine-tuning."""

    output_dir: Path = field(default=Path("runs/train"), metadata=NOT_AN_OPTION)
    """Where checkpoints (``checkpoint-<step>/``), ``metrics.jsonl``, TensorBoard events and plots go."""
    micro_batch_size: int = 32
    """Sequences per forward/backward pass on one process."""
    global_batch_size: int | None = None
    """Sequences per optimizer update over all processes and accumulation steps. Must be a multiple of
    ``micro_batch_size x world_size``; gradient accumulation is derived from it."""
    grad_accum_steps: int | None = None
    """Micro-batches accumulated per update on each process; give this or ``global_batch_size`` (default 1)."""
    lr: float = 1e-4
    """Peak learning rate (after warmup)."""
    optimizer: str = "adamw"
    """``adamw`` (decoupled weight decay, eps 1e-6) or ``lamb`` (layer-wise trust ratio, large batches)."""
    weight_decay: float = 0.01
    """Decoupled weight decay; biases and LayerNorm parameters are excluded."""
    adam_beta1: float = 0.9
    """First-moment decay of Adam/LAMB."""
    adam_beta2: float = 0.999
    """Second-moment decay of Adam/LAMB."""
    adam_eps: float = 1e-6
    """Adam/LAMB epsilon (BERT uses 1e-6, not PyTorch's 1e-8)."""
    schedule: str = "linear"
    """``linear`` (Google BERT: warmup, and a linear decay to 0 that starts at step 0), ``poly`` (decays from the
    end of the warmup, as transformers; ``schedule_power`` 1 is linear), ``cosine`` or ``constant``."""
    schedule_power: float = 1.0
    """Exponent of the ``poly`` schedule (NVIDIA's LAMB recipe uses 0.5)."""
    warmup_steps: int | None = None
    """Updates of linear warmup; give this or ``warmup_ratio``."""
    warmup_ratio: float | None = None
    """Warmup as a fraction of ``max_steps`` (e.g. 0.1 for fine-tuning, 0.01 for pre-training)."""
    max_steps: int | None = None
    """Optimizer updates to run. With ``max_time`` alone, the schedule is stretched over the time budget."""
    max_time: float | None = field(default=None, metadata={"cli_type": str})
    """Wall-clock budget in seconds (or ``"8h"``, ``"90m"``), summed over resumed runs."""
    epochs: float | None = None
    """Passes over the training data. With ``max_steps`` too, the run ends at whichever comes first, and its stop
    reason (``epochs`` or ``max_steps``) says which."""
    max_steps_from: str = field(default="max_steps", metadata=NOT_AN_OPTION)
    """What ``max_steps`` stands for, reported as the stop reason when the run reaches it: ``max_steps``, or
    ``epochs`` when :meth:`for_epoch` found that the epochs end the run first."""
    clip_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this value; ``None`` or 0 disables clipping."""
    precision: str = "auto"
    """``fp32``, ``bf16`` (autocast), ``fp16`` (autocast + loss scaling, CUDA only) or ``auto`` (bf16 on a
    GPU that supports it, else fp32)."""
    seed: int = 42
    """Seed of model init, dropout and every generator the loop owns; process ``r`` uses ``seed + r``."""
    eval_every: int = 0
    """Run the evaluation callback every N updates (0: only at the end, if a callback is given)."""
    save_every: int = 0
    """Write a checkpoint every N updates (0: only at the end and on SIGTERM/SIGINT)."""
    keep_last: int = 3
    """Checkpoints kept on disk; older ones are deleted after a new one is complete."""
    log_every: int = 10
    """Log training metrics every N updates (JSONL, TensorBoard, progress bar)."""
    max_bad_steps: int = 10
    """Consecutive updates with a non-finite loss or gradient that stop the run (each one is skipped)."""
    resume: str | None = None
    """``auto``: continue from the latest valid checkpoint in ``output_dir`` if any; a path: from that
    checkpoint; ``None``: start fresh (an existing checkpoint in ``output_dir`` is then an error)."""
    device: str | None = None
    """``cpu``, ``cuda``, ``cuda:1``...; default: this process's GPU if there is one, else CPU."""
    progress: bool = True
    """Show a progress bar (main process only)."""
    tensorboard: bool = True
    """Write TensorBoard event files (needs the ``tensorboard`` package; skipped with a notice if absent)."""
    plot: bool = True
    """Write ``curves.png`` at the end (needs ``matplotlib``; skipped with a notice if absent)."""
    best_metric: str | None = None
    """Evaluation metric that selects the best model (exported to ``output_dir/best``), e.g. ``accuracy``."""
    best_mode: str = "max"
    """``max`` if a larger ``best_metric`` is better (accuracy, F1), ``min`` for losses."""
    eval_each_epoch: bool = True
    """With a finite batch source, also evaluate when an epoch ends (fine-tuning)."""
    fsdp: bool = False
    """Shard parameters, gradients and optimizer state over the processes (FSDP2) instead of replicating them
    (DDP): for models whose training state does not fit one device. Checkpoints stay full and portable."""
    ddp_find_unused_parameters: bool = False
    """Let DistributedDataParallel tolerate parameters without gradients (e.g. a pooler a head ignores)."""
    compile: bool = False
    """Run the model through ``torch.compile`` (symbolic batch and sequence sizes, so varying lengths reuse
    one graph): fuses the small element-wise kernels; the first steps pay the compilation (tens of seconds)."""
    peak_flops: float | None = None
    """Peak FLOP/s of one device, the MFU denominator. Default: pre-training takes the GPU's datasheet dense peak
    at the run's precision (the measured matmul peak on a CPU or an unlisted GPU); fine-tuning logs no MFU."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=NOT_AN_OPTION)
    """Free-form values stored with checkpoints (e.g. the data directory), for humans."""

    def __post_init__(self) -> None:
        self.output_dir = Path(self.output_dir)
        self.max_time = parse_duration(self.max_time)
        positive = ("micro_batch_size", "keep_last", "log_every", "max_bad_steps")
        for name in positive:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("global_batch_size", "grad_accum_steps", "max_steps"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("eval_every", "save_every", "warmup_steps"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
        if self.global_batch_size is not None and self.grad_accum_steps is not None:
            raise ConfigError(
                "give --global-batch-size or --grad-accum-steps, not both (one is derived from the other)"
            )
        if self.warmup_steps is not None and self.warmup_ratio is not None:
            raise ConfigError("give --warmup-steps or --warmup-ratio, not both")
        if self.warmup_ratio is not None and not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"--warmup-ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ConfigError(f"--weight-decay must be >= 0, got {self.weight_decay}")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.max_time is not None and self.max_time <= 0:
            raise ConfigError(f"--max-time must be positive, got {self.max_time}")
        if self.epochs is not None and not self.epochs > 0:
            raise ConfigError(f"epochs must be positive, got {self.epochs}")
        if self.max_steps is None and self.max_time is None and self.epochs is None:
            raise ConfigError("set --max-steps, --max-time or --epochs: the run needs an end")
        if self.max_steps_from not in ("max_steps", "epochs"):
            raise ConfigError(f"max_steps_from must be 'max_steps' or 'epochs', got {self.max_steps_from!r}")
        if self.best_mode not in ("max", "min"):
            raise ConfigError(f"best_mode must be 'max' or 'min', got {self.best_mode!r}")
        if self.clip_grad_norm is not None and self.clip_grad_norm < 0:
            raise ConfigError(f"--clip-grad-norm must be >= 0, got {self.clip_grad_norm}")

    # ------------------------------------------------------------------------------ derived values
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

    def for_epoch(self, micro_batches: int, world_size: int = 1) -> TrainConfig:
        """This config with ``epochs`` turned into updates, for an epoch of ``micro_batches`` per process.

        ``max_steps`` becomes the smaller of the two limits and ``max_steps_from`` says which one it is, so the
        run ends at whichever comes first and reports it. Without ``epochs`` the config is returned as it is.
        """
        if self.epochs is None:
            return self
        by_epochs = max(1, math.ceil(self.epochs * micro_batches / self.accumulation(world_size)))
        if self.max_steps is not None and self.max_steps <= by_epochs:
            return dataclasses.replace(self, max_steps_from="max_steps")
        return dataclasses.replace(self, max_steps=by_epochs, max_steps_from="epochs")

    def to_dict(self) -> dict[str, Any]:
        """Plain values only (strings, numbers, lists, dicts): safe for JSON and ``weights_only`` loading."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["output_dir"] = str(self.output_dir)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        known = [f.name for f in dataclasses.fields(cls)]
        for key in data:
            if key not in known:
                raise ConfigError(f"unknown training option {key!r}{_did_you_mean(key, known)}")
        return cls(**data)


# ------------------------------------------------------------------------------------------ options
def option_names(cls: type) -> list[str]:
    """Fields of dataclass ``cls`` that a user sets (CLI flag or config-file key), in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if f.metadata.get("option", True)]


def _did_you_mean(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def split_options(options: Mapping[str, Any], cls: type, *, source: str = "") -> tuple[dict[str, Any], dict[str, Any]]:
    """Flat options as ``(fields of cls, TrainConfig fields)``; a name in both belongs to ``cls``.

    An unknown key is a ``ConfigError`` naming it and the closest known one (``source`` prefixes it).
    """
    own_names = [name for name in option_names(cls) if name != "train"]
    train_names = option_names(TrainConfig)
    own: dict[str, Any] = {}
    train: dict[str, Any] = {}
    for key, value in options.items():
        if key in own_names:
            own[key] = value
        elif key in train_names:
            train[key] = value
        else:
            prefix = f"{source}: " if source else ""
            raise ConfigError(f"{prefix}unknown option {key!r}{_did_you_mean(key, own_names + train_names)}")
    return own, train


def read_config_file(
    path: str | os.PathLike, cls: type, aliases: Mapping[str, str] | None = None, sections: Iterable[str] = ()
) -> dict[str, Any]:
    """Flat options for ``cls`` (a config that nests a :class:`TrainConfig` as ``train``) from a TOML/YAML file.

    Keys are the dataclass fields (``-`` and ``_`` alike); training options may sit at the top or in a
    ``[train]`` (or ``[train_options]``) table, which wins. Dict-valued fields (``task_options``) stay tables. ``aliases``
    maps short names to fields (``dev`` -> ``dev_file``; a string ``train`` is then ``train_file``).
    Unknown keys are an error naming the closest known one. The same rules hold for every command. Tables
    named in ``sections`` belong to another reader and are left out.
    """
    aliases = dict(aliases or {})
    data = {k.replace("-", "_"): v for k, v in read_options_file(path).items() if k not in sections}
    tables = [data.pop(name) for name in ("train", "train_options") if isinstance(data.get(name), Mapping)]
    flat = {aliases.get(key, key): value for key, value in data.items()}
    for table in tables:  # a key in a table wins over the same key at the top
        flat.update({k.replace("-", "_"): v for k, v in table.items()})
    split_options(flat, cls, source=str(path))  # unknown keys are an error now, before anything runs
    return flat
