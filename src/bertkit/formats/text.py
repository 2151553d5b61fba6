"""Reading a text file as UTF-8, or failing with one message that says where the bad bytes are and what to do.

Every user-given text file goes through :func:`read_text`: labelled tables, CoNLL and SQuAD files, config
files, vocabularies, inference inputs. A compressed file (``.gz``, ``.bz2``, ``.xz``, ``.zst``) is
decompressed first; a UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from pathlib import Path

from bertkit.errors import BertkitError, DataError
from bertkit.formats.compression import open_decompressed, reading


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
    ``TokenizerError`` for a vocabulary); the message is the same whatever the class. The file is read in
    chunks, and a binary or UTF-16 file is refused at its first chunk that shows it (see :func:`text_kind`),
    so that a large binary file costs a prefix of its bytes, not its size in memory.
    """
    path = existing_file(path, error)
    return decode_utf8(read_text_bytes(path, error), path, error)


def read_text_bytes(path: Path, error: type[BertkitError] = DataError) -> bytes:
    """The decompressed bytes of the text file ``path``, refused (one ``error``) as soon as a chunk shows that
    it is not text: its head by :func:`text_kind`, any later chunk by a NUL byte."""
    chunks = []
    with reading(path, error), open_decompressed(path, error) as handle:
        offset = 0
        while chunk := handle.read(SNIFF_BYTES if offset == 0 else CHUNK_BYTES):
            kind = text_kind(chunk) if offset == 0 else (BINARY if b"\x00" in chunk else None)
            if kind is not None:
                raise error(f"{path}: {describe(kind, chunk, offset)}")
            chunks.append(chunk)
            offset += len(chunk)
    return b"".join(chunks)


def iter_text_lines(
    path: str | os.PathLike, *, keep_blank: bool = False, error: type[BertkitError] = DataError
) -> Iterator[str]:
    """The lines of the text file ``path`` as :func:`text_lines` splits them, read a chunk at a time: a file of
    any size costs a chunk and the lines not yet taken, and is refused (one ``error``) at the first chunk that
    shows it is not UTF-8 text, with the same checks and words as :func:`read_text`."""
    path = existing_file(path, error)
    decoder = codecs.getincrementaldecoder("utf-8")()
    with reading(path, error), open_decompressed(path, error) as handle:
        offset, lines_before, pending = 0, 0, ""
        while chunk := handle.read(SNIFF_BYTES if offset == 0 else CHUNK_BYTES):
            if offset == 0:
                chunk = chunk.removeprefix(codecs.BOM_UTF8)
            kind = text_kind(chunk) if offset == 0 else (BINARY if b"\x00" in chunk else None)
            if kind is not None:
                raise error(f"{path}: {describe(kind, chunk, offset)}")
            try:
                text = pending + decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                line = lines_before + pending.count("\n") + chunk.count(b"\n", 0, exc.start) + 1
                raise error(
                    f"{path}: not UTF-8 text (line {line}: {exc.reason}); convert it to UTF-8 "
                    f"(e.g. iconv -f latin1 -t utf-8) and try again"
                ) from None
            offset += len(chunk)
            whole, _, pending = text.rpartition("\n")
            if whole or _:
                lines_before += whole.count("\n") + 1
                yield from text_lines(whole + "\n", keep_blank=keep_blank)
        pending += decoder.decode(b"", final=True)
        if pending:
            yield from text_lines(pending, keep_blank=keep_blank)


