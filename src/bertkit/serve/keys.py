"""API keys: the accepted set (flags, environment, a key file re-read on SIGHUP or when it changes) and the
constant-time check of a request's ``Authorization: Bearer KEY``. Keys are never logged; a request is
known by its key's index (``key-2``) in logs and rate limits."""

from __future__ import annotations

import hmac
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from bertkit.errors import ConfigError

logger = logging.getLogger("bertkit.serve")


def read_key_file(path: str | os.PathLike) -> list[str]:
    """The keys of a key file: one a line, blank lines and ``#`` comments skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"--api-key-file {path}: cannot read it ({exc.strerror or exc})") from None
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


class KeyRing:
    """The keys a request may present. Empty (no flag, variable or file): the service is open."""

    def __init__(self, keys: Sequence[str] = (), key_file: str | os.PathLike | None = None):
        self._static = [k.encode() for k in keys]
        self._file = Path(key_file) if key_file is not None else None
        self._file_keys: list[bytes] = []
        self._stamp: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._reload_asked = False
        if self._file is not None:
            self._file_keys = [k.encode() for k in read_key_file(self._file)]
            self._stamp = self._file_stamp()

    @property
    def enabled(self) -> bool:
        return bool(self._static or self._file is not None)

    def ask_reload(self) -> None:
        """Re-read the key file before the next check (the SIGHUP handler; safe in a signal handler)."""
        self._reload_asked = True

    def _file_stamp(self) -> tuple[int, int] | None:
        assert self._file is not None
        try:
            stat = self._file.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def _refresh(self) -> None:
        if self._file is None:
            return
        stamp = self._file_stamp()
        if not self._reload_asked and stamp == self._stamp:
            return
        with self._lock:
            self._reload_asked = False
            self._stamp = stamp
            try:
                self._file_keys = [k.encode() for k in read_key_file(self._file)]
            except ConfigError as exc:  # keep serving with the keys read last time
                logger.warning("%s; keeping the %d keys read before", exc, len(self._file_keys))
                return
            logger.warning("re-read %d keys from %s", len(self._file_keys), self._file)

    def identify(self, authorization: str | None) -> str | None:
        """``key-N`` for a header carrying an accepted key, else None. Every key is compared, each in
        constant time, so the answer's timing does not tell which one or how much matched."""
        self._refresh()
        scheme, _, token = (authorization or "").partition(" ")
        presented = token.strip().encode() if scheme.lower() == "bearer" else b""
        found = None
        for i, key in enumerate(self._static + self._file_keys):
            if hmac.compare_digest(presented, key) and presented:
                found = found or f"key-{i}"
        return found
