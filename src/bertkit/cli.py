"""The ``bertkit`` command. Thin: parse arguments, call the library, print. No logic a Python user lacks.

Every ``BertkitError`` (bad input, missing files, invalid options) becomes one line on stderr and exit
code 2; typer's own usage errors also exit with 2.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Protocol

import typer

from bertkit.cli_options import (
    ConfigOption,
    ExampleLastCommand,
    command_function,
    config_options,
    lazy_command,
    show_default,
)
from bertkit.errors import BertkitError

if TYPE_CHECKING:  # the inference package imports torch, which `bertkit --help` should not pay for
    from bertkit.data.corpus import CorpusOptions, CorpusStats
    from bertkit.inference import TextInput
    from bertkit.training.finetune import FinetuneConfig

app = typer.Typer(
    rich_markup_mode=None,
    name="bertkit",
    help="BERT from scratch: WordPiece, pre-training, fine-tuning, inference and Hugging Face interop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def fail(message: str) -> NoReturn:
    """Stop the command with one clear line and exit code 2."""
    raise BertkitError(message)


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, standalone_mode=False)
    except BertkitError as exc:
        print(f"bertkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bertkit: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except OSError as exc:  # a file system problem (permissions, disk full) the command did not foresee
        print(f"bertkit: error: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr)
        return 2
    except Exception as exc:  # click usage errors and friends
        usage, abort = _click_exceptions()
        if isinstance(exc, usage):
            exc.show()
            return 2
        if isinstance(exc, abort):
            return 1
        raise
    return 0


class _ShowsItself(Protocol):
    """A click usage error: ``show()`` prints it with the command's usage line."""

    def show(self) -> None: ...


