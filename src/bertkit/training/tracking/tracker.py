"""The :class:`Tracker` protocol every ``--report-to`` backend implements, and the :class:`RunInfo` it opens."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


@dataclass
class RunInfo:
    """What a tracker needs to open (or reopen) its run."""

    name: str
    group: str | None
    tags: dict[str, str]
    output_dir: Path
    resume_step: int | None = None
    """The step a resumed run continues from (``None``: a fresh run)."""
    stored: dict[str, Any] = field(default_factory=dict)
    """What this tracker's :meth:`Tracker.start` returned for the run being resumed (its run id); empty if none."""


class Tracker(Protocol):
    """One experiment tracker. Every method may raise: :class:`Tracking` turns that into one warning."""

    name: str
    """The ``--report-to`` name."""
    rewinds: bool
    """Whether a resumed run rewinds the tracker itself (TensorBoard's ``purge_step``), so that the steps after
    the checkpoint are sent again; otherwise they are not sent twice."""

    def start(self, run: RunInfo) -> dict[str, Any]:
        """Open the run (reopen ``run.stored``'s); what identifies it, kept in ``tracking.json``."""
        ...

    def log_params(self, params: Mapping[str, Any]) -> None: ...

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...

    def log_artifact(self, path: Path, name: str) -> None:
        """Send the folder ``path`` as the artifact ``name``."""
        ...

    def finish(self, status: str) -> None:
        """Close the run: ``FINISHED``, or ``KILLED`` when a signal stopped it."""
        ...
