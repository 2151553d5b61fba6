"""The training log line: values summed over the updates since the last line, reduced over processes."""

from __future__ import annotations

import time
from typing import Any

import torch

from bertkit.progress import Progress
from bertkit.training import distributed
from bertkit.training.train_config import TrainConfig

MetricValue = float | torch.Tensor | tuple[Any, Any]
"""A logged value: a number, or ``(numerator, denominator)`` so that ratios add up exactly over batches."""


class LogWindow:
    """Sums of logged values, tokens and updates since the last log line."""

    def __init__(self) -> None:
        self.sums: dict[str, list[Any]] = {}
        self.tokens = 0
        self.updates = 0
        self.start = time.perf_counter()

    def add(self, name: str, value: MetricValue) -> None:
        num, den = value if isinstance(value, tuple) else (value, 1.0)
        num = num.detach().double() if isinstance(num, torch.Tensor) else float(num)
        den = den.detach().double() if isinstance(den, torch.Tensor) else float(den)
        entry = self.sums.setdefault(name, [0.0, 0.0])
        entry[0] = entry[0] + num
        entry[1] = entry[1] + den

    def reduce(self, env: distributed.DistEnv) -> dict[str, float]:
        """Each value's ratio of sums over all processes (collective: every process calls it)."""
        names = sorted(self.sums)
        flat = [float(x) for n in names for x in self.sums[n]]
        flat = distributed.all_reduce_sum(env, flat)
        return {n: (flat[2 * i] / flat[2 * i + 1] if flat[2 * i + 1] else float("nan")) for i, n in enumerate(names)}

    def record(
        self,
        env: distributed.DistEnv,
        *,
        step: int,
        lr: float,
        epoch: int,
        elapsed: float,
        config: TrainConfig,
        flops_per_token: float | None,
    ) -> dict[str, Any]:
        """The ``split="train"`` record of this window, with throughput and MFU (collective)."""
        values = self.reduce(env)
        seconds = max(time.perf_counter() - self.start, 1e-9)
        tokens = distributed.all_reduce_sum(env, [float(self.tokens)])[0]
        record: dict[str, Any] = {
            "step": step,
            "split": "train",
            **values,
            "lr": lr,
            "epoch": epoch,
            "elapsed_s": round(elapsed, 3),
            "tokens_per_s": tokens / seconds,
        }
        if flops_per_token and config.logging.peak_flops:
            record["mfu"] = tokens / seconds * flops_per_token / (config.logging.peak_flops * env.world_size)
        return record


def progress_display(config: TrainConfig, step: int, enabled: bool) -> Progress | None:
    """The updates' progress display (a bar in a terminal, a line every so often elsewhere); None when disabled
    or on other processes than the main one."""
    if not (enabled and config.logging.progress):
        return None
    return Progress(config.duration.max_steps, initial=step, unit="step", desc="train")


def show_on_bar(progress: Progress, record: dict[str, Any], config: TrainConfig, elapsed: float) -> None:
    postfix = {"loss": f"{record.get('loss', float('nan')):.4f}", "tok/s": f"{record['tokens_per_s']:.0f}"}
    if "mfu" in record:
        postfix["mfu"] = f"{record['mfu']:.1%}"
    if config.duration.max_time is not None:
        postfix["left"] = f"{max(config.duration.max_time - elapsed, 0):.0f}s"
    progress.set_postfix(postfix)
