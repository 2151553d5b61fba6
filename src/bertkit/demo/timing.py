"""Each stage's wall-clock seconds, kept for the report and logged as the demo goes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from bertkit.notices import notice


@contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Record the seconds the ``with`` block took as ``timings[name]`` and log them."""
    started = time.perf_counter()
    yield
    timings[name] = round(time.perf_counter() - started, 1)
    notice(f"demo: {name}: {timings[name]:.0f} s")
