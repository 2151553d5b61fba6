"""Opening a file through its compression, chosen by the last suffix.

``.gz``, ``.bz2`` and ``.xz``/``.lzma`` use the standard library; ``.zst`` needs ``zstandard`` (the ``zstd``
extra). The suffix before the compression names the format: ``books.jsonl.gz`` is JSON lines.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

from bertkit.errors import BertkitError, DataError
from bertkit.formats.extras import import_extra

COMPRESSIONS = (".gz", ".bz2", ".xz", ".lzma", ".zst")

_STANDARD_OPEN: dict[str, Callable[..., Any]] = {
    ".gz": gzip.open,
    ".bz2": bz2.open,
    ".xz": lzma.open,
    ".lzma": lzma.open,
}


def split_suffix(path: str | os.PathLike) -> tuple[str, str]:
    """(the compression suffix or ``""``, the format suffix before it), lower-cased:
    ``Books.JSONL.gz`` -> ``(".gz", ".jsonl")``, ``notes.txt`` -> ``("", ".txt")``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in COMPRESSIONS:
        return suffix, Path(path.stem).suffix.lower()
    return "", suffix


def open_decompressed(path: str | os.PathLike, error: type[BertkitError] = DataError) -> IO[bytes]:
    """``path`` opened for reading its decompressed bytes. A file that cannot be opened is one ``error``
    naming it: ``cannot read input PATH: Permission denied``."""
    path = Path(path)
    compression = split_suffix(path)[0]
    try:
        if compression == ".zst":
            return io.BufferedReader(_ZstdFrames(path.open("rb"), import_extra("zstandard", path)), 1 << 16)
        if compression:
            return cast(IO[bytes], _STANDARD_OPEN[compression](path, "rb"))
        return path.open("rb")
    except OSError as exc:
        raise error(f"cannot read input {path}: {exc.strerror or exc}") from None


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of every frame of a ``.zst`` file. Unlike ``zstandard``'s stream reader, a file
    cut inside a frame is an ``EOFError`` (as gzip, bz2 and xz raise), not a silently shorter text."""

    def __init__(self, raw: IO[bytes], zstandard: Any):
        self._raw = raw
        self._frame = zstandard.ZstdDecompressor().decompressobj
        self._decompressor = self._frame()
        self._inside_frame = False
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 14)
            if not chunk:
                if self._inside_frame:
                    raise EOFError("compressed file ended before the end-of-stream marker was reached")
                return 0
            self._pending = memoryview(self._decompress(chunk))
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]  # a view: no copy of the rest
        return size

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            out.append(self._decompressor.decompress(data))
            self._inside_frame = not self._decompressor.eof
            if self._inside_frame:
                break
            data = self._decompressor.unused_data  # the next frame starts here
            self._decompressor = self._frame()
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


def _stream_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file or a corrupt or truncated compressed stream raises."""
    errors: list[type[BaseException]] = [OSError, EOFError, lzma.LZMAError, zlib.error]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


@contextlib.contextmanager
def reading(path: str | os.PathLike, error: type[BertkitError] = DataError) -> Iterator[None]:
    """Around code that reads ``path``: an I/O error or a corrupt compressed stream becomes one ``error``
    naming the file (``cannot read input books.txt.gz: Not a gzipped file``); bertkit's own errors pass."""
    try:
        yield
    except BertkitError:
        raise
    except _stream_errors() as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise error(f"cannot read input {path}: {reason}") from None


def read_bytes(path: str | os.PathLike, error: type[BertkitError] = DataError) -> bytes:
    """The decompressed bytes of ``path`` (see :func:`open_decompressed` and :func:`reading` for errors)."""
    with reading(path, error), open_decompressed(path, error) as handle:
        return handle.read()