def text_lines(text: str, *, keep_blank: bool = False) -> list[str]:
    """The lines of a plain text file, one input each: every command that reads a ``.txt`` of texts (``embed``,
    ``classify``, ``tag``, ``predict``, ``evaluate``...) splits it here. Blank lines are dropped, or with
    ``keep_blank`` kept as ``""`` (so that the n-th result belongs to the n-th line, as ``wc -l`` counts)."""
    if keep_blank:
        return [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    return [line.rstrip("\r\n") for line in text.splitlines() if line.strip()]


def decode_utf8(data: bytes, source: str | os.PathLike, error: type[BertkitError] = DataError) -> str:
    """``data`` decoded as UTF-8 (a byte-order mark dropped), or one ``error`` naming ``source``, the line
    and the byte within it: ``notes.txt: not UTF-8 text (line 3, byte 5: invalid start byte); ...``."""
    data = data.removeprefix(codecs.BOM_UTF8)
    kind = text_kind(data[:SNIFF_BYTES])
    if kind is not None:
        raise error(f"{source}: {describe(kind, data[:SNIFF_BYTES], 0)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = exc.start - data.rfind(b"\n", 0, exc.start)  # 1-based within the line
        raise error(
            f"{source}: not UTF-8 text (line {line}, byte {byte}: {exc.reason}); convert it to UTF-8 "
            f"(e.g. iconv -f latin1 -t utf-8) and try again"
        ) from None


SNIFF_BYTES = 8192
"""How much of a file's head :func:`text_kind` looks at."""
CHUNK_BYTES = 1 << 20
"""The chunk in which the rest of a text file is read and checked for NUL bytes."""
UTF16 = "UTF-16 text, not UTF-8: convert it first (iconv -f utf-16 -t utf-8 FILE > FILE.utf8)"
BINARY = "a binary file, not text: give a UTF-8 text file"
_MAGIC = {
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a zip archive (or a .docx/.xlsx/.odt document, which is one)",
    b"\x1f\x8b": "gzip-compressed data without a .gz suffix",
    b"PAR1": "a Parquet file without a .parquet suffix",
    b"\x93NUMPY": "a NumPy array (.npy)",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"SQLite format 3\x00": "an SQLite database",
    b"\x7fELF": "an executable program",
}
"""The first bytes of common binary files given by mistake, and what they are."""


def text_kind(head: bytes) -> str | None:
    """What the first bytes of a file are when they are not text, as :data:`UTF16` or :data:`BINARY`; ``None``
    for text (UTF-8, or another 8-bit encoding such as Latin-1 that decoding then names).

    UTF-16: a byte-order mark, or a NUL in every other byte with text between. Binary: any other NUL byte
    (UTF-8 text has none), or many control bytes in what is not UTF-8 either. This is the one test of every reader of user files: the
    inference inputs, labelled tables, the pre-training corpus and tokenizer training."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return UTF16
    if len(head) >= 8:
        even, odd = head[0::2], head[1::2]
        for nuls, other in ((odd, even), (even, odd)):
            if nuls.count(0) > 0.9 * len(nuls) and other.count(0) < 0.1 * len(other):
                return UTF16
    if b"\x00" in head:
        return BINARY
    controls = sum(byte < 32 and byte not in b"\t\n\r\f" for byte in head)
    return BINARY if controls > 0.1 * len(head) and not _utf8(head) else None


def _utf8(head: bytes) -> bool:
    """Whether ``head`` is UTF-8, but for a character cut at its end."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3 and exc.reason == "unexpected end of data"
    return True


def describe(kind: str, chunk: bytes, offset: int) -> str:
    """``kind`` (from :func:`text_kind`) said for a file whose bytes from ``offset`` are ``chunk``: what the
    binary file looks like (a PDF, an archive, all NUL bytes) and where its first NUL byte is."""
    if kind != BINARY:
        return kind
    if offset == 0:
        for magic, what in _MAGIC.items():
            if chunk.startswith(magic):
                return f"{what}, not text: give a UTF-8 text file"
    if not chunk.strip(b"\x00"):
        return f"NUL bytes from byte {offset} (an empty preallocated or sparse file?), not text: give a UTF-8 text file"
    nul = chunk.find(b"\x00")
    where = f"a NUL byte at byte {offset + nul}" if nul >= 0 else "control bytes"
    return f"a binary file ({where}), not text: give a UTF-8 text file"


def not_text_kind(head: bytes) -> str | None:
    """:func:`text_kind` said in full (:func:`describe`) for a file's head; ``None`` for text."""
    kind = text_kind(head)
    return None if kind is None else describe(kind, head, 0)
