"""Option groups: a config as a tree of small dataclasses, read and written by flat option names.

A config such as :class:`bertkit.training.train_config.TrainConfig` nests one :class:`OptionGroup` per concern
(optimizer, schedule, precision...), as torchtitan nests its job config; each group owns its fields, their
docstrings and their checks. Users still name every option by one flat name (``--lr``, ``lr = 5e-5``): a field's
flat name is its own name, or the ``flat`` entry of its metadata (``OptimizerConfig.name`` is ``optimizer``).
Flat names are unique within a config, so the command line and config files stay flat while code reads
``config.optimizer.lr``.

``Literal`` fields are checked here, once for every group, from their type: no group writes a string check.
Numeric fields are checked here too (:func:`check_numbers`): every number must be finite, and a field declares
its range in its metadata (``field(default=1e-4, metadata=above(0))``), so that ``--lr nan`` or
``--temperature -1`` is one line naming the flag, whichever command takes it.
This module imports nothing heavy, so the CLI can generate its options from the tree without torch.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import itertools
import math
import re
import textwrap
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bertkit.errors import ConfigError

FLAT = "flat"
"""Metadata key of a field whose flat option name is not its own name."""

NOT_AN_OPTION = {"option": False}
"""Field metadata of values the entry point derives (``output_dir``...): neither a CLI flag nor a file key."""

T = TypeVar("T")


def flat(name: str, **metadata: Any) -> dict[str, Any]:
    """Field metadata: the option is called ``name`` on the command line and in config files."""
    return {FLAT: name, **metadata}


_ROLE = re.compile(r":(?:class|meth|func|data|attr):`~?(?:[\w.]+\.)?([\w]+)`")


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass ``cls`` (attribute docstrings, read from the source)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except OSError:  # installed without sources: options without help beat no command
        return {}
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def help_text(doc: str) -> str:
    """A field docstring as one line of plain help text (reST roles and literals unwrapped)."""
    text = _ROLE.sub(r"\1", " ".join(doc.split()))
    return text.replace("``", "")


def flag(name: str) -> str:
    """The command-line flag of flat option ``name``."""
    return "--" + name.replace("_", "-")


@dataclass
class OptionGroup:
    """Base of the groups nested in a config: checks every ``Literal`` field against its choices.

    A subclass with checks of its own defines ``__post_init__`` and calls ``super().__post_init__()`` first.
    """

    def __post_init__(self) -> None:
        check_choices(self)
        check_numbers(self)


@dataclass(frozen=True)
class Leaf:
    """One option of a config tree: its flat name, where it sits and the field that declares it."""

    name: str
    """Flat option name (``lr``, ``optimizer``)."""
    path: tuple[str, ...]
    """Attributes from the root (``("optimizer", "lr")``)."""
    field: dataclasses.Field
    """The declaring field (its default and metadata)."""
    owner: type
    """The dataclass that declares the field (its docstrings live there)."""
    hint: Any
    """The field's resolved type."""

    @property
    def is_option(self) -> bool:
        return bool(self.field.metadata.get("option", True))


def is_group(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, OptionGroup)


def leaves(cls: type) -> tuple[Leaf, ...]:
    """Every leaf field of config ``cls``, groups walked in declaration order."""
    if cls not in _LEAVES:
        _LEAVES[cls] = _walk(cls)
    return _LEAVES[cls]


_LEAVES: dict[type, tuple[Leaf, ...]] = {}


def _walk(cls: type) -> tuple[Leaf, ...]:
    hints = typing.get_type_hints(cls)
    found: list[Leaf] = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if is_group(hint):
            found += [dataclasses.replace(leaf, path=(f.name, *leaf.path)) for leaf in leaves(hint)]
        else:
            found.append(Leaf(f.metadata.get(FLAT, f.name), (f.name,), f, cls, hint))
    names = [leaf.name for leaf in found]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise TypeError(f"{cls.__name__}: flat option names must be unique, {duplicates} are not")
    return tuple(found)


def option_leaves(cls: type) -> list[Leaf]:
    """The leaves a user sets (CLI flag or config-file key)."""
    return [leaf for leaf in leaves(cls) if leaf.is_option]


def option_names(cls: type) -> list[str]:
    """Flat names of the options of dataclass ``cls`` (CLI flags or config-file keys), groups walked, in
    declaration order."""
    return [leaf.name for leaf in option_leaves(cls)]


def to_flat(config: object) -> dict[str, Any]:
    """Every leaf value of ``config`` by flat name."""
    out = {}
    for leaf in leaves(type(config)):
        value = config
        for attribute in leaf.path:
            value = getattr(value, attribute)
        out[leaf.name] = value
    return out


def _nest(cls: type, options: Mapping[str, Any]) -> dict[str, Any]:
    """Flat ``options`` as ``cls``'s keyword arguments: group fields as ``{field: {leaf: value}}``."""
    by_name = {leaf.name: leaf for leaf in leaves(cls)}
    nested: dict[str, Any] = {}
    for key, value in options.items():
        if key not in by_name:
            raise ConfigError(f"unknown option {key!r} of {cls.__name__}")
        *groups, last = by_name[key].path
        target = nested
        for group in groups:
            target = target.setdefault(group, {})
        target[last] = value
    return nested