def _click_exceptions() -> tuple[tuple[type[_ShowsItself], ...], tuple[type[Exception], ...]]:
    """(usage errors, aborts) of click and of the copy of click that typer >= 0.26 vendors (``typer._click``)."""
    import click

    usage: list[type[_ShowsItself]] = [click.exceptions.ClickException]
    abort: list[type[Exception]] = [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored
    except ImportError:
        pass
    else:
        usage.append(vendored.ClickException)
        abort.extend(getattr(vendored, name) for name in ("Abort",) if hasattr(vendored, name))
    return tuple(usage), tuple(abort)


# ------------------------------------------------------------------------------------------ commands
# Subcommands are registered below, one block per library area, each calling the library.
# Options are declared as `Annotated[type, typer.Option(...)]`, the default after `=`. Typer passes every
# parameter by name, so a command whose required options follow optional ones (the order of its --help) makes
# them keyword-only with `*`.


# ---------------------------------------------------------------------------------------- tokenizer
@app.command("tokenize", short_help="Show a text's WordPieces, ids and offsets.", cls=ExampleLastCommand)
def tokenize_command(
    text: Annotated[str, typer.Argument(help="Text to tokenize.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model directory, vocab.txt or tokenizer.json.")],
    pair: Annotated[str | None, typer.Option("--pair", help="Optional second text (segment B).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Show the WordPieces of a text: tokens, ids, segments and character offsets into the text.

    \b
    Example:
      bertkit tokenize --model ./bert "Naïve café, 北京!" --json
    """
    import json

    from bertkit.hub import resolve_model
    from bertkit.tokenizer import Tokenizer

    enc = Tokenizer.from_pretrained(resolve_model(model)).encode(text, pair)
    if json_output:
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
app.add_typer(tokenizer_app, name="tokenizer")


def _corpus_cli() -> tuple[list[ConfigOption], dict[str, tuple[Any, Any]]]:
    """The corpus options (format, text field, cleaning) of every command that reads a raw corpus, declared
    once by ``CorpusOptions``: ``prepare-data``, ``tokenizer train``, ``tokenizer extend``."""
    from bertkit.data.corpus import CorpusOptions

    extra = {
        "keep_gutenberg_boilerplate": (
            Annotated[bool, typer.Option(help="Do not strip Project Gutenberg headers/footers.")],
            False,
        ),
    }
    return config_options([CorpusOptions], exclude={"strip_gutenberg"}), extra


def _corpus_options(given: dict[str, Any]) -> CorpusOptions:
    """The ``CorpusOptions`` of a command's parsed options (popped from ``given``)."""
    from bertkit.data.corpus import CorpusOptions

    corpus: dict[str, Any] = {"strip_gutenberg": not given.pop("keep_gutenberg_boilerplate")}
    for f in dataclasses.fields(CorpusOptions):
        value = given.pop(f.name, None)
        if value is not None:
            corpus[f.name] = value
    return CorpusOptions(**corpus)


def _corpus_warnings(stats: CorpusStats) -> None:
    for line in stats.warnings():
        print(f"bertkit: warning: {line}", file=sys.stderr)


def _tokenizer_train_function() -> Callable[..., None]:
    options, extra = _corpus_cli()
    extra = {
        "input": (
            Annotated[
                list[str],
                typer.Option("--input", "-i", help="Corpus files, directories or globs (repeatable); see --format."),
            ],
            ...,
        ),
        "vocab_size": (
            Annotated[int, typer.Option("--vocab-size", help="Vocabulary size, the 5 special tokens included.")],
            30522,
        ),
        "output": (
            Annotated[str, typer.Option("--output", "-o", help="Directory for vocab.txt, tokenizer.json and configs.")],
            ...,
        ),
        "min_frequency": (Annotated[int, typer.Option("--min-frequency", help="Drop merges seen fewer times.")], 2),
        "lowercase": (
            Annotated[bool, typer.Option("--lowercase/--no-lowercase", help="Uncased (lowercase + strip accents).")],
            True,
        ),
        **extra,
    }
    return command_function("tokenizer train", tokenizer_train_command.__doc__, options, extra, _run_tokenizer_train)


def _run_tokenizer_train(given: dict[str, Any]) -> None:
    from bertkit.data.corpus import CorpusStats, corpus_texts
    from bertkit.tokenizer import Tokenizer

    stats = CorpusStats()
    texts = corpus_texts(given.pop("input"), _corpus_options(given), stats)
    tok = Tokenizer.train(
        texts, vocab_size=given["vocab_size"], min_frequency=given["min_frequency"], lowercase=given["lowercase"]
    )
    _corpus_warnings(stats)
    output = given["output"]
    tok.save_pretrained(output)
    print(f"wrote a {tok.vocab_size}-token vocabulary to {output} (fingerprint {tok.fingerprint})", file=sys.stderr)


@tokenizer_app.command(
    "train", short_help="Learn a WordPiece vocabulary from a corpus.", cls=lazy_command(_tokenizer_train_function)
)
def tokenizer_train_command() -> None:
    """Learn a BERT WordPiece vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] get ids 0-4) and save it.

    The corpus is read as prepare-data reads it: text, JSONL, Parquet, compressed; Gutenberg boilerplate stripped.

    \b
    Example:
      bertkit tokenizer train --input ../shared/data/gutenberg/books \\
        --vocab-size 8000 --output ./tok
    """


def _tokenizer_extend_function() -> Callable[..., None]:
    options, extra = _corpus_cli()
    extra = {
        "model": (
            Annotated[str, typer.Option("--model", "-m", help="Model directory (Hugging Face layout) to extend.")],
            ...,
        ),
        "output": (
            Annotated[str, typer.Option("--output", "-o", help="Directory for the extended model (not --model).")],
            ...,
        ),
        "tokens": (
            Annotated[str | None, typer.Option("--tokens", help="Text file: one word (or ##piece) to add per line.")],
            None,
        ),
        "corpus": (
            Annotated[
                list[str] | None,
                typer.Option(
                    "--corpus",
                    help="Corpus files, directories or globs to pick frequent split words from (repeatable); "
                    "see --format.",
                ),
            ],
            None,
        ),
        "max_new_tokens": (
            Annotated[int, typer.Option("--max-new-tokens", help="At most this many words from --corpus.")],
            1000,
        ),
        "min_frequency": (
            Annotated[int, typer.Option("--min-frequency", help="Corpus words seen fewer times are not added.")],
            20,
        ),
        "use_unused": (
            Annotated[
                bool,
                typer.Option(
                    "--use-unused/--no-use-unused", help=r"Fill \[unusedN] slots before growing the vocabulary."
                ),
            ],
            True,
        ),
        **extra,
    }
    return command_function("tokenizer extend", tokenizer_extend_command.__doc__, options, extra, _run_tokenizer_extend)


def _run_tokenizer_extend(given: dict[str, Any]) -> None:
    from bertkit.data.corpus import CorpusStats
    from bertkit.hub import resolve_model
    from bertkit.vocab import REPORT_NAME, extend_vocabulary

    tokens, output = given["tokens"], given["output"]
    stats = CorpusStats()
    words = read_lines(tokens) if tokens else []
    report = extend_vocabulary(
        resolve_model(given["model"]),
        output,
        tokens=words,
        corpus=given["corpus"] or [],
        max_new_tokens=given["max_new_tokens"],
        min_frequency=given["min_frequency"],
        use_unused=given["use_unused"],
        corpus_options=_corpus_options(given),
        corpus_stats=stats,
    )
    _corpus_warnings(stats)
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


# ---------------------------------------------------------------------------------------- end of tokenizer block


# ---------------------------------------------------------------------------------------- inference
def read_lines(path: str) -> list[str]:
    """Non-empty lines of a UTF-8 text file, or of stdin when ``path`` is ``-``."""
    from pathlib import Path

    if path == "-":
        return [line.rstrip("\r\n") for line in sys.stdin if line.strip()]
    file = Path(path)
    if not file.exists():
        fail(f"input file {path} does not exist")
    if not file.is_file():
        fail(f"input {path} is a directory, not a file; give a text file with one input per line")
    try:
        lines = [line.rstrip("\r\n") for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}); convert it to UTF-8 first")
    if not lines:
        fail(f"{path} is empty: give one input per line")
    return lines


# Options shared by the inference commands.
ModelOption = Annotated[
    str, typer.Option("--model", "-m", help="Model directory (Hugging Face layout) or hub id (org/name@revision).")
]
InputOption = Annotated[
    str | None, typer.Option("--input", "-i", help="Text file with one input per line; - for stdin.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object per input instead of text.")]
BatchOption = Annotated[int, typer.Option("--batch-size", help="Inputs per forward pass.")]
QuantizeOption = Annotated[
    str | None,
    typer.Option(
        "--quantize", help="int8: the encoder's linear layers in int8 (CPU inference; compiled unless --no-compile)."
    ),
]
CompileOption = Annotated[
    bool | None,
    typer.Option("--compile/--no-compile", help="Run the model through torch.compile (default: with --quantize only)."),
]


def _text_or_pair(line: str) -> TextInput:
    """A line as one text, or as a (text, text_pair) where a TAB splits it."""
    first, tab, second = line.partition("\t")
    return (first, second) if tab else line


@app.command("embed", short_help="Embed texts as vectors (feature extraction).", cls=ExampleLastCommand)
def embed_command(
    model: ModelOption,
    input: Annotated[
        str, typer.Option("--input", "-i", help="Text file, one text (or TAB-separated pair) per line; - for stdin.")
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="Where to write the embeddings (.npy, float32, one row per line).")
    ],
    pooling: Annotated[
        str | None,
        typer.Option(
            help="cls | mean | max: how token vectors become one vector per line (default: the checkpoint's "
            "sentence-transformers pooling, else cls)."
        ),
    ] = None,
    layers: Annotated[str, typer.Option(help="Comma-separated hidden layers to concatenate, -1 = last.")] = "-1",
    batch_size: Annotated[int, typer.Option(help="Texts per forward pass.")] = 32,
    max_length: Annotated[
        int | None,
        typer.Option(
            help="Truncate inputs to this many tokens (default: the checkpoint's sentence-transformers length, "
            "else its fine-tuning length, else the model's maximum)."
        ),
    ] = None,
    normalize: Annotated[
        bool | None,
        typer.Option(
            "--normalize/--no-normalize",
            help="L2-normalise every vector (default: as the checkpoint's sentence-transformers modules, else not).",
        ),
    ] = None,
    long_text: Annotated[
        str, typer.Option(help="truncate | windows: embed longer texts whole, in overlapping windows.")
    ] = "truncate",
    window_stride: Annotated[int, typer.Option(help="With --long-text windows: tokens between window starts.")] = 128,
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
) -> None:
    """Extract contextual embeddings (feature extraction) for one text per line into a .npy file.

    \b
    Example:
      bertkit embed --model ./minilm --input sentences.txt \\
        --output vectors.npy --pooling mean --layers -1,-2
    """
    import warnings

    import numpy as np

    from bertkit.errors import TruncationWarning
    from bertkit.inference import embed, load
    from bertkit.inference.encoder import embed_settings
    from bertkit.io import atomic_path

    if not output.endswith(".npy"):
        fail(f"--output must end with .npy, got {output}")
    if pooling not in (None, "cls", "mean", "max"):
        fail(f"--pooling must be cls, mean or max, got {pooling}")
    texts = [_text_or_pair(line) for line in read_lines(input)]
    loaded = load(model, head="BertModel", quantize=quantize, compile=compile)
    settings = embed_settings(loaded, pooling, normalize, max_length)
    source = " (from the checkpoint's sentence-transformers files)" if settings.from_checkpoint else ""
    print(f"bertkit: embedding with {settings.describe()}{source}", file=sys.stderr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        vectors = embed(
            texts,
            loaded,
            pooling=settings.pooling,
            layers=layers,
            batch_size=batch_size,
            max_length=settings.max_length,
            normalize=settings.normalize,
            progress=True,
            long_text=long_text,
            window_stride=window_stride,
        )
    for warning in caught:
        if isinstance(warning.message, TruncationWarning):
            cut = warning.message
            print(
                f"bertkit: {cut.count} of {cut.total} inputs were longer than {cut.max_length} tokens and were cut "
                f"(--long-text windows embeds single texts whole)",
                file=sys.stderr,
            )
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    with atomic_path(output) as tmp:
        np.save(tmp, vectors.astype(np.float32))
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {output}", file=sys.stderr)


# ---------------------------------------------------------------------- inference pipelines, serve, export
def _pipeline_inputs(texts: list[str] | None, input: str | None) -> list[str]:
    """Texts from the arguments or from ``--input`` (a file, ``-`` for stdin), one per line."""
    if texts and input:
        fail("give texts as arguments or --input FILE, not both")
    lines = list(texts) if texts else read_lines(input) if input else []
    if not lines:
        fail("give a text as an argument, or --input FILE with one input per line (- for stdin)")
    return lines


def _print_json(obj: object) -> None:
    import json

    print(json.dumps(obj, ensure_ascii=False))


@app.command("fill-mask", short_help="Predict the words behind [MASK].", cls=ExampleLastCommand)
def fill_mask_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts with one or more [MASK].")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Candidates per mask.")] = 5,
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
) -> None:
    """Predict the words hidden behind [MASK] (needs a model with its masked-LM head).

    \b
    Example:
      bertkit fill-mask --model ./bert "Paris is the [MASK] of France."
    """
    from bertkit.inference import fill_mask, load

    items = _pipeline_inputs(texts, input)
    loaded = load(model, quantize=quantize, compile=compile)
    for text, masks in zip(items, fill_mask(items, loaded, top_k=top_k, batch_size=batch_size)):
        if as_json:
            _print_json({"text": text, "masks": [[c.to_dict() for c in m] for m in masks]})
            continue
        print(text)
        for number, candidates in enumerate(masks, start=1):
            label = f"[MASK] {number}: " if len(masks) > 1 else ""
            for c in candidates:
                print(f"  {label}{c.text:<16} {100 * c.score:6.2f}%  {c.sequence}")


