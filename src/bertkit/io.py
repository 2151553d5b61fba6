"""Crash-safe file writing: write to a temporary name in the same directory, then rename over the target.

``tempfile.mkstemp`` creates its file private (0600); before the rename each file gets the mode a plain
``open`` would have given it (0666 less the umask: 0644 under umask 022), so outputs are as readable as
any other file the user writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from bertkit.errors import DataError


def _umask() -> int:
    """The process umask. Linux reports it in /proc; elsewhere it is read by setting it, which briefly
    changes it for other threads, so that is the fallback only."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _give_normal_mode(path: str | os.PathLike) -> None:
    os.chmod(path, 0o666 & ~_umask())


def check_output_file(path: str | os.PathLike, flag: str = "--output", example: str = "out.jsonl") -> Path:
    """``path`` as a file to write, checked before any work, so that a long run does not end on a bad output
    path: it is no directory, and its nearest existing parent is one (missing ones are made when it is written)."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{flag} {path} is a directory; give a file in it, e.g. {flag} {path / example}")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise DataError(f"{flag} {path}: {parent} is a file, not a directory")
    return path


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary sibling of ``path`` for writing; on success it is fsynced and renamed to ``path``.

    On any exception the temporary file is removed, so ``path`` is either the old content or the new one,
    never a half-written file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    binary = "b" in mode
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        _give_normal_mode(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as handle:
        handle.write(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """One JSON object per line, written atomically."""
    path = Path(path)
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def write_json(obj: Any, path: str | os.PathLike) -> Path:
    """Indented JSON, written atomically."""
    path = Path(path)
    with atomic_open(path) as handle:
        json.dump(obj, handle, ensure_ascii=False, indent=2)
        handle.write("\n")
    return path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling path for writers that insist on a file name (safetensors, numpy, matplotlib).

    The caller writes to the yielded path; it is renamed to ``path`` only if the block succeeds.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        _give_normal_mode(tmp)  # after the writer, which may have made the file anew
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under the sibling name ``<path>.tmp``; on success it replaces ``path``.

    A crash while building leaves ``path`` as it was (a stale ``.tmp`` is cleared by the next call). The
    old directory is moved aside before the rename and deleted after it, since a rename cannot replace
    a non-empty directory.
    """
    path = Path(path)
    staging = path.with_name(path.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    old = path.with_name(path.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if path.exists():
        os.replace(path, old)
    os.replace(staging, path)
    shutil.rmtree(old, ignore_errors=True)
