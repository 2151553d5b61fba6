"""The cells every results section writes: numbers, shares, seed spreads and the machine a file ran on."""

from __future__ import annotations

import statistics
from collections.abc import Callable

Row = tuple[str, str, str, str]  # bertkit, peer (same run), ratio, machine and load
Extractor = Callable[[str], list[tuple[str, Row]]]
"""Reads a result file's rows: (what | `command`, row)."""


def num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def pct(share: float) -> str:
    return f"{100 * share:.1f} %"


def machine(info: dict, extra: dict | None = None) -> str:
    """CPU, cores and threads (or the GPU and torch), from whatever the file recorded."""
    info = {**info, **(extra or {})}
    if info.get("gpu"):  # a GPU run: the card and the torch build are what matter, not the host's threads
        parts = [f"{info['gpu']}, torch {info.get('torch', '?')}"]
    else:
        parts = [f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores"]
    if "torch_threads" in info and not info.get("gpu"):
        parts.append(f"{info['torch_threads']} thread(s)")
    return ", ".join(parts)


def spread(values: list[float], digits: int = 3) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f} ({len(values)} seeds)"
