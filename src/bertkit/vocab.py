"""Growing a pre-trained model's vocabulary for a new domain (``bertkit tokenizer extend``).

A checkpoint trained on general text splits a domain's frequent words into several pieces
(``cardiomyopathy`` -> ``card ##iom ##yo ##pathy``): longer inputs, and no vector of its own for the word.
Extending the vocabulary gives such words an id before continued pre-training (``pretrain --init-from``):

* Slots: ``[unusedN]`` entries are re-used first, as google-research/bert advises, so the vocabulary and
  the embedding matrix keep their size; then rows of an embedding matrix larger than the vocabulary
  (padded checkpoints); only then are rows appended (``vocab_size`` grows in ``config.json``).
* Initialisation: a new token's input embedding (and, with an MLM head, its output bias) is the mean of
  those of the pieces the old vocabulary split it into, so training starts from what the model already
  reads for the word, not from noise. Pieces that are all ``[UNK]`` fall back to the mean of the matrix.
* Tokens are whole words or continuation pieces written ``##piece``, normalised as the tokenizer
  normalises text (lower-cased and accent-stripped for uncased models). A token the basic tokenizer would
  split (spaces, punctuation, several CJK characters) could never be produced, so it is refused.
* From a corpus: the words (with at least one letter) the model splits that cost the most extra tokens,
  frequency x (pieces - 1), at least ``min_frequency`` times.

The output is a complete Hugging Face-layout model directory: ``transformers`` and bertkit load it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from bertkit.checkpoint_files import SAFETENSORS_NAME, read_weights, write_weights
from bertkit.config import BertConfig
from bertkit.data.corpus import CorpusOptions, CorpusStats, corpus_texts
from bertkit.errors import CheckpointError, ConfigError, TokenizerError
from bertkit.io import atomic_directory
from bertkit.tokenizer import UNK, Tokenizer

REPORT_NAME = "vocab_extension.json"
_UNUSED = re.compile(r"\[unused\d+\]")
# Tensors indexed by token id in Hugging Face BERT checkpoints (any head prefix).
_ROW_TENSORS = ("embeddings.word_embeddings.weight", "cls.predictions.decoder.weight")
_BIAS_TENSORS = ("cls.predictions.bias", "cls.predictions.decoder.bias")


@dataclass
class AddedToken:
    token: str
    id: int
    pieces: list[str]
    """How the old vocabulary split it (its embedding is their mean)."""
    count: int | None = None
    """Occurrences in the corpus, for tokens picked from one."""


@dataclass
class VocabularyExtension:
    """What :func:`extend_vocabulary` did."""

    output: str
    vocab_size_before: int
    vocab_size_after: int
    unused_slots_used: int
    added: list[AddedToken] = field(default_factory=list)
    already_known: list[str] = field(default_factory=list)
    """Requested tokens the vocabulary already had (nothing to do)."""


def normalise_token(tokenizer: Tokenizer, token: str) -> str:
    """``token`` as the tokenizer would see it (case, accents), or ``TokenizerError`` if it would be split."""
    text = token.strip()
    prefix = "##" if text.startswith("##") else ""
    words = tokenizer.split_words(text[len(prefix) :])
    if len(words) != 1:
        shown = " ".join(words) if words else "nothing"
        raise TokenizerError(
            f"{token!r} cannot be one vocabulary entry: the tokenizer splits it into {shown}; "
            f"give single words (or ##pieces) without spaces or punctuation"
        )
    return prefix + words[0]


def frequent_split_words(
    tokenizer: Tokenizer, texts: Iterable[str], max_words: int, min_frequency: int = 20
) -> list[AddedToken]:
    """The ``max_words`` words of ``texts`` whose splitting costs most tokens (frequency x extra pieces).

    Words without a letter (numbers, symbols) are left out: they are open classes that would fill the slots.
    ``id`` of the returned entries is -1 (not assigned yet).
    """
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(tokenizer.split_words(text))
    vocab = tokenizer.vocab
    scored = []
    for word, count in counts.items():
        if count < min_frequency or word in vocab or not any(c.isalpha() for c in word):
            continue
        pieces = tokenizer.word_pieces(word)
        if len(pieces) > 1:
            scored.append((count * (len(pieces) - 1), word, count, pieces))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [AddedToken(word, -1, pieces, count) for _, word, count, pieces in scored[:max_words]]


def _piece_mean(rows: Tensor, piece_ids: list[int]) -> Tensor:
    return rows[piece_ids].mean(dim=0) if piece_ids else rows.mean(dim=0)


def _grow(tensor: Tensor, new: list[AddedToken], piece_ids: list[list[int]], rows: int) -> Tensor:
    """``tensor`` (indexed by token id on dim 0) with ``rows`` rows and the new tokens' rows set."""
    out = (
        torch.cat([tensor, tensor.new_zeros((rows - tensor.shape[0], *tensor.shape[1:]))])
        if rows > tensor.shape[0]
        else tensor.clone()
    )
    source = tensor.float()
    for entry, ids in zip(new, piece_ids):
        out[entry.id] = _piece_mean(source, ids).to(tensor.dtype)
    return out.contiguous()


