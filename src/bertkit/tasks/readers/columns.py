"""Which column of a table plays a role (text, label, ...): the one asked for, or the first known default.

A table without a header has columns ``"0"``, ``"1"``...; with exactly two of them and a role left open,
:func:`text_and_label` takes the common text/label layout, the label being the column that looks like one.
Every column that is still missing is named in one error (:func:`missing_columns`), each with its flag.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal, overload

from bertkit.errors import DataError


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: Literal[True] = ...,
) -> str: ...


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool,
) -> str | None: ...


def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool = True,
) -> str | None:
    """The column to use for ``role``: the requested one (a name, or a 0-based index), else the first known
    default present. Raises ``DataError`` listing the available columns when it is missing.
    """
    if requested is not None:
        if isinstance(requested, int) or (
            isinstance(requested, str) and requested.isdigit() and requested not in columns
        ):
            index = int(requested)
            if not 0 <= index < len(columns):
                raise DataError(f"{path}: {role} column index {index} is out of range (0..{len(columns) - 1})")
            return columns[index]
        if requested not in columns:
            raise DataError(f"{path}: no {role} column {requested!r}; columns are {', '.join(map(repr, columns))}")
        return requested
    for name in candidates:
        if name in columns:
            return name
    if required:
        raise missing_columns(path, columns, [(role, candidates)])
    return None


def missing_columns(
    path: str | os.PathLike, columns: Sequence[str], missing: Sequence[tuple[str, Sequence[str]]]
) -> DataError:
    """One error for every role without a column: what was looked for, the columns there are, and the flags
    that name them (``--text-column 0 --label-column 1`` for a file without a header)."""
    looked = " and ".join(
        f"no {role} column (looked for {', '.join(map(repr, candidates))})" for role, candidates in missing
    )
    flags = " and ".join(f"--{role.replace(' ', '-')}-column" for role, _ in missing)
    it = "it" if len(missing) == 1 else "them"
    return DataError(f"{path}: {looked}; columns are {', '.join(map(repr, columns))}; name {it} with {flags}")


def unnamed(columns: Sequence[str]) -> bool:
    """Whether the columns are positions (``"0"``, ``"1"``...): a TSV/CSV file read without a header."""
    return list(columns) == [str(i) for i in range(len(columns))]


def text_and_label(columns: Sequence[str], values: Sequence[Sequence[str]], text: str | None) -> tuple[str, str, str]:
    """For a table of two unnamed columns: the text column, the label column and one line saying so.

    ``text`` is the text column when given (the label is then the other). Otherwise the label is the column
    that looks like one: the only one that is all numbers, else the one with fewer distinct values; when
    neither tells, the common order, text then label.
    """
    first, second = columns
    if text is not None:
        label = second if text == first else first
        return text, label, f"two columns without a header: column {label} is the label (--label-column names another)"
    numbers = [all(_is_number(v) for v in column) for column in values]
    distinct = [len(set(column)) for column in values]
    if numbers[0] != numbers[1]:
        label, why = (first, "it holds numbers") if numbers[0] else (second, "it holds numbers")
    elif distinct[0] != distinct[1]:
        label = first if distinct[0] < distinct[1] else second
        why = f"it has {min(distinct)} distinct values to the other's {max(distinct)}"
    else:
        label, why = second, "the usual order, text then label"
    text = second if label == first else first
    return (
        text,
        label,
        f"two columns without a header: column {text} is the text and column {label} the label ({why}; "
        f"--text-column and --label-column choose otherwise)",
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