@app.command("next-sentence", short_help="Score whether sentence B follows sentence A.", cls=ExampleLastCommand)
def next_sentence_command(
    first: Annotated[str | None, typer.Argument(help="Sentence A.")] = None,
    second: Annotated[str | None, typer.Argument(help="Sentence B.")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
) -> None:
    """Probability that sentence B follows sentence A (needs a pre-training model with its NSP head).

    With --input, each line is A<TAB>B.

    \b
    Example:
      bertkit next-sentence --model ./bert "I went home." "Then I slept."
    """
    from bertkit.inference import next_sentence

    if first is not None and second is None:
        fail("give two sentences (A and B), or --input FILE with A<TAB>B per line")
    pairs = []
    for i, line in enumerate(_pipeline_inputs([f"{first}\t{second}"] if first is not None else None, input)):
        pair = _text_or_pair(line)
        if not isinstance(pair, tuple):
            fail(f"line {i + 1} has no TAB between sentence A and sentence B")
        pairs.append(pair)
    probs = next_sentence([a for a, _ in pairs], [b for _, b in pairs], model, batch_size=batch_size)
    assert isinstance(probs, list)  # lists in, one probability per pair out
    for (a, b), p in zip(pairs, probs):
        if as_json:
            _print_json({"first": a, "second": b, "probability": p})
        else:
            print(f"{p:.4f}\t{a}\t{b}")


@app.command("classify", short_help="Label texts or pairs with a fine-tuned classifier.", cls=ExampleLastCommand)
def classify_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to classify (a TAB separates a pair).")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
) -> None:
    """Label texts or text pairs with a fine-tuned classifier (or score them, for regression).

    \b
    Example:
      bertkit classify --model ./sst2-model --input reviews.txt --json
    """
    from bertkit.inference import classify

    items = [_text_or_pair(line) for line in _pipeline_inputs(texts, input)]
    for item, p in zip(items, classify(items, model, batch_size=batch_size)):
        text, pair = (item, None) if isinstance(item, str) else item
        if as_json:
            _print_json(
                {
                    "text": text,
                    **({"text_pair": pair} if pair is not None else {}),
                    "label": p.label,
                    "score": p.score,
                    "probabilities": p.probabilities,
                }
            )
        elif p.label is None:
            print(f"{p.score:.4f}\t{text}" + (f"\t{pair}" if pair is not None else ""))
        else:
            print(f"{p.label}\t{p.score:.4f}\t{text}" + (f"\t{pair}" if pair is not None else ""))


