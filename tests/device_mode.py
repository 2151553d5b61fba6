"""The device test mode: ``pytest --device cuda`` (or ``BERTKIT_TEST_DEVICE=cuda``) runs the model, training,
inference and service tests on the GPU; without it they run on the CPU.

``conftest.py`` puts the choice into ``BERTKIT_TEST_DEVICE`` before collection, so helpers read it here and
child processes (the CLI, the service) inherit it. The training loop picks the GPU by itself when there is one.
``no_host_sync`` fails a block that makes the host wait for the device: ``torch.cuda.set_sync_debug_mode`` on
CUDA; on the CPU, where nothing waits, the calls that would wait on a GPU (``.item()``, ``float()``, ``bool()``,
``int()``, ``.tolist()``, ``.nonzero()`` of a tensor) raise instead, so the CPU suite checks the same rule.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator

import torch

SYNCING = ("item", "tolist", "nonzero", "__bool__", "__float__", "__int__", "__index__")


def test_device() -> torch.device:
    """The device of this test run (``BERTKIT_TEST_DEVICE``, default cpu)."""
    return torch.device(os.environ.get("BERTKIT_TEST_DEVICE") or "cpu")


test_device.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


class HostSync(AssertionError):
    """A tensor's value was read on the host inside a block that must not wait for the device."""


@contextlib.contextmanager
def no_host_sync(device: torch.device) -> Iterator[None]:
    """Fail on any host synchronisation inside the block (see the module's text)."""
    if device.type == "cuda":
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)
        return
    originals = {name: getattr(torch.Tensor, name) for name in SYNCING}

    def refuse(name: str):
        def reader(self: torch.Tensor, *args, **kwargs):
            raise HostSync(f"Tensor.{name} inside a step: on a GPU the host would wait for the device here")

        return reader

    for name in SYNCING:
        setattr(torch.Tensor, name, refuse(name))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


@contextlib.contextmanager
def host_reads(device: torch.device) -> Iterator[list[str]]:
    """Record the host synchronisations inside the block: the list yielded gets one entry per read (on CUDA,
    ``set_sync_debug_mode("warn")``'s warnings; on the CPU, the reads of ``SYNCING``)."""
    seen: list[str] = []
    if device.type == "cuda":
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield seen
        finally:
            torch.cuda.set_sync_debug_mode(previous)
        seen += [str(w.message) for w in caught if "synchroniz" in str(w.message)]
        return
    originals = {name: getattr(torch.Tensor, name) for name in SYNCING}

    def counting(name: str):
        original = originals[name]

        def reader(self: torch.Tensor, *args, **kwargs):
            seen.append(name)
            return original(self, *args, **kwargs)

        return reader

    for name in SYNCING:
        setattr(torch.Tensor, name, counting(name))
    try:
        yield seen
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
