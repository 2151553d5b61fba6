"""``bench_time_to_quality``'s clock: each side's budget in CPU (or wall) seconds, the held-out curve sampled
along it, and the held-out score itself."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


@torch.no_grad()
def score(model: torch.nn.Module, setup: Any) -> float:
    """Held-out MLM accuracy: the argmax at each masked position against the original token."""
    model.eval()
    correct = total = 0
    for start in range(0, len(setup.heldout), 64):
        ids = setup.heldout[start : start + 64]
        out = model(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=torch.zeros_like(ids))
        logits = next(
            getattr(out, name) for name in ("prediction_logits", "mlm_logits", "logits") if hasattr(out, name)
        )
        positions, labels = setup.positions[start : start + 64], setup.labels[start : start + 64]
        picked = logits.gather(1, positions.unsqueeze(-1).expand(-1, -1, logits.shape[-1])).argmax(-1)
        real = labels != -100
        correct += int(((picked == labels) & real).sum())
        total += int(real.sum())
    model.train()
    return correct / max(total, 1)


# ------------------------------------------------------------------------------------------ the clock
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK_HELP = (
    "cpu: seconds the training process ran on the CPU (all its threads), which other jobs sharing the core do not "
    "inflate; wall: elapsed seconds (the same on a core nothing else uses)"
)


class Snapshots:
    """Copies of the weights at every tenth of the budget, timed by a clock that starts with training."""

    def __init__(self, budget: float, clock: str, points: int = 10):
        self.budget, self.every = budget, budget / points
        self.clock = CLOCKS[clock]
        self.start = self.clock()
        self.paused = 0.0
        self.taken: list[tuple[float, int, dict[str, torch.Tensor]]] = []
        self.seen: list[tuple[float, int]] = []  # the first and the latest (seconds, step) observed

    def pace(self) -> float:
        """Updates per second between the first and the last observation (start-up left out)."""
        (t0, s0), (t1, s1) = self.seen[0], self.seen[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def seconds(self) -> float:
        return self.clock() - self.start - self.paused

    def maybe(self, model: torch.nn.Module, step: int, force: bool = False) -> None:
        """Copy the weights when the clock passed the next point (or ``force``); the copy is off the clock."""
        now = self.seconds()
        self.seen[1:] = [(now, step)] if self.seen else []
        if not self.seen:
            self.seen.append((now, step))
        if force or now >= len(self.taken) * self.every:
            began = self.clock()
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.taken.append((now, step, state))
            self.paused += self.clock() - began

    def curve(self, model: torch.nn.Module, setup: Any) -> list[dict[str, float]]:
        points = []
        for seconds, step, state in self.taken:
            model.load_state_dict(state)
            points.append({"seconds": round(seconds, 2), "step": step, "mlm_acc": round(score(model, setup), 5)})
        return points
