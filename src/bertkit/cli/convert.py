"""``convert``: a checkpoint (Hugging Face or Google TF) rewritten in Hugging Face layout."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import typer

from bertkit.cli.options import cli
from bertkit.cli.program import fail
from bertkit.cli.shared_options import head_class, options_command

commands = typer.Typer(rich_markup_mode=None)


@dataclass(kw_only=True)
class ConvertOptions:
    """``bertkit convert``."""

    model: str = field(metadata=cli("--model", "-m"))
    """Checkpoint: a model directory (also Google's TF release) or a bert_model.ckpt prefix."""
    output: str = field(metadata=cli("--output", "-o"))
    """Directory to write (Hugging Face layout)."""
    head: str = "auto"
    """auto (the heads the checkpoint holds) | encoder | a class name like BertForMaskedLM."""
    sentence_transformers: str | None = None
    """cls | mean | max: also write sentence-transformers files with this pooling, so the output loads in
    SentenceTransformer (default: keep the source's, if any)."""
    normalize: bool = False
    """With --sentence-transformers: the vectors are L2-normalised (a Normalize module)."""
    max_seq_length: int | None = None
    """With --sentence-transformers: longest input (default: the model's)."""


@options_command(commands, "convert", ConvertOptions, short_help="Rewrite a checkpoint in Hugging Face layout.")
def convert_command(o: ConvertOptions) -> None:
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

    pooling = o.sentence_transformers
    if pooling is None and (o.normalize or o.max_seq_length is not None):
        fail("--normalize and --max-seq-length describe sentence vectors: give --sentence-transformers POOLING too")
    sentence = SentenceConfig(pooling, o.normalize, o.max_seq_length) if pooling is not None else None
    converted = convert_checkpoint(o.model, o.output, head=head_class(o.head), sentence=sentence)
    print(f"wrote {o.output} ({type(converted).__name__}); it loads in bertkit and in transformers", file=sys.stderr)
