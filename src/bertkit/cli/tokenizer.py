"""Tokenizer commands: ``tokenize`` (show a text's WordPieces), ``tokenizer train`` and ``tokenizer extend``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer

from bertkit.cli.console import read_lines
from bertkit.cli.options import cli, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import (
    corpus_config_options,
    corpus_options,
    corpus_warnings,
    generated_command,
    options_command,
    shared,
)
from bertkit.option_groups import at_least

if TYPE_CHECKING:  # the library imports torch, which `bertkit --help` should not pay for
    from bertkit.vocab import VocabularyExtension

commands = typer.Typer(rich_markup_mode=None)


@dataclass(kw_only=True)
class TokenizeOptions:
    """``bertkit tokenize``."""

    text: str = field(metadata=cli(argument=True))
    """Text to tokenize."""
    model: str = field(metadata=cli("--model", "-m"))
    """Model directory, vocab.txt or tokenizer.json."""
    pair: str | None = field(default=None, metadata=cli("--pair"))
    """Optional second text (segment B)."""
    json_output: bool = field(default=False, metadata=cli("--json"))
    """Print JSON instead of a table."""


@options_command(commands, "tokenize", TokenizeOptions, short_help="Show a text's WordPieces, ids and offsets.")
def tokenize_command(o: TokenizeOptions) -> None:
    """Show the WordPieces of a text: tokens, ids, segments and character offsets into the text.

    \b
    Example:
      bertkit tokenize --model ./bert "Naïve café, 北京!" --json
    """
    import json

    from bertkit.jobs import tokenize

    text, pair = o.text, o.pair
    enc = tokenize(text, o.model, pair)
    if o.json_output:
        keys = ("tokens", "ids", "type_ids", "offsets", "word_ids", "special_tokens_mask")
        print(json.dumps({k: getattr(enc, k) for k in keys}, ensure_ascii=False))
        return
    print(f"{'#':>4}  {'token':<20} {'id':>6}  seg  span")
    rows = zip(enc.tokens, enc.ids, enc.type_ids, enc.offsets, enc.sequence_ids)
    for i, (tok, id_, seg, (start, end), sequence) in enumerate(rows):
        source = (text, pair or "")[sequence] if sequence is not None else ""
        print(f"{i:>4}  {tok:<20} {id_:>6}  {seg:>3}  {start}:{end} {source[start:end]!r}")


tokenizer_app = typer.Typer(
    rich_markup_mode=None, help="Learn WordPiece vocabularies, or extend a model's.", no_args_is_help=True
)
commands.add_typer(tokenizer_app, name="tokenizer")


# --------------------------------------------------------------------------------------- tokenizer train
def _tokenizer_train_function() -> Callable[..., None]:
    return generated_command(
        "tokenizer train",
        tokenizer_train_command.__doc__,
        corpus_config_options(),
        TokenizerTrainOptions,
        _run_tokenizer_train,
    )


@dataclass(kw_only=True)
class TokenizerTrainOptions:
    """The options of ``tokenizer train`` besides the corpus options (``CorpusOptions``)."""

    input: list[str] = field(metadata=cli("--input", "-i"))
    """Corpus files, directories or globs (repeatable); see --format."""
    kind: str = "wordpiece"
    """wordpiece | bpe: BERT's WordPiece ([PAD] [UNK] [CLS] [SEP] [MASK]), or byte-level BPE as RoBERTa and
    ModernBERT use (<s> <pad> </s> <unk> <mask>; every byte has a token, so nothing is unknown)."""
    vocab_size: int = field(default=30522, metadata=at_least(1, **cli("--vocab-size")))
    """Vocabulary size, the 5 special tokens included."""
    output: str = field(metadata=cli("--output", "-o"))
    """Directory for vocab.txt, tokenizer.json and configs."""
    min_frequency: int = field(default=2, metadata=at_least(1, **cli("--min-frequency")))
    """Drop merges seen fewer times."""
    lowercase: bool | None = None
    """Uncased: lowercase (and, for WordPiece, strip accents) (default: uncased for wordpiece, cased for bpe)."""
    keep_gutenberg_boilerplate: bool = shared("keep_gutenberg_boilerplate")


def _run_tokenizer_train(o: TokenizerTrainOptions, fields: dict[str, Any]) -> None:
    from bertkit.data.corpus import CorpusStats, corpus_texts
    from bertkit.errors import TokenizerError
    from bertkit.tokenizer import Tokenizer

    if o.kind not in ("wordpiece", "bpe"):
        fail(f"--kind must be wordpiece or bpe, got {o.kind}")
    stats = CorpusStats()
    texts = corpus_texts(o.input, corpus_options(o.keep_gutenberg_boilerplate, fields), stats)
    tok: Tokenizer
    try:
        if o.kind == "bpe":
            from bertkit.tokenizer.bpe_training import train_byte_level_bpe

            tok = train_byte_level_bpe(
                texts, vocab_size=o.vocab_size, min_frequency=o.min_frequency, lowercase=bool(o.lowercase)
            )
        else:
            lowercase = True if o.lowercase is None else o.lowercase
            tok = Tokenizer.train(texts, vocab_size=o.vocab_size, min_frequency=o.min_frequency, lowercase=lowercase)
    except TokenizerError:
        if stats.skipped:  # nothing was read because every file was skipped: say why, not "empty"
            fail(f"no text to learn from: {stats.skipped_summary()}")
        raise
    corpus_warnings(stats)
    tok.save_pretrained(o.output)
    print(f"wrote a {tok.vocab_size}-token vocabulary to {o.output} (fingerprint {tok.fingerprint})", file=sys.stderr)


@tokenizer_app.command(
    "train",
    short_help="Learn a WordPiece or byte-level BPE vocabulary from a corpus.",
    cls=lazy_command(_tokenizer_train_function),
)
def tokenizer_train_command() -> None:
    """Learn a BERT WordPiece vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] get ids 0-4), or with --kind bpe a
    byte-level BPE one (<s> <pad> </s> <unk> <mask>, for ModernBERT pre-training), and save it.

    The corpus is read as prepare-data reads it: text, JSONL, Parquet, compressed; Gutenberg boilerplate stripped.

    \b
    Example:
      bertkit tokenizer train --input data/books \\
        --vocab-size 8000 --output ./tok
      bertkit tokenizer train --kind bpe --input data/books \\
        --vocab-size 8000 --output ./bpe-tok
    """


# -------------------------------------------------------------------------------------- tokenizer extend
def _tokenizer_extend_function() -> Callable[..., None]:
    return generated_command(
        "tokenizer extend",
        tokenizer_extend_command.__doc__,
        corpus_config_options(),
        TokenizerExtendOptions,
        _run_tokenizer_extend,
    )


@dataclass(kw_only=True)
class TokenizerExtendOptions:
    """The options of ``tokenizer extend`` besides the corpus options (``CorpusOptions``)."""

    model: str = field(metadata=cli("--model", "-m"))
    """Model directory (Hugging Face layout) to extend."""
    output: str = field(metadata=cli("--output", "-o"))
    """Directory for the extended model (not --model)."""
    tokens: str | None = field(default=None, metadata=cli("--tokens"))
    """Text file: one word (or ##piece) to add per line."""
    corpus: list[str] | None = field(default=None, metadata=cli("--corpus"))
    """Corpus files, directories or globs to pick frequent split words from (repeatable); see --format."""
    max_new_tokens: int = field(default=1000, metadata=at_least(1, **cli("--max-new-tokens")))
    """At most this many words from --corpus."""
    min_frequency: int = field(default=20, metadata=at_least(1, **cli("--min-frequency")))
    """Corpus words seen fewer times are not added."""
    use_unused: bool = True
    """Fill [unusedN] slots before growing the vocabulary."""
    keep_gutenberg_boilerplate: bool = shared("keep_gutenberg_boilerplate")


def _run_tokenizer_extend(o: TokenizerExtendOptions, fields: dict[str, Any]) -> None:
    from bertkit.data.corpus import CorpusStats
    from bertkit.hub import resolve_model
    from bertkit.vocab import extend_vocabulary

    stats = CorpusStats()
    words = read_lines(o.tokens) if o.tokens else []
    report = extend_vocabulary(
        resolve_model(o.model),
        o.output,
        tokens=words,
        corpus=o.corpus or [],
        max_new_tokens=o.max_new_tokens,
        min_frequency=o.min_frequency,
        use_unused=o.use_unused,
        corpus_options=corpus_options(o.keep_gutenberg_boilerplate, fields),
        corpus_stats=stats,
    )
    corpus_warnings(stats)
    _print_extension(report, o.output)


def _print_extension(report: VocabularyExtension, output: str) -> None:
    """What ``tokenizer extend`` added (the first ten words), and what to run next."""
    from bertkit.vocab import REPORT_NAME

    for entry in report.added[:10]:
        seen = f", seen {entry.count:,} times" if entry.count is not None else ""
        print(f"  {entry.token} (id {entry.id}) was {' '.join(entry.pieces)}{seen}", file=sys.stderr)
    if len(report.added) > 10:
        print(f"  ... and {len(report.added) - 10} more (all in {output}/{REPORT_NAME})", file=sys.stderr)
    if report.already_known:
        print(
            f"bertkit: {len(report.already_known)} requested token(s) were already in the vocabulary", file=sys.stderr
        )
    print(
        f"bertkit: added {len(report.added)} token(s), {report.unused_slots_used} in [unused] slots; vocabulary "
        f"{report.vocab_size_before} -> {report.vocab_size_after}; wrote {output}. Continue pre-training with "
        f"bertkit prepare-data --tokenizer {output} ... and bertkit pretrain --init-from {output} ...",
        file=sys.stderr,
    )


@tokenizer_app.command(
    "extend", short_help="Add a domain's words to a model's vocabulary.", cls=lazy_command(_tokenizer_extend_function)
)
def tokenizer_extend_command() -> None:
    """Give a model's vocabulary new words (a domain's terms) before continued pre-training.

    New tokens fill [unusedN] slots first, then new rows; each starts from the mean embedding of the pieces
    the old vocabulary split it into.

    \b
    Example:
      bertkit tokenizer extend --model ./bert --corpus ./clinical \\
        --max-new-tokens 500 --output ./bert-clinical
    """
