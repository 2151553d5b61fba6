"""Keep a thread's alternate signal stack across calls into OpenVINO.

OpenVINO's CPU plugin, when created, gives the calling thread an alternate signal stack of its own
(``sigaltstack``) and remembers the one it replaced; when destroyed, it puts that one back and frees its
own. Two plugins destroyed in the order they were made (two ``Core`` objects, or NNCF's short-lived ones
beside bertkit's) leave the thread on a freed stack, and the next signal handled there (Ctrl-C in a
training run, SIGTERM to the service) crashes the process. Putting back the thread's stack right after
each call that may create a plugin makes every plugin remember, and later restore, a stack that lives.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _Stack(ctypes.Structure):
    """Linux's ``stack_t`` (the field order differs on other systems)."""

    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]


def _sigaltstack() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).sigaltstack
    except (OSError, AttributeError):
        return None


_SIGALTSTACK = _sigaltstack()


@contextmanager
def signal_stack_kept() -> Iterator[None]:
    """Run the block, then give the calling thread back the alternate signal stack it had before it."""
    before = _Stack()
    if _SIGALTSTACK is None or _SIGALTSTACK(None, ctypes.byref(before)) != 0:
        yield
        return
    try:
        yield
    finally:
        _SIGALTSTACK(ctypes.byref(before), None)


def current_signal_stack() -> tuple[int, int, int] | None:
    """The calling thread's alternate signal stack as (address, flags, size); None where not known."""
    if _SIGALTSTACK is None:
        return None
    stack = _Stack()
    _SIGALTSTACK(None, ctypes.byref(stack))
    return stack.ss_sp or 0, stack.ss_flags, stack.ss_size
