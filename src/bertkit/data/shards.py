"""On-disk layout of a prepared dataset: packed, memory-mapped shards and their metadata.

A dataset directory holds, per corpus block ``k`` and split (``train``/``eval``), NumPy ``.npy`` arrays
``block-00000k.<split>.<array>.npy``:

- ``input_ids``: every instance's ``[CLS] A [SEP] B [SEP]`` ids back to back, no padding (``uint16`` when
  the vocabulary has at most 65,536 ids, else ``uint32``);
- ``offsets`` (``int64``, N+1): instance ``i`` is ``input_ids[offsets[i]:offsets[i+1]]``;
- ``a_lengths`` (``int32``): length of segment A, so segment ids are 0 for the first ``a_length + 2``
  positions (``[CLS]``, A and the first ``[SEP]``) and 1 after;
- ``next_sentence_label`` (``uint8``): 0 = B follows A, 1 = B is random;
- static masking only: ``masked_positions`` (``uint16``, N x P), ``masked_labels`` (id dtype, N x P) and
  ``masked_counts`` (``uint16``), P = ``max_predictions_per_seq``; ``input_ids`` already hold the
  replaced tokens.

``block-00000k.json`` records each array's byte size and SHA-256, instance and token counts and the
settings hash; ``dataset.json`` lists the blocks (by listing the directory, so shards written by
independent jobs merge by being in one directory) with totals. Opening checks sizes; :func:`verify`
checks every checksum.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.data.instances import Instance
from bertkit.errors import DataError
from bertkit.io import atomic_write_bytes, atomic_write_text

FORMAT_VERSION = 1
DATASET_FILE = "dataset.json"
SPLITS = ("train", "eval")


def id_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype that holds every id."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def block_name(index: int) -> str:
    return f"block-{index:06d}"


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def pack_instances(instances: list[Instance], *, vocab_size: int, max_predictions: int | None) -> dict[str, np.ndarray]:
    """Instances -> the shard arrays (``max_predictions`` None: no mask arrays, for dynamic masking)."""
    n = len(instances)
    lengths = np.fromiter((len(x.tokens) for x in instances), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    dtype = id_dtype(vocab_size)
    ids = np.empty(int(offsets[-1]), dtype=dtype)
    for i, inst in enumerate(instances):
        ids[offsets[i] : offsets[i + 1]] = inst.tokens
    arrays = {
        "input_ids": ids,
        "offsets": offsets,
        "a_lengths": np.fromiter((x.a_length for x in instances), dtype=np.int32, count=n),
        "next_sentence_label": np.fromiter((x.is_random_next for x in instances), dtype=np.uint8, count=n),
    }
    if max_predictions is not None:
        positions = np.zeros((n, max_predictions), dtype=np.uint16)
        labels = np.zeros((n, max_predictions), dtype=dtype)
        counts = np.zeros(n, dtype=np.uint16)
        for i, inst in enumerate(instances):
            k = len(inst.masked_positions)
            positions[i, :k] = inst.masked_positions
            labels[i, :k] = inst.masked_labels
            counts[i] = k
        arrays.update(masked_positions=positions, masked_labels=labels, masked_counts=counts)
    return arrays


def write_block(
    directory: Path, index: int, splits: dict[str, dict[str, np.ndarray]], *, settings_hash: str, stats: dict[str, Any]
) -> dict[str, Any]:
    """Write one block's arrays (atomically, file by file) and then its JSON; returns the JSON content."""
    directory.mkdir(parents=True, exist_ok=True)
    name = block_name(index)
    meta: dict[str, Any] = {"block": index, "settings_hash": settings_hash, "splits": {}, "stats": stats}
    for split, arrays in splits.items():
        files = {}
        for key, array in arrays.items():
            data = _npy_bytes(array)
            filename = f"{name}.{split}.{key}.npy"
            atomic_write_bytes(directory / filename, data)
            files[key] = {"file": filename, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        meta["splits"][split] = {
            "num_instances": int(len(arrays["offsets"]) - 1),
            "num_tokens": int(arrays["offsets"][-1]),
            "files": files,
        }
    # The JSON comes last: a block without it was interrupted and is not part of the dataset.
    atomic_write_text(directory / f"{name}.json", json.dumps(meta, indent=1, sort_keys=True))
    return meta


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{path} is missing; is this a directory written by 'bertkit prepare-data'?") from exc
    except (OSError, ValueError) as exc:
        raise DataError(f"{path} is unreadable or not JSON ({exc}); prepare the data again") from exc


def index_dataset(
    directory: str | Path, header: dict[str, Any], *, expected_blocks: int | None = None
) -> dict[str, Any]:
    """(Re)write ``dataset.json`` from the block files present: ``header`` (settings, tokenizer) plus
    the block list, totals and merged statistics. Blocks of other settings are an error."""
    directory = Path(directory)
    blocks = []
    totals = {split: {"num_instances": 0, "num_tokens": 0} for split in SPLITS}
    stats: dict[str, int] = {}
    for path in sorted(directory.glob("block-*.json")):
        meta = read_json(path)
        if meta.get("settings_hash") != header["settings_hash"]:
            raise DataError(
                f"{path.name} was prepared with other settings than this dataset; use one output directory per setting"
            )
        blocks.append(meta["block"])
        for split, info in meta["splits"].items():
            totals[split]["num_instances"] += info["num_instances"]
            totals[split]["num_tokens"] += info["num_tokens"]
        for key, value in meta.get("stats", {}).items():
            if isinstance(value, int):
                stats[key] = stats.get(key, 0) + value
    content = dict(header)
    content.update(
        format_version=FORMAT_VERSION,
        blocks=blocks,
        expected_blocks=expected_blocks,
        complete=expected_blocks is not None and blocks == list(range(expected_blocks)),
        splits=totals,
        instance_stats=stats,
    )
    atomic_write_text(directory / DATASET_FILE, json.dumps(content, indent=1, sort_keys=True))
    return content


@dataclass
class ShardSplit:
    """The arrays of one block and split, memory-mapped on first use."""

    directory: Path
    info: dict[str, Any]

    def __post_init__(self) -> None:
        self._arrays: dict[str, np.ndarray] | None = None

    @property
    def num_instances(self) -> int:
        return int(self.info["num_instances"])

    def arrays(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            arrays = {}
            for key, entry in self.info["files"].items():
                path = self.directory / entry["file"]
                try:
                    size = path.stat().st_size
                except FileNotFoundError as exc:
                    raise DataError(f"shard file {path} is missing; prepare the data again") from exc
                if size != entry["bytes"]:
                    raise DataError(
                        f"shard file {path} has {size} bytes, expected {entry['bytes']}: "
                        "it is truncated or modified; prepare that block again"
                    )
                arrays[key] = np.load(path, mmap_mode="r", allow_pickle=False)
            self._arrays = arrays
        return self._arrays

    def __getstate__(self) -> dict[str, Any]:
        # Memory maps are reopened in each DataLoader worker instead of being pickled as copies.
        return {"directory": self.directory, "info": self.info, "_arrays": None}


def open_dataset(directory: str | Path) -> dict[str, Any]:
    """Read ``dataset.json`` and check the listed blocks exist."""
    directory = Path(directory)
    meta = read_json(directory / DATASET_FILE)
    if meta.get("format_version") != FORMAT_VERSION:
        raise DataError(
            f"{directory} has data format {meta.get('format_version')}, this bertkit reads "
            f"{FORMAT_VERSION}; prepare the data again"
        )
    return meta


def load_splits(directory: str | Path, meta: dict[str, Any], split: str) -> list[ShardSplit]:
    """The shards of ``split`` in block order."""
    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")
    directory = Path(directory)
    out = []
    for index in meta["blocks"]:
        block = read_json(directory / f"{block_name(index)}.json")
        info = block["splits"].get(split)
        if info and info["num_instances"]:
            out.append(ShardSplit(directory, info))
    return out


def _shard_files(directory: Path, meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The metadata entry (file name, bytes, SHA-256) of every shard file, in block order."""
    entries = []
    for index in meta["blocks"]:
        block = read_json(directory / f"{block_name(index)}.json")
        for split in block["splits"].values():
            entries.extend(split["files"].values())
    return entries


def file_stamps(directory: str | Path) -> dict[str, list[int]]:
    """Size and modification time of every shard file: cheap to take, and changed by any rewrite of a file."""
    directory = Path(directory)
    stamps = {}
    for entry in _shard_files(directory, open_dataset(directory)):
        try:
            stat = (directory / entry["file"]).stat()
        except OSError:
            continue  # missing: verify() says so
        stamps[entry["file"]] = [stat.st_size, stat.st_mtime_ns]
    return stamps


def verify(directory: str | Path) -> list[str]:
    """Full check of every shard file against its recorded size and SHA-256; returns the problems found."""
    directory = Path(directory)
    meta = open_dataset(directory)
    problems = []
    if not meta.get("complete"):
        problems.append(f"dataset has blocks {len(meta['blocks'])} of expected {meta.get('expected_blocks')}")
    for entry in _shard_files(directory, meta):
        path = directory / entry["file"]
        if not path.exists():
            problems.append(f"{entry['file']}: missing")
            continue
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != entry["sha256"]:
            problems.append(f"{entry['file']}: checksum mismatch")
    return problems
