"""``export onnx``: a model as an ONNX graph, optionally int8, checked against PyTorch."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import typer

from bertkit.cli.options import cli
from bertkit.cli.program import fail
from bertkit.cli.shared_options import head_class, options_command, shared

commands = typer.Typer(rich_markup_mode=None)


export_app = typer.Typer(rich_markup_mode=None, help="Export a model to other runtimes.", no_args_is_help=True)
commands.add_typer(export_app, name="export")


@dataclass(kw_only=True)
class ExportOnnxOptions:
    """``bertkit export onnx``."""

    model: str = shared("model")
    output: str = field(metadata=cli("--output", "-o"))
    """The .onnx file to write, or a folder (no .onnx suffix): the graph with the config, tokenizer, pooling and
    labels, which bertkit's commands and `bertkit serve` run without torch (pip install 'bertkit[onnx]')."""
    head: str = "auto"
    """auto (the checkpoint's head) | encoder | a class name like BertForMaskedLM."""
    opset: int = 17
    """ONNX opset version."""
    verify: bool = True
    """Run the file with onnxruntime and compare with PyTorch."""
    quantize: str | None = field(default=None, metadata=cli("--quantize"))
    """int8: quantize the graph's matmuls with onnxruntime's dynamic quantizer (per channel)."""


@options_command(export_app, "onnx", ExportOnnxOptions, short_help="Export to ONNX (dynamic batch and length axes).")
def export_onnx_command(o: ExportOnnxOptions) -> None:
    """Export to ONNX with dynamic batch and sequence axes (inputs input_ids, token_type_ids, attention_mask;
    a ModernBERT graph has no token_type_ids).

    \b
    Example:
      bertkit export onnx --model ./sst2-model --output sst2.onnx
      bertkit export onnx --model ./minilm --output minilm-onnx --quantize int8
      bertkit serve --model minilm-onnx   # runs without torch
    """
    from bertkit.export import (
        check_onnx_installed,
        export_onnx,
        int8_reduce_range,
        output_names,
        quantize_onnx,
        verify_onnx,
    )
    from bertkit.quantize import check_scheme
    from bertkit.weights import load_model

    check_onnx_installed()
    check_scheme(o.quantize)
    quantize = o.quantize
    loaded = load_model(o.model, head=head_class(o.head))
    if o.output.endswith(".onnx"):
        path = export_onnx(loaded, o.output, opset=o.opset)
        if quantize:
            quantize_onnx(path, path, reduce_range=int8_reduce_range(loaded))
    else:
        from bertkit.inference.export_folder import export_folder
        from bertkit.inference.exported import GRAPH_FILE

        path = export_folder(loaded, o.model, o.output, quantize=quantize, opset=o.opset) / GRAPH_FILE
    kind = f"{type(loaded).__name__}{', int8' if quantize else ''}"
    print(f"wrote {path} ({kind}: outputs {', '.join(output_names(loaded))})", file=sys.stderr)
    if o.verify:
        diff = verify_onnx(loaded, path)
        print(f"onnxruntime matches PyTorch: max abs diff {diff:.2e}", file=sys.stderr)
        if quantize:  # int8 rounding moves outputs by far more than float tolerance; the figure is for the user
            return
        if diff > 1e-4:
            fail(f"the exported graph differs from the model by {diff:.2e} (more than 1e-4)")
