"""Reading Parquet and Arrow tables (``pyarrow``, the ``parquet`` extra), compressed or not.

Parquet and Arrow readers need random access, so a compressed file is unpacked into memory; a plain one is
read from disk (Arrow memory-mapped). An Arrow path is an IPC stream or file, or the directory that
``datasets.Dataset.save_to_disk`` writes (its shards concatenated in their listed order).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bertkit.errors import DataError
from bertkit.formats.compression import read_bytes, split_suffix
from bertkit.formats.extras import import_extra
from bertkit.formats.text import existing_file, read_text

PARQUET_SUFFIXES = (".parquet", ".pq")
ARROW_SUFFIXES = (".arrow",)


def pyarrow(reading: str | os.PathLike) -> Any:
    """The ``pyarrow`` module, imported to read ``reading``; missing, one line naming the extra."""
    return import_extra("pyarrow", reading)


def _random_access(path: Path, memory_map: bool = False) -> tuple[Any, int]:
    """A source pyarrow can seek in, and its (decompressed) size in bytes."""
    pa = pyarrow(path)
    if split_suffix(path)[0]:
        data = read_bytes(path)
        return pa.BufferReader(data), len(data)
    return (pa.memory_map(str(path)) if memory_map else str(path)), path.stat().st_size


def open_parquet(path: str | os.PathLike) -> tuple[Any, int]:
    """A ``pyarrow.parquet.ParquetFile`` of ``path`` and its (decompressed) size in bytes. A file that is not
    Parquet is one ``DataError``: ``PATH: not a readable Parquet file (...)``."""
    path = existing_file(path)
    pa = pyarrow(path)
    pq = import_extra("pyarrow.parquet", path)
    source, nbytes = _random_access(path)
    try:
        return pq.ParquetFile(source), nbytes
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None


def read_parquet(path: str | os.PathLike) -> Any:
    """The whole table of a Parquet file (see :func:`open_parquet`), or of a directory of Parquet files
    (a partitioned dataset)."""
    pa = pyarrow(path)
    try:
        if Path(path).is_dir():
            return import_extra("pyarrow.parquet", path).read_table(path)
        return open_parquet(path)[0].read()
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None


def read_arrow(path: str | os.PathLike) -> Any:
    """The table of an Arrow stream or file, or of a ``save_to_disk`` directory (see the module doc). A file
    that is not Arrow is one ``DataError``: ``PATH: not a readable Arrow file (...)``."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    pa = pyarrow(path)
    tables = [_read_arrow_file(file, pa) for file in (saved_dataset_files(path) if path.is_dir() else [path])]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _read_arrow_file(path: Path, pa: Any) -> Any:
    try:
        source, _ = _random_access(path, memory_map=True)
        with source:
            try:
                return pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:  # not a stream: the file format, with its footer
                source.seek(0)
                return pa.ipc.open_file(source).read_all()
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{path}: not a readable Arrow file ({exc})") from None


def saved_dataset_files(directory: str | os.PathLike) -> list[Path]:
    """The Arrow files of a ``datasets.save_to_disk`` directory, in the order its ``state.json`` lists them.
    A dataset dictionary (several splits) or a directory without Arrow files is one ``DataError``."""
    directory = Path(directory)
    if (directory / "dataset_dict.json").is_file():
        splits = json.loads(read_text(directory / "dataset_dict.json")).get("splits", [])
        raise DataError(
            f"{directory}: a dataset with splits {', '.join(splits)}; give one split's directory, e.g. {directory / splits[0]}"
            if splits
            else f"{directory}: a dataset dictionary without splits"
        )
    files = sorted(directory.glob("*.arrow"))
    state = directory / "state.json"
    if state.is_file():  # its list keeps the shards' order
        listed = json.loads(read_text(state)).get("_data_files", [])
        files = [directory / f["filename"] for f in listed] or files
    if not files:
        raise DataError(f"{directory}: a directory without .arrow files; give a datasets save_to_disk directory")
    return files


def is_saved_dataset(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` is one split written by ``datasets.Dataset.save_to_disk``."""
    directory = Path(directory)
    return (directory / "state.json").is_file() and any(directory.glob("*.arrow"))