def extend_vocabulary(
    model: str | Path,
    output: str | Path,
    *,
    tokens: Sequence[str] = (),
    corpus: Sequence[str] = (),
    max_new_tokens: int = 1000,
    min_frequency: int = 20,
    use_unused: bool = True,
    corpus_options: CorpusOptions | None = None,
    corpus_stats: CorpusStats | None = None,
) -> VocabularyExtension:
    """Add ``tokens`` (and up to ``max_new_tokens`` frequent split words of ``corpus`` files) to the model
    directory ``model``, writing the extended model to ``output`` (see the module doc for slots and init).

    ``corpus`` is read as ``prepare-data`` reads it (:func:`bertkit.data.corpus_texts`: formats, compression,
    ``corpus_options`` for the format, text field and cleaning); ``corpus_stats`` receives what was read."""
    source, output = Path(model), Path(output)
    if source.resolve() == output.resolve():
        raise ConfigError(f"the output {output} is the model directory itself; write the extended model elsewhere")
    if max_new_tokens < 0 or min_frequency < 1:
        raise ConfigError("--max-new-tokens must be >= 0 and --min-frequency >= 1")
    if not tokens and not corpus:
        raise ConfigError("nothing to add: give tokens (a file with one per line) and/or a corpus to pick words from")
    tokenizer = Tokenizer.from_pretrained(source)
    config = BertConfig.load(source)
    state = read_weights(source)

    new, known = _requested_tokens(tokenizer, tokens)
    if corpus:
        picked = frequent_split_words(
            tokenizer, corpus_texts(corpus, corpus_options, corpus_stats), max_new_tokens + len(new), min_frequency
        )
        chosen = {a.token for a in new}
        new += [a for a in picked if a.token not in chosen][:max_new_tokens]
    if not new:
        why = [f"the {len(known)} requested token(s) are already in the vocabulary"] if known else []
        if corpus and corpus_stats is not None and corpus_stats.files == 0 and corpus_stats.skipped:
            why.append(f"the corpus has no text: {corpus_stats.skipped_summary()}")
        elif corpus:
            why.append(
                f"no word of the corpus seen at least {min_frequency} times is split by the vocabulary "
                f"(a lower --min-frequency may find some)"
            )
        raise ConfigError(f"nothing to add: {'; '.join(why)}")

    tokens_by_id, unused = _assign_slots(tokenizer, new, use_unused)
    rows = max(config.vocab_size, len(tokens_by_id))
    _grow_state(state, config, new, tokenizer.vocab, rows, source)
    report = VocabularyExtension(
        str(output), tokenizer.vocab_size, len(tokens_by_id), min(len(new), unused), new, known
    )
    with atomic_directory(output) as staging:
        write_weights(state, staging / SAFETENSORS_NAME)
        dataclasses.replace(config, vocab_size=rows).save(staging)
        tokenizer.with_vocab(tokens_by_id).save_pretrained(staging)
        (staging / REPORT_NAME).write_text(
            json.dumps(asdict(report), indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return report


def _requested_tokens(tokenizer: Tokenizer, tokens: Sequence[str]) -> tuple[list[AddedToken], list[str]]:
    """The requested tokens, normalised, that the vocabulary lacks (each once), and those it already has."""
    vocab = tokenizer.vocab
    new: list[AddedToken] = []
    known: list[str] = []
    for token in tokens:
        word = normalise_token(tokenizer, token)
        if word in vocab:
            known.append(word)
        elif all(a.token != word for a in new):
            new.append(AddedToken(word, -1, tokenizer.word_pieces(word.removeprefix("##"))))
    return new, known


def _assign_slots(tokenizer: Tokenizer, new: list[AddedToken], use_unused: bool) -> tuple[list[str], int]:
    """Give each new token its id (``[unusedN]`` slots first, then appended ids); the extended vocabulary in id
    order, and how many ``[unusedN]`` slots there were."""
    old_tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    unused = [i for i, t in enumerate(old_tokens) if _UNUSED.fullmatch(t)] if use_unused else []
    slots = unused[: len(new)] + list(range(len(old_tokens), len(old_tokens) + max(0, len(new) - len(unused))))
    tokens_by_id = list(old_tokens)
    for entry, slot in zip(new, slots):
        entry.id = slot
        if slot < len(tokens_by_id):
            tokens_by_id[slot] = entry.token
        else:
            tokens_by_id.append(entry.token)
    return tokens_by_id, len(unused)


def _grow_state(
    state: dict[str, Tensor], config: BertConfig, new: list[AddedToken], vocab: dict[str, int], rows: int, source: Path
) -> None:
    """Every tensor indexed by token id grown in place to ``rows`` rows, the new tokens' rows initialised."""
    piece_ids = [[vocab[p] for p in entry.pieces if p != UNK and p in vocab] for entry in new]
    grown = 0
    for name, tensor in list(state.items()):
        if name.endswith(_ROW_TENSORS + _BIAS_TENSORS):
            if tensor.shape[0] != config.vocab_size:
                raise CheckpointError(
                    f"{source}: {name} has {tensor.shape[0]} rows but config.json says vocab_size "
                    f"{config.vocab_size}; the config does not match the weights"
                )
            state[name] = _grow(tensor, new, piece_ids, rows)
            grown += name.endswith(_ROW_TENSORS[0])
    if not grown:
        raise CheckpointError(f"{source} has no embeddings.word_embeddings.weight; is it a BERT checkpoint?")
