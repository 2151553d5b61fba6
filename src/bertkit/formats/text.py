"""Reading a text file as UTF-8, or failing with one message that says where the bad bytes are and what to do.

Every user-given text file goes through :func:`read_text`: labelled tables, CoNLL and SQuAD files, config
files, vocabularies, inference inputs. A compressed file (``.gz``, ``.bz2``, ``.xz``, ``.zst``) is
decompressed first; a UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path

from bertkit.errors import BertkitError, DataError
from bertkit.formats.compression import read_bytes


def existing_file(path: str | os.PathLike, error: type[BertkitError] = DataError) -> Path:
    """``path`` when it is a file; else one ``error``: ``PATH: no such file or directory`` or
    ``PATH: is a directory, not a file``."""
    path = Path(path)
    if path.is_dir():
        raise error(f"{path}: is a directory, not a file")
    if not path.is_file():
        raise error(f"{path}: no such file or directory")
    return path


def read_text(path: str | os.PathLike, error: type[BertkitError] = DataError) -> str:
    """The text of the file ``path``; a missing, unreadable or non-UTF-8 file is one ``error`` naming it.

    ``error`` is the exception class the caller's users expect (``ConfigError`` for a config file,
    ``TokenizerError`` for a vocabulary); the message is the same whatever the class.
    """
    path = existing_file(path, error)
    return decode_utf8(read_bytes(path, error), path, error)


def decode_utf8(data: bytes, source: str | os.PathLike, error: type[BertkitError] = DataError) -> str:
    """``data`` decoded as UTF-8 (a byte-order mark dropped), or one ``error`` naming ``source``, the line
    and the byte within it: ``notes.txt: not UTF-8 text (line 3, byte 5: invalid start byte); ...``."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        kind = not_text_kind(data[:4096])
        if kind is not None:
            raise error(f"{source}: {kind}") from None
        line = data.count(b"\n", 0, exc.start) + 1
        byte = exc.start - data.rfind(b"\n", 0, exc.start)  # 1-based within the line
        raise error(
            f"{source}: not UTF-8 text (line {line}, byte {byte}: {exc.reason}); convert it to UTF-8 "
            f"(e.g. iconv -f latin1 -t utf-8) and try again"
        ) from None


UTF16 = "UTF-16 text, not UTF-8: convert it first (iconv -f utf-16 -t utf-8 FILE > FILE.utf8)"
BINARY = "a binary file, not text (it has NUL and control bytes): give a UTF-8 text file"


def not_text_kind(head: bytes) -> str | None:
    """What the first bytes of a file that is not UTF-8 are, with the fix: UTF-16 text (a byte-order mark, or
    a NUL in every other byte) or binary (NUL or many control bytes); ``None`` for text in another 8-bit
    encoding (Latin-1, cp1252)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return UTF16
    if len(head) >= 8 and (head[1::2].count(0) > 0.9 * len(head[1::2]) or head[0::2].count(0) > 0.9 * len(head[::2])):
        return UTF16
    controls = sum(byte < 32 and byte not in b"\t\n\r\f" for byte in head)
    if b"\x00" in head or controls > 0.1 * len(head):
        return BINARY
    return None
