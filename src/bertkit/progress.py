"""Progress output that fits where it goes: a bar in a terminal, a plain line every few seconds elsewhere.

On a terminal, :class:`Progress` draws a tqdm bar that redraws itself in place. Redirected to a file or a CI
log (the stream is no TTY), carriage-return redraws would pile up as one endless line, so it writes one plain
line every ``interval`` seconds instead, and a last one when it closes. Every progress display of bertkit
(data preparation, the training loop, batched inference) goes through it. On stderr (no ``stream`` given) it
shows only while the ``bertkit.progress`` logger passes INFO records, as under the ``bertkit`` command
(``bertkit.notices.show_on_stderr``); a Python program that configured no logging sees none.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Self, TextIO, TypeVar

from bertkit.notices import shows

INTERVAL = 30.0
"""Seconds between two plain progress lines."""

SCALED_BAR = "{l_bar}{bar}| {n_fmt}{unit}/{total_fmt}{unit} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
"""The terminal bar of a scaled count: the unit after the count and after the total (``913kB/2.10MB``)."""

T = TypeVar("T")


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (a redirected or closed stream is not)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Progress over ``total`` units (``None``: unknown): :meth:`update` as work gets done, :meth:`close` at the end.

    ``enabled=False`` shows nothing, nor does a display on stderr that ``bertkit.progress`` keeps quiet
    (:mod:`bertkit.notices`); ``bar`` forces the terminal (True) or the plain mode (False) instead of
    asking the stream; ``unit_scale`` shows large counts with SI prefixes (``12.3MB``). ``clock`` is for tests.
    Extra keywords go to tqdm in terminal mode.
    """

    def __init__(
        self,
        total: float | None = None,
        *,
        desc: str,
        unit: str = "it",
        initial: float = 0,
        unit_scale: bool = False,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = INTERVAL,
        bar: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        **bar_options: Any,
    ) -> None:
        self.total, self.desc, self.unit, self.unit_scale = total, desc, unit, unit_scale
        self.n = self.start_n = initial
        if stream is None and not shows(name="bertkit.progress"):
            enabled = False
        self.enabled, self.interval, self.clock = enabled, interval, clock
        self.stream = stream or sys.stderr
        self.postfix: dict[str, str] = {}
        self.start = self.last_line = clock()
        self.lines_at = initial  # the count the last plain line showed
        self._bar: Any = None
        if enabled and (bar if bar is not None else is_terminal(self.stream)):
            from tqdm.auto import tqdm  # only a terminal display pays for importing it

            options = {"dynamic_ncols": True, **bar_options}
            if unit_scale and total:  # tqdm's default shows 913k/2.10M: say the unit of both counts
                options.setdefault("bar_format", SCALED_BAR)
            self._bar = tqdm(
                total=total, initial=initial, desc=desc, unit=unit, unit_scale=unit_scale, file=self.stream, **options
            )

    @property
    def is_bar(self) -> bool:
        return self._bar is not None

    def update(self, n: float = 1) -> None:
        self.n += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.enabled and self.clock() - self.last_line >= self.interval:
            self._line()

    def set_postfix(self, values: Mapping[str, str]) -> None:
        """Figures shown after the count (``loss``, ``tok/s``): on the bar, or in the next plain line."""
        self.postfix = dict(values)
        if self._bar is not None:
            self._bar.set_postfix(self.postfix)

    def write(self, message: str) -> None:
        """A message of its own line (above the bar in a terminal)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.stream)
        else:
            print(message, file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self.n != self.lines_at:
            self._line()
        self.enabled = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        """The plain line for the progress so far: ``train: 120/1000 step (12%), 3.40 step/s, 35s, loss 2.31``,
        ``prepare-data: 12.3MB/20.0MB (61%), 3.1MB/s, 4s``."""
        elapsed = self.clock() - self.start
        unit = self.unit if self.unit_scale else " " + self.unit  # 12.3MB, but 120 step
        done = self._count(self.n)
        if self.total:
            # 12.3MB/20.0MB (a scaled count has its unit on both), but 120/1000 step
            done += f"{unit if self.unit_scale else ''}/{self._count(self.total)}{unit} ({self.n / self.total:.0%})"
        else:
            done += unit
        rate = (self.n - self.start_n) / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.desc}: {done}", f"{self._count(rate, precise=True)}{unit}/s", f"{elapsed:.0f}s"]
        parts += [f"{key} {value}" for key, value in self.postfix.items()]
        return ", ".join(parts)

    def _line(self) -> None:
        print(self.line(), file=self.stream, flush=True)
        self.last_line, self.lines_at = self.clock(), self.n

    def _count(self, value: float, *, precise: bool = False) -> str:
        if self.unit_scale:
            for prefix in ("", "k", "M", "G", "T"):
                if abs(value) < 1000 or prefix == "T":
                    return f"{value:.1f}{prefix}" if prefix or precise else f"{value:.0f}"
                value /= 1000
        if precise:
            return f"{value:.2f}"
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def track(iterable: Iterable[T], *, total: int | None = None, **options: Any) -> Iterator[T]:
    """The items of ``iterable``, counting each on a :class:`Progress` (``options`` as there)."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    with Progress(total, **options) as progress:
        for item in iterable:
            yield item
            progress.update(1)