def _build(cls: type[T], nested: Mapping[str, Any]) -> T:
    hints = typing.get_type_hints(cls)
    kwargs = {k: _build(hints[k], v) if is_group(hints[k]) else v for k, v in nested.items()}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if is_group(hints[f.name]) and f.name not in kwargs and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _build(hints[f.name], {})  # a required group: its own checks say what it lacks
    built = cls(**kwargs)
    if not isinstance(built, OptionGroup):  # a group checked itself; a command's own options are checked here
        check_numbers(built)
    return built


def from_flat(cls: type[T], options: Mapping[str, Any]) -> T:
    """A ``cls`` from flat options; each group gets its own and checks them."""
    return _build(cls, _nest(cls, options))


def replace_flat(config: T, options: Mapping[str, Any]) -> T:
    """``config`` with the flat ``options`` changed (the changed groups, and the config, check again)."""
    return _replace(config, _nest(type(config), options))


def _replace(config: T, nested: Mapping[str, Any]) -> T:
    changes = {}
    for key, value in nested.items():
        current = getattr(config, key)
        changes[key] = _replace(current, value) if is_group(type(current)) else value
    return dataclasses.replace(config, **changes)  # type: ignore[type-var]


# ------------------------------------------------------------------------------------------ checks
def choices(hint: Any) -> tuple[Any, ...] | None:
    """The values a ``Literal[...]`` type allows (``None`` too for ``Literal[...] | None``); None for other
    types."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = choices(args[0]) if len(args) == 1 else None
        return None if inner is None else (*inner, None)
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else None


def check_choices(group: object) -> None:
    """A ``ConfigError`` for the first ``Literal`` field of ``group`` whose value is not one of its choices,
    naming the value, the choices and the flag that sets it."""
    for leaf in leaves(type(group)):
        if len(leaf.path) > 1:
            continue  # a nested group checks its own fields
        allowed = choices(leaf.hint)
        value = getattr(group, leaf.field.name)
        if allowed is None or value in allowed:
            continue
        where = f" (set {flag(leaf.name)})" if leaf.is_option else ""
        listed = ", ".join(str(choice) for choice in allowed if choice is not None)
        raise ConfigError(f"unknown {leaf.name} {value!r}; choose one of {listed}{where}")


RANGE = "range"
"""Field metadata key of a numeric option's :class:`Range`."""


@dataclass(frozen=True)
class Range:
    """The values a numeric option takes: between ``low`` and ``high`` (either may be open or absent)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    """``low`` itself is refused (``> 0`` rather than ``>= 0``)."""
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return low_ok and high_ok

    def describe(self) -> str:
        """``> 0``, ``>= 1``, ``in [0, 1)``."""
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def above(low: float, **metadata: Any) -> dict[str, Any]:
    """Field metadata of a number that must be greater than ``low`` (``above(0)``: positive)."""
    return {RANGE: Range(low, low_open=True), **metadata}


def at_least(low: float, **metadata: Any) -> dict[str, Any]:
    """Field metadata of a number that must be ``low`` or more (``at_least(1)``: a positive count)."""
    return {RANGE: Range(low), **metadata}


def between(low: float, high: float, *, low_open: bool = False, high_open: bool = False, **metadata: Any) -> dict:
    """Field metadata of a number between ``low`` and ``high`` (closed unless said open)."""
    return {RANGE: Range(low, high, low_open, high_open), **metadata}


def option_flag(leaf: Leaf) -> str:
    """The flag a user types for ``leaf``: its declared long flag (``--unlabeled``), else ``--flat-name``."""
    declared = [d.split("/")[0] for d in leaf.field.metadata.get("cli_flags", ()) if d.startswith("--")]
    return declared[0] if declared else flag(leaf.name)


def check_numbers(config: object) -> None:
    """A ``ConfigError`` naming the flag of the first numeric field of ``config`` (its own fields; a nested
    group checks its own) that is not finite (nan, inf) or lies outside the :class:`Range` of its metadata."""
    for leaf in leaves(type(config)):
        if len(leaf.path) > 1:
            continue
        value = getattr(config, leaf.field.name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        allowed: Range | None = leaf.field.metadata.get(RANGE)
        if isinstance(value, float) and _counts(leaf.hint):
            wanted = f"a whole number {allowed.describe()}" if allowed else "a whole number"
        elif isinstance(value, float) and not math.isfinite(value):
            wanted = f"a finite number {allowed.describe()}" if allowed else "a finite number"
        elif allowed is not None and value not in allowed:
            wanted = allowed.describe()
        else:
            continue
        raise ConfigError(f"{option_flag(leaf)} must be {wanted}, got {value!r}")


def _counts(hint: Any) -> bool:
    """Whether a field of type ``hint`` holds whole numbers only (``int``, ``int | None``)."""
    args = set(typing.get_args(hint)) - {type(None)} if typing.get_args(hint) else {hint}
    return int in args and float not in args
