"""The one training loop, shared by pre-training and every fine-tuning task.

A :class:`Trainer` takes a model whose ``forward(**batch)`` returns an object with ``.loss``, a batch source
(:class:`bertkit.data.batch_sources.BatchSource`), a :class:`TrainConfig` and optional :class:`Hooks`, and owns
everything else: optimizer and schedule, precision, gradient accumulation and clipping, skipping non-finite
steps, data parallelism (DDP or FSDP), evaluation, best-model selection, logging, checkpoints, resume and
signals. :meth:`Trainer.train` reads top to bottom; each of its steps is a method below it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Self

import torch
from torch import nn

from bertkit.checkpoint_files import SAFETENSORS_NAME, write_module_weights
from bertkit.compiling import compile_model
from bertkit.data.batch_sources import BatchSource, FollowsRun
from bertkit.errors import BertkitError, ConfigError
from bertkit.models import registry
from bertkit.models.bert import EncoderLayer
from bertkit.notices import notice
from bertkit.quantize import refuse_training
from bertkit.training import distributed
from bertkit.training.checkpoint import load_checkpoint, save_checkpoint
from bertkit.training.logwindow import LogWindow, MetricValue, progress_display, show_on_bar
from bertkit.training.optim import build_optimizer, lr_multiplier, set_lr
from bertkit.training.precision import resolve_precision
from bertkit.training.run_log import MetricsLogger
from bertkit.training.state import STATE_FORMAT, find_resume, rng_state, seed_everything, set_rng_state
from bertkit.training.train_config import TrainConfig
from bertkit.weights import save_pretrained

if TYPE_CHECKING:
    from bertkit.training.sharding import Gathered


class TrainingDiverged(BertkitError):
    """Too many consecutive updates had a non-finite loss or gradient."""


@dataclass
class TrainResult:
    """What a call to :func:`train` did."""

    step: int
    """Optimizer updates done in total (including those of earlier, resumed runs)."""
    stop_reason: str
    """Why the run ended: ``max_steps``; ``epochs`` (the epochs :meth:`TrainConfig.for_epoch` turned into
    ``max_steps`` ran out first); ``max_time``; ``signal`` (SIGTERM/SIGINT: a checkpoint was written, resume
    later); or the reason the ``should_stop`` hook gave on the main process (``early_stopping`` in fine-tuning),
    which the other processes of a distributed run report as ``should_stop``."""
    checkpoint: Path | None
    """The last checkpoint written."""
    elapsed: float
    """Training wall-clock seconds over all resumed runs."""
    skipped_steps: int
    """Updates skipped because of a non-finite loss or gradient."""
    best_metric: float | None = None
    """Best value of ``config.evaluation.best_metric`` seen."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Every record logged (train and eval), as in ``metrics.jsonl``."""
    signal: int | None = None
    """The signal that stopped the run (``signal.SIGTERM``, ``signal.SIGINT``) when ``stop_reason`` is ``signal``."""
    model: nn.Module | None = None
    """The trained model, unsharded, on the main process (the model passed in, unless ``fsdp`` sharded it;
    then a gathered full copy). None on the other processes of a sharded run."""


def save_weights(model: nn.Module, directory: Path) -> None:
    """The default export: ``save_pretrained`` for bertkit models (of any registered architecture), else a bare
    ``model.safetensors``."""
    if registry.of_model(model) is not None:
        save_pretrained(model, directory)
    else:
        write_module_weights(model, directory / SAFETENSORS_NAME)


