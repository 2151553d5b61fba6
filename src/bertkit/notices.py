"""How bertkit tells the user something while it works: records on the ``bertkit...`` loggers of
:mod:`logging`, which the ``bertkit`` command shows as ``bertkit: ...`` lines on stderr (:func:`show_on_stderr`);
and the library chatter it keeps from them (``quiet_libraries``).

A Python program decides as it does for any library: ``logging.getLogger("bertkit").setLevel(logging.ERROR)``
silences bertkit. With no logging configured, Python shows warnings (its last-resort handler) and keeps the
INFO lines (what was read, sized, written) and the progress displays to itself; ``show_on_stderr()`` shows them
as the command does.
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

LOGGER = "bertkit"
"""The root of bertkit's loggers; each module logs on its own (``bertkit.training.finetune``)."""


def notice(message: str, level: int = logging.INFO) -> None:
    """Log ``message`` (at INFO unless ``level``) on the calling module's ``bertkit...`` logger; the command
    shows it as ``bertkit: <message>`` on stderr (stdout stays for results)."""
    caller = sys._getframe(1).f_globals.get("__name__", LOGGER)
    name = caller if caller == LOGGER or caller.startswith(LOGGER + ".") else LOGGER
    logging.getLogger(name).log(level, message, stacklevel=2)


class StderrHandler(logging.Handler):
    """Each record as ``bertkit: <message>`` (``bertkit: <warning_prefix><message>`` from WARNING up) on
    ``sys.stderr`` as it is when the record comes (a test or a redirection may have replaced it)."""

    def __init__(self, warning_prefix: str = "") -> None:
        super().__init__()
        self.warning_prefix = warning_prefix

    def format(self, record: logging.LogRecord) -> str:
        prefix = self.warning_prefix if record.levelno >= logging.WARNING else ""
        return f"{LOGGER}: {prefix}{record.getMessage()}"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def show_on_stderr(level: int = logging.INFO, *, warning_prefix: str | None = None) -> StderrHandler:
    """Show bertkit's records from ``level`` up as ``bertkit: ...`` lines on stderr, with the progress displays
    (what the command does before it runs; a second call keeps the one handler and sets its prefix).
    ``warning_prefix``: put before warnings' messages (``"warning: "``)."""
    logger = logging.getLogger(LOGGER)
    handler = next((h for h in logger.handlers if isinstance(h, StderrHandler)), None)
    if handler is None:
        handler = StderrHandler()
        logger.addHandler(handler)
    if warning_prefix is not None:
        handler.warning_prefix = warning_prefix
    logger.setLevel(level)
    return handler


def shows(level: int = logging.INFO, name: str = LOGGER) -> bool:
    """Whether logger ``name`` passes records of ``level`` (a handler then decides where they go): the progress
    displays on stderr ask ``shows(name="bertkit.progress")``."""
    return logging.getLogger(name).isEnabledFor(level)


@contextmanager
def quiet_libraries(*loggers: str) -> Iterator[None]:
    """While the block runs, keep off stderr what libraries say that does not concern the user: the warnings
    of the named loggers (torchao's optional GPU kernels that do not load on this machine, a deprecation
    inside torch about how torchao registers its types) and Python warnings. Errors still reach the user,
    and every level is restored afterwards."""
    saved = [(logging.getLogger(name), logging.getLogger(name).level) for name in loggers]
    for logger, _ in saved:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)
