"""Hugging Face hub datasets named ``hf:NAME[:CONFIG]:SPLIT``, loaded by ``datasets.load_dataset``."""

from __future__ import annotations

import os
from typing import Any

from bertkit.errors import DataError
from bertkit.formats import import_extra

HF_PREFIX = "hf:"
_TRUE = ("1", "ON", "YES", "TRUE")


def parse_hub_name(source: str) -> tuple[str, str | None, str]:
    """``hf:NAME[:CONFIG]:SPLIT`` -> (name, config, split)."""
    parts = source[len(HF_PREFIX) :].split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise DataError(f"{source}: write a hub dataset as hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT (hf:glue:sst2:train)")
    return parts[0], parts[1] if len(parts) == 3 else None, parts[-1]


def load_hub_split(source: str) -> Any:
    """The Arrow table of one split of a hub dataset (needs the ``datasets`` extra)."""
    name, config, split = parse_hub_name(source)
    import_extra("pyarrow", source)
    datasets = import_extra("datasets", source)
    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, FileNotFoundError, ValueError...)
        offline = os.environ.get("HF_DATASETS_OFFLINE", "") in _TRUE or os.environ.get("HF_HUB_OFFLINE", "") in _TRUE
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = "; offline and not in the cache: load it once online" if offline else ""
        raise DataError(f"{source}: cannot load {name!r} split {split!r}{hint} ({reason})") from None
    if isinstance(dataset, datasets.DatasetDict):
        raise DataError(f"{source}: give a split (splits: {', '.join(dataset)})")
    return dataset.with_format("arrow")[:]
