"""Command-line options generated from the config dataclasses, so that every option is declared once.

A field gives its flag (``micro_batch_size`` -> ``--micro-batch-size``; a field of a nested option group by its
flat name, see :mod:`bertkit.option_groups`), its type, its help (the field's docstring) and the default shown
in the help. Every generated option defaults to ``None``, meaning "not given",
so that a config file's value stands unless a flag overrides it; the dataclass then fills what neither gave.

A command's own options (those of no library config: inputs, outputs, the engine) are a dataclass too, read by
:func:`dataclass_parameters` with their real defaults, which ``--help`` shows; field metadata from :func:`cli`
gives a field its flags, or makes it a positional argument, hidden, or parsed by a function. This module is the
only one that writes ``typer.Option`` (``tests/test_cli_options_declared.py``).

The commands are built on first use (:func:`lazy_command`): the dataclasses live with the training code,
which imports torch, and ``bertkit tokenize`` or ``bertkit --help`` should not pay for that.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from bertkit.option_groups import Leaf, field_docs, flag, help_text, option_leaves


def show_default(value: Any) -> str:
    """A default as the help shows it: ``on``/``off``, ``5e-05``, ``adamw``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _option_type(hint: Any) -> type | None:
    """The click-level type of a field: ``int | None`` -> int, a ``Literal`` of strings -> str; ``None`` for what
    is no flag (dicts, configs)."""
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union  # `Literal[...] | None`
    args = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    if len(args) != 1:
        return None
    kind = args[0]
    if typing.get_origin(kind) is typing.Literal:
        kind = type(typing.get_args(kind)[0])
    if kind is Path:
        return str
    return kind if kind in (bool, int, float, str) else None


@dataclasses.dataclass(frozen=True)
class ConfigOption:
    """One generated command-line option: the config field it fills and how it reads."""

    name: str
    """The field (and keyword) name."""
    decls: tuple[str, ...]
    """Flag declarations, e.g. ``("--output", "-o")`` or ``("--fsdp/--no-fsdp",)``."""
    type: Any
    """``int``, ``str``...; ``list[str]`` for a repeatable option."""
    help: str


def config_options(
    classes: Iterable[type],
    *,
    flags: Mapping[str, tuple[str, ...]] | None = None,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, str] | None = None,
) -> list[ConfigOption]:
    """Options for the user-settable fields of ``classes``, their option groups walked (a name already taken
    by an earlier class is skipped: the earlier field shadows it, as in
    :func:`bertkit.training.train_config.split_options`). An option's name is its flat name (``optimizer`` for
    ``OptimizerConfig.name``).

    ``flags``: declarations other than ``--field-name``; ``defaults``: the default to show, where it is not the
    field's own (a command's defaults table).
    """
    flags, defaults, skip = dict(flags or {}), dict(defaults or {}), set(exclude)
    options: list[ConfigOption] = []
    for cls in classes:
        for leaf in option_leaves(cls):
            kind = leaf.field.metadata.get("cli_type") or _option_type(leaf.hint)
            if leaf.name in skip or kind is None:
                continue
            skip.add(leaf.name)
            options.append(_option(leaf, kind, flags.get(leaf.name), defaults.get(leaf.name)))
    return options


def _option(leaf: Leaf, kind: type, decls: tuple[str, ...] | None, shown: str | None) -> ConfigOption:
    """The option of one leaf: ``--flat-name`` (``--x/--no-x`` for a switch) unless ``decls`` says otherwise;
    help from the field's docstring, with ``shown`` or else the field's default."""
    name = flag(leaf.name)
    decls = decls or ((f"{name}/--no-{name[2:]}",) if kind is bool else (name,))
    if shown is None and leaf.field.default not in (dataclasses.MISSING, None):
        shown = show_default(leaf.field.default)
    help = help_text(field_docs(leaf.owner).get(leaf.field.name, "")) + (f" (default: {shown})" if shown else "")
    return ConfigOption(leaf.name, decls, kind, help)


# ------------------------------------------------------------------ a command's own options dataclass
CLI_FLAGS = "cli_flags"
"""Field metadata: the flag declarations, e.g. ``("--model", "-m")`` (none: the field's name as a flag, with its
negation for a switch)."""
CLI_SHARED = "cli_shared"
"""Field metadata: (dataclass, field) whose docstring is this option's help (an option several commands share,
declared once: ``shared_options.shared``)."""


def cli(
    *decls: str,
    argument: bool = False,
    hidden: bool = False,
    metavar: str | None = None,
    parser: Callable[[str], Any] | None = None,
    show_default: bool = True,
) -> dict[str, Any]:
    """Field metadata of a command option: its flag declarations (none: ``--field-name``, ``--x/--no-x`` for a
    switch), or a positional ``argument``; ``hidden`` from ``--help``; its ``metavar``; the ``parser`` of the
    text given; ``show_default=False`` where the help says the default itself."""
    spec = dict(argument=argument, hidden=hidden, metavar=metavar, parser=parser, show_default=show_default)
    return {CLI_FLAGS: decls, "cli": {k: v for k, v in spec.items() if v not in (None, False) or k == "show_default"}}


