"""BERT's pre-training instance creation (reference section 4), on token ids, driven by one explicit RNG.

A document is a list of sentences, a sentence a list of WordPiece ids (no specials). From each document
:func:`create_instances_from_document` makes ``[CLS] A [SEP] B [SEP]`` pairs exactly as
google-research/bert's ``create_instances_from_document``:

- the target length is ``max_seq_length - 3``; with probability ``short_seq_prob`` it is drawn uniformly
  from ``[2, max_seq_length - 3]`` instead, once per document per pass (short sequences teach the model
  the positions it would otherwise only see in fine-tuning);
- sentences accumulate into a chunk until it reaches the target or the document ends; segment A is the
  chunk's first ``a_end`` sentences, ``a_end`` uniform in ``[1, len(chunk) - 1]``;
- with probability 0.5 (always when the chunk has one sentence) B is a random span from another
  document (up to 10 draws to avoid the current one) and the chunk's unused sentences are put back;
  otherwise B is the rest of the chunk;
- :func:`truncate_seq_pair` trims the longer side one token at a time, from the front or back at random.

NSP label convention (as Hugging Face's ``BertForPreTraining``): 0 = B follows A, 1 = B is random.

Without next-sentence prediction, :func:`create_full_sentence_instances` makes RoBERTa's FULL-SENTENCES
inputs instead: ``[CLS] s1 s2 ... [SEP]`` blocks filled with whole sentences read in document order up to
``max_seq_length``, crossing document boundaries with a ``[SEP]`` between two documents (one segment, NSP
label 0, never random).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from bertkit.errors import DataError

Document = list[list[int]]
Masker = Callable[[list[int], random.Random], tuple[list[int], list[int], list[int]]]
"""``masker(tokens, rng) -> (masked_tokens, positions, labels)``; None for unmasked (dynamic) data."""


@dataclass
class Instance:
    """One pre-training pair."""

    tokens: list[int]
    """``[CLS] A [SEP] B [SEP]`` ids, after masking when masks are baked in."""
    a_length: int
    """Number of A tokens; segment id 0 covers the first ``a_length + 2`` positions, 1 the rest."""
    is_random_next: bool
    """NSP label 1 (B is random) when True, 0 (B follows A) when False."""
    masked_positions: list[int] = field(default_factory=list)
    masked_labels: list[int] = field(default_factory=list)
    short_target: bool = False
    """The document's target length this pass was drawn short (for statistics only)."""

    @property
    def segment_ids(self) -> list[int]:
        return [0] * (self.a_length + 2) + [1] * (len(self.tokens) - self.a_length - 2)


def truncate_seq_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim in place until ``len(a) + len(b) <= max_num_tokens``: the longer side (B on ties) loses one token,
    from the front with probability 0.5, else the back (the random side adds noise against edge effects)."""
    # Index bounds instead of ``del x[0]`` so that a pathological 100k-token sentence stays linear.
    bounds = [[0, len(tokens_a)], [0, len(tokens_b)]]
    while (bounds[0][1] - bounds[0][0]) + (bounds[1][1] - bounds[1][0]) > max_num_tokens:
        side = bounds[0] if bounds[0][1] - bounds[0][0] > bounds[1][1] - bounds[1][0] else bounds[1]
        if rng.random() < 0.5:
            side[0] += 1
        else:
            side[1] -= 1
    tokens_a[:] = tokens_a[bounds[0][0] : bounds[0][1]]
    tokens_b[:] = tokens_b[bounds[1][0] : bounds[1][1]]


def create_instances_from_document(
    all_documents: Sequence[Document],
    document_index: int,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    masker: Masker | None = None,
) -> list[Instance]:
    """All instances of one document for one pass (google-research/bert's algorithm, see module doc)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    if max_num_tokens < 2:
        raise DataError(f"--max-seq-length must be at least 5 (3 special tokens + A + B), got {max_seq_length}")
    target_seq_length = max_num_tokens
    short = False
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
        short = True

    instances: list[Instance] = []
    current_chunk: list[list[int]] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
                tokens_b: list[int] = []
                if len(current_chunk) == 1 or rng.random() < 0.5:
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    # With one document (or bad luck 10 times) this is the same document, as the original.
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    # Put the unused sentences back so that they are not wasted.
                    i -= len(current_chunk) - a_end
                else:
                    is_random_next = False
                    for seg in current_chunk[a_end:]:
                        tokens_b.extend(seg)
                truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                tokens = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]
                positions: list[int] = []
                labels: list[int] = []
                if masker is not None:
                    tokens, positions, labels = masker(tokens, rng)
                instances.append(Instance(tokens, len(tokens_a), is_random_next, positions, labels, short))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def create_instances(
    documents: list[Document],
    *,
    max_seq_length: int,
    short_seq_prob: float,
    dupe_factor: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    masker: Masker | None = None,
) -> list[Instance]:
    """The whole algorithm over a set of documents: drop empty sentences and documents, shuffle the
    documents, run ``dupe_factor`` passes (each with fresh target lengths and masks), shuffle the instances."""
    documents = [doc for doc in ([s for s in d if s] for d in documents) if doc]
    rng.shuffle(documents)
    instances: list[Instance] = []
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances.extend(
                create_instances_from_document(
                    documents,
                    index,
                    max_seq_length=max_seq_length,
                    short_seq_prob=short_seq_prob,
                    cls_id=cls_id,
                    sep_id=sep_id,
                    rng=rng,
                    masker=masker,
                )
            )
    rng.shuffle(instances)
    return instances


def create_full_sentence_instances(
    documents: list[Document],
    *,
    max_seq_length: int,
    dupe_factor: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    masker: Masker | None = None,
) -> list[Instance]:
    """RoBERTa's FULL-SENTENCES inputs: ``dupe_factor`` passes over the shuffled documents, each packed into
    ``[CLS] ... [SEP]`` blocks of at most ``max_seq_length`` tokens that cross document boundaries with a
    ``[SEP]`` between documents; a sentence longer than a block is cut into block-sized pieces. Each pass
    shuffles the documents afresh, so its blocks start at other sentences; the instances are shuffled."""
    capacity = max_seq_length - 2
    if capacity < 1:
        raise DataError(f"--max-seq-length must be at least 3 ([CLS], a token, [SEP]), got {max_seq_length}")
    documents = [doc for doc in ([s for s in d if s] for d in documents) if doc]
    instances: list[Instance] = []
    for _ in range(dupe_factor):
        rng.shuffle(documents)
        for block in full_sentence_blocks(documents, capacity, sep_id):
            tokens = [cls_id, *block, sep_id]
            positions: list[int] = []
            labels: list[int] = []
            if masker is not None:
                tokens, positions, labels = masker(tokens, rng)
            instances.append(Instance(tokens, len(tokens) - 2, False, positions, labels))
    rng.shuffle(instances)
    return instances


def full_sentence_blocks(documents: Sequence[Document], capacity: int, sep_id: int) -> Iterator[list[int]]:
    """The documents' sentences in order, packed into blocks of at most ``capacity`` ids, with ``sep_id`` between
    two documents (never at a block's end); a sentence longer than ``capacity`` is cut into pieces."""
    block: list[int] = []
    for d, document in enumerate(documents):
        if d and block:
            block.append(sep_id)
        for sentence in document:
            for start in range(0, len(sentence), capacity):
                piece = sentence[start : start + capacity]
                if len(block) + len(piece) > capacity:
                    while block and block[-1] == sep_id:
                        block.pop()
                    if block:
                        yield block
                    block = []
                block.extend(piece)
    if block:
        yield block
