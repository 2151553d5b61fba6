"""Inference commands: ``embed``, ``fill-mask``, ``next-sentence``, ``classify``, ``tag``, ``answer`` and
``attention``, each a call to one pipeline of :mod:`bertkit.inference` and a printer of its results."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from bertkit.cli.console import print_json, read_lines
from bertkit.cli.options import ExampleLastCommand
from bertkit.cli.program import fail
from bertkit.cli.shared_options import (
    BackendOption,
    BatchOption,
    CompileOption,
    InputOption,
    JsonOption,
    ModelOption,
    QuantizeOption,
    ThreadsOption,
)
from bertkit.formats import read_text
from bertkit.io import check_output_file
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
EmbedInputOption = Annotated[
    str | None,
    typer.Option(
        "--input",
        "-i",
        help="Text file, one text (or TAB-separated pair) per line, a blank line embedded as the empty text; "
        "- for stdin.",
    ),
]
EmbedOutputOption = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Where to write the embeddings (.npy, float32, one row per input line) (default: one JSON "
        'object per input on stdout, {"text": ..., "embedding": [...]}).',
    ),
]


@commands.command("embed", short_help="Embed texts as vectors (feature extraction).", cls=ExampleLastCommand)
def embed_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to embed (or --input FILE).")] = None,
    *,
    model: ModelOption,
    input: EmbedInputOption = None,
    output: EmbedOutputOption = None,
    pooling: Annotated[
        str | None,
        typer.Option(
            help="cls | mean | max: how token vectors become one vector per line (default: the checkpoint's "
            "sentence-transformers pooling, else mean)."
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
    dimensions: Annotated[
        int | None,
        typer.Option(
            help="Keep the first K dimensions of every vector (Matryoshka), normalised again when the vectors "
            "are normalised (default: all).",
        ),
    ] = None,
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
    backend: BackendOption = None,
    threads: ThreadsOption = None,
) -> None:
    """Extract contextual embeddings (feature extraction): one vector per text or per input line (blank lines
    included), into a .npy file or as JSON lines on stdout.

    \b
    Example:
      bertkit embed --model ./minilm --input sentences.txt \\
        --output vectors.npy --pooling mean --layers -1,-2
      bertkit embed --model ./minilm "A first text." "A second one."
    """
    use_threads(threads)
    from bertkit.inference import embed_settings, load

    if output is not None:
        if not output.endswith(".npy"):
            fail(f"--output must end with .npy (or leave it out for JSON lines on stdout), got {output}")
        check_output_file(output, example="vectors.npy")
    if pooling not in (None, "cls", "mean", "max"):
        fail(f"--pooling must be cls, mean or max, got {pooling}")
    items = [_text_or_pair(line) for line in _pipeline_inputs(texts, input, keep_blank=True)]
    loaded = load(model, head="BertModel", quantize=quantize, compile=compile, backend=backend)
    settings = embed_settings(loaded, pooling, normalize, max_length)
    print(f"bertkit: embedding with {settings.notice()}", file=sys.stderr)
    vectors = _embed_telling_cuts(
        items,
        loaded,
        settings,
        layers=layers,
        batch_size=batch_size,
        long_text=long_text,
        window_stride=window_stride,
        dimensions=dimensions,
    )
    _write_embeddings(items, vectors, output)


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


def _embed_telling_cuts(
    texts: list[TextInput],
    loaded: Loaded,
    settings: EmbedSettings,
    *,
    layers: str,
    batch_size: int,
    long_text: str,
    window_stride: int,
    dimensions: int | None,
) -> np.ndarray:
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
            layers=layers,
            batch_size=batch_size,
            max_length=settings.max_length,
            normalize=settings.normalize,
            progress=True,
            long_text=long_text,
            window_stride=window_stride,
            dimensions=dimensions,
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
    return vectors


# ------------------------------------------------------------------------------------ the other pipelines
@commands.command("fill-mask", short_help="Predict the words behind [MASK].", cls=ExampleLastCommand)
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
    threads: ThreadsOption = None,
) -> None:
    """Predict the words hidden behind [MASK] (needs a model with its masked-LM head).

    \b
    Example:
      bertkit fill-mask --model ./bert "Paris is the [MASK] of France."
    """
    use_threads(threads)
    from bertkit.inference import fill_mask, load

    items = _pipeline_inputs(texts, input)
    loaded = load(model, quantize=quantize, compile=compile)
    for text, masks in zip(items, fill_mask(items, loaded, top_k=top_k, batch_size=batch_size)):
        if as_json:
            print_json({"text": text, "masks": [[c.to_dict() for c in m] for m in masks]})
            continue
        print(text)
        for number, candidates in enumerate(masks, start=1):
            label = f"[MASK] {number}: " if len(masks) > 1 else ""
            for c in candidates:
                print(f"  {label}{c.text:<16} {100 * c.score:6.2f}%  {c.sequence}")


@commands.command("next-sentence", short_help="Score whether sentence B follows sentence A.", cls=ExampleLastCommand)
def next_sentence_command(
    first: Annotated[str | None, typer.Argument(help="Sentence A.")] = None,
    second: Annotated[str | None, typer.Argument(help="Sentence B.")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
    threads: ThreadsOption = None,
) -> None:
    """Probability that sentence B follows sentence A (needs a pre-training model with its NSP head).

    With --input, each line is A<TAB>B.

    \b
    Example:
      bertkit next-sentence --model ./bert "I went home." "Then I slept."
    """
    use_threads(threads)
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
            print_json({"first": a, "second": b, "probability": p})
        else:
            print(f"{p:.4f}\t{a}\t{b}")


@commands.command("classify", short_help="Label texts or pairs with a fine-tuned classifier.", cls=ExampleLastCommand)
def classify_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to classify (a TAB separates a pair).")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
    threads: ThreadsOption = None,
) -> None:
    """Label texts or text pairs with a fine-tuned classifier (or score them, for regression).

    \b
    Example:
      bertkit classify --model ./sst2-model --input reviews.txt --json
    """
    use_threads(threads)
    from bertkit.inference import classify

    items = [_text_or_pair(line) for line in _pipeline_inputs(texts, input)]
    for item, p in zip(items, classify(items, model, batch_size=batch_size)):
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


@commands.command("tag", short_help="Tag words (entities) with a fine-tuned tagger.", cls=ExampleLastCommand)
def tag_command(
    texts: Annotated[list[str] | None, typer.Argument(help="Texts to tag.")] = None,
    *,
    model: ModelOption,
    input: InputOption = None,
    as_json: JsonOption = False,
    batch_size: BatchOption = 32,
    threads: ThreadsOption = None,
) -> None:
    """Find entities (or any word tags) with a fine-tuned token classifier; offsets are characters.

    \b
    Example:
      bertkit tag --model ./ner-model \\
        "George Washington lived in Mount Vernon."
    """
    use_threads(threads)
    from bertkit.inference import tag

    items = _pipeline_inputs(texts, input)
    for result in tag(items, model, batch_size=batch_size):
        if as_json:
            print_json(result.to_dict())
            continue
        marked, cursor = [], 0
        for e in result.entities:
            marked += [result.text[cursor : e.start], f"[{e.text}]{e.type}"]
            cursor = e.end
        print("".join(marked) + result.text[cursor:])


@commands.command("answer", short_help="Answer questions from a context (extractive QA).", cls=ExampleLastCommand)
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
    threads: ThreadsOption = None,
) -> None:
    """Answer questions from a context with a fine-tuned extractive QA model (long contexts are windowed).

    \b
    Example:
      bertkit answer --model ./squad-model -q "Who led the army?" \\
        --context-file history.txt
    """
    use_threads(threads)
    from bertkit.inference import answer

    rows = _question_rows(input) if input else [_one_question(question, context, context_file)]
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
            print_json({"question": q, **payload[0]} if top_k == 1 else {"question": q, "answers": payload})
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


@commands.command("attention", short_help="Show where each token attends, layer by layer.", cls=ExampleLastCommand)
def attention_command(
    text: Annotated[str, typer.Argument(help="The text to look at.")],
    model: ModelOption,
    as_json: JsonOption = False,
    layer: Annotated[int, typer.Option(help="Layer (Python index, -1 = last).")] = -1,
    head: Annotated[int | None, typer.Option(help="Head (default: the mean over heads).")] = None,
    top: Annotated[int, typer.Option(help="Most attended tokens to list per token.")] = 3,
    threads: ThreadsOption = None,
) -> None:
    """Show where each token attends in one layer (all layers and heads with --json).

    \b
    Example:
      bertkit attention --model ./bert --layer 5 \\
        --head 2 "The cat sat on the mat."
    """
    use_threads(threads)
    from bertkit.inference import attentions

    maps = attentions(text, model)
    if as_json:
        print_json({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(5).tolist()})
        return
    layers, heads = maps.attentions.shape[:2]
    if not -layers <= layer < layers or (head is not None and not -heads <= head < heads):
        fail(f"the model has {layers} layers of {heads} heads; got layer {layer}, head {head}")
    matrix = maps.attentions[layer].mean(0) if head is None else maps.attentions[layer, head]
    for token, row in zip(maps.tokens, matrix):
        best = row.argsort()[::-1][:top]
        print(f"{token:>14} -> " + ", ".join(f"{maps.tokens[j]} {row[j]:.2f}" for j in best))