@app.command("tag", short_help="Tag words (entities) with a fine-tuned tagger.", cls=ExampleLastCommand)
def tag_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to tag.")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
) -> None:
    """Find entities (or any word tags) with a fine-tuned token classifier; offsets are characters.

    \b
    Example:
      bertkit tag --model ./ner-model \\
        "George Washington lived in Mount Vernon."
    """
    from bertkit.inference import tag

    items = _pipeline_inputs(texts, input)
    for result in tag(items, model, batch_size=batch_size):
        if as_json:
            _print_json(result.to_dict())
            continue
        marked, cursor = [], 0
        for e in result.entities:
            marked += [result.text[cursor : e.start], f"[{e.text}]{e.type}"]
            cursor = e.end
        print("".join(marked) + result.text[cursor:])


@app.command("answer", short_help="Answer questions from a context (extractive QA).", cls=ExampleLastCommand)
def answer_command(
    *,
    question: Annotated[str | None, typer.Option("--question", "-q", help="The question.")] = None,
    context: Annotated[str | None, typer.Option("--context", "-c", help="The text that holds the answer.")] = None,
    context_file: Annotated[str | None, typer.Option("--context-file", help="Read the context from this file.")] = None,
    input: Annotated[
        str | None, typer.Option("--input", "-i", help='JSON lines {"question", "context"}; - for stdin.')
    ] = None,
    model: ModelOption,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Answers per question.")] = 1,
    allow_no_answer: Annotated[
        bool, typer.Option(help="SQuAD v2 models: answer nothing when no span is likely.")
    ] = False,
) -> None:
    """Answer questions from a context with a fine-tuned extractive QA model (long contexts are windowed).

    \b
    Example:
      bertkit answer --model ./squad-model -q "Who led the army?" \\
        --context-file history.txt
    """
    import json
    from pathlib import Path

    from bertkit.inference import answer

    if input:
        rows = []
        for number, line in enumerate(read_lines(input), start=1):
            try:
                row = json.loads(line)
                rows.append((str(row["question"]), str(row["context"])))
            except (ValueError, KeyError, TypeError):
                fail(f"{input}:{number}: expected a JSON object with question and context")
    else:
        if context_file:
            if not Path(context_file).is_file():
                fail(f"context file {context_file} does not exist")
            try:
                context = Path(context_file).read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                fail(f"{context_file} is not UTF-8 text (byte {exc.start}); convert it to UTF-8 first")
        if not question or not context:
            fail("give --question and --context (or --context-file), or --input FILE of JSON lines")
        rows = [(question, context)]
    results = answer(
        [q for q, _ in rows],
        [c for _, c in rows],
        model,
        top_k=top_k,
        batch_size=batch_size,
        allow_no_answer=allow_no_answer,
    )
    for (q, _), found in zip(rows, results):
        found = found if isinstance(found, list) else [found]
        if as_json:
            payload = [a.to_dict() for a in found]
            _print_json({"question": q, **payload[0]} if top_k == 1 else {"question": q, "answers": payload})
            continue
        for a in found:
            where = f"chars {a.start}-{a.end}" if a.start is not None else "no answer"
            print(f"{a.text or '(no answer)'}\t{100 * a.score:.1f}%\t{where}\t{q}")


@app.command("attention", short_help="Show where each token attends, layer by layer.", cls=ExampleLastCommand)
def attention_command(
    text: Annotated[str, typer.Argument(help="The text to look at.")],
    model: ModelOption,
    as_json: JsonOption = False,
    layer: Annotated[int, typer.Option(help="Layer (Python index, -1 = last).")] = -1,
    head: Annotated[int | None, typer.Option(help="Head (default: the mean over heads).")] = None,
    top: Annotated[int, typer.Option(help="Most attended tokens to list per token.")] = 3,
) -> None:
    """Show where each token attends in one layer (all layers and heads with --json).

    \b
    Example:
      bertkit attention --model ./bert --layer 5 \\
        --head 2 "The cat sat on the mat."
    """
    from bertkit.inference import attentions

    maps = attentions(text, model)
    if as_json:
        _print_json({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(5).tolist()})
        return
    layers, heads = maps.attentions.shape[:2]
    if not -layers <= layer < layers or (head is not None and not -heads <= head < heads):
        fail(f"the model has {layers} layers of {heads} heads; got layer {layer}, head {head}")
    matrix = maps.attentions[layer].mean(0) if head is None else maps.attentions[layer, head]
    for token, row in zip(maps.tokens, matrix):
        best = row.argsort()[::-1][:top]
        print(f"{token:>14} -> " + ", ".join(f"{maps.tokens[j]} {row[j]:.2f}" for j in best))