@dataclass
class Hooks:
    """What a caller plugs into the loop; every hook is optional."""

    evaluate: Callable[[nn.Module], Mapping[str, float]] | None = None
    """``evaluate(model) -> {name: value}``, called on the main process in eval mode under ``no_grad`` every
    ``eval_every`` updates, at epoch ends and at the end; values are logged with ``split="eval"`` and
    ``config.evaluation.best_metric`` among them selects the model exported to ``best/``."""
    output_metrics: Callable[[Any, Any], Mapping[str, MetricValue]] | None = None
    """``output_metrics(output, batch) -> {name: value or (num, den)}`` logged with the loss."""
    extra_files: Callable[[Path], None] | None = None
    """Writes additional files (tokenizer) into each checkpoint directory."""
    export: Callable[[nn.Module, Path], None] = save_weights
    """``export(model, directory)`` writes a model directory (``best/``)."""
    on_epoch_end: Callable[[int, nn.Module], None] | None = None
    """``on_epoch_end(epoch, model)`` after each finished epoch (main process)."""
    should_stop: Callable[[], str | None] | None = None
    """Asked before every update on the main process; a returned reason (e.g. "early_stopping") ends the run
    there, as the end of its budget does: final checkpoint, logs and curves."""


class _StopFlag:
    """SIGTERM/SIGINT set a flag that the loop checks between updates; a second signal interrupts at once."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is not None:  # asked twice: stop now, without the checkpoint
            raise KeyboardInterrupt
        self.signal = signum
        notice(f"received {signal.Signals(signum).name}: saving a checkpoint after this update, then stopping")

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class Trainer:
    """One training run: set up (fresh or resumed) on construction, then :meth:`train`."""

    def __init__(
        self,
        model: nn.Module,
        batches: BatchSource,
        config: TrainConfig,
        hooks: Hooks | None = None,
        *,
        flops_per_token: float | None = None,
        env: distributed.DistEnv | None = None,
        temporary_checkpoints: bool = False,
    ) -> None:
        """``flops_per_token``: training FLOPs per token, for the MFU column (with ``config.logging.peak_flops``);
        ``env``: the process group, default :func:`distributed.setup` from ``torchrun``'s environment;
        ``temporary_checkpoints``: the caller deletes the checkpoints once the run finishes (fine-tuning's work
        directory), so the closing line names one only when the run stopped early and can resume from it."""
        self.temporary_checkpoints = temporary_checkpoints
        _require_max_steps(config)
        self.env = env = env or distributed.setup(config.distributed.device)
        self.batches, self.config, self.hooks = batches, config, hooks or Hooks()
        self.flops_per_token = flops_per_token
        self.device = env.device
        self.accum = config.accumulation(env.world_size)
        self.step_accum = self.accum  # this update's, smaller during a batch-size warmup
        self.precision = resolve_precision(config.precision.mode, self.device)
        self.sharded = self._shards()
        self.step, self.epoch, self.elapsed_before, self.skipped, self.tokens = 0, 0, 0.0, 0, 0
        self.agreed_elapsed = 0.0  # the largest elapsed time over the processes, at the last stop check
        self.best: float | None = None  # of config.evaluation.best_metric
        self.lr = 0.0
        self.bad_in_a_row = 0
        self.stop = _StopFlag()
        self.gathered: Gathered | None = None  # under FSDP: the main process's full copy of the model
        # Rank 0 decides, so that every process resumes from the same checkpoint.
        resume_from = distributed.broadcast_object(env, find_resume(config) if env.is_main else None)
        history = self._set_up_model(model, resume_from)
        self._set_up_logging(resume_from, history)
        self.iterator = iter(batches)

    def _shards(self) -> bool:
        """Whether FSDP shards this run: asked for, and several processes to shard over."""
        fsdp, env = self.config.distributed.fsdp, self.env
        if fsdp and env.distributed and self.precision.scaler is not None:
            raise ConfigError("fsdp with fp16 loss scaling is not supported; use precision bf16 or fp32")
        if fsdp and not env.distributed and env.is_main:
            notice("fsdp shards over several processes (torchrun); with one process it trains unsharded")
        return fsdp and env.distributed

    def _set_up_model(self, model: nn.Module, resume_from: Path | None) -> list[dict[str, Any]] | None:
        """The model on the device, seeded, with its optimizer, restored from ``resume_from`` (with the counters,
        data position and RNG streams), wrapped for DDP and compiled as the config says; returns the resumed
        run's logged history (None for a fresh run)."""
        refuse_training(model)
        self.bare = model.to(self.device)
        seed_everything(self.config.seed + self.env.rank)
        state = load_checkpoint(resume_from, self.bare, map_location=self.device) if resume_from is not None else {}
        self.optimizer = self._build_optimizer(state.get("optimizer"))
        if resume_from is not None:
            self.resume(resume_from, state)
        self.ddp = self._data_parallel()
        if self.config.compile:
            # On a GPU only the layers' position-wise steps are compiled: attention keeps its own kernels, and
            # Inductor has failed on the whole model's softmax there (benchmarks/GPU.md); on a CPU the whole model.
            compile_model(
                self.bare, scope="layers" if self.device.type == "cuda" and _has_layers(self.bare) else "model"
            )
        self.bare.train()
        self.params = [p for p in self.bare.parameters() if p.requires_grad]
        return state.get("history") if resume_from is not None else None

    def _set_up_logging(self, resume_from: Path | None, history: list[dict[str, Any]] | None) -> None:
        """Metrics logger, progress display, and the bookkeeping of what was saved and evaluated last."""
        env, resumed = self.env, resume_from is not None
        self.logger = MetricsLogger(
            self.config.output_dir,
            enabled=env.is_main,
            resume_step=self.step if resumed else None,
            resume_history=history,
            config=self.config,
            device=str(self.device),
        )
        if env.is_main:
            self._announce()
        self.run_start = time.perf_counter()
        self.last_saved: Path | None = resume_from
        self.last_saved_step = self.step if resumed else -1
        # A checkpoint saved right after an evaluation at its step already holds that evaluation: resuming
        # there (e.g. at the very end of a run) must not evaluate and log it a second time.
        evaluated_here = any(r.get("split") == "eval" and r.get("step") == self.step for r in history or [])
        self.last_eval_step = self.step if resumed and evaluated_here else -1
        # Callers may give ``evaluate`` on the main process only; every process must agree on when to gather.
        self.evaluates = distributed.broadcast_object(env, self.hooks.evaluate is not None)
        self.window = LogWindow()
        self.progress = progress_display(self.config, self.step, enabled=env.is_main)

    # ------------------------------------------------------------------------------------ the run
    def train(self) -> TrainResult:
        """Update until a stop condition holds; log, evaluate and save as the config says."""
        config = self.config
        with self.stop:
            while (stop_reason := self.stop_reason()) is None:
                if not self.train_step():
                    continue  # a skipped (non-finite) update: nothing to log, evaluate or save
                if self.batches.epoch != self.epoch:  # the source rolls over with an epoch's last batch
                    self.end_epoch()
                if self.progress is not None:
                    self.progress.update(1)
                if self.step % config.logging.log_every == 0 or self.step == config.duration.max_steps:
                    self.log_window()
                if config.evaluation.eval_every and self.step % config.evaluation.eval_every == 0:
                    self.evaluate()
                if config.checkpointing.save_every and self.step % config.checkpointing.save_every == 0:
                    self.save("periodic")
        if self.progress is not None:
            self.progress.close()
        if stop_reason != "signal":
            self.evaluate()
        if self.last_saved_step != self.step:  # the same decision on every process (last_saved: main's only)
            self.save(stop_reason)
        trained = self.unsharded()
        self.logger.close(plot=config.logging.plot, stop_reason=stop_reason)
        if self.env.is_main:
            kept = not self.temporary_checkpoints or stop_reason == "signal"
            where = f"; checkpoint {self.last_saved}" if kept else ""
            notice(f"stopped ({stop_reason}) at step {self.step} after {self.elapsed():.0f}s{where}")
        return TrainResult(
            step=self.step,
            stop_reason=stop_reason,
            checkpoint=self.last_saved,
            elapsed=self.elapsed(),
            skipped_steps=self.skipped,
            best_metric=self.best,
            history=list(self.logger.history),
            signal=(self.stop.signal or signal.SIGTERM) if stop_reason == "signal" else None,
            model=trained,
        )

    def stop_reason(self) -> str | None:
        """Why the run ends before the next update, or None to go on; the same answer on every process."""
        config = self.config
        elapsed = self.elapsed()
        asked = self.hooks.should_stop() if self.hooks.should_stop is not None and self.env.is_main else None
        signalled, self.agreed_elapsed, stop_asked = distributed.all_reduce_max(
            self.env, [float(self.stop.signal is not None), elapsed, float(asked is not None)]
        )
        timed_out = config.duration.max_time is not None and self.agreed_elapsed >= config.duration.max_time
        if config.duration.max_steps is not None and self.step >= config.duration.max_steps:
            return config.duration.max_steps_from  # "epochs" when the epochs end the run before max_steps

        if signalled:
            return "signal"
        if timed_out:
            return "max_time"
        if stop_asked:
            return asked or "should_stop"  # other processes only know that the main process asked
        return None

    # ------------------------------------------------------------------------------------ one update
    def train_step(self) -> bool:
        """One optimizer update over ``accum`` micro-batches; False when it was skipped as non-finite."""
        total = self.horizon()
        self.lr = self.learning_rate(total)
        set_lr(self.optimizer, self.lr)
        if isinstance(self.batches, FollowsRun):
            self.batches.set_run_share(min(self.step / total, 1.0))
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        update_tokens = 0
        self.step_accum = self.config.batch.accumulation_at(self.step, self.env.world_size, total)
        for micro in range(self.step_accum):
            batch = _to_device(self.next_batch(), self.device)
            output = self.forward_backward(batch, last=micro == self.step_accum - 1)
            loss_sum += output.loss.detach().float()
            update_tokens += _count_tokens(batch)
            if self.hooks.output_metrics is not None:
                for name, value in self.hooks.output_metrics(output, batch).items():
                    self.window.add(name, value)
        grad_norm = self.clip_gradients()
        mean_loss = loss_sum / self.step_accum
        scaler = self.precision.scaler
        if scaler is not None:
            scaler.step(self.optimizer)  # skips the update itself on inf/nan gradients
            scaler.update()
        else:
            self.step_unless_non_finite(torch.isfinite(mean_loss) & torch.isfinite(grad_norm))
        self.optimizer.zero_grad(set_to_none=True)
        # The update's one host synchronisation, once all of its work is queued on the device.
        loss, norm = torch.stack([mean_loss, grad_norm.double()]).tolist()
        finite_loss = math.isfinite(loss)
        finite = finite_loss and math.isfinite(norm)
        self.tokens += update_tokens * self.env.world_size
        self.window.tokens += update_tokens
        if not finite:
            self.skip_update(loss, norm, counts_as_failure=scaler is None or not finite_loss)
            return False
        self.step += 1
        self.bad_in_a_row = 0
        self.window.add("loss", loss)
        self.window.add("grad_norm", norm)
        self.window.updates += 1
        return True

    def step_unless_non_finite(self, finite: torch.Tensor) -> None:
        """The optimizer's update, skipped when ``finite`` (a 0-dim bool on the device) is False. A fused Adam(W)
        reads ``found_inf`` and skips on the device, so the host does not wait for the backward pass before
        queueing the update; other optimizers need the answer on the host first."""
        optimizer = self.optimizer
        # The groups' own flag, not ``defaults``: a state dict loaded from another run sets the groups' options.
        fused = all(group.get("fused") for group in optimizer.param_groups)
        if isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW) and fused:
            optimizer.found_inf = (~finite).float()  # type: ignore[attr-defined]
            try:
                optimizer.step()
            finally:
                del optimizer.found_inf  # type: ignore[attr-defined]
        elif bool(finite):
            optimizer.step()

    def horizon(self) -> int:
        """The updates the run is expected to make, over which every schedule runs (learning rate, batch-size
        warmup, masking rate): ``max_steps``; on a time budget, the updates the pace so far says it allows, so
        that each schedule is a function of the share of the budget spent and ends with it; with both, the one
        that comes first. Every process computes it from the same (agreed) elapsed time."""
        duration = self.config.duration
        if duration.max_time is None:
            return duration.max_steps or 1
        by_time = _estimated_total(self.step, self.agreed_elapsed, duration.max_time)
        return min(duration.max_steps, by_time) if duration.max_steps else by_time

    def learning_rate(self, total: int) -> float:
        config = self.config
        return config.optimizer.lr * lr_multiplier(
            self.step,
            schedule=config.schedule.name,
            warmup_steps=config.schedule.warmup(total),
            total_steps=total,
            power=config.schedule.power,
            decay_ratio=config.schedule.decay_ratio,
        )

    def next_batch(self) -> Any:
        try:
            return next(self.iterator)
        except StopIteration:  # a finite source: the next pass
            self.iterator = iter(self.batches)
            try:
                return next(self.iterator)
            except StopIteration:
                raise BertkitError("the batch source yielded no batches; is the dataset empty?") from None

    def forward_backward(self, batch: Any, *, last: bool) -> Any:
        """Forward and backward of one micro-batch; gradients are synchronised on the ``last`` one only."""
        if self.sharded:  # reduce-scatter gradients on the last micro-batch only
            sharding().set_gradient_sync(self.bare, last)
        with self.ddp.no_sync() if self.ddp is not None and not last else contextlib.nullcontext():
            with self.precision.autocast():
                output = (self.ddp or self.bare)(**batch)
            scaled = output.loss.float() / self.step_accum
            if self.precision.scaler is not None:
                scaled = self.precision.scaler.scale(scaled)
            scaled.backward()
        return output

    def clip_gradients(self) -> torch.Tensor:
        """Unscale (fp16), clip to ``clip_grad_norm`` and return the global gradient norm."""
        if self.precision.scaler is not None:
            self.precision.scaler.unscale_(self.optimizer)
        if self.config.optimizer.clip_grad_norm:
            grad_norm = nn.utils.clip_grad_norm_(self.params, self.config.optimizer.clip_grad_norm)
        else:
            grad_norm = nn.utils.get_total_norm([p.grad for p in self.params if p.grad is not None])
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor norm over the shards (its module is slow to import)
            grad_norm = grad_norm.full_tensor()
        return grad_norm

    def skip_update(self, loss: float, grad_norm: float, *, counts_as_failure: bool) -> None:
        self.skipped += 1
        # fp16 overflows at a too-high loss scale are routine; only a non-finite loss counts as failure.
        if not counts_as_failure:
            return
        self.bad_in_a_row += 1
        notice(
            f"non-finite loss or gradient at step {self.step} (loss {loss}, grad norm {grad_norm}): "
            f"update skipped ({self.skipped} so far)",
            logging.WARNING,
        )
        if self.bad_in_a_row >= self.config.max_bad_steps:
            raise TrainingDiverged(
                f"{self.bad_in_a_row} consecutive updates had a non-finite loss or gradient; stopped. Last good "
                f"checkpoint: {self.last_saved or 'none'}. Lower --lr, raise warmup, or use fp32/bf16"
            )

    # ------------------------------------------------------------------------------------ around updates
    def end_epoch(self) -> None:
        finished, self.epoch = self.epoch, self.batches.epoch
        if self.env.is_main and self.hooks.on_epoch_end is not None:
            self.hooks.on_epoch_end(finished, self.bare)
        if self.config.evaluation.eval_each_epoch and not self.config.evaluation.eval_every:
            self.evaluate()

    def log_window(self) -> None:
        """Log the updates since the last log line (collective) and start a new window."""
        elapsed = self.elapsed()
        record = self.window.record(
            self.env,
            step=self.step,
            lr=self.lr,
            epoch=self.epoch,
            elapsed=elapsed,
            config=self.config,
            flops_per_token=self.flops_per_token,
        )
        self.logger.log(record)
        if self.progress is not None:
            show_on_bar(self.progress, record, self.config, elapsed)
        self.window = LogWindow()

    def evaluate(self) -> None:
        """Run the ``evaluate`` hook once per step (collective under FSDP); log it and export a new best."""
        if not self.evaluates or self.last_eval_step == self.step:
            return
        self.last_eval_step = self.step
        evaluated = self.unsharded()
        if self.env.is_main and evaluated is not None and self.hooks.evaluate is not None:
            evaluated.eval()
            saved_rng = rng_state()  # evaluation must not move the training RNG streams: resume would diverge
            with torch.no_grad(), self.precision.autocast():
                results = dict(self.hooks.evaluate(evaluated))
            set_rng_state(saved_rng)
            self.bare.train()
            self.logger.log({"step": self.step, "split": "eval", "epoch": self.epoch, **results})
            chosen = self.config.evaluation
            if chosen.best_metric is not None and chosen.best_metric in results:
                value = float(results[chosen.best_metric])
                if chosen.is_better(value, self.best):
                    self.best = value
                    self.hooks.export(evaluated, self.config.output_dir / "best")
            if self.progress is not None:
                self.progress.write(f"step {self.step} eval: " + ", ".join(f"{k} {v:.4g}" for k, v in results.items()))
        distributed.barrier(self.env)

    # ------------------------------------------------------------------------------------ state
    def elapsed(self) -> float:
        """Training wall-clock seconds over all resumed runs."""
        return self.elapsed_before + time.perf_counter() - self.run_start

    def unsharded(self) -> nn.Module | None:
        """The full model on the main process (collective under FSDP: every process calls it)."""
        return self.gathered.refresh(self.bare) if self.gathered is not None else self.bare

    def save(self, reason: str) -> Path | None:
        """Write a checkpoint of the weights and ``trainer_state`` (collective); return its path on the main."""
        env = self.env
        rngs = distributed.all_gather_object(env, rng_state())
        snapshot = self.unsharded()
        if self.sharded:
            optimizer_state = sharding().full_optimizer_state(self.bare, self.optimizer)
        else:
            optimizer_state = self.optimizer.state_dict() if env.is_main else None
        path = None
        if env.is_main:
            assert snapshot is not None  # the main process holds the full model
            scaler = self.precision.scaler
            trainer_state = {
                "format": STATE_FORMAT,
                "step": self.step,
                "epoch": self.epoch,
                "elapsed": self.elapsed(),
                "skipped_steps": self.skipped,
                "tokens": self.tokens,
                "best": self.best,
                "optimizer": optimizer_state,
                "scaler": scaler.state_dict() if scaler is not None else {},
                "rng": rngs,
                "loader": self.batches.state_dict(),
                "history": self.logger.history,
                "config": self.config.to_dict(),
                "world_size": env.world_size,
                "reason": reason,
            }
            path = save_checkpoint(
                self.config.output_dir,
                self.step,
                snapshot,
                trainer_state,
                extra_files=self.hooks.extra_files,
                keep_last=self.config.checkpointing.keep_last,
            )
        distributed.barrier(env)
        self.last_saved, self.last_saved_step = path or self.last_saved, self.step
        return path

    def resume(self, checkpoint: Path, state: Mapping[str, Any]) -> None:
        """Counters, scaler, data position and RNG streams from a loaded ``trainer_state``."""
        if self.precision.scaler is not None and state.get("scaler"):
            self.precision.scaler.load_state_dict(state["scaler"])
        self.step = int(state["step"])
        self.elapsed_before, self.skipped = float(state["elapsed"]), int(state["skipped_steps"])
        self.tokens, self.best = int(state["tokens"]), state.get("best")
        self.batches.load_state_dict(state["loader"])
        self.epoch = self.batches.epoch
        rngs = state["rng"]
        if len(rngs) == self.env.world_size:
            set_rng_state(rngs[self.env.rank])
        else:
            notice(
                f"resuming {len(rngs)}-process checkpoint on {self.env.world_size} processes: data order "
                "is kept, dropout streams are re-seeded",
                logging.WARNING,
            )
            seed_everything(self.config.seed + self.env.rank + 1_000_003 * self.step)
        if self.env.is_main:
            notice(f"resumed from {checkpoint} at step {self.step}")

    def _data_parallel(self) -> nn.parallel.DistributedDataParallel | None:
        """DDP around the model when several processes train it unsharded (FSDP shards it instead)."""
        if not self.env.distributed or self.sharded:
            return None
        return nn.parallel.DistributedDataParallel(
            self.bare,
            device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=self.config.distributed.ddp_find_unused_parameters,
        )

    def _announce(self) -> None:
        config, world = self.config, self.env.world_size
        notice(
            f"training: micro-batch {config.batch.micro_batch_size} x {self.accum} accumulation x {world} process(es) "
            f"= global batch {config.batch.micro_batch_size * self.accum * world}; precision {self.precision.name} on "
            f"{self.device}; optimizer {config.optimizer.name}"
        )

    def _build_optimizer(self, saved: dict[str, Any] | None) -> torch.optim.Optimizer:
        """The optimizer with its saved state; under FSDP it is built after sharding, over the shards."""
        config, bare = self.config, self.bare

        def new_optimizer(fused: bool = True) -> torch.optim.Optimizer:
            return build_optimizer(
                bare,
                config.optimizer.name,
                config.optimizer.lr,
                config.optimizer.weight_decay,
                (config.optimizer.adam_beta1, config.optimizer.adam_beta2),
                config.optimizer.adam_eps,
                fused=fused,
            )

        if self.sharded:
            if saved is not None and not sharding().keyed_by_name(saved):  # an unsharded run's
                saved = sharding().by_name(bare, new_optimizer(), saved)
            self.gathered = sharding().Gathered(bare, self.env.is_main)
            sharding().shard(bare)
        optimizer = new_optimizer(fused=not self.sharded)
        if saved is not None:
            if sharding().keyed_by_name(saved):  # written by a sharded run
                sharding().load_optimizer_state(bare, optimizer, saved)
            else:
                optimizer.load_state_dict(saved)
        return optimizer


