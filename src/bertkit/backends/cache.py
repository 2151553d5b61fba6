"""bertkit's cache of exported graphs: where it is, and the key that names one graph.

A graph lives in ``cache_dir()/<engine>/<key>``, where the key hashes the weights, the config, the model
class, the options and the versions of bertkit, torch, onnx and the engine's packages, so that a change to any
of them builds it anew. Files are written under a temporary name and renamed, so a process never reads half
of one; a second process finds them there and skips the export.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit import __version__
from bertkit.export import export_onnx, int8_reduce_range, output_names, quantize_onnx
from bertkit.io import atomic_write_text
from bertkit.notices import notice

ENGINE_PACKAGES = {"onnxruntime": ("onnxruntime",), "openvino": ("openvino", "nncf")}
"""The packages whose versions each engine's graphs depend on, besides bertkit, torch and onnx."""


def cache_dir() -> Path:
    """bertkit's cache: ``$BERTKIT_CACHE``, else ``$XDG_CACHE_HOME/bertkit``, else ``~/.cache/bertkit``."""
    root = os.environ.get("BERTKIT_CACHE")
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bertkit"


def versions(engine: str = "onnxruntime") -> dict[str, str]:
    """The versions a graph for ``engine`` depends on (part of its cache key)."""
    found = {"bertkit": __version__, "torch": torch.__version__}
    for package in ("onnx", *ENGINE_PACKAGES.get(engine, ())):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def cache_key(model: nn.Module, quantize: str | None, engine: str = "onnxruntime", **options: Any) -> str:
    """A hash of what ``engine``'s graph of ``model`` depends on: the model class, its config, every weight,
    ``quantize`` and ``options``, and ``versions(engine)``."""
    digest = hashlib.sha256()
    to_dict = getattr(getattr(model, "config", None), "to_dict", None)
    header = {
        "class": type(model).__name__,
        "config": to_dict() if callable(to_dict) else None,
        "options": {"engine": engine, "quantize": quantize, "outputs": output_names(model), **options},
        "versions": versions(engine),
    }
    digest.update(json.dumps(header, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


def write_about(folder: Path, model: nn.Module, quantize: str | None, engine: str) -> None:
    """``about.json`` beside a cached graph: what it is and the versions it was built with."""
    info = {"class": type(model).__name__, "engine": engine, "quantize": quantize, "versions": versions(engine)}
    atomic_write_text(folder / "about.json", json.dumps(info, indent=1) + "\n")


def exported_graph(model: nn.Module, quantize: str | None) -> Path:
    """The cached ONNX file of ``model`` (int8 through ONNX Runtime's quantizer when ``quantize``), exported
    (and quantized) first if absent."""
    folder = cache_dir() / "onnx" / cache_key(model, quantize)
    path = folder / "model.onnx"
    if path.is_file():
        return path
    notice(f"exporting to ONNX (once, cached in {folder})")
    folder.mkdir(parents=True, exist_ok=True)
    if quantize is None:
        export_onnx(model, path)
    else:
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            float32 = export_onnx(model, Path(scratch) / "float32.onnx")
            quantize_onnx(float32, path, reduce_range=int8_reduce_range(model))
    write_about(folder, model, quantize, "onnxruntime")
    return path
