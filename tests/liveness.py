"""Deadlines for tests that wait on another thread or process: liveness only, never speed.

A test waits for a server to start or a request to finish for as long as a machine under load may take
(``LIVENESS_S``), and fails only when the thing never happens: a deadline is there so that a hung test ends,
not to measure anything. Waiting is on the event itself (``server.started``, a file, a process), polled.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LIVENESS_S = 600.0
"""How long a test waits for something that must happen: minutes, so that a loaded machine never fails it."""


def wait_until(condition: Callable[[], object], what: str, *, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` when ``alive`` says the waited-on thread or
    process has died, or after ``LIVENESS_S``."""
    deadline = time.monotonic() + LIVENESS_S
    while not condition():
        assert alive(), f"gave up waiting for {what}: it died first"
        assert time.monotonic() < deadline, f"gave up waiting for {what} after {LIVENESS_S:.0f} s"
        time.sleep(0.02)
