"""``prepare_dataset``: raw corpus -> MLM+NSP shards, streaming, on all cores, byte-identical per seed.

The main process scans the corpus (decode, clean, documents) and cuts the document stream into blocks of
``block_bytes`` by content order. Each block is then processed independently, by any worker, with RNGs
seeded from ``(seed, block index)``: sentence splitting, tokenization, a held-out split by document, and
google-research/bert's algorithm (shuffle documents, ``dupe_factor`` passes, shuffle instances). Workers
write their block's shard files themselves; at most ``2 x workers`` blocks are in flight, so memory is
bounded by the block size, not the corpus.

Deviation from the original, on purpose: the original draws the "random next" segment from any document
of the whole corpus, which requires the corpus in memory. Here it comes from another document of the
same block (a few MB of text, dozens to thousands of documents). The shuffle of instances is likewise
within a block; the training loader shuffles globally.

Independent jobs (``shard_index``/``num_shards``) each process the blocks ``b`` with
``b % num_shards == shard_index`` into the same directory; ``dataset.json`` is re-indexed by listing
the block files after each job. Blocks already written with the same settings are skipped, so an
interrupted run resumes.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import multiprocessing
import os
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.pool import AsyncResult
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.data.corpus import (
    Block,
    CorpusOptions,
    CorpusStats,
    document_sentences,
    expand_inputs,
    iter_blocks,
    read_documents,
)
from bertkit.data.instances import Instance, create_full_sentence_instances, create_instances
from bertkit.data.masking import MaskingSpec, continuation_table, derive_seed, static_masker
from bertkit.data.recipes import PREPARE_DEFAULTS, RecipeName, check_recipe
from bertkit.data.shards import block_name, index_dataset, pack_instances, read_json, write_block
from bertkit.errors import ConfigError, DataError
from bertkit.formats import split_suffix
from bertkit.hub import resolve_model
from bertkit.io import atomic_path
from bertkit.option_groups import at_least, between, check_numbers
from bertkit.progress import Progress
from bertkit.tokenizer import JsonTokenizer, Tokenizer

log = logging.getLogger("bertkit.data")

TOKENIZER_DIR = "tokenizer"
CONTINUATION_FILE = "wordpiece_continuation.npy"
_STREAM_SPLIT, _STREAM_TRAIN, _STREAM_EVAL = 1, 2, 3
_TOKENIZE_BATCH = 4096


@dataclass
class PrepareConfig:
    """Settings of a prepared dataset. Every field that changes the output enters the settings hash."""

    inputs: list[str]
    """Files, directories and globs of raw text."""
    output: str
    """Dataset directory to write (shards, ``dataset.json``, a copy of the tokenizer)."""
    tokenizer: str
    """Tokenizer directory or file, as ``Tokenizer.from_pretrained`` takes, or a model's hub id (``org/name``)."""
    max_seq_length: int = field(default=128, metadata=at_least(5))
    """Longest instance, special tokens included."""
    short_seq_prob: float = field(default=0.1, metadata=between(0, 1))
    """Probability that a document's target length is drawn short for a pass."""
    dupe_factor: int = field(default=10, metadata=at_least(1))
    """Passes over the corpus, each with fresh split points, random segments and masks."""
    masked_lm_prob: float = field(default=0.15, metadata=between(0, 1))
    """Fraction of tokens to predict."""
    max_predictions_per_seq: int | None = field(default=None, metadata=at_least(1))
    """Cap on masked tokens per instance; None: ``round(max_seq_length * masked_lm_prob)`` (20 for 128)."""
    masking: str | None = None
    """``static``: masks drawn now and stored (BERT); ``dynamic``: drawn per epoch by the loader (RoBERTa).
    Default: the recipe's (``static`` for ``bert``, ``dynamic`` for ``modern``)."""
    whole_word_mask: bool = False
    """Mask all WordPieces of a word together."""
    nsp: bool | None = None
    """Make next-sentence pairs ``[CLS] A [SEP] B [SEP]`` for next-sentence prediction (BERT); off: RoBERTa's
    full-sentence blocks that fill ``max_seq_length`` across document boundaries, with ``[SEP]`` between two
    documents, and pre-training without the next-sentence task. Default: the recipe's (on for ``bert``, off
    for ``modern``)."""
    recipe: RecipeName = "bert"
    """``bert`` (the paper's data: NSP pairs, static masks) or ``modern`` (full-sentence blocks without NSP,
    dynamic masks); the recipe fills only the options not given."""
    seed: int = 12345
    """Seeds every random choice (the original's default)."""
    eval_fraction: float = field(default=0.01, metadata=between(0, 1))
    """Probability that a document goes to the held-out ``eval`` split instead of ``train``."""
    eval_unit_sentences: int = field(default=256, metadata=at_least(1))
    """Documents longer than this many sentences (whole books, say) draw their split per run of this many
    consecutive sentences, so that a corpus of a few long documents still gets a held-out split."""
    block_bytes: int = field(default=4 << 20, metadata=at_least(1))
    """Text per block: the unit of parallelism, of random-next sampling and of instance shuffling."""
    workers: int | None = field(default=None, metadata=at_least(1))
    """Worker processes; None: all cores."""
    shard_index: int = field(default=0, metadata=at_least(0))
    """This job's index among ``num_shards`` independent jobs."""
    num_shards: int = field(default=1, metadata=at_least(1))
    """Independent jobs that share the work (block ``b`` goes to job ``b % num_shards``)."""
    corpus: CorpusOptions = field(default_factory=CorpusOptions)
    """How raw files become documents."""

    def __post_init__(self) -> None:
        if isinstance(self.inputs, (str, os.PathLike)):
            self.inputs = [str(self.inputs)]
        check_numbers(self)
        defaults = PREPARE_DEFAULTS[check_recipe(self.recipe)]
        if self.masking is None:
            self.masking = defaults["masking"]
        if self.nsp is None:
            self.nsp = defaults["nsp"]
        if self.masking not in ("static", "dynamic"):
            raise DataError(f"--masking must be 'static' or 'dynamic', got {self.masking!r}")
        if self.max_predictions_per_seq is None:
            self.max_predictions_per_seq = max(1, round(self.max_seq_length * self.masked_lm_prob))
        if self.max_predictions_per_seq > self.max_seq_length:
            raise ConfigError("--max-predictions-per-seq must be at most --max-seq-length")
        if self.shard_index >= self.num_shards:
            raise ConfigError(f"--shard-index must be in [0, {self.num_shards}), got {self.shard_index}")

    def output_settings(self) -> dict[str, Any]:
        """The settings that define the dataset's content (not how many processes made it)."""
        keys = (
            "max_seq_length",
            "short_seq_prob",
            "dupe_factor",
            "masked_lm_prob",
            "max_predictions_per_seq",
            "masking",
            "whole_word_mask",
            "seed",
            "eval_fraction",
            "eval_unit_sentences",
            "block_bytes",
        )
        settings = {k: getattr(self, k) for k in keys}
        if not self.nsp:  # only when off, so that the datasets prepared before the option keep their hash
            settings["nsp"] = False
        settings["corpus"] = asdict(self.corpus)
        return settings


