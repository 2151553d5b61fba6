"""Prometheus metrics of the service at ``/metrics``, through ``prometheus_client`` (the ``metrics`` extra).

Each app has its own registry: requests by route, method and status, request latency, items per model
call, requests waiting for the model, tokens checked in, and the model's load time. Without the package
the service runs as before and ``/metrics`` answers 501 saying which extra to install.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("bertkit.serve")

MISSING = "Prometheus metrics need prometheus_client; pip install 'bertkit[metrics]'"

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def available() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


class Metrics:
    """The service's instruments; every method is a no-op when ``prometheus_client`` is not installed."""

    def __init__(self, queue_depth: Callable[[], int], load_seconds: float | None):
        self.enabled = available()
        if not self.enabled:
            return
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "bertkit_requests", "HTTP requests answered.", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "bertkit_request_duration_seconds",
            "Time to answer a request.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch = Histogram("bertkit_batch_size", "Inputs per model call.", buckets=BATCH_BUCKETS, registry=r)
        self.tokens = Counter("bertkit_tokens", "WordPiece tokens of the inputs accepted.", registry=r)
        self.in_flight = Gauge("bertkit_requests_in_flight", "Requests being answered.", registry=r)
        Gauge("bertkit_queue_depth", "Requests waiting for the model.", registry=r).set_function(
            lambda: float(queue_depth())
        )
        load = Gauge("bertkit_model_load_seconds", "Seconds the model took to load.", registry=r)
        load.set(load_seconds if load_seconds is not None else float("nan"))

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        if self.enabled:
            self.requests.labels(route, method, str(status)).inc()
            self.latency.labels(route).observe(seconds)

    def batched(self, requests: int, items: int) -> None:
        if self.enabled:
            self.batch.observe(items)

    def counted(self, tokens: int) -> None:
        if self.enabled:
            self.tokens.inc(tokens)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def track(self, delta: int) -> None:
        if self.enabled:
            self.in_flight.inc(delta)


def tell_if_missing(log: Callable[[str], Any] = logger.warning) -> None:
    """One line at start when ``/metrics`` cannot answer."""
    if not available():
        log(f"/metrics is off: {MISSING}")
