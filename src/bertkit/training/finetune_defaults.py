"""Fine-tuning's defaults: the common row (each family adds its own), and the rule that sizes batch and epochs to
the training set.

The BERT paper fine-tunes with batch 16 or 32 for 2-4 epochs and notes that small sets are the sensitive
ones. A fixed batch of 32 for 3 epochs gives a set of 3,000 sentences about 280 updates, which underfits
(docs/finetuning.md, "Batch and epochs follow the training set's size"). So what the user leaves unset is
sized to the data (:func:`size_to_data`):

* batch 16 (the paper's smaller one) below :data:`SMALL_SET` training examples, the task's batch from there on,
* the task's epochs, raised until the run makes at least :data:`MIN_UPDATES` updates, at most :data:`MAX_EPOCHS`.

Sets of 10,000 examples and more with at least 1,000 updates in the task's epochs (SST-2, CoNLL-2003, SQuAD)
run exactly the table's recipe. The dev set still picks the best epoch, so a longer run cannot do worse on
dev than its own earlier epochs. Measured before and after: ``docs/results.md`` (fine-tuning defaults).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bertkit.tasks.registry import FAMILIES, family, task_names

# Fine-tuning decays the rate from the end of the warmup, as transformers does, not from step 0 as Google BERT
# does, whose rate stays about 10 % below the peak throughout and scored lower on dev (docs/experiments.md,
# "Learning-rate schedule"). Pre-training keeps Google's schedule.
DEFAULT_SCHEDULE = "poly"

COMMON: dict[str, Any] = {
    # Google BERT's recipes (bert-algorithms.md section 8). Fine-tuning's defaults (of FinetuneConfig and
    # TrainConfig fields); a family's ``defaults`` (tasks/<family>/) override them. ``epochs`` applies only when
    # no other end (``max_steps``, ``max_time``) is given; ``micro_batch_size`` and ``epochs`` are where
    # size_to_data starts from when the user gives neither.
    "lr": 5e-5,
    "epochs": 3.0,
    "max_seq_length": 128,
    "micro_batch_size": 32,
    "warmup_ratio": 0.1,
    "schedule": DEFAULT_SCHEDULE,
}
"""The defaults every task family starts from."""


class _DefaultsTable(Mapping[str, Mapping[str, Any]]):
    """``all`` (:data:`COMMON`), then each registered family's own row: read from the registry on every use,
    so that a family registered later has its row too."""

    def _rows(self) -> dict[str, Mapping[str, Any]]:
        return {"all": COMMON, **{name: f.defaults for name, f in FAMILIES.items() if f.defaults}}

    def __getitem__(self, key: str) -> Mapping[str, Any]:
        return self._rows()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


DEFAULTS: Mapping[str, Mapping[str, Any]] = _DefaultsTable()
"""Fine-tuning's defaults, by task: the one table that FinetuneConfig and ``bertkit finetune --help`` read."""

SMALL_SET = 10_000
"""Training sets with fewer examples than this get batch 16 (or the task's batch, if smaller)."""
SMALL_BATCH = 16
MIN_UPDATES = 1_000
"""Epochs are raised until a run makes at least this many optimizer updates..."""
MAX_EPOCHS = 10
"""...but never beyond this many epochs (a set of 1,000 examples gets 630 updates of 16)."""

SIZED: dict[str, tuple[str, ...]] = {
    "micro_batch_size": ("micro_batch_size", "global_batch_size", "grad_accum_steps"),
    "epochs": ("epochs", "max_steps", "max_time"),
}
"""The defaults :func:`size_to_data` may change, each with the options that decide it instead when given."""


def unset_defaults(given: Collection[str]) -> tuple[str, ...]:
    """The defaults of :data:`SIZED` that none of the ``given`` options decides."""
    return tuple(name for name, deciders in SIZED.items() if not set(deciders) & set(given))


def task_defaults(task: str) -> dict[str, Any]:
    """The defaults of ``task``: the ``all`` row with its family's own row on top."""
    known = task in task_names()
    return {**COMMON, **(family(task).defaults if known else {})}


def fixed_recipe(task: str) -> bool:
    """Whether ``task`` runs its defaults as they are on any set (its family's ``fixed_recipe``)."""
    return task in task_names() and family(task).fixed_recipe


@dataclass(frozen=True)
class Sizing:
    """Batch and epochs for one training set, and why."""

    batch_size: int
    """Sequences per update (over all processes)."""
    epochs: float | None
    """``None`` when another limit (``--max-steps``, ``--max-time``) ends the run."""
    updates: int
    """Optimizer updates that batch and epochs make."""
    reason: str
    """One line for the user: what was chosen from what, and which flag sets it instead."""

    def to_dict(self) -> dict[str, Any]:
        return {"batch_size": self.batch_size, "epochs": self.epochs, "updates": self.updates, "reason": self.reason}


def size_to_data(
    examples: int, features: int, *, sized: Collection[str], batch_size: int, epochs: float | None
) -> Sizing | None:
    """Batch and epochs for ``examples`` training examples (``features`` after windowing).

    ``sized`` names the values the user left unset (of :data:`SIZED`); ``batch_size`` (over all processes) and
    ``epochs`` are the ones in effect, given or the table's. ``None`` when the user set both.
    """
    if not sized:
        return None
    batch = batch_size
    why: list[str] = []
    if "micro_batch_size" in sized:
        if examples < SMALL_SET and batch > SMALL_BATCH:
            batch = SMALL_BATCH
            why.append(f"batch {batch}, as there are fewer than {SMALL_SET:,} (--micro-batch-size sets it)")
        else:
            why.append(f"batch {batch}, the task's")
    per_epoch = math.ceil(features / batch)
    chosen = epochs
    if "epochs" in sized and epochs is not None:
        if per_epoch * epochs < MIN_UPDATES:
            needed = math.ceil(MIN_UPDATES / per_epoch)
            chosen = float(min(MAX_EPOCHS, max(needed, math.ceil(epochs))))
            short = f"{epochs:g} would make {math.ceil(per_epoch * epochs)}"
            if chosen < MAX_EPOCHS:
                why.append(f"{chosen:g} epochs, for at least {MIN_UPDATES:,} updates ({short}; --epochs sets it)")
            else:
                why.append(
                    f"{chosen:g} epochs, the most the rule gives ({short}; {needed} would make {MIN_UPDATES:,}; --epochs sets it)"
                )
        else:
            why.append(f"{epochs:g} epochs, the task's")
    updates = math.ceil(per_epoch * chosen) if chosen is not None else 0
    reason = f"{examples:,} training examples: " + "; ".join(why) + (f": {updates:,} updates" if updates else "")
    return Sizing(batch, chosen, updates, reason)