def _declaring(leaf: Leaf) -> tuple[type, str]:
    """The class and field whose docstring is ``leaf``'s help: a shared field's, or its own."""
    shared: tuple[type, str] | None = leaf.field.metadata.get(CLI_SHARED)
    return shared or (leaf.owner, leaf.field.name)


def _typer_type(hint: Any) -> Any:
    """The type typer parses a field as: a ``Literal`` as its values' type, a ``Path`` as ``str``."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [_typer_type(a) for a in typing.get_args(hint) if a is not type(None)]
        return functools.reduce(operator.or_, args) | None
    if typing.get_origin(hint) is typing.Literal:
        return type(typing.get_args(hint)[0])
    return str if hint is Path else hint


def dataclass_parameters(cls: type, exclude: Iterable[str] = ()) -> dict[str, tuple[Any, Any]]:
    """The options of dataclass ``cls`` (groups walked) as typer parameters, name -> (``Annotated[type,
    typer.Option(...)]`` or ``typer.Argument``, default; ``...`` where the field has none: required), help
    from the field's docstring; the defaults are the fields' own, which ``--help`` shows."""
    parameters = {}
    for leaf in option_leaves(cls):
        if leaf.name in exclude:
            continue
        owner, name = _declaring(leaf)
        spec = dict(leaf.field.metadata.get("cli", {}))
        kind = _typer_type(leaf.field.metadata.get("cli_type") or leaf.hint)
        decls = leaf.field.metadata.get(CLI_FLAGS) or ()
        if not decls and not spec.get("argument") and bool in (kind, bool | None):
            decls = (f"{flag(leaf.name)}/--no-{flag(leaf.name)[2:]}",)
        help = help_text(field_docs(owner).get(name, ""))
        make = typer.Argument if spec.pop("argument", False) else typer.Option
        info = make(*decls, help=help, **spec)
        field = leaf.field
        default = (
            field.default
            if field.default is not dataclasses.MISSING
            else field.default_factory()
            if field.default_factory is not dataclasses.MISSING
            else ...
        )
        parameters[leaf.name] = (Annotated[kind, info], default)
    return parameters


def _metavar(kind: Any) -> str | None:
    """A repeatable option (``list[str]``) reads as its item type, ``<str>``; others keep typer's own."""
    return f"<{typing.get_args(kind)[0].__name__}>" if typing.get_origin(kind) is list else None


def command_function(
    name: str,
    doc: str | None,
    options: Iterable[ConfigOption],
    extra: Mapping[str, tuple[Any, Any]],
    run: Callable[[dict[str, Any]], None],
) -> Callable[..., None]:
    """A function typer turns into the command: one keyword per option, each ``None`` unless given, plus
    ``extra`` parameters declared by the command itself, name -> (``Annotated[type, typer.Option(...)]``,
    default; ``...`` for a required option); it calls ``run`` with all of them."""
    parameters = [
        inspect.Parameter(
            o.name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[o.type | None, typer.Option(*o.decls, help=o.help, metavar=_metavar(o.type))],
            default=None,
        )
        for o in options
    ]
    parameters += [
        inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
        for key, (kind, default) in extra.items()
    ]

    def command(**given: Any) -> None:
        run(given)

    command.__name__ = command.__qualname__ = name.replace("-", "_") + "_command"
    command.__doc__ = doc
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command


class ExampleLastCommand(TyperCommand):
    """A command whose ``--help`` ends with the docstring's example, after the options.

    The example is the docstring's last paragraph, written as ``\\b`` + ``Example:`` so that click keeps its
    lines (each short enough for 80 columns) instead of re-wrapping them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        head, marker, example = (self.help or "").partition(EXAMPLE_MARKER)
        if marker and self.epilog is None:
            self.help, self.epilog = head.rstrip(), marker + example


EXAMPLE_MARKER = "\b\nExample:"


def lazy_command(build: Callable[[], Callable[..., None]]) -> type[TyperCommand]:
    """A command class for ``app.command(cls=...)`` whose options come from ``build()`` on first use.

    The registered function only names the command and gives its one-line summary for ``bertkit --help``;
    parsing, ``--help`` and running go to the command typer makes of ``build()``'s function.
    """

    @functools.cache
    def real() -> Any:
        function = build()
        single = typer.Typer(
            rich_markup_mode=None,
            add_completion=False,
            pretty_exceptions_enable=False,
            context_settings={"help_option_names": ["-h", "--help"]},
        )
        single.command(cls=ExampleLastCommand)(function)
        return typer.main.get_command(single)

    class LazyCommand(ExampleLastCommand):
        def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
            return real().make_context(info_name, args, parent=parent, **extra)

        def get_params(self, ctx: Any) -> list[Any]:
            return real().get_params(ctx)

    return LazyCommand
