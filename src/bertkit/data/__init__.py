"""Pre-training data: corpus reading, BERT's instance creation, masking, shards and the resumable loader.

See ``docs/data.md`` for the formats, the algorithm and its one deliberate deviation.
"""

from typing import TYPE_CHECKING, Any

from bertkit import resolve_export

if TYPE_CHECKING:  # resolved on first use: the loader needs torch, and a task's batch ordering none of the rest
    from bertkit.data.corpus import (
        CorpusOptions,
        CorpusStats,
        corpus_texts,
        expand_inputs,
        read_documents,
        split_sentences,
    )
    from bertkit.data.instances import Instance, create_instances, create_instances_from_document, truncate_seq_pair
    from bertkit.data.loader import PretrainingCollator, PretrainingDataset, PretrainingLoader
    from bertkit.data.masking import MaskingSpec, mask_tokens
    from bertkit.data.prepare import PrepareConfig, prepare_dataset
    from bertkit.data.shards import open_dataset, verify

_HOMES = {
    "CorpusOptions": "bertkit.data.corpus",
    "CorpusStats": "bertkit.data.corpus",
    "corpus_texts": "bertkit.data.corpus",
    "expand_inputs": "bertkit.data.corpus",
    "read_documents": "bertkit.data.corpus",
    "split_sentences": "bertkit.data.corpus",
    "Instance": "bertkit.data.instances",
    "create_instances": "bertkit.data.instances",
    "create_instances_from_document": "bertkit.data.instances",
    "truncate_seq_pair": "bertkit.data.instances",
    "MaskingSpec": "bertkit.data.masking",
    "mask_tokens": "bertkit.data.masking",
    "PrepareConfig": "bertkit.data.prepare",
    "prepare_dataset": "bertkit.data.prepare",
    "open_dataset": "bertkit.data.shards",
    "verify": "bertkit.data.shards",
    "PretrainingCollator": "bertkit.data.loader",
    "PretrainingDataset": "bertkit.data.loader",
    "PretrainingLoader": "bertkit.data.loader",
}


def __getattr__(name: str) -> Any:
    return resolve_export(__name__, globals(), _HOMES, name)


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
