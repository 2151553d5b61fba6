"""Choosing the fine-tuned model on dev: the loop's hooks that evaluate after every epoch, keep the best
model's predictions, stop early on the main metric, time the epochs without the evaluations, and export
``best/`` with its tokenizer; a resumed run continues from the evaluations its log kept."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bertkit.data.batch_sources import ResumableBatches
from bertkit.errors import ConfigError
from bertkit.features.runner import run_model
from bertkit.notices import notice
from bertkit.tasks import Task
from bertkit.training.loop import Hooks
from bertkit.weights import save_pretrained

if TYPE_CHECKING:
    from bertkit.training.finetune_config import FinetuneConfig


def previous_evaluations(work: Path) -> list[dict[str, Any]]:
    """Dev evaluations of an interrupted run up to its last valid checkpoint (from its ``metrics.jsonl``)."""
    from bertkit.training.checkpoint import latest_valid_checkpoint

    checkpoint = latest_valid_checkpoint(work) if work.is_dir() else None
    log = work / "metrics.jsonl"
    if checkpoint is None or not log.is_file():
        return []
    last = int(checkpoint.name.rsplit("-", 1)[1])
    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a line cut by a kill
            continue
        if record.get("split") == "eval" and record.get("step", 0) <= last:
            records.append({k: v for k, v in record.items() if k != "split"})
    for record in records:
        record.setdefault("epoch", None)
    return records


class DevSelection:
    """The loop's hooks in fine-tuning: dev evaluation that keeps the best predictions, early stopping on
    the main metric, epoch timing (evaluations excluded) and the export of ``best/`` with its tokenizer."""

    def __init__(
        self,
        task: Task,
        config: FinetuneConfig,
        tokenizer: Any,
        batches: ResumableBatches,
        accum: int,
        dev: tuple[Sequence, Sequence] | None,
        previous: list[dict[str, Any]],
    ) -> None:
        self.task, self.config, self.tokenizer, self.batches, self.accum, self.dev = (
            task,
            config,
            tokenizer,
            batches,
            accum,
            dev,
        )
        self.evaluations = previous
        """Every dev evaluation: ``step``, ``epoch``, ``seconds`` and the metrics (an interrupted run's first)."""
        self.best: dict[str, Any] = {}
        self.stale = 0  # evaluations in a row without a better main metric
        for record in previous:  # a resumed run continues the best-model and patience bookkeeping
            scores = {k: v for k, v in record.items() if k not in ("step", "epoch", "seconds")}
            self._score(record["step"], record["epoch"], scores, predictions=None)
        self.epoch_ends: list[float] = []
        self.eval_spans: list[tuple[float, float]] = []  # (start, seconds) of each evaluation in this run

    def hooks(self) -> Hooks:
        return Hooks(
            evaluate=self.evaluate if self.dev is not None else None,
            export=self.export,
            on_epoch_end=self.on_epoch_end,
            should_stop=self.should_stop,
        )

    def _score(self, step: int, epoch: int | None, scores: dict[str, float], predictions: Any) -> None:
        main = self.task.main_metric
        if main in scores and (not self.best or scores[main] > self.best["metrics"][main]):
            self.best.update(step=step, epoch=epoch, metrics=scores, predictions=predictions)
            self.stale = 0
        else:
            self.stale += 1

    def evaluate(self, model: torch.nn.Module) -> dict[str, float]:
        assert self.dev is not None  # only handed to the loop with a dev set
        examples, features = self.dev
        start = time.perf_counter()
        rows = run_model(
            model, self.task, features, batch_size=self.config.eval_batch_size, pad_id=self.tokenizer.pad_id
        )
        predictions = self.task.postprocess(examples, features, rows)
        scores = {
            k: float(v) for k, v in self.task.evaluate(predictions, examples).items() if isinstance(v, (int, float))
        }
        if self.task.main_metric not in scores:
            raise ConfigError(
                f"main metric {self.task.main_metric!r} is not among the task's metrics "
                f"({', '.join(scores)}); choose another main_metric"
            )
        step = self.batches.consumed // self.accum
        self._score(step, self.batches.epoch, scores, predictions)
        seconds = time.perf_counter() - start
        self.eval_spans.append((start, seconds))
        self.evaluations.append({"step": step, "epoch": self.batches.epoch, "seconds": round(seconds, 3), **scores})
        return scores

    def on_epoch_end(self, epoch: int, model: torch.nn.Module) -> None:
        self.epoch_ends.append(time.perf_counter() - sum(seconds for _, seconds in self.eval_spans))

    def export(self, model: torch.nn.Module, directory: Path) -> None:
        max_seq_length = self.config.max_seq_length
        assert max_seq_length is not None  # FinetuneConfig fills it in from the task's defaults
        sentence = self.task.sentence_config(max_seq_length)
        save_pretrained(self.task.saved_model(model), directory, tokenizer=self.tokenizer, sentence=sentence)

    def should_stop(self) -> str | None:
        patience = self.config.early_stopping_patience
        if patience is None or self.stale < patience:
            return None
        main = self.task.main_metric
        notice(
            f"early stopping: {self.stale} evaluations without a better {main} "
            f"(best {self.best['metrics'][main]:.4f} at step {self.best['step']})"
        )
        return "early_stopping"

    def train_seconds(self, started: float, history: Sequence[Mapping[str, Any]]) -> float:
        """Training wall-clock up to the last logged update, dev evaluations excluded."""
        logged = [r for r in history if r.get("split") == "train" and "elapsed_s" in r]
        if not logged:
            return 0.0
        # elapsed_s counts from the loop's start and includes evaluations done before that update
        last = logged[-1]["elapsed_s"]
        return last - sum(seconds for at, seconds in self.eval_spans if at - started < last)