def _settings_hash(settings: dict[str, Any], tokenizer_fingerprint: str, files: list[Path]) -> str:
    # File names and sizes (not absolute paths) so that jobs on machines with other mount points agree.
    payload = {
        "settings": settings,
        "tokenizer": tokenizer_fingerprint,
        "files": [(p.name, p.stat().st_size) for p in files],
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------------ worker side
_WORKER: dict[str, Any] = {}


def _init_worker(tokenizer_dir: str, header: dict[str, Any], output: str) -> None:
    tokenizer = Tokenizer.from_pretrained(tokenizer_dir)
    settings = header["settings"]
    spec = MaskingSpec(
        mask_id=tokenizer.mask_id,
        vocab_size=tokenizer.vocab_size,
        special_ids=frozenset({tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id}),
        masked_lm_prob=settings["masked_lm_prob"],
        max_predictions_per_seq=settings["max_predictions_per_seq"],
        whole_word_mask=settings["whole_word_mask"],
        is_continuation=continuation_table(tokenizer.vocab, tokenizer.vocab_size)
        if settings["whole_word_mask"]
        else None,
    )
    _WORKER.update(tokenizer=tokenizer, header=header, spec=spec, output=Path(output))


def _tokenize(sentences: list[str]) -> list[list[int]]:
    tokenizer = _WORKER["tokenizer"]
    out: list[list[int]] = []
    for start in range(0, len(sentences), _TOKENIZE_BATCH):
        out.extend(tokenizer.ids_batch(sentences[start : start + _TOKENIZE_BATCH]))
    return out


def split_documents(documents: list[list], fraction: float, unit: int, rng: random.Random) -> dict[str, list]:
    """Held-out ``eval`` documents and the ``train`` rest.

    One draw per document, empty or not, so the split does not depend on tokenization details; a document
    longer than ``unit`` sentences draws once per run of ``unit`` sentences, and the train runs between
    held-out runs become separate documents (no "actual next" pair ever spans a held-out gap).
    """
    parts: dict[str, list] = {"train": [], "eval": []}
    for doc in documents:
        run: list = []
        held_out = False
        for start in range(0, max(len(doc), 1), unit):
            piece = doc[start : start + unit]
            if rng.random() < fraction:
                held_out = True
                parts["eval"].append(piece)
                if run:
                    parts["train"].append(run)
                    run = []
            else:
                run.extend(piece)
        if run or not held_out:
            parts["train"].append(run)
    return parts


def process_block(block: Block) -> dict[str, Any]:
    """Everything for one block (in a worker): sentences, ids, split, instances, masks, shard files."""
    header = _WORKER["header"]
    settings = header["settings"]
    tokenizer = _WORKER["tokenizer"]
    seed = settings["seed"]
    max_num_tokens = settings["max_seq_length"] - 3

    documents = []
    for raw in block.documents:
        sentences = document_sentences(raw)
        ids = _tokenize(sentences)
        documents.append([s for s in ids if s])
    split_rng = random.Random(derive_seed(seed, block.index, _STREAM_SPLIT))
    parts = split_documents(documents, settings["eval_fraction"], settings["eval_unit_sentences"], split_rng)

    masker = static_masker(_WORKER["spec"]) if settings["masking"] == "static" else None
    stats = collections.Counter(
        documents=sum(1 for d in documents if d),
        sentences=sum(len(d) for d in documents),
        long_sentences=sum(1 for d in documents for s in d if len(s) > max_num_tokens),
        tokens=sum(len(s) for d in documents for s in d),
    )
    arrays = {}
    for split, stream in (("train", _STREAM_TRAIN), ("eval", _STREAM_EVAL)):
        instances = _instances(parts[split], settings, random.Random(derive_seed(seed, block.index, stream)), masker)
        stats[f"{split}_random_next"] += sum(x.is_random_next for x in instances)
        stats[f"{split}_short_targets"] += sum(x.short_target for x in instances)
        stats[f"{split}_masked"] += sum(len(x.masked_positions) for x in instances)
        arrays[split] = pack_instances(
            instances,
            vocab_size=tokenizer.vocab_size,
            max_predictions=settings["max_predictions_per_seq"] if masker is not None else None,
        )
        del instances
    return write_block(_WORKER["output"], block.index, arrays, settings_hash=header["settings_hash"], stats=dict(stats))


def _instances(documents: list[Any], settings: dict[str, Any], rng: random.Random, masker: Any) -> list[Instance]:
    """One split's instances: next-sentence pairs, or full-sentence blocks when the settings turn NSP off."""
    tokenizer = _WORKER["tokenizer"]
    common = dict(
        max_seq_length=settings["max_seq_length"],
        dupe_factor=settings["dupe_factor"],
        cls_id=tokenizer.cls_id,
        sep_id=tokenizer.sep_id,
        rng=rng,
        masker=masker,
    )
    if not settings.get("nsp", True):
        return create_full_sentence_instances(documents, **common)
    return create_instances(documents, short_seq_prob=settings["short_seq_prob"], **common)


# ------------------------------------------------------------------------------------------ main side
def prepare_dataset(config: PrepareConfig, *, progress: bool = True) -> dict[str, Any]:
    """Prepare (or resume preparing) a dataset; returns the content of its ``dataset.json``."""
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise DataError(f"--output {output} exists and is not a directory")
    files = expand_inputs(config.inputs)
    tokenizer = Tokenizer.from_pretrained(resolve_model(config.tokenizer))
    if config.whole_word_mask and isinstance(tokenizer, JsonTokenizer):
        raise DataError(
            f"--whole-word-mask reads word boundaries from WordPiece's ## pieces, and {config.tokenizer} is not a "
            f"WordPiece tokenizer; prepare without --whole-word-mask"
        )
    created = not output.exists()  # removed again if the inputs turn out to hold no text
    output.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(output / TOKENIZER_DIR)
    header = _header(config, tokenizer, files, output)
    stats = CorpusStats()
    blocks = iter_blocks(read_documents(files, config.corpus, stats), config.block_bytes)
    shown = Progress(
        text_bytes(files),
        desc="prepare-data",
        unit="B",
        unit_scale=True,
        enabled=progress,
        smoothing=0.05,
    )
    with shown:
        num_blocks = _write_blocks(config, blocks, header, shown)
    if num_blocks == 0:
        if created:
            shutil.rmtree(output, ignore_errors=True)
        raise DataError(f"the inputs contain no usable text: {stats.skipped_summary()}")
    header["corpus_stats"] = stats.to_dict()
    meta = index_dataset(output, header, expected_blocks=num_blocks)
    for line in stats.warnings():
        log.warning(line)
    held_out = meta["splits"]["eval"]["num_instances"]
    if meta["complete"] and held_out == 0 and config.eval_fraction > 0 and meta["splits"]["train"]["num_instances"]:
        log.warning(no_eval_line(config))
    return meta


def no_eval_line(config: PrepareConfig) -> str:
    """The warning for a data set without held-out instances, with the flags that give it some."""
    return (
        f"the eval split holds no instances: the corpus is too small for --eval-fraction {config.eval_fraction:g} "
        f"of its runs of --eval-unit-sentences {config.eval_unit_sentences} sentences, so pretrain will not "
        f"evaluate; raise --eval-fraction or lower --eval-unit-sentences"
    )


def text_bytes(files: Sequence[Path]) -> int | None:
    """The bytes of text the inputs hold, which the progress counts; ``None`` (unknown) when one is compressed,
    as its size on disk is not its text's."""
    if any(split_suffix(path)[0] for path in files):
        return None
    return sum(path.stat().st_size for path in files)


def _header(config: PrepareConfig, tokenizer: Tokenizer, files: list[Path], output: Path) -> dict[str, Any]:
    """What every block and ``dataset.json`` record: the settings, their hash and the tokenizer (and, for
    whole-word masking, the continuation table written beside them)."""
    settings = config.output_settings()
    header: dict[str, Any] = {
        "settings": settings,
        "settings_hash": _settings_hash(settings, tokenizer.fingerprint, files),
        "tokenizer": {
            "fingerprint": tokenizer.fingerprint,
            "vocab_size": tokenizer.vocab_size,
            "pad_id": tokenizer.pad_id,
            "cls_id": tokenizer.cls_id,
            "sep_id": tokenizer.sep_id,
            "mask_id": tokenizer.mask_id,
            "directory": TOKENIZER_DIR,
        },
    }
    if config.whole_word_mask:
        with atomic_path(output / CONTINUATION_FILE) as tmp:
            np.save(tmp, continuation_table(tokenizer.vocab, tokenizer.vocab_size))
        header["continuation_file"] = CONTINUATION_FILE
    return header


def _write_blocks(config: PrepareConfig, blocks: Iterable[Block], header: dict[str, Any], shown: Progress) -> int:
    """Process this job's blocks not written yet (in worker processes unless ``workers`` is 1); the number of
    blocks the corpus has."""
    output = Path(config.output)
    done = _existing_blocks(output, header["settings_hash"])
    workers = config.workers or os.cpu_count() or 1
    init_args = (str(output / TOKENIZER_DIR), header, str(output))
    num_blocks = 0
    if workers == 1:
        _init_worker(*init_args)
        for block in blocks:
            num_blocks += 1
            if _mine(block.index, config) and block.index not in done:
                process_block(block)
            shown.update(block.nbytes)
        return num_blocks
    with multiprocessing.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=init_args) as pool:
        pending: collections.deque[tuple[AsyncResult[Any], int]] = collections.deque()
        for block in blocks:
            num_blocks += 1
            if not _mine(block.index, config) or block.index in done:
                shown.update(block.nbytes)
                continue
            pending.append((pool.apply_async(process_block, (block,)), block.nbytes))
            del block
            while len(pending) >= 2 * workers:  # bounded in-flight work = bounded memory
                _finish(pending.popleft(), shown)
        while pending:
            _finish(pending.popleft(), shown)
    return num_blocks


def _mine(index: int, config: PrepareConfig) -> bool:
    return index % config.num_shards == config.shard_index


def _finish(item: tuple[AsyncResult[Any], int], shown: Progress) -> None:
    result, nbytes = item
    result.get()
    shown.update(nbytes)


def _existing_blocks(output: Path, settings_hash: str) -> set[int]:
    done = set()
    for path in output.glob("block-*.json"):
        meta = read_json(path)
        if meta.get("settings_hash") != settings_hash:
            raise DataError(
                f"{output} already holds data prepared with other settings ({path.name}); "
                "choose a new --output directory or delete it"
            )
        if path.name == f"{block_name(meta['block'])}.json":
            done.add(meta["block"])
    return done
