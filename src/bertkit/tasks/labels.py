"""Label names and the contiguous ids a head predicts, kept in a fine-tuned model's ``config.id2label``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from bertkit.errors import DataError


class LabelMap:
    """Label names <-> contiguous ids. Built from the training examples and saved as ``config.id2label``."""

    def __init__(self, labels: Sequence[str]):
        if len(set(labels)) != len(labels):
            raise DataError(f"duplicate label names in {list(labels)}")
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}

    @classmethod
    def fit(cls, labels: Iterable[str]) -> LabelMap:
        """Sorted distinct labels; numbers sort numerically so that GLUE's ``0``/``1`` keep their ids."""
        distinct = set(labels)
        if not distinct:
            raise DataError("no labels found in the training data")

        def key(label: str) -> tuple[int, float, str]:
            try:
                return 0, float(label), label
            except ValueError:
                return 1, 0.0, label

        return cls(sorted(distinct, key=key))

    @classmethod
    def from_id2label(cls, id2label: Mapping[int | str, str]) -> LabelMap:
        """Rebuild from a ``config.json`` ``id2label`` (JSON turns its keys into strings)."""
        items = sorted((int(k), v) for k, v in id2label.items())
        if [k for k, _ in items] != list(range(len(items))):
            raise DataError(f"id2label ids must be 0..{len(items) - 1}, got {[k for k, _ in items]}")
        return cls([v for _, v in items])

    def encode(self, label: str, where: str) -> int:
        """Id of ``label``; ``where`` (``file:line``) names the offending input when it was never seen in train."""
        try:
            return self.index[label]
        except KeyError:
            raise DataError(
                f"{where}: label {label!r} does not occur in the training data (known: "
                f"{', '.join(map(repr, self.labels[:20]))}{' ...' if len(self.labels) > 20 else ''})"
            ) from None

    def id2label(self) -> dict[int, str]:
        return dict(enumerate(self.labels))

    def __len__(self) -> int:
        return len(self.labels)
