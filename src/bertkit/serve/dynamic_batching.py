"""Dynamic batching by a token budget: the inputs of concurrent requests are pooled and run in batches of
similar length.

Requests put jobs (a pipeline key, a function, the request's inputs and each input's length in tokens) on
one queue. A single worker moves them into a pool of pending inputs and, each step, runs one batch: the
inputs of the oldest pending input's key (the first ``max_items`` of them in arrival order) are sorted by
length and cut into runs of at most ``max_batch`` inputs whose padded size (inputs x the longest) stays
within ``max_tokens``; the run holding the oldest input goes to the model. A long text thus never pads a
batch of short ones, an input alone over the budget still runs (alone), and the oldest input always goes
next, so none starves. The model runs in one dedicated thread, so the event loop stays free to accept,
tokenize (in ``tokenize_in_thread``'s pool) and answer requests. Under load the pool fills while the model
runs, so batches grow by themselves; when idle, a lone request waits only ``window`` seconds.

The queue is bounded two ways, and a request over either bound is refused at once with :class:`Overloaded`
(a 503 with ``Retry-After``), never left to time out: ``max_queue`` requests waiting, and the time the
waiting inputs would take at the measured rate (``max_wait_s``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bertkit.errors import BertkitError

logger = logging.getLogger("bertkit.serve")

T = TypeVar("T")


class Overloaded(Exception):
    """The queue is full: the caller should answer 503 and the client retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(eq=False)
class _Job:
    key: Hashable
    fn: Callable[[list], list]
    items: list
    lengths: list[int]
    future: asyncio.Future
    results: list = field(default_factory=list)
    left: int = 0
    """Inputs not run yet."""

    def __post_init__(self) -> None:
        self.results = [None] * len(self.items)
        self.left = len(self.items)


@dataclass(eq=False)
class _Input:
    """One pending input: its job, its place in the job, its length in tokens."""

    job: _Job
    index: int
    length: int


@dataclass
class BatchStats:
    """Counters for ``/info`` and tests: calls into the model, the inputs and padded tokens they carried."""

    calls: int = 0
    items: int = 0
    requests: int = 0
    largest: int = 0
    padded_tokens: int = 0

    def record(self, requests: int, items: int, padded_tokens: int = 0) -> None:
        self.calls += 1
        self.items += items
        self.requests += requests
        self.largest = max(self.largest, items)
        self.padded_tokens += padded_tokens


