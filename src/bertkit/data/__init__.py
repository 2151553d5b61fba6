"""Pre-training data: corpus reading, BERT's instance creation, masking, shards and the resumable loader.

See ``docs/data.md`` for the formats, the algorithm and its one deliberate deviation.
"""

from typing import Any

from bertkit.data.corpus import (
    CorpusOptions,
    CorpusStats,
    corpus_texts,
    expand_inputs,
    read_documents,
    split_sentences,
)
from bertkit.data.instances import Instance, create_instances, create_instances_from_document, truncate_seq_pair
from bertkit.data.masking import MaskingSpec, mask_tokens
from bertkit.data.prepare import PrepareConfig, prepare_dataset
from bertkit.data.shards import open_dataset, verify

_LOADER = {"PretrainingCollator", "PretrainingDataset", "PretrainingLoader"}


def __getattr__(name: str) -> Any:
    # The loader needs torch; preparing data does not, so spawned preparation workers start fast.
    if name in _LOADER:
        from bertkit.data import loader

        return getattr(loader, name)
    raise AttributeError(f"module 'bertkit.data' has no attribute {name!r}")


__all__ = [
    "CorpusOptions",
    "CorpusStats",
    "Instance",
    "MaskingSpec",
    "PrepareConfig",
    "PretrainingCollator",
    "PretrainingDataset",
    "PretrainingLoader",
    "corpus_texts",
    "create_instances",
    "create_instances_from_document",
    "expand_inputs",
    "mask_tokens",
    "open_dataset",
    "prepare_dataset",
    "read_documents",
    "split_sentences",
    "truncate_seq_pair",
    "verify",
]
