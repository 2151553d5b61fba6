"""Which loader a model takes: an export folder runs on ONNX Runtime without torch (``bertkit.inference.exported``),
anything else is a checkpoint that PyTorch loads (``bertkit.inference.loading``, imported only then)."""

from __future__ import annotations

import os
from typing import Any

from bertkit.tasks.pipeline import LoadedModel


def load(path: str | os.PathLike, head: str | None = None, device: Any = "cpu", **options: Any) -> Any:
    """``path`` ready for the pipelines: an ``Exported`` for an export folder (``head`` is the graph's own), else
    ``bertkit.inference.loading.load(path, head, device, **options)``, a ``Loaded`` checkpoint."""
    from bertkit.inference.exported import is_export_folder, load_exported

    if isinstance(path, (str, os.PathLike)) and is_export_folder(path):
        return load_exported(path, device=device, **options)
    from bertkit.inference.loading import load as load_checkpoint

    return load_checkpoint(path, head, device, **options)


def as_loaded(model: Any, head: str | None = None) -> Any:
    """``model`` itself when already loaded (a checkpoint or an export), else the path loaded (``load``)."""
    return load(model, head=head) if isinstance(model, (str, os.PathLike)) else model


def for_pipeline(pipeline: str, model: Any) -> Any:
    """The loaded model, refused with one line when it cannot run ``pipeline``."""
    loaded: LoadedModel = as_loaded(model)
    getattr(loaded, "require")(pipeline)  # noqa: B009 - both loaders have it; the pipelines' protocol does not
    return loaded
