"""Who may call the service and how often, and how it runs in production: keys, rate limits, TLS, CORS, the
access log and the shutdown grace period (``ServeAccess``; ``bertkit serve``'s flags come from its fields).

No FastAPI here, so the dataclass and its checks work without the ``serve`` extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bertkit.errors import ConfigError

KEY_ENV = "BERTKIT_API_KEY"
"""Environment variable with accepted keys, comma-separated (added to ``--api-key`` and ``--api-key-file``)."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute)\s*$")


@dataclass
class ServeAccess:
    """Authentication, rate limits, TLS, CORS, access logs and graceful shutdown of ``bertkit serve``."""

    api_key: list[str] = field(default_factory=list, metadata={"cli_type": list[str]})
    """A key clients must send as ``Authorization: Bearer KEY`` (repeat the flag for several keys; also the
    BERTKIT_API_KEY environment variable, comma-separated). No key: the service is open."""
    api_key_file: str | None = None
    """A file of accepted keys, one a line (blank lines and ``#`` comments skipped); re-read on SIGHUP or when
    it changes."""
    rate_limit: str | None = None
    """Requests allowed per key (per client address without keys), as ``20/s`` or ``600/m``; over it: 429 with
    Retry-After. Default: unlimited."""
    rate_burst: int | None = None
    """Requests a client may make at once before the rate limit applies (default: one second's worth, at
    least 1)."""
    cors_origin: list[str] = field(default_factory=list, metadata={"cli_type": list[str]})
    """A web origin (``https://app.example.com``, or ``*``) whose pages may call the API from a browser;
    repeat for several. Default: none (CORS closed)."""
    log_format: Literal["text", "json"] = "text"
    """Access log lines: ``text`` or ``json`` (one JSON object per request: time, method, path, status,
    duration_ms, request_id, client)."""
    ssl_certfile: str | None = None
    """TLS certificate (PEM) to serve HTTPS; needs ``--ssl-keyfile``."""
    ssl_keyfile: str | None = None
    """TLS private key (PEM) of ``--ssl-certfile``."""
    graceful_timeout: float = 30.0
    """Seconds that requests in flight at SIGTERM get to finish before the server exits."""

    def __post_init__(self) -> None:
        if self.rate_limit is not None:
            parse_rate(self.rate_limit)
        if self.rate_burst is not None and self.rate_burst < 1:
            raise ConfigError(f"--rate-burst must be at least 1, got {self.rate_burst}")
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"--log-format must be text or json, got {self.log_format!r}")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigError("TLS needs both --ssl-certfile and --ssl-keyfile")
        for name in ("ssl_certfile", "ssl_keyfile", "api_key_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"--{name.replace('_', '-')} {path}: no such file")
        if self.graceful_timeout < 0:
            raise ConfigError(f"--graceful-timeout must be 0 or more, got {self.graceful_timeout}")

    def rate(self) -> tuple[float, float] | None:
        """(requests per second, burst) or None when unlimited."""
        if self.rate_limit is None:
            return None
        per_second = parse_rate(self.rate_limit)
        return per_second, float(self.rate_burst or max(1, round(per_second)))

    def static_keys(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Keys from the flags and the environment (the key file is read by the key ring)."""
        environ = os.environ if environ is None else environ
        from_env = [k.strip() for k in environ.get(KEY_ENV, "").split(",") if k.strip()]
        return [k for k in self.api_key if k.strip()] + from_env


def parse_rate(text: str) -> float:
    """Requests per second of ``20/s`` or ``600/m``."""
    match = _RATE.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ConfigError(f"--rate-limit {text!r}: give requests per second or minute, like 20/s or 600/m")
    amount = float(match.group(1))
    return amount if match.group(2).startswith("s") else amount / 60