class Batcher:
    """Pools jobs from concurrent requests and runs them in length-grouped batches on one model thread.

    ``window_s``: how long a lone first input waits for company; ``max_items``: inputs looked at to form one
    batch; ``max_queue``: requests that may wait; ``max_batch``: inputs per model call; ``max_tokens``: padded
    tokens per model call (inputs x the longest); ``max_wait_s``: refuse new work once the waiting inputs
    would take longer than this at the measured rate (None: no such bound).
    """

    def __init__(
        self,
        window_s: float = 0.005,
        max_items: int = 128,
        max_queue: int = 1024,
        *,
        max_batch: int = 32,
        max_tokens: int = 4096,
        max_wait_s: float | None = None,
    ):
        self.window_s = window_s
        self.max_items = max_items
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.max_wait_s = max_wait_s
        self.stats = BatchStats()
        self.on_batch: Callable[[int, int], None] | None = None
        """Called with (requests, items) after each model call (the metrics' batch sizes)."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertkit-model")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task | None = None
        self._pool: list[_Input] = []
        self._waiting_jobs = 0
        self._waiting_tokens = 0
        self._seconds_per_token: float | None = None
        """Moving average of the model's time per padded token: the estimate of a queue's wait."""

    def _ensure_worker(self) -> asyncio.Queue[_Job]:
        # Started on the loop that serves requests (a test client may bring a new loop each time).
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop or self._worker is None or self._worker.done():
            self._loop = loop
            self._queue = asyncio.Queue()
            self._pool = []
            self._waiting_jobs = self._waiting_tokens = 0
            self._worker = loop.create_task(self._run(self._queue), name="bertkit-batcher")
        return self._queue

    async def submit(
        self, key: Hashable, fn: Callable[[list], list], items: Sequence[Any], lengths: Sequence[int] | None = None
    ) -> list:
        """Run ``fn`` on ``items`` batched with other requests' items of the same ``key``; one result per item.

        ``fn`` must accept any list of items and return a list of the same length. ``lengths``: each item's
        length in tokens (the batch's budget; default 1 each). Raises :class:`Overloaded` at once when the
        queue is full. Cancelling the caller (a timeout) withdraws the inputs that have not started.
        """
        queue = self._ensure_worker()
        sizes = [max(1, int(n)) for n in lengths] if lengths is not None else [1] * len(items)
        if len(sizes) != len(items):
            raise ValueError(f"{len(items)} items but {len(sizes)} lengths")
        self._check_room(sum(sizes))
        future = asyncio.get_running_loop().create_future()
        job = _Job(key, fn, list(items), sizes, future)
        if not job.items:
            return []
        self._waiting_jobs += 1
        self._waiting_tokens += sum(sizes)
        queue.put_nowait(job)
        return await future  # a cancelled caller cancels the future: its waiting inputs are dropped

    def _check_room(self, tokens: int) -> None:
        if self._waiting_jobs >= self.max_queue:
            wait = self.expected_wait()
            raise Overloaded(
                f"{self._waiting_jobs} requests are waiting for the model; try again shortly", _seconds(wait)
            )
        if self.max_wait_s is not None and self._seconds_per_token is not None and self._waiting_jobs:
            wait = (self._waiting_tokens + tokens) * self._seconds_per_token
            if wait > self.max_wait_s:
                raise Overloaded(
                    f"the waiting inputs need about {wait:.0f} s of model time; try again shortly",
                    _seconds(self.expected_wait()),
                )

    def expected_wait(self) -> float:
        """Seconds the model needs for what is waiting now, at the measured rate (0 before any call)."""
        return self._waiting_tokens * (self._seconds_per_token or 0.0)

    async def _run(self, queue: asyncio.Queue[_Job]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._pool:
                self._add(await queue.get())
                deadline = loop.time() + self.window_s
                while len(self._pool) < self.max_items:
                    remaining = deadline - loop.time()
                    try:
                        job = queue.get_nowait() if remaining <= 0 else await asyncio.wait_for(queue.get(), remaining)
                    except (TimeoutError, asyncio.QueueEmpty):
                        break
                    self._add(job)
            while not queue.empty():
                self._add(queue.get_nowait())
            self._drop_withdrawn()
            if self._pool:
                await self._call(loop, self._next_batch())

    def _add(self, job: _Job) -> None:
        self._pool.extend(_Input(job, i, n) for i, n in enumerate(job.lengths))

    def _drop_withdrawn(self) -> None:
        """Forget the inputs of requests that gave up (a timeout) while waiting."""
        if any(entry.job.future.done() for entry in self._pool):
            for entry in self._pool:
                if entry.job.future.done():
                    self._finished(entry.job)
            self._pool = [entry for entry in self._pool if not entry.job.future.done()]

    def _next_batch(self) -> list[_Input]:
        """The batch holding the oldest pending input, taken out of the pool (see the module's docstring)."""
        oldest = self._pool[0]
        candidates = [entry for entry in self._pool if entry.job.key == oldest.job.key][: self.max_items]
        batch = next(run for run in token_batches(candidates, self.max_batch, self.max_tokens) if oldest in run)
        taken = set(map(id, batch))
        self._pool = [entry for entry in self._pool if id(entry) not in taken]
        return batch

    async def _call(self, loop: asyncio.AbstractEventLoop, batch: list[_Input]) -> None:
        fn = batch[0].job.fn
        items = [entry.job.items[entry.index] for entry in batch]
        padded = len(batch) * max(entry.length for entry in batch)
        started = time.perf_counter()
        try:
            results = await loop.run_in_executor(self._executor, fn, items)
        except BertkitError as exc:
            self._failed(loop, batch, exc)
            return
        except Exception as exc:
            logger.exception("pipeline failed on a batch of %d inputs", len(items))
            for job in _jobs_of(batch):
                self._settle(job, error=exc)
            return
        self._measured((time.perf_counter() - started) / padded)
        requests = len(_jobs_of(batch))
        self.stats.record(requests, len(items), padded)
        if self.on_batch is not None:
            self.on_batch(requests, len(items))
        for entry, result in zip(batch, results):
            entry.job.results[entry.index] = result
            entry.job.left -= 1
            if entry.job.left == 0:
                self._settle(entry.job, entry.job.results)

    def _failed(self, loop: asyncio.AbstractEventLoop, batch: list[_Input], exc: BertkitError) -> None:
        """One request's bad input must not fail the others batched with it: a request that was alone fails;
        otherwise every input goes back to the pool to run alone."""
        jobs = _jobs_of(batch)
        if len(jobs) == 1 and len(batch) == jobs[0].left:
            self._settle(jobs[0], error=exc)
            return
        if len(batch) == 1:
            self._settle(batch[0].job, error=exc)
            return
        retry = [entry for entry in batch if not entry.job.future.done()]
        for entry in retry:  # alone: a batch of one per input
            entry.length = self.max_tokens + 1
        self._pool[:0] = retry

    def _settle(self, job: _Job, results: list | None = None, *, error: BaseException | None = None) -> None:
        if not job.future.done():  # else the caller gave up (timeout) meanwhile
            if error is not None:
                job.future.set_exception(error)
            else:
                job.future.set_result(results)
        self._finished(job)
        if error is not None:
            self._pool = [entry for entry in self._pool if entry.job is not job]

    def _finished(self, job: _Job) -> None:
        if job.left >= 0:
            self._waiting_jobs -= 1
            self._waiting_tokens -= sum(job.lengths)
            job.left = -1  # counted out once

    def _measured(self, seconds_per_token: float) -> None:
        if self.stats.calls == 0:  # the first call warms the model up: not a rate
            return
        previous = self._seconds_per_token
        self._seconds_per_token = seconds_per_token if previous is None else 0.8 * previous + 0.2 * seconds_per_token

    def depth(self) -> int:
        """Requests waiting for the model."""
        return max(0, self._waiting_jobs)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


def token_batches(entries: Sequence[_Input], max_batch: int, max_tokens: int) -> list[list[_Input]]:
    """``entries`` sorted by length and cut into runs of at most ``max_batch`` whose padded size (count x
    the longest) is at most ``max_tokens``; an entry alone over the budget is a run of its own."""
    runs: list[list[_Input]] = []
    run: list[_Input] = []
    for entry in sorted(entries, key=lambda e: e.length):
        if run and (len(run) >= max_batch or (len(run) + 1) * entry.length > max_tokens):
            runs.append(run)
            run = []
        run.append(entry)
    if run:
        runs.append(run)
    return runs


def _jobs_of(batch: Sequence[_Input]) -> list[_Job]:
    return list({id(entry.job): entry.job for entry in batch}.values())


def _seconds(wait: float) -> int:
    """A ``Retry-After`` in whole seconds: the expected wait, at least 1."""
    return max(1, math.ceil(wait))


async def in_thread(executor: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in ``executor``, off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(executor, fn, *args)