@app.command("serve", short_help="Serve a model over HTTP, with a web page.", cls=ExampleLastCommand)
def serve_command(
    model: ModelOption,
    host: Annotated[str, typer.Option(help="Address to bind; the default serves this machine only.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    batch_size: Annotated[int, typer.Option(help="Inputs per forward pass.")] = 32,
    max_items: Annotated[int, typer.Option(help="Inputs in one request.")] = 64,
    timeout: Annotated[float, typer.Option(help="Seconds before a request is answered 504.")] = 30.0,
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
) -> None:
    """Serve the model over HTTP (JSON API with OpenAPI docs at /docs, web page at /).

    \b
    Example:
      bertkit serve --model ./bert --port 8000  # then open http://127.0.0.1:8000/
    """
    from bertkit.inference import load
    from bertkit.inference.encoder import embed_settings
    from bertkit.serve import ServeLimits, serve

    loaded = load(model, quantize=quantize, compile=compile)
    if loaded.sentence_config is not None and not loaded.sentence_config.unsupported:
        print(
            f"bertkit: /embed defaults to {embed_settings(loaded).describe()} (sentence-transformers)", file=sys.stderr
        )
    serve(
        loaded,
        host=host,
        port=port,
        limits=ServeLimits(batch_size=batch_size, max_items=max_items, request_timeout_s=timeout),
    )


export_app = typer.Typer(rich_markup_mode=None, help="Export a model to other runtimes.", no_args_is_help=True)
app.add_typer(export_app, name="export")


@export_app.command("onnx", short_help="Export to ONNX (dynamic batch and length axes).", cls=ExampleLastCommand)
def export_onnx_command(
    model: ModelOption,
    output: Annotated[str, typer.Option("--output", "-o", help="The .onnx file to write.")],
    head: Annotated[
        str, typer.Option(help="auto (the checkpoint's head) | encoder | a class name like BertForMaskedLM.")
    ] = "auto",
    opset: Annotated[int, typer.Option(help="ONNX opset version.")] = 17,
    verify: Annotated[bool, typer.Option(help="Run the file with onnxruntime and compare with PyTorch.")] = True,
    quantize: Annotated[
        str | None,
        typer.Option(
            "--quantize", help="int8: quantize the graph's matmuls with onnxruntime's dynamic quantizer (per channel)."
        ),
    ] = None,
) -> None:
    """Export to ONNX with dynamic batch and sequence axes (inputs input_ids, token_type_ids, attention_mask).

    \b
    Example:
      bertkit export onnx --model ./sst2-model --output sst2.onnx
    """
    from bertkit.export import check_onnx_installed, export_onnx, output_names, quantize_onnx, verify_onnx
    from bertkit.quantize import check_scheme
    from bertkit.weights import load_model

    check_onnx_installed()
    check_scheme(quantize)
    loaded = load_model(model, head={"auto": None, "encoder": "BertModel"}.get(head, head))
    path = export_onnx(loaded, output, opset=opset)
    if quantize:
        quantize_onnx(path, path)
    kind = f"{type(loaded).__name__}{', int8' if quantize else ''}"
    print(f"wrote {path} ({kind}: outputs {', '.join(output_names(loaded))})", file=sys.stderr)
    if verify:
        diff = verify_onnx(loaded, path)
        print(f"onnxruntime matches PyTorch: max abs diff {diff:.2e}", file=sys.stderr)
        if quantize:  # int8 rounding moves outputs by far more than float tolerance; the figure is for the user
            return
        if diff > 1e-4:
            fail(f"the exported graph differs from the model by {diff:.2e} (more than 1e-4)")


@app.command("convert", short_help="Rewrite a checkpoint in Hugging Face layout.", cls=ExampleLastCommand)
def convert_command(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="Checkpoint: a model directory (also Google's TF release) or a bert_model.ckpt prefix.",
        ),
    ],
    output: Annotated[str, typer.Option("--output", "-o", help="Directory to write (Hugging Face layout).")],
    head: Annotated[
        str,
        typer.Option(help="auto (the heads the checkpoint holds) | encoder | a class name like BertForMaskedLM."),
    ] = "auto",
    sentence_transformers: Annotated[
        str | None,
        typer.Option(
            help="cls | mean | max: also write sentence-transformers files with this pooling, so the output loads "
            "in SentenceTransformer (default: keep the source's, if any)."
        ),
    ] = None,
    normalize: Annotated[
        bool, typer.Option(help="With --sentence-transformers: the vectors are L2-normalised (a Normalize module).")
    ] = False,
    max_seq_length: Annotated[
        int | None, typer.Option(help="With --sentence-transformers: longest input (default: the model's).")
    ] = None,
) -> None:
    """Rewrite a checkpoint as a Hugging Face-layout directory (config.json, model.safetensors, tokenizer files).

    Reads Google's TensorFlow BERT releases (bert_config.json, vocab.txt, bert_model.ckpt.*) without
    TensorFlow, and pytorch_model.bin or sharded checkpoints.

    \b
    Example:
      bertkit convert --model ./uncased_L-12_H-768_A-12 \\
        --output ./bert-base-uncased
    """
    from bertkit.sentence_config import SentenceConfig
    from bertkit.weights import convert_checkpoint

    if sentence_transformers is None and (normalize or max_seq_length is not None):
        fail("--normalize and --max-seq-length describe sentence vectors: give --sentence-transformers POOLING too")
    sentence = (
        SentenceConfig(sentence_transformers, normalize, max_seq_length) if sentence_transformers is not None else None
    )
    converted = convert_checkpoint(
        model, output, head={"auto": None, "encoder": "BertModel"}.get(head, head), sentence=sentence
    )
    print(f"wrote {output} ({type(converted).__name__}); it loads in bertkit and in transformers", file=sys.stderr)


# ---------------------------------------------------------------------- end of inference block


# ---------------------------------------------------------------------------------------- pretrain (training)
# The options of `pretrain` and `finetune` are generated from their config dataclasses (bertkit.cli_options), on
# first use: the dataclasses import torch. Only what is no config field (the config file, pretrain's resume
# switches, task options) is declared here.
_CONFIG_FILE = (
    Annotated[str | None, typer.Option("--config", "-c", help="TOML/YAML file with any of these options (flags win).")],
    None,
)


def _pretrain_function() -> Callable[..., None]:
    from bertkit.training.config import TrainConfig
    from bertkit.training.pretrain import PretrainConfig

    options = config_options([PretrainConfig, TrainConfig], flags={"output": ("--output", "-o")}, exclude={"resume"})
    extra = {
        "config": _CONFIG_FILE,
        "resume": (
            Annotated[bool, typer.Option("--resume", help="Continue from the latest valid checkpoint in --output.")],
            False,
        ),
        "resume_from": (
            Annotated[str | None, typer.Option("--resume-from", help="Continue from this checkpoint directory.")],
            None,
        ),
    }
    return command_function("pretrain", pretrain_command.__doc__, options, extra, _run_pretrain)


def _run_pretrain(given: dict[str, Any]) -> None:
    from bertkit.training.pretrain import build_config, pretrain, read_config_file

    config, resume, resume_from = given.pop("config"), given.pop("resume"), given.pop("resume_from")
    options = read_config_file(config) if config else {}
    options.update({k: v for k, v in given.items() if v is not None})
    if resume and resume_from:
        fail("give --resume or --resume-from, not both")
    if resume or resume_from:
        options["resume"] = resume_from or "auto"
    result = pretrain(build_config(options))
    if result.stop_reason == "signal":
        print(
            f"bertkit: stopped by a signal at step {result.step}; checkpoint {result.checkpoint}. "
            "Continue with the same command plus --resume.",
            file=sys.stderr,
        )
        raise typer.Exit(130)


