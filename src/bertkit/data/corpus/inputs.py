"""Which files a corpus is: files, directories and globs expanded; archives and documents refused by name."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from bertkit.errors import DataError
from bertkit.formats import COMPRESSIONS, is_saved_dataset, saved_dataset_files, split_suffix

# Containers whose text the reader cannot reach: refused by name rather than skipped as binary.
_REFUSED_SUFFIXES = {
    ".zip", ".tar", ".tgz", ".tbz2", ".txz", ".7z", ".rar", ".lz4", ".z", ".br",
    ".pdf", ".doc", ".docx", ".odt", ".rtf", ".epub", ".xls", ".xlsx",
}  # fmt: skip
# What datasets.save_to_disk writes beside its Arrow shards: metadata, not text.
_SAVED_DATASET_METADATA = {"state.json", "dataset_info.json"}


def expand_inputs(inputs: Sequence[str | os.PathLike]) -> list[Path]:
    """Files, directories (recursively, hidden files excluded) and globs, as a sorted de-duplicated list. A
    ``datasets.save_to_disk`` directory is its Arrow files."""
    if not inputs:
        raise DataError("no input given; pass files, directories or globs with --input")
    found: list[Path] = []
    for item in inputs:
        text = str(item)
        path = Path(text)
        if path.is_dir():
            found.extend(_directory_files(path))
        elif path.is_file():
            found.append(path)
        elif glob.has_magic(text):
            matches = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not matches:
                raise DataError(f"input pattern {text!r} matches no file")
            found.extend(matches)
        else:
            raise DataError(f"input {text!r} does not exist")
    unique = sorted(set(found))
    if not unique:
        raise DataError("the inputs contain no files")
    return unique


def _directory_files(root: Path) -> list[Path]:
    if is_saved_dataset(root):
        return saved_dataset_files(root)
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not _hidden(p.relative_to(root)) and not _saved_dataset_metadata(p) and not _manifest(p)
    )


def _manifest(path: Path) -> bool:
    """Whether ``path`` is a folder's list of its files (``MANIFEST.tsv``, ``manifest.json``...), not text to
    learn; named on the command line, it is read as any file."""
    return path.stem.lower() == "manifest" and path.suffix.lower() in (".tsv", ".csv", ".json", ".jsonl", ".txt", "")


def _saved_dataset_metadata(path: Path) -> bool:
    """Whether ``path`` is what ``datasets.save_to_disk`` writes beside its Arrow shards (not text to learn)."""
    if path.name == "dataset_dict.json":
        return any(is_saved_dataset(split) for split in path.parent.iterdir() if split.is_dir())
    return path.name in _SAVED_DATASET_METADATA and is_saved_dataset(path.parent)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def refuse_containers(path: Path) -> None:
    """A ``DataError`` for an archive or a document (``.zip``, ``.tar.gz``, ``.pdf`` ...), compressed or not."""
    compression, suffix = split_suffix(path)
    if suffix in _REFUSED_SUFFIXES or (not compression and path.suffix.lower() in _REFUSED_SUFFIXES):
        raise DataError(
            f"cannot read input {path}: {suffix} files are not a corpus format (read are plain text, .jsonl, "
            f".parquet and .arrow, optionally {'/'.join(COMPRESSIONS)} compressed); unpack or convert it, "
            f"or leave it out"
        )
