"""Option groups: a config as a tree of dataclasses, named by flat options, Literal fields checked from their type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from bertkit.errors import ConfigError
from bertkit.option_groups import OptionGroup, flat, from_flat, leaves, option_names, replace_flat, to_flat
from bertkit.training.train_config import DurationConfig, OptimizerConfig, TrainConfig


@dataclass
class Colour(OptionGroup):
    name: Literal["red", "green"] = field(default="red", metadata=flat("colour"))
    shade: Literal["light", "dark"] | None = None


@dataclass
class Picture:
    colour: Colour = field(default_factory=Colour)
    size: int = 1


def test_flat_names_walk_the_groups():
    assert option_names(Picture) == ["colour", "shade", "size"]
    assert [leaf.path for leaf in leaves(Picture)] == [("colour", "name"), ("colour", "shade"), ("size",)]
    picture = from_flat(Picture, {"colour": "green", "size": 3})
    assert picture == Picture(Colour("green"), 3)
    assert to_flat(picture) == {"colour": "green", "shade": None, "size": 3}
    changed = replace_flat(picture, {"shade": "dark"})
    assert changed.colour == Colour("green", "dark") and picture.colour.shade is None


def test_a_literal_field_is_checked_from_its_type_and_names_the_flag():
    with pytest.raises(ConfigError, match=r"unknown colour 'blue'; choose one of red, green \(set --colour\)"):
        Colour("blue")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unknown shade 'grey'; choose one of light, dark \(set --shade\)"):
        from_flat(Picture, {"shade": "grey"})
    with pytest.raises(ConfigError, match=r"unknown optimizer 'sgd'; choose one of adamw, lamb \(set --optimizer\)"):
        TrainConfig.from_options(max_steps=1, optimizer="sgd")
    with pytest.raises(ConfigError, match=r"unknown max_steps_from 'x'; choose one of max_steps, epochs$"):
        DurationConfig(max_steps=1, max_steps_from="x")  # type: ignore[arg-type]


def test_train_config_reads_by_group_and_round_trips_flat():
    config = TrainConfig.from_options(max_steps=5, lr=3e-5, optimizer="lamb", schedule_power=0.5, precision="bf16")
    assert (config.optimizer.lr, config.optimizer.name, config.schedule.power, config.precision.mode) == (
        3e-5,
        "lamb",
        0.5,
        "bf16",
    )
    assert config.duration == DurationConfig(max_steps=5)
    assert TrainConfig.from_dict(config.to_dict()) == config
    assert config.with_options(lr=1e-3).optimizer == OptimizerConfig(name="lamb", lr=1e-3)
    with pytest.raises(ConfigError, match=r"unknown training option 'learning_rate'"):
        config.with_options(learning_rate=1)
    with pytest.raises(ConfigError, match="needs an end"):
        TrainConfig.from_options(lr=1e-3)