@app.command("pretrain", short_help="Pre-train BERT (masked LM + next sentence).", cls=lazy_command(_pretrain_function))
def pretrain_command() -> None:
    """Pre-train BERT (masked LM + next sentence) on a prepared dataset; resumable, multi-process with torchrun.

    \b
    Example:
      bertkit pretrain --data data/wiki128 --model-config mini \\
        --output runs/mini --global-batch-size 256 --micro-batch-size 64 \\
        --lr 1e-4 --warmup-steps 1000 --max-steps 20000 --save-every 1000 \\
        --eval-every 1000
    """


# ---------------------------------------------------------------------------------------- finetune / evaluate / predict
# All logic is in bertkit.training.finetune.
# Help texts are rich markup: a bracket that opens with a lowercase letter would be read as a style tag and vanish,
# hence parentheses for the examples and the defaults.
TextColumnOption = Annotated[
    str | None,
    typer.Option(
        "--text-column", help="Classification: column of the text (GLUE names: sentence, sentence1, #1 String...)."
    ),
]
PairColumnOption = Annotated[
    str | None,
    typer.Option(
        "--text-pair-column",
        help="Classification: column of the second text ('' = none) (GLUE names: sentence2, #2 String...).",
    ),
]
LabelColumnOption = Annotated[
    str | None,
    typer.Option("--label-column", help="Classification: column of the label (GLUE names: label, score, Quality...)."),
]
TaskOption = Annotated[
    str | None,
    typer.Option("--task", "-t", help="classification | regression | ner | qa (default: the model's)."),
]
MaxSeqLengthOption = Annotated[int | None, typer.Option(help="Longest feature in tokens (default: as in training).")]
FormatOption = Annotated[
    str | None,
    typer.Option(
        help="tsv | csv | jsonl | json | parquet | arrow (a datasets save_to_disk directory) | hf "
        "(hf:NAME[:CONFIG]:SPLIT) (default: from the path)."
    ),
]
HeaderOption = Annotated[
    bool | None,
    typer.Option(
        "--header/--no-header", help="Whether a TSV/CSV file's first line names its columns (default: detected)."
    ),
]
TagColumnOption = Annotated[
    int | None, typer.Option(help="ner: 0-based column of the tag (default: the last; as in training).")
]


def _task_options(
    text_column: str | None, text_pair_column: str | None, label_column: str | None, **more: object
) -> dict[str, object]:
    """Task options given on the command line (a column is a name, or digits for a 0-based index)."""
    columns = dict(text_column=text_column, text_pair_column=text_pair_column, label_column=label_column)
    options: dict[str, object] = {k: v for k, v in columns.items() if v is not None}
    options.update({k: v for k, v in more.items() if v is not None})
    return options


def _show_warnings() -> None:
    import logging

    logging.basicConfig(format="bertkit: %(message)s", level=logging.WARNING)


def _finetune_function() -> Callable[..., None]:
    from bertkit.training.config import TrainConfig
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.finetune_defaults import DEFAULTS

    # the defaults table, e.g. "5e-05; qa 3e-05": the default for every task, then each task's own
    shown = {
        name: "; ".join(
            [show_default(value)]
            + [f"{task} {show_default(row[name])}" for task, row in DEFAULTS.items() if task != "all" and name in row]
        )
        for name, value in DEFAULTS["all"].items()
    }
    options = config_options(
        [FinetuneConfig, TrainConfig],
        exclude={"best_metric", "best_mode"},
        defaults=shown,
        flags={
            "task": ("--task", "-t"),
            "model": ("--model", "-m"),
            "train_file": ("--train",),
            "dev_file": ("--dev",),
            "output": ("--output", "-o"),
            "group_by_length": ("--group-by-length/--random-batches",),
        },
    )
    extra = {
        "config": _CONFIG_FILE,
        "text_column": (TextColumnOption, None),
        "text_pair_column": (PairColumnOption, None),
        "label_column": (LabelColumnOption, None),
        **_FINETUNE_TASK_OPTIONS,
        **_SEARCH_OPTIONS,
    }
    return command_function("finetune", finetune_command.__doc__, options, extra, _run_finetune)


_SEARCH_OPTIONS = {
    "search": (
        Annotated[
            bool,
            typer.Option(
                "--search",
                help="Run the BERT paper's grid (batch 16, 32; lr 5e-5, 3e-5, 2e-5; 2-4 epochs), or the config "
                "file's [search] table, and keep the best run on --dev; --resume continues a killed search.",
            ),
        ],
        False,
    ),
    "search_trials": (
        Annotated[
            int | None,
            typer.Option(help="With --search: sample this many points with optuna (TPE) instead of the whole grid."),
        ],
        None,
    ),
    "search_budget": (
        Annotated[
            str | None,
            typer.Option(help="With --search: wall-clock limit (30m, 2h); the best run so far wins when it ends."),
        ],
        None,
    ),
}


_FINETUNE_TASK_OPTIONS = {
    "main_metric": (
        Annotated[
            str | None,
            typer.Option(help="Metric that picks the best epoch (default: accuracy; regression pearson; ner, qa f1)."),
        ],
        None,
    ),
    "doc_stride": (
        Annotated[int | None, typer.Option(help="qa: tokens between the starts of context windows (default: 128).")],
        None,
    ),
    "tag_column": (
        Annotated[int | None, typer.Option(help="ner: 0-based column of the tag (default: the last).")],
        None,
    ),
    "label_names": (
        Annotated[
            str | None,
            typer.Option(
                help="classification: names of the sorted labels, comma-separated, e.g. negative,positive for 0/1."
            ),
        ],
        None,
    ),
}


