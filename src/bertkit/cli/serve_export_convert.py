"""Commands that hand a model to other software: ``serve`` (HTTP), ``export onnx`` and ``convert`` (a checkpoint
rewritten in Hugging Face layout)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer

from bertkit.cli.options import ExampleLastCommand, config_options, lazy_command
from bertkit.cli.program import fail
from bertkit.cli.shared_options import (
    BackendOption,
    CompileOption,
    ModelOption,
    QuantizeOption,
    ThreadsOption,
    generated_command,
    only_fields,
)
from bertkit.threads import use_threads

commands = typer.Typer(rich_markup_mode=None)


def _head_class(head: str) -> str | None:
    """The model class ``--head`` names: ``auto`` -> None (the checkpoint decides), ``encoder`` -> BertModel."""
    return {"auto": None, "encoder": "BertModel"}.get(head, head)


# ------------------------------------------------------------------------------------------------ serve
def _serve_function() -> Callable[..., None]:
    from bertkit.serve import ServeLimits
    from bertkit.serve.access import ServeAccess

    limits = config_options(
        [ServeLimits, ServeAccess],
        exclude=only_fields(ServeLimits, "batch_size", "max_batch_tokens", "max_items", "request_timeout_s"),
        flags={"request_timeout_s": ("--timeout",)},
    )
    return generated_command("serve", serve_command.__doc__, limits, _run_serve)


def _run_serve(
    *,
    model: ModelOption,
    host: Annotated[str, typer.Option(help="Address to bind; the default serves this machine only.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    quantize: QuantizeOption = None,
    compile: CompileOption = None,
    backend: BackendOption = None,
    threads: ThreadsOption = None,
    **fields: Any,
) -> None:
    import dataclasses

    from bertkit.serve.address import listening_socket

    sock = listening_socket(host, port)  # a bad port or address: one line, before torch is imported
    use_threads(threads)
    from bertkit.backends import choose_backend
    from bertkit.checkpoint_files.pretrained import check_pretrained
    from bertkit.inference import Loaded, load
    from bertkit.inference.encoder_outputs import embed_settings
    from bertkit.serve import ServeLimits
    from bertkit.serve.access import ServeAccess
    from bertkit.serve.app import serve_loading

    given = {k: v for k, v in fields.items() if v is not None}
    names = {f.name for f in dataclasses.fields(ServeAccess)}
    access = ServeAccess(**{k: v for k, v in given.items() if k in names})  # bad flags fail before the port opens
    limits = ServeLimits(**{k: v for k, v in given.items() if k not in names})
    choose_backend(backend, quantize)  # so do a wrong backend and a model path that is no model
    check_pretrained(model)

    def load_model() -> Loaded:  # runs while the port answers 503 (bertkit.serve.loading_app)
        loaded = load(model, quantize=quantize, compile=compile, backend=backend)
        if loaded.sentence_config is None or not loaded.sentence_config.unsupported:
            print(f"bertkit: embeddings default to {embed_settings(loaded).notice()}", file=sys.stderr)
        return loaded

    serve_loading(load_model, host=host, port=port, limits=limits, model_id=model, access=access, sock=sock)


@commands.command("serve", short_help="Serve a model over HTTP, with a web page.", cls=lazy_command(_serve_function))
def serve_command() -> None:
    """Serve the model over HTTP (JSON API with OpenAPI docs at /docs, web page at /, Prometheus metrics at
    /metrics, probes at /health/ready and /health/live). The port opens before the model loads: until it is
    loaded, /health/ready and every route answer 503, /health/live 200. SIGTERM drains requests in flight, then
    exits 0.

    \b
    Example:
      bertkit serve --model ./bert --port 8000  # then open http://127.0.0.1:8000/
    """


# ------------------------------------------------------------------------------------------------ export
export_app = typer.Typer(rich_markup_mode=None, help="Export a model to other runtimes.", no_args_is_help=True)
commands.add_typer(export_app, name="export")


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
    loaded = load_model(model, head=_head_class(head))
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


# ----------------------------------------------------------------------------------------------- convert
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
    converted = convert_checkpoint(model, output, head=_head_class(head), sentence=sentence)
    print(f"wrote {output} ({type(converted).__name__}); it loads in bertkit and in transformers", file=sys.stderr)
