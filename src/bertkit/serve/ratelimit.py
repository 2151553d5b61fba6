"""Per-client rate limits: a token bucket per key (or client address), refilled at ``rate`` per second up to
``burst``. The clock is injectable so that tests step time instead of sleeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

MAX_CLIENTS = 10_000
"""Buckets kept; past this, full ones (clients idle long enough to be back at ``burst``) are forgotten."""


class RateLimiter:
    """``take(client)``: 0.0 when the request may go ahead, else the seconds until it could."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._buckets[client] = (tokens - 1, now)
                if len(self._buckets) > MAX_CLIENTS:
                    self._forget_full(now)
                return 0.0
            self._buckets[client] = (tokens, now)
            return (1 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        for client, (tokens, at) in list(self._buckets.items()):
            if tokens + (now - at) * self.rate >= self.burst:
                del self._buckets[client]
