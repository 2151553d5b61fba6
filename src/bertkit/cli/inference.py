"""Inference commands: ``embed``, ``fill-mask``, ``next-sentence``, ``classify``, ``tag``, ``answer`` and
``attention``, each a call to one pipeline of :mod:`bertkit.inference` and a printer of its results."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import typer

from bertkit.cli.console import print_json, read_lines
from bertkit.cli.options import cli
from bertkit.cli.program import fail
from bertkit.cli.shared_options import EngineOptions, LengthOptions, options_command, shared, threads_for
from bertkit.formats import read_text
from bertkit.io import check_output_file
from bertkit.option_groups import at_least
from bertkit.threads import use_threads

if TYPE_CHECKING:  # the inference package imports torch, which `bertkit --help` should not pay for
    import numpy as np

    from bertkit.inference import Loaded, TextInput
    from bertkit.inference.encoder_outputs import EmbedSettings

commands = typer.Typer(rich_markup_mode=None)


def _text_or_pair(line: str) -> TextInput:
    """A line as one text, or as a (text, text_pair) where a TAB splits it."""
    first, tab, second = line.partition("\t")
    return (first, second) if tab else line


STREAM_LINES = 10_000
"""Lines of an ``--input`` file a streaming command (``classify``) holds at once: a larger file is read, run and
printed this many lines at a time, so that its size never shows in memory."""


def _input_chunks(texts: list[str] | None, input: str | None) -> Iterator[list[str]]:
    """The inputs as :func:`_pipeline_inputs` gives them, a file's in chunks of ``STREAM_LINES`` lines read
    lazily (``formats.iter_text_lines``); stdin and arguments as one chunk."""
    from itertools import islice

    from bertkit.errors import BertkitError
    from bertkit.formats import iter_text_lines

    if texts or not input or input == "-":
        yield _pipeline_inputs(texts, input)
        return
    empty, lines = True, iter_text_lines(input)
    try:
        while chunk := list(islice(lines, STREAM_LINES)):
            empty = False
            yield chunk
    except BertkitError as exc:
        fail(str(exc))
    if empty:
        _pipeline_inputs(None, input)  # the one-line refusal of an empty file


def _pipeline_inputs(texts: list[str] | None, input: str | None, *, keep_blank: bool = False) -> list[str]:
    """Texts from the arguments or from ``--input`` (a file, ``-`` for stdin), one per line (blank lines kept
    with ``keep_blank``)."""
    if texts and input:
        fail("give texts as arguments or --input FILE, not both")
    lines = list(texts) if texts else read_lines(input, keep_blank=keep_blank) if input else []
    if not lines:
        fail("give a text as an argument, or --input FILE with one input per line (- for stdin)")
    return lines


# ------------------------------------------------------------------------------------------------ embed
@dataclass(kw_only=True)
class EmbedOptions:
    """``bertkit embed``."""

    texts: list[str] | None = field(default=None, metadata=cli(argument=True))
    """Texts to embed (or --input FILE)."""
    model: str = shared("model")
    input: str | None = field(default=None, metadata=cli("--input", "-i"))
    """Text file, one text (or TAB-separated pair) per line, a blank line embedded as the empty text; - for
    stdin."""
    output: str | None = field(default=None, metadata=cli("--output", "-o"))
    """Where to write the embeddings (.npy, float32, one row per input line) (default: one JSON object per
    input on stdout, {"text": ..., "embedding": [...]})."""
    pooling: str | None = None
    """cls | mean | max: how token vectors become one vector per line (default: the checkpoint's
    sentence-transformers pooling, else mean)."""
    layers: str = "-1"
    """Comma-separated hidden layers to concatenate, -1 = last."""
    batch_size: int = field(default=32, metadata=at_least(1))
    """Texts per forward pass."""
    normalize: bool | None = None
    """L2-normalise every vector (default: as the checkpoint's sentence-transformers modules, else not)."""
    length: LengthOptions = field(default_factory=LengthOptions)
    dimensions: int | None = field(default=None, metadata=at_least(1))
    """Keep the first K dimensions of every vector (Matryoshka), normalised again when the vectors are
    normalised (default: all)."""
    engine: EngineOptions = field(default_factory=EngineOptions)


@options_command(commands, "embed", EmbedOptions, short_help="Embed texts as vectors (feature extraction).")
def embed_command(o: EmbedOptions) -> None:
    """Extract contextual embeddings (feature extraction): one vector per text or per input line (blank lines
    included), into a .npy file or as JSON lines on stdout.

    \b
    Example:
      bertkit embed --model ./minilm --input sentences.txt \\
        --output vectors.npy --pooling mean --layers -1,-2
      bertkit embed --model ./minilm "A first text." "A second one."
    """
    threads_for(o.model, o.engine.threads)
    from bertkit.inference import embed_settings, load

    if o.output is not None:
        if not o.output.endswith(".npy"):
            fail(f"--output must end with .npy (or leave it out for JSON lines on stdout), got {o.output}")
        check_output_file(o.output, example="vectors.npy")
    if o.pooling not in (None, "cls", "mean", "max"):
        fail(f"--pooling must be cls, mean or max, got {o.pooling}")
    items = [_text_or_pair(line) for line in _pipeline_inputs(o.texts, o.input, keep_blank=True)]
    loaded = load(o.model, head="BertModel", **o.engine.loading())
    settings = embed_settings(loaded, o.pooling, o.normalize, o.length.max_seq_length)
    print(f"bertkit: embedding with {settings.notice()}", file=sys.stderr)
    vectors = _embed_telling_cuts(items, loaded, settings, o)
    _write_embeddings(items, vectors, o.output)


def _write_embeddings(items: list[TextInput], vectors: np.ndarray, output: str | None) -> None:
    """The vectors as float32 into the .npy file ``output``, or one JSON object per input on stdout."""
    import numpy as np

    from bertkit.io import atomic_path

    if output is None:
        for item, vector in zip(items, vectors.astype(np.float32).tolist()):
            print_json({"text": list(item) if isinstance(item, tuple) else item, "embedding": vector})
        return
    with atomic_path(output) as tmp:
        np.save(tmp, vectors.astype(np.float32))
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {output}", file=sys.stderr)


def _embed_telling_cuts(texts: list[TextInput], loaded: Loaded, settings: EmbedSettings, o: EmbedOptions) -> np.ndarray:
    """``embed`` with a progress bar; its warning that inputs were cut becomes one line saying what to do."""
    import warnings

    from bertkit.errors import TruncationWarning
    from bertkit.inference import embed

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        vectors = embed(
            texts,
            loaded,
            pooling=settings.pooling,
            layers=o.layers,
            batch_size=o.batch_size,
            max_length=settings.max_length,
            normalize=settings.normalize,
            progress=True,
            long_text=o.length.long_text or "truncate",
            window_stride=o.length.window_stride or 128,
            dimensions=o.dimensions,
        )
    for warning in caught:
        if isinstance(warning.message, TruncationWarning):
            cut = warning.message
            print(
                f"bertkit: {cut.count} of {cut.total} inputs were longer than {cut.max_length} tokens and were cut "
                f"(raise --max-seq-length, or pass --long-text windows to embed single texts whole)",
                file=sys.stderr,
            )
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return vectors


# ------------------------------------------------------------------------------------ the other pipelines
@dataclass(kw_only=True)
class FillMaskOptions:
    """``bertkit fill-mask``."""

    texts: list[str] | None = field(default=None, metadata=cli(argument=True))
    """Texts with one or more [MASK]."""
    model: str = shared("model")
    input: str | None = shared("input")
    as_json: bool = shared("as_json")
    batch_size: int = shared("batch_size")
    top_k: int = field(default=5, metadata=at_least(1, **cli("--top-k", "-k")))
    """Candidates per mask."""
    quantize: str | None = shared("quantize")
    compile: bool | None = shared("compile")
    threads: int | None = shared("threads")


@options_command(commands, "fill-mask", FillMaskOptions, short_help="Predict the words behind [MASK].")
def fill_mask_command(o: FillMaskOptions) -> None:
    """Predict the words hidden behind [MASK] (needs a model with its masked-LM head).

    \b
    Example:
      bertkit fill-mask --model ./bert "Paris is the [MASK] of France."
    """
    use_threads(o.threads)
    from bertkit.inference import fill_mask, load

    items = _pipeline_inputs(o.texts, o.input)
    loaded = load(o.model, quantize=o.quantize, compile=o.compile)
    for text, masks in zip(items, fill_mask(items, loaded, top_k=o.top_k, batch_size=o.batch_size)):
        if o.as_json:
            print_json({"text": text, "masks": [[c.to_dict() for c in m] for m in masks]})
            continue
        print(text)
        for number, candidates in enumerate(masks, start=1):
            label = f"[MASK] {number}: " if len(masks) > 1 else ""
            for c in candidates:
                print(f"  {label}{c.text:<16} {100 * c.score:6.2f}%  {c.sequence}")


@dataclass(kw_only=True)
class PipelineOptions:
    """The options of ``bertkit classify`` and ``bertkit tag``: inputs, model and output, and ``next-sentence``'s
    beside its two sentences."""

    model: str = shared("model")
    input: str | None = shared("input")
    as_json: bool = shared("as_json")
    batch_size: int = shared("batch_size")
    threads: int | None = shared("threads")


@dataclass(kw_only=True)
class NextSentenceOptions(PipelineOptions):
    """``bertkit next-sentence``."""

    first: str | None = field(default=None, metadata=cli(argument=True))
    """Sentence A."""
    second: str | None = field(default=None, metadata=cli(argument=True))
    """Sentence B."""


@options_command(
    commands, "next-sentence", NextSentenceOptions, short_help="Score whether sentence B follows sentence A."
)
def next_sentence_command(o: NextSentenceOptions) -> None:
    """Probability that sentence B follows sentence A (needs a pre-training model with its NSP head).

    With --input, each line is A<TAB>B.

    \b
    Example:
      bertkit next-sentence --model ./bert "I went home." "Then I slept."
    """
    use_threads(o.threads)
    from bertkit.inference import next_sentence

    if o.first is not None and o.second is None:
        fail("give two sentences (A and B), or --input FILE with A<TAB>B per line")
    pairs = []
    given = [f"{o.first}\t{o.second}"] if o.first is not None else None
    for i, line in enumerate(_pipeline_inputs(given, o.input)):
        pair = _text_or_pair(line)
        if not isinstance(pair, tuple):
            fail(f"line {i + 1} has no TAB between sentence A and sentence B")
        pairs.append(pair)
    probs = next_sentence([a for a, _ in pairs], [b for _, b in pairs], o.model, batch_size=o.batch_size)
    assert isinstance(probs, list)  # lists in, one probability per pair out
    for (a, b), p in zip(pairs, probs):
        if o.as_json:
            print_json({"first": a, "second": b, "probability": p})
        else:
            print(f"{p:.4f}\t{a}\t{b}")


@dataclass(kw_only=True)
class ClassifyOptions(PipelineOptions):
    """``bertkit classify``."""

    texts: list[str] | None = field(default=None, metadata=cli(argument=True))
    """Texts to classify (a TAB separates a pair)."""
    length: LengthOptions = field(default_factory=LengthOptions)


@options_command(commands, "classify", ClassifyOptions, short_help="Label texts or pairs with a fine-tuned classifier.")
def classify_command(o: ClassifyOptions) -> None:
    """Label texts or text pairs with a fine-tuned classifier (or score them, for regression).

    \b
    Example:
      bertkit classify --model ./sst2-model --input reviews.txt --json
    """
    threads_for(o.model, o.threads)
    from bertkit.inference import classify, load

    model = None
    for lines in _input_chunks(o.texts, o.input):
        if model is None:  # once, after the first chunk's checks
            model = load(o.model)
        items = [_text_or_pair(line) for line in lines]
        predictions = classify(
            items,
            model,
            batch_size=o.batch_size,
            max_length=o.length.max_seq_length,
            long_text=o.length.long_text,
            window_stride=o.length.window_stride,
        )
        _print_classified(items, predictions, o.as_json)


def _print_classified(items: list[TextInput], predictions: list, as_json: bool) -> None:
    """One line (or JSON object) per input on stdout, as it is classified."""
    for item, p in zip(items, predictions):
        text, pair = (item, None) if isinstance(item, str) else item
        if as_json:
            print_json(
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


@dataclass(kw_only=True)
class TagOptions(PipelineOptions):
    """``bertkit tag``."""

    texts: list[str] | None = field(default=None, metadata=cli(argument=True))
    """Texts to tag."""
    length: LengthOptions = field(default_factory=LengthOptions)


@options_command(
    commands,
    "tag",
    TagOptions,
    short_help="Tag words (entities) with a fine-tuned tagger.",
    exclude={"long_text"},  # a tagger always reads a long text in windows
)
def tag_command(o: TagOptions) -> None:
    """Find entities (or any word tags) with a fine-tuned token classifier; offsets are characters.

    \b
    Example:
      bertkit tag --model ./ner-model \\
        "George Washington lived in Mount Vernon."
    """
    threads_for(o.model, o.threads)
    from bertkit.inference import tag

    items = _pipeline_inputs(o.texts, o.input)
    tagged = tag(
        items,
        o.model,
        batch_size=o.batch_size,
        max_length=o.length.max_seq_length,
        window_stride=o.length.window_stride,
    )
    for result in tagged:
        if o.as_json:
            print_json(result.to_dict())
            continue
        marked, cursor = [], 0
        for e in result.entities:
            marked += [result.text[cursor : e.start], f"[{e.text}]{e.type}"]
            cursor = e.end
        print("".join(marked) + result.text[cursor:])


@dataclass(kw_only=True)
class AnswerOptions:
    """``bertkit answer``."""

    question: str | None = field(default=None, metadata=cli("--question", "-q"))
    """The question."""
    context: str | None = field(default=None, metadata=cli("--context", "-c"))
    """The text that holds the answer."""
    context_file: str | None = field(default=None, metadata=cli("--context-file"))
    """Read the context from this file."""
    input: str | None = field(default=None, metadata=cli("--input", "-i"))
    """JSON lines {"question", "context"}; - for stdin."""
    model: str = shared("model")
    as_json: bool = shared("as_json")
    batch_size: int = shared("batch_size")
    top_k: int = field(default=1, metadata=at_least(1, **cli("--top-k", "-k")))
    """Answers per question."""
    allow_no_answer: bool = False
    """SQuAD v2 models: answer nothing when no span is likely."""
    max_query_length: int | None = shared("max_query_length")
    length: LengthOptions = field(default_factory=LengthOptions)
    threads: int | None = shared("threads")


@options_command(
    commands,
    "answer",
    AnswerOptions,
    short_help="Answer questions from a context (extractive QA).",
    exclude={"long_text"},  # a long context is always read in windows
)
def answer_command(o: AnswerOptions) -> None:
    """Answer questions from a context with a fine-tuned extractive QA model (long contexts are windowed).

    \b
    Example:
      bertkit answer --model ./squad-model -q "Who led the army?" \\
        --context-file history.txt
    """
    threads_for(o.model, o.threads)
    from bertkit.inference import answer

    rows = _question_rows(o.input) if o.input else [_one_question(o.question, o.context, o.context_file)]
    results = answer(
        [q for q, _ in rows],
        [c for _, c in rows],
        o.model,
        top_k=o.top_k,
        batch_size=o.batch_size,
        allow_no_answer=o.allow_no_answer,
        max_length=o.length.max_seq_length,
        doc_stride=o.length.window_stride,
        max_query_length=o.max_query_length,
    )
    for (q, _), found in zip(rows, results):
        found = found if isinstance(found, list) else [found]
        if o.as_json:
            payload = [a.to_dict() for a in found]
            print_json({"question": q, **payload[0]} if o.top_k == 1 else {"question": q, "answers": payload})
            continue
        for a in found:
            where = f"chars {a.start}-{a.end}" if a.start is not None else "no answer"
            print(f"{a.text or '(no answer)'}\t{100 * a.score:.1f}%\t{where}\t{q}")


def _question_rows(input: str) -> list[tuple[str, str]]:
    """(question, context) of each JSON line of ``input``."""
    import json

    rows = []
    for number, line in enumerate(read_lines(input), start=1):
        try:
            row = json.loads(line)
            rows.append((str(row["question"]), str(row["context"])))
        except (ValueError, KeyError, TypeError):
            fail(f"{input}:{number}: expected a JSON object with question and context")
    return rows


def _one_question(question: str | None, context: str | None, context_file: str | None) -> tuple[str, str]:
    """The (question, context) of ``--question`` with ``--context`` or ``--context-file``."""
    from pathlib import Path

    if context_file:
        if not Path(context_file).is_file():
            fail(f"context file {context_file} does not exist")
        context = read_text(context_file)
    if question is None or context is None:
        fail("give --question and --context (or --context-file), or --input FILE of JSON lines")
    if not context.strip():
        where = f"the context file {context_file}" if context_file else "--context"
        fail(f"{where} is empty: give the text the answer is to be found in")
    if not question.strip():
        fail("--question is empty: give the question to answer")
    return question, context


@dataclass(kw_only=True)
class AttentionOptions:
    """``bertkit attention``."""

    text: str = field(metadata=cli(argument=True))
    """The text to look at."""
    model: str = shared("model")
    as_json: bool = shared("as_json")
    layer: int = -1
    """Layer (Python index, -1 = last)."""
    head: int | None = None
    """Head (default: the mean over heads)."""
    top: int = field(default=3, metadata=at_least(1))
    """Most attended tokens to list per token."""
    threads: int | None = shared("threads")


@options_command(commands, "attention", AttentionOptions, short_help="Show where each token attends, layer by layer.")
def attention_command(o: AttentionOptions) -> None:
    """Show where each token attends in one layer (all layers and heads with --json).

    \b
    Example:
      bertkit attention --model ./bert --layer 5 \\
        --head 2 "The cat sat on the mat."
    """
    use_threads(o.threads)
    from bertkit.inference import attentions

    maps = attentions(o.text, o.model)
    if o.as_json:
        print_json({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(5).tolist()})
        return
    layers, heads = maps.attentions.shape[:2]
    layer, head = o.layer, o.head
    if not -layers <= layer < layers or (head is not None and not -heads <= head < heads):
        fail(f"the model has {layers} layers of {heads} heads; got layer {layer}, head {head}")
    matrix = maps.attentions[layer].mean(0) if head is None else maps.attentions[layer, head]
    for token, row in zip(maps.tokens, matrix):
        best = row.argsort()[::-1][: o.top]
        print(f"{token:>14} -> " + ", ".join(f"{maps.tokens[j]} {row[j]:.2f}" for j in best))