def train(
    model: nn.Module,
    batches: BatchSource,
    config: TrainConfig,
    *,
    evaluate: Callable[[nn.Module], Mapping[str, float]] | None = None,
    output_metrics: Callable[[Any, Any], Mapping[str, MetricValue]] | None = None,
    flops_per_token: float | None = None,
    extra_files: Callable[[Path], None] | None = None,
    export: Callable[[nn.Module, Path], None] | None = None,
    on_epoch_end: Callable[[int, nn.Module], None] | None = None,
    should_stop: Callable[[], str | None] | None = None,
    env: distributed.DistEnv | None = None,
) -> TrainResult:
    """Train ``model`` on ``batches`` as ``config`` says (see :class:`Trainer` and :class:`Hooks`)."""
    hooks = Hooks(
        evaluate=evaluate,
        output_metrics=output_metrics,
        extra_files=extra_files,
        export=export or save_weights,
        on_epoch_end=on_epoch_end,
        should_stop=should_stop,
    )
    return Trainer(model, batches, config, hooks, flops_per_token=flops_per_token, env=env).train()


def _require_max_steps(config: TrainConfig) -> None:
    """The loop counts updates: ``epochs`` must have become ``max_steps`` (:meth:`TrainConfig.for_epoch`)."""
    duration = config.duration
    if duration.epochs is not None and duration.max_steps is None:
        raise ConfigError(
            f"epochs={duration.epochs} needs the length of an epoch, which the loop does not know: train with "
            "config.for_epoch(len(batches), world_size), which turns epochs into max_steps, or set max_steps"
        )


def sharding() -> ModuleType:
    """:mod:`bertkit.training.sharding`, imported when first needed: FSDP's modules take half a second to
    import, and only sharded runs and the checkpoints they wrote need them."""
    return importlib.import_module("bertkit.training.sharding")


def _has_layers(model: nn.Module) -> bool:
    return any(isinstance(m, EncoderLayer) for m in model.modules())


def _to_device(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def _count_tokens(batch: Any) -> int:
    if isinstance(batch, Mapping) and isinstance(batch.get("input_ids"), torch.Tensor):
        return batch["input_ids"].numel()
    return 0


def _estimated_total(step: int, elapsed: float, budget: float | None) -> int:
    """Total updates a time budget allows, extrapolated from the pace so far (schedules need a length)."""
    if budget is None or step < 5 or elapsed <= 0:
        return 10**9 if step < 5 else step + 1
    return max(step + 1, int(step * budget / elapsed))
