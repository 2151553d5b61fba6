"""Option groups: a config as a tree of dataclasses, named by flat options, Literal fields checked from their type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from bertkit.errors import ConfigError
from bertkit.option_groups import (
    RANGE,
    OptionGroup,
    above,
    at_least,
    between,
    flat,
    from_flat,
    leaves,
    option_names,
    replace_flat,
    to_flat,
)
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


@dataclass
class Sizes(OptionGroup):
    rate: float = field(default=0.5, metadata=between(0, 1, high_open=True))
    count: int | None = field(default=None, metadata=at_least(1))
    scale: float = field(default=1.0, metadata=above(0))
    anything: float = 0.0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"rate": 1.0}, "--rate must be in [0, 1), got 1.0"),
        ({"rate": float("nan")}, "--rate must be a finite number in [0, 1), got nan"),
        ({"count": 0}, "--count must be >= 1, got 0"),
        ({"count": 2.5}, "--count must be a whole number >= 1, got 2.5"),
        ({"scale": 0.0}, "--scale must be > 0, got 0.0"),
        ({"scale": -1}, "--scale must be > 0, got -1"),
        ({"anything": float("inf")}, "--anything must be a finite number, got inf"),
    ],
)
def test_a_number_outside_its_declared_range_is_one_line_naming_the_flag(given, message):
    with pytest.raises(ConfigError) as raised:
        Sizes(**given)
    assert str(raised.value) == message
    assert Sizes(rate=0.0, count=None, scale=1e-9, anything=-5.0).count is None  # the edges it allows


def test_a_commands_own_options_are_checked_when_built_from_flat_names():
    @dataclass
    class Own:
        top_k: int = field(default=5, metadata=at_least(1, cli_flags=("--top-k", "-k")))

    with pytest.raises(ConfigError, match=r"^--top-k must be >= 1, got 0$"):
        from_flat(Own, {"top_k": 0})


def test_every_numeric_training_option_declares_its_range():
    """A number without a declared range is only checked for being finite: each training option says which
    values make sense, so that a zero, a negative or a probability above 1 is refused where it is declared."""
    from bertkit.training.distill import DistillConfig
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.pretrain import PretrainConfig

    unranged = [
        f"{cls.__name__}.{leaf.name}"
        for cls in (TrainConfig, PretrainConfig, FinetuneConfig, DistillConfig)
        for leaf in leaves(cls)
        if leaf.is_option and leaf.hint in (int, float, int | None, float | None) and RANGE not in leaf.field.metadata
    ]
    assert unranged == ["TrainConfig.seed"]