def _run_finetune(given: dict[str, Any]) -> None:
    from bertkit.training.finetune import FinetuneConfig, finetune, read_config_file

    _show_warnings()
    config = given.pop("config")
    options = read_config_file(config) if config else {}
    task_options = dict(options.pop("task_options", {}) or {})
    task_options.update(
        _task_options(
            *(given.pop(k) for k in ("text_column", "text_pair_column", "label_column")),
            **{k: given.pop(k) for k in _FINETUNE_TASK_OPTIONS},
        )
    )
    searching = {k: given.pop(k) for k in _SEARCH_OPTIONS}
    options.update({k: v for k, v in given.items() if v is not None})
    for required, flag in (("task", "--task"), ("model", "--model"), ("train_file", "--train"), ("output", "--output")):
        if required not in options:
            fail(f"{flag} is required (on the command line or in the config file)")
    finetune_config = FinetuneConfig.from_options(**options, task_options=task_options)
    if searching.pop("search"):
        _run_search(finetune_config, config, trials=searching["search_trials"], budget=searching["search_budget"])
        return
    if any(value is not None for value in searching.values()):
        fail("--search-trials and --search-budget go with --search")
    result = finetune(finetune_config)
    if result.output is None:
        print(
            f"bertkit: stopped by a signal at step {result.train.step}; continue with the same command plus --resume.",
            file=sys.stderr,
        )
        raise typer.Exit(130)
    if result.metrics:
        _print_json(result.metrics)


def _run_search(config: FinetuneConfig, config_file: str | None, *, trials: int | None, budget: str | None) -> None:
    from bertkit.training.search import SearchConfig, search, search_table

    settings = (
        SearchConfig.from_file(config_file, trials=trials, budget=budget)
        if config_file
        else SearchConfig(trials=trials, budget=budget)
    )
    result = search(config, settings)
    if result.output is None:
        print("bertkit: stopped by a signal; continue the search with the same command plus --resume.", file=sys.stderr)
        raise typer.Exit(130)
    assert result.winner is not None
    print(search_table(result.runs, result.winner, result.main_metric), end="")


@app.command(
    "finetune", short_help="Fine-tune for classification, regression, NER or QA.", cls=lazy_command(_finetune_function)
)
def finetune_command() -> None:
    """Fine-tune a BERT model for classification, regression, NER or SQuAD-style QA.

    \b
    Example:
      bertkit finetune --task classification --model ./minilm \\
        --train sst2/train.tsv --dev sst2/dev.tsv --output runs/sst2 \\
        --epochs 3 --lr 5e-5 --micro-batch-size 32
    """


@app.command("evaluate", short_help="Print a fine-tuned model's metrics on labelled data.", cls=ExampleLastCommand)
def evaluate_command(
    model: Annotated[str, typer.Option("--model", "-m", help="Fine-tuned model directory.")],
    input: Annotated[
        str | None, typer.Option("--input", "-i", help="Labelled file in the task's format (required).")
    ] = None,
    data: Annotated[str | None, typer.Option("--data", "-d", hidden=True, help="Same as --input.")] = None,
    task: TaskOption = None,
    text_column: TextColumnOption = None,
    text_pair_column: PairColumnOption = None,
    label_column: LabelColumnOption = None,
    tag_column: TagColumnOption = None,
    format: FormatOption = None,
    header: HeaderOption = None,
    max_seq_length: MaxSeqLengthOption = None,
    batch_size: Annotated[int, typer.Option(help="Features per forward pass.")] = 64,
    predictions: Annotated[
        str | None, typer.Option("--predictions", help="Also write the task's prediction files here.")
    ] = None,
    device: Annotated[str, typer.Option(help="cpu | cuda | cuda:N.")] = "cpu",
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
) -> None:
    """Print a fine-tuned model's metrics on a labelled file as JSON.

    \b
    Example:
      bertkit evaluate --model runs/sst2 --input sst2/dev.tsv
    """
    from bertkit.inference import evaluate_model

    # --data is the older name of --input, kept so existing scripts run; help shows only --input.
    if input is not None and data is not None and input != data:
        fail(f"give the labelled file once: --input {input} and --data {data} differ (--data is --input's alias)")
    path = input if input is not None else data
    if path is None:
        fail("give the labelled file to evaluate on with --input FILE")
    _show_warnings()
    scores = evaluate_model(
        model,
        path,
        task=task,
        task_options=_task_options(text_column, text_pair_column, label_column, tag_column=tag_column),
        max_seq_length=max_seq_length,
        batch_size=batch_size,
        device=device,
        predictions_dir=predictions,
        format=format,
        header=header,
        quantize=quantize,
        compile=compile,
    )
    _print_json(scores)


@app.command("predict", short_help="Write a fine-tuned model's predictions as JSON lines.", cls=ExampleLastCommand)
def predict_command(
    model: Annotated[str, typer.Option("--model", "-m", help="Fine-tuned model directory.")],
    input: Annotated[
        str, typer.Option("--input", "-i", help="File in the task's format (labels, if any, are ignored).")
    ],
    output: Annotated[str, typer.Option("--output", "-o", help="JSONL file: one prediction per input, with scores.")],
    task: TaskOption = None,
    text_column: TextColumnOption = None,
    text_pair_column: PairColumnOption = None,
    format: FormatOption = None,
    header: HeaderOption = None,
    max_seq_length: MaxSeqLengthOption = None,
    batch_size: Annotated[int, typer.Option(help="Features per forward pass.")] = 64,
    device: Annotated[str, typer.Option(help="cpu | cuda | cuda:N.")] = "cpu",
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
) -> None:
    """Write one JSON line per input row, sentence or question, with the predicted label/tags/answer and scores.

    \b
    Example:
      bertkit predict --model runs/sst2 --input sst2/test.tsv \\
        --output predictions.jsonl
    """
    from bertkit.inference import predict

    _show_warnings()
    count = predict(
        model,
        input,
        output,
        task=task,
        task_options=_task_options(text_column, text_pair_column, None),
        max_seq_length=max_seq_length,
        batch_size=batch_size,
        device=device,
        format=format,
        header=header,
        quantize=quantize,
        compile=compile,
    )
    print(f"wrote {count} predictions to {output}", file=sys.stderr)


# ---------------------------------------------------------------------------------------- end of finetune block


