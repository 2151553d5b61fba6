"""Pre-training recipes: named sets of defaults for ``prepare-data`` and ``pretrain`` (``--recipe``).

``bert`` is the paper's recipe and changes nothing: next-sentence pairs, static masks at 15 %, dropout 0.1,
linear warmup and decay. ``modern`` takes what the recent encoders found to buy quality per hour of
compute and what ``benchmarks/bench_time_to_quality.py`` measured to help here: RoBERTa's full-sentence blocks
without next-sentence prediction, masks drawn afresh for every pass (at the dataset's ``--masked-lm-prob``),
no dropout (Cramming), and a warmup-stable-decay learning rate (flat after the warmup, a linear decay over the
last fifth). docs/pretraining.md ("Recipes") has the measurements. A masking rate that decays over the run
(Ankner et al. 2023, "Dynamic masking rate schedules for MLM pretraining"; ``--masking-rate 0.3
--masking-rate-end 0.15``) is an option, not part of ``modern``: that ablation measured it at +0.0 points against
the paper's fixed 15 %. Pre-LN layers
(``layer_norm_position="pre"``) were measured against BERT's post-LN there and did not win, so ``modern`` keeps
post-LN; untied output embeddings (``tie_word_embeddings=False``) did not win at that budget either, so it keeps
them tied. A recipe fills only the options that were not given: a flag or a config-file key always wins.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any, Literal

from bertkit.errors import ConfigError

RecipeName = Literal["bert", "modern"]
RECIPES: tuple[str, ...] = typing.get_args(RecipeName)

PREPARE_DEFAULTS: dict[str, dict[str, Any]] = {
    "bert": {"nsp": True, "masking": "static"},
    "modern": {"nsp": False, "masking": "dynamic"},
}
"""``prepare-data`` options of each recipe."""

PRETRAIN_DEFAULTS: dict[str, dict[str, Any]] = {
    "bert": {},
    "modern": {"dropout": 0.0, "schedule": "wsd"},
}
"""``pretrain`` options of each recipe (flat names, training options included)."""


def check_recipe(name: str) -> str:
    """``name`` if it is a recipe, else a ``ConfigError`` naming the choices."""
    if name not in RECIPES:
        raise ConfigError(f"unknown --recipe {name!r}; choose {' or '.join(RECIPES)}")
    return name


def with_recipe(options: Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``options`` with the defaults of their ``recipe`` (``bert`` when absent) under the options given."""
    name = check_recipe(options.get("recipe") or "bert")
    given = {key: value for key, value in options.items() if value is not None}
    return {**defaults[name], **given, "recipe": name}
