"""Optional dependencies: importing one, or one line that says which extra to install."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from bertkit.errors import MissingExtraError

# The module each optional format needs, and the bertkit extra (pyproject.toml) that installs it.
EXTRAS = {"pyarrow": "parquet", "zstandard": "zstd", "datasets": "datasets"}


def import_extra(module: str, reading: str | os.PathLike) -> ModuleType:
    """``module`` (a key of :data:`EXTRAS`, or a submodule such as ``pyarrow.parquet``), imported to read
    ``reading`` (a path or a source name). Not installed: ``MissingExtraError`` with the one message
    ``reading PATH needs pyarrow: pip install 'bertkit[parquet]'``."""
    package = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"reading {reading} needs {package}: pip install 'bertkit[{EXTRAS[package]}]'"
        ) from None
