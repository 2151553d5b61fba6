"""Dynamic batching: inputs of concurrent requests are gathered for a short window and run together.

Requests put jobs (a pipeline key, a function and the request's inputs) on one queue. A single worker
takes the first job, waits up to ``window`` seconds for more (or until ``max_items`` inputs), groups the
jobs by key and calls each group's function once on all their inputs, in one dedicated model thread so the
event loop stays free to accept and validate requests. Under load the queue fills while the model runs,
so batches grow by themselves; when idle, a lone request waits only the window.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bertkit.errors import BertkitError

logger = logging.getLogger("bertkit.serve")


class Overloaded(Exception):
    """The queue is full: the caller should answer 503 and the client retry later."""


@dataclass
class _Job:
    key: Hashable
    fn: Callable[[list], list]
    items: list
    future: asyncio.Future


@dataclass
class BatchStats:
    """Counters for ``/info`` and tests: calls into the model and inputs they carried."""

    calls: int = 0
    items: int = 0
    requests: int = 0
    largest: int = 0

    def record(self, requests: int, items: int) -> None:
        self.calls += 1
        self.items += items
        self.requests += requests
        self.largest = max(self.largest, items)


class Batcher:
    """Gathers jobs from concurrent requests and runs them in batches on one model thread."""

    def __init__(self, window_s: float = 0.005, max_items: int = 128, max_queue: int = 1024):
        self.window_s = window_s
        self.max_items = max_items
        self.max_queue = max_queue
        self.stats = BatchStats()
        self.on_batch: Callable[[int, int], None] | None = None
        """Called with (requests, items) after each model call (the metrics' batch sizes)."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bertkit-model")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task | None = None

    def _ensure_worker(self) -> asyncio.Queue[_Job]:
        # Started on the loop that serves requests (a test client may bring a new loop each time).
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop or self._worker is None or self._worker.done():
            self._loop = loop
            self._queue = asyncio.Queue()
            self._worker = loop.create_task(self._run(self._queue), name="bertkit-batcher")
        return self._queue

    async def submit(self, key: Hashable, fn: Callable[[list], list], items: Sequence[Any]) -> list:
        """Run ``fn`` on ``items`` batched with other requests' items of the same ``key``; one result per item.

        ``fn`` must accept any list of items and return a list of the same length. Cancelling the caller
        (a timeout) withdraws the job if it has not started.
        """
        queue = self._ensure_worker()
        if queue.qsize() >= self.max_queue:
            raise Overloaded(f"{queue.qsize()} requests are waiting for the model; try again shortly")
        future = asyncio.get_running_loop().create_future()
        queue.put_nowait(_Job(key, fn, list(items), future))
        return await future

    async def _run(self, queue: asyncio.Queue[_Job]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await queue.get()]
            count = len(jobs[0].items)
            deadline = loop.time() + self.window_s
            while count < self.max_items:
                remaining = deadline - loop.time()
                try:
                    job = queue.get_nowait() if remaining <= 0 else await asyncio.wait_for(queue.get(), remaining)
                except (TimeoutError, asyncio.QueueEmpty):
                    break
                jobs.append(job)
                count += len(job.items)
            groups: dict[Hashable, list[_Job]] = {}
            for job in jobs:
                if not job.future.done():  # withdrawn by a timeout while queued
                    groups.setdefault(job.key, []).append(job)
            for group in groups.values():
                await self._call(loop, group)

    async def _call(self, loop: asyncio.AbstractEventLoop, group: list[_Job]) -> None:
        items = [item for job in group for item in job.items]
        try:
            results = await loop.run_in_executor(self._executor, group[0].fn, items)
        except BertkitError as exc:
            if len(group) == 1:
                _settle(group[0], error=exc)
                return
            # One request's bad input must not fail the others batched with it: run them one by one.
            for job in group:
                await self._call(loop, [job])
            return
        except Exception as exc:
            logger.exception("pipeline failed on a batch of %d inputs", len(items))
            for job in group:
                _settle(job, error=exc)
            return
        self.stats.record(len(group), len(items))
        if self.on_batch is not None:
            self.on_batch(len(group), len(items))
        start = 0
        for job in group:
            _settle(job, results[start : start + len(job.items)])
            start += len(job.items)

    def depth(self) -> int:
        """Jobs waiting for the model."""
        return self._queue.qsize() if self._queue is not None else 0

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _settle(job: _Job, results: list | None = None, *, error: BaseException | None = None) -> None:
    if job.future.done():  # the caller gave up (timeout) meanwhile
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(results)
