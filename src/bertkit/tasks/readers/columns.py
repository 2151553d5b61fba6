"""Which column of a table plays a role (text, label, ...): the one asked for, or the first known default."""

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
        option = f"--{role.replace(' ', '-')}-column"
        raise DataError(
            f"{path}: no {role} column found (looked for {', '.join(map(repr, candidates))}); "
            f"columns are {', '.join(map(repr, columns))}; name it with {option}"
        )
    return None