# --------------------------------------------------------------------------------------------- data
def _prepare_data_function() -> Callable[..., None]:
    from bertkit.data import PrepareConfig

    block_mb = PrepareConfig.block_bytes / (1 << 20)  # the field's default
    options = config_options(
        [PrepareConfig],
        exclude={"block_bytes"},
        flags={"tokenizer": ("--tokenizer", "-t"), "output": ("--output", "-o")},
    )
    corpus_options, corpus_extra = _corpus_cli()
    options += corpus_options
    extra = {
        "input": (
            Annotated[list[str], typer.Option("--input", "-i", help="Files, directories or globs (repeatable).")],
            ...,  # required (typer's marker)
        ),
        "block_mb": (
            Annotated[
                float | None,
                typer.Option(
                    help=f"MB of text per block (unit of parallelism and of random-next sampling) "
                    f"(default: {block_mb:g})."
                ),
            ],
            None,
        ),
        **corpus_extra,
        "quiet": (Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")], False),
    }
    return command_function("prepare-data", prepare_data_command.__doc__, options, extra, _run_prepare_data)


def _run_prepare_data(given: dict[str, Any]) -> None:
    import logging

    from bertkit.data import PrepareConfig, prepare_dataset

    logging.basicConfig(format="bertkit: warning: %(message)s", level=logging.WARNING)
    inputs, block_mb, quiet = given.pop("input"), given.pop("block_mb"), given.pop("quiet")
    corpus = _corpus_options(given)
    options = {k: v for k, v in given.items() if v is not None}
    for required in ("tokenizer", "output"):
        if required not in options:
            fail(f"--{required} is required")
    if block_mb is not None:
        options["block_bytes"] = max(1, int(block_mb * (1 << 20)))
    config = PrepareConfig(inputs=inputs, corpus=corpus, **options)
    meta = prepare_dataset(config, progress=not quiet)
    train, held = meta["splits"]["train"], meta["splits"]["eval"]
    state = "complete" if meta["complete"] else f"{len(meta['blocks'])} of {meta['expected_blocks']} blocks so far"
    print(
        f"wrote {train['num_instances']} train + {held['num_instances']} eval instances "
        f"({train['num_tokens'] + held['num_tokens']} tokens) to {config.output} ({state})",
        file=sys.stderr,
    )


@app.command(
    "prepare-data",
    short_help="Turn a corpus into MLM+NSP pre-training shards.",
    cls=lazy_command(_prepare_data_function),
)
def prepare_data_command() -> None:
    """Turn a raw corpus into sharded, memory-mapped MLM+NSP pre-training data (BERT's algorithm, all cores).

    \b
    Example:
      bertkit prepare-data --input ../shared/data/gutenberg/books \\
        --tokenizer ./tok --output ./data128 --max-seq-length 128 \\
        --dupe-factor 5 --masking static --seed 1 --workers 8
    """


# --------------------------------------------------------------------------------------------- demo
@app.command("demo", short_help="Run the end-to-end demo on the shipped data.", cls=ExampleLastCommand)
def demo_command(
    output: Annotated[str, typer.Option(help="Run directory (replaced if it exists).")] = "runs/demo",
    corpus: Annotated[
        list[str] | None,
        typer.Option(help="Raw text to pre-train on; repeat for several (default: data/corpus and data/books)."),
    ] = None,
    labeled_train: Annotated[str, typer.Option(help="Labeled sentences to fine-tune on.")] = "data/polarity/train.tsv",
    labeled_dev: Annotated[str, typer.Option(help="Labeled sentences to evaluate on.")] = "data/polarity/dev.tsv",
    pretrain_time: Annotated[
        str | None, typer.Option(help="Wall-clock budget of pre-training (e.g. 90s, 8m, 1h) (default: 12m).")
    ] = None,
    finetune_examples: Annotated[
        int | None, typer.Option(min=1, help="Labeled sentences to fine-tune on (first N; default all).")
    ] = None,
    finetune_seeds: Annotated[
        str | None,
        typer.Option(help="Fine-tuning seeds, comma-separated; one run per seed and start (default: 1,2,3)."),
    ] = None,
    finetune_epochs: Annotated[
        float | None, typer.Option(help="Fine-tuning epochs for each starting point (default: 3).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model preset to pre-train (default: tiny).")] = None,
    task_text: Annotated[
        bool, typer.Option("--task-text", help="Also pre-train on the labeled training sentences, labels dropped.")
    ] = False,
    reference_model: Annotated[
        str | None,
        typer.Option(
            help="A BERT pre-trained at scale (HF layout dir) for the same comparison, "
            "or 'none' (default: auto, all-MiniLM-L6-v2 where installed).",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 1234,
    threads: Annotated[
        int | None, typer.Option(min=1, help="Torch threads and data workers (default: all cores).")
    ] = None,
) -> None:
    """Train a vocabulary, pre-train a small BERT on the shipped books, compare fill-mask and fine-tuning.

    \b
    Example:
      bertkit demo --output runs/demo --pretrain-time 12m \\
        --finetune-examples 1000 --finetune-seeds 1,2,3
    """
    from bertkit.demo import DemoConfig, run_demo

    chosen: dict[str, Any] = {}
    if finetune_seeds is not None:
        try:
            chosen["finetune_seeds"] = tuple(int(s) for s in finetune_seeds.split(",") if s.strip())
        except ValueError:
            raise BertkitError(f"--finetune-seeds {finetune_seeds!r}: write integers separated by commas") from None
        if not chosen["finetune_seeds"]:
            raise BertkitError("--finetune-seeds needs at least one seed")
    for name, value in (("pretrain_time", pretrain_time), ("finetune_epochs", finetune_epochs), ("model", model)):
        if value is not None:
            chosen[name] = value
    if reference_model is not None:
        chosen["reference_model"] = None if reference_model.lower() == "none" else reference_model
    if corpus:
        chosen["corpus"] = tuple(corpus)
    run_demo(
        DemoConfig(
            labeled_train=labeled_train,
            labeled_dev=labeled_dev,
            output=output,
            finetune_examples=finetune_examples,
            task_text=task_text,
            seed=seed,
            threads=threads,
            **chosen,
        )
    )
