"""TensorFlow files: read TensorFlow checkpoints (Google's original BERT releases) without TensorFlow.

A TF checkpoint ``model.ckpt`` is a *tensor bundle*: ``model.ckpt.index`` is a LevelDB-format sorted table
whose values are ``BundleEntryProto`` messages (dtype, shape, shard, offset, size), and the tensors' raw
little-endian bytes sit in ``model.ckpt.data-00000-of-0000N``. Both formats are small and stable, so this
module parses them directly (a few protobuf fields, the table's blocks) rather than pulling in TensorFlow.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bertkit.errors import CheckpointError

_TABLE_MAGIC = 0xDB4775248B80FB57
_FOOTER_SIZE = 48  # two BlockHandles padded to 40 bytes, then the 8-byte magic number
_BLOCK_TRAILER = 5  # compression type (1 byte) + masked crc32c (4 bytes)

# tensorflow/core/framework/types.proto DataType -> numpy dtype (little-endian), for the numeric types.
_DTYPES = {
    1: "<f4",
    2: "<f8",
    3: "<i4",
    4: "u1",
    5: "<i2",
    6: "i1",
    9: "<i8",
    10: "?",
    17: "<u2",
    19: "<f2",
    22: "<u4",
    23: "<u8",
}
_DT_BFLOAT16 = 14


@dataclass(frozen=True)
class _Entry:
    dtype: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    sliced: bool


# ------------------------------------------------------------------------------------------ protobuf wire format
def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(message: int | bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of a protobuf message: ints for varint/fixed fields, bytes for the rest."""
    if not isinstance(message, bytes):
        raise ValueError("a field that should hold a message holds a number")
    pos = 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(message, pos)
        elif wire == 1:
            value, pos = int.from_bytes(message[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(message, pos)
            value, pos = message[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(message[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(message):
            raise ValueError("truncated protobuf message")
        yield number, value


def _entry(message: bytes) -> _Entry:
    scalars, shape, sliced = {1: 0, 3: 0, 4: 0, 5: 0}, [], False  # dtype, shard, offset, size
    for number, value in _fields(message):
        if number in scalars:
            if not isinstance(value, int):
                raise ValueError(f"field {number} of a tensor entry is not a number")
            scalars[number] = value
        elif number == 2:  # TensorShapeProto: repeated Dim dim = 2 { int64 size = 1; }
            for dim_number, dim in _fields(value):
                if dim_number == 2:
                    size = next((v for n, v in _fields(dim) if n == 1), 0)
                    if not isinstance(size, int):
                        raise ValueError("a tensor dimension is not a number")
                    shape.append(size)
        elif number == 7:
            sliced = True
    return _Entry(scalars[1], tuple(shape), scalars[3], scalars[4], scalars[5], sliced)


# ------------------------------------------------------------------------------------------ the sorted table
def _block(data: bytes, handle: bytes) -> bytes:
    offset, pos = _varint(handle, 0)
    size, _ = _varint(handle, pos)
    if offset + size + _BLOCK_TRAILER > len(data):
        raise ValueError("a block points past the end of the file")
    if data[offset + size] != 0:
        raise ValueError("compressed table blocks are not supported (TensorFlow writes checkpoints uncompressed)")
    return data[offset : offset + size]


def _block_entries(block: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) pairs of one table block; keys are prefix-compressed against the previous key."""
    if len(block) < 4:
        raise ValueError("table block too short")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    end = len(block) - 4 * (restarts + 1)
    if end < 0:
        raise ValueError("bad restart count in a table block")
    pos, key = 0, b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        length, pos = _varint(block, pos)
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        yield key, block[pos : pos + length]
        pos += length


def _table(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a LevelDB-format table held in ``data``."""
    if len(data) < _FOOTER_SIZE:
        raise ValueError("file too short for a table footer")
    footer = data[-_FOOTER_SIZE:]
    if struct.unpack("<Q", footer[-8:])[0] != _TABLE_MAGIC:
        raise ValueError("not a TensorFlow checkpoint index (bad magic number)")
    _, pos = _varint(footer, 0)  # metaindex handle: offset ...
    _, pos = _varint(footer, pos)  # ... and size (unused)
    for _, handle in _block_entries(_block(data, footer[pos:])):
        yield from _block_entries(_block(data, handle))


# ------------------------------------------------------------------------------------------ public
def checkpoint_prefix(path: str | os.PathLike) -> Path | None:
    """The checkpoint prefix (``.../model.ckpt``) for a directory, an ``.index`` file or a prefix; None if none."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.ckpt.index")) or sorted(path.glob("*.ckpt-*.index"))
        # Several (model.ckpt-1000, model.ckpt-2000): the one with the highest step, as TF's "latest" would be.
        found.sort(key=lambda p: (len(p.name), p.name))
        return found[-1].with_suffix("") if found else None
    if path.suffix == ".index" and path.is_file():
        return path.with_suffix("")
    if path.with_name(path.name + ".index").is_file():
        return path
    return None


def checkpoint_index(path: str | os.PathLike) -> Path | None:
    """The ``.index`` file of the checkpoint at ``path`` (as for ``checkpoint_prefix``); None if none."""
    prefix = checkpoint_prefix(path)
    return prefix.with_name(prefix.name + ".index") if prefix is not None else None


def read_tf_checkpoint(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every numeric tensor of a TensorFlow (V2) checkpoint, by variable name (``bert/embeddings/...``).

    ``path`` is the prefix (``model.ckpt``), its ``.index`` file or a directory holding one. String
    tensors are skipped; partitioned variables and big-endian bundles are refused with ``CheckpointError``.
    """
    index = checkpoint_index(path)
    if index is None:
        raise CheckpointError(f"{path} is not a TensorFlow checkpoint: no model.ckpt.index there")
    shards, entries = _read_index(index)
    prefix = index.with_suffix("")
    data_files = [prefix.with_name(f"{prefix.name}.data-{i:05d}-of-{shards:05d}") for i in range(shards)]
    missing = [f.name for f in data_files if not f.is_file()]
    if missing:
        raise CheckpointError(f"{index} needs {', '.join(missing)}, which is missing next to it")
    buffers = [
        np.memmap(f, dtype=np.uint8, mode="r") if f.stat().st_size else np.zeros(0, np.uint8) for f in data_files
    ]
    tensors: dict[str, np.ndarray] = {}
    for name, entry in entries.items():
        if entry.dtype == _DT_BFLOAT16:
            raise CheckpointError(
                f"{index}: {name} is bfloat16, which numpy cannot hold; save the checkpoint in float32"
            )
        if entry.dtype not in _DTYPES:
            continue  # strings and other non-numeric bookkeeping
        dtype = np.dtype(_DTYPES[entry.dtype])
        count = math.prod(entry.shape)  # exact: a damaged shape must fail the size check below, not overflow
        if (
            entry.shard >= shards
            or entry.size != count * dtype.itemsize
            or entry.offset + entry.size > len(buffers[entry.shard])
        ):
            raise CheckpointError(
                f"{data_files[min(entry.shard, shards - 1)]}: the bytes of {name} are not where the "
                f"index says; the checkpoint is truncated or its files are mixed up"
            )
        raw = buffers[entry.shard][entry.offset : entry.offset + entry.size]
        tensors[name] = np.frombuffer(raw.tobytes(), dtype=dtype).reshape(entry.shape)
    return tensors


def _read_index(index: Path) -> tuple[int, dict[str, _Entry]]:
    """The number of data shards and the tensor entries of a checkpoint's ``.index`` file, checked."""
    try:
        records = list(_table(index.read_bytes()))
        header = dict(_fields(records[0][1])) if records and records[0][0] == b"" else {}
        entries = {key.decode("utf-8"): _entry(value) for key, value in records if key}
    except (ValueError, UnicodeDecodeError, struct.error) as exc:
        raise CheckpointError(
            f"{index} is not a readable TensorFlow checkpoint index ({exc}); is it truncated?"
        ) from None
    if header.get(2, 0) != 0:
        raise CheckpointError(f"{index} is a big-endian checkpoint; convert it on a little-endian machine")
    shards = header.get(1, 1)
    if not isinstance(shards, int) or not 1 <= shards <= 100_000:
        raise CheckpointError(f"{index} claims {shards!r} data shards; the index is damaged")
    sliced = [name for name, entry in entries.items() if entry.sliced]
    if sliced:
        raise CheckpointError(f"{index} holds partitioned variables ({sliced[0]}...); bertkit reads whole tensors only")
    return shards, entries
