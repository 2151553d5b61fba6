"""Features into tensors: list-valued keys right-padded to the longest of the batch; and tensors back into rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from bertkit.features import Feature


def pad_and_stack(
    features: Sequence[Feature],
    names: Sequence[str],
    pad_values: Mapping[str, int | float],
    dtypes: Mapping[str, torch.dtype] | None = None,
) -> dict[str, torch.Tensor]:
    """Tensors for ``names``: list-valued features right-padded to the longest in the batch, scalars stacked."""
    if not features:
        raise ValueError("cannot collate an empty batch")
    dtypes = dtypes or {}
    batch: dict[str, torch.Tensor] = {}
    for name in names:
        values = [f[name] for f in features]
        dtype = dtypes.get(name, torch.long)
        if isinstance(values[0], (list, tuple)):
            width = max(len(v) for v in values)
            pad = pad_values.get(name, 0)
            batch[name] = torch.tensor([list(v) + [pad] * (width - len(v)) for v in values], dtype=dtype)
        else:
            batch[name] = torch.tensor(values, dtype=dtype)
    return batch


def to_numpy_rows(tensor: torch.Tensor, lengths: Sequence[int] | None = None) -> list:
    """Split a batch tensor into per-example float32 numpy arrays, cut to ``lengths`` when given."""
    array = tensor.detach().float().cpu().numpy()
    if lengths is None:
        return list(array)
    return [row[:n] for row, n in zip(array, lengths)]
