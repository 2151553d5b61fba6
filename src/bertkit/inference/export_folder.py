"""``bertkit export onnx --output DIR``: a model as an export folder, the input of the torch-free runtime
(``bertkit.inference.exported``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

from torch import nn

from bertkit.errors import BertkitError
from bertkit.export import export_onnx, input_names, int8_reduce_range, output_names, quantize_onnx
from bertkit.hub import resolve_model
from bertkit.inference.exported import GRAPH_FILE, HEAD_PIPELINES, RUNTIME_FILE
from bertkit.inference.loading import head_name
from bertkit.io import atomic_directory
from bertkit.sentence_config import read_sentence_config, write_sentence_config
from bertkit.tokenizer import Tokenizer


def export_folder(
    model: nn.Module, source: str | os.PathLike, output: str | os.PathLike, *, quantize: str | None, opset: int
) -> Path:
    """An export folder that the torch-free runtime (``bertkit.inference.exported``) runs: the graph
    (``model.onnx``, int8 through ``quantize_onnx`` when ``quantize``), ``config.json``, the tokenizer and the
    sentence-transformers settings of the model folder ``source``, and ``bertkit_onnx.json`` (the head, the
    graph's inputs and outputs, int8 or not). The folder is assembled under a temporary name and renamed."""
    output = Path(output)
    if output.exists() and not (output / RUNTIME_FILE).is_file():
        raise BertkitError(f"{output} exists and is not an export folder; give a new folder (--output)")
    head = head_name(model) or type(model).__name__
    if head not in HEAD_PIPELINES:
        raise BertkitError(
            f"{type(model).__name__} is not run by the export runtime; --head encoder or a fine-tuned head"
        )
    config = cast(Any, model).config
    with atomic_directory(output) as folder:
        export_onnx(model, folder / GRAPH_FILE, opset=opset)
        if quantize:
            quantize_onnx(folder / GRAPH_FILE, folder / GRAPH_FILE, reduce_range=int8_reduce_range(model))
        config.save(folder)
        source = resolve_model(source)
        Tokenizer.from_pretrained(source).save_pretrained(folder)
        sentence = read_sentence_config(source) if source.is_dir() else None
        if sentence is not None:
            write_sentence_config(folder, sentence, config.hidden_size)
        info = {
            "class": type(model).__name__,
            "head": head,
            "inputs": list(input_names(model)),
            "outputs": output_names(model),
            "quantize": quantize,
            "graph": GRAPH_FILE,
            "opset": opset,
        }
        (folder / RUNTIME_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return output
