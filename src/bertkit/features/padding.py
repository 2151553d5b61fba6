"""Features into arrays: list-valued keys right-padded to the longest of the batch; and batch outputs back into
rows. ``pad_arrays`` pads in numpy for every engine; ``pad_and_stack`` makes torch tensors of the same arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.features import Feature
from bertkit.features.outputs import as_float32

if TYPE_CHECKING:
    import torch


def pad_arrays(
    features: Sequence[Feature], names: Sequence[str], pad_values: Mapping[str, int | float]
) -> dict[str, np.ndarray]:
    """int64 arrays for ``names``: list-valued features right-padded to the longest in the batch, scalars stacked."""
    if not features:
        raise ValueError("cannot collate an empty batch")
    batch: dict[str, np.ndarray] = {}
    for name in names:
        values = [f[name] for f in features]
        if isinstance(values[0], (list, tuple)):
            width = max(len(v) for v in values)
            floats = any(isinstance(x, float) for v in values for x in v)
            array = np.full((len(values), width), pad_values.get(name, 0), dtype=np.float64 if floats else np.int64)
            for row, value in enumerate(values):
                array[row, : len(value)] = value
            batch[name] = array
        else:
            batch[name] = np.asarray(values)
    return batch


def pad_and_stack(
    features: Sequence[Feature],
    names: Sequence[str],
    pad_values: Mapping[str, int | float],
    dtypes: Mapping[str, torch.dtype] | None = None,
) -> dict[str, torch.Tensor]:
    """Tensors for ``names`` (``pad_arrays``), each of its dtype in ``dtypes`` (default ``torch.long``)."""
    import torch

    dtypes = dtypes or {}
    arrays = pad_arrays(features, names, pad_values)
    return {name: torch.as_tensor(array, dtype=dtypes.get(name, torch.long)) for name, array in arrays.items()}


def to_numpy_rows(values: Any, lengths: Sequence[int] | None = None) -> list:
    """Split a batch output (a tensor, or an engine's numpy array) into per-example float32 numpy arrays, cut to
    ``lengths`` when given."""
    array = as_float32(values)
    if lengths is None:
        return list(array)
    return [row[:n] for row, n in zip(array, lengths)]
