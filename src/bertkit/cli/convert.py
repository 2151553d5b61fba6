"""``convert``: a checkpoint (Hugging Face or Google TF) rewritten in Hugging Face layout."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bertkit.cli.options import ExampleLastCommand
from bertkit.cli.program import fail
from bertkit.cli.shared_options import (
    head_class,
)

commands = typer.Typer(rich_markup_mode=None)


@commands.command("convert", short_help="Rewrite a checkpoint in Hugging Face layout.", cls=ExampleLastCommand)
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
    converted = convert_checkpoint(model, output, head=head_class(head), sentence=sentence)
    print(f"wrote {output} ({type(converted).__name__}); it loads in bertkit and in transformers", file=sys.stderr)
