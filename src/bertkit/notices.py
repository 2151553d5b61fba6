"""The one way bertkit tells the user something while it works: a ``bertkit:`` line on stderr; and the library
chatter it keeps from them (``quiet_libraries``)."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager


def notice(message: str) -> None:
    """Write ``bertkit: <message>`` to stderr (stdout stays for results)."""
    print(f"bertkit: {message}", file=sys.stderr)


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
