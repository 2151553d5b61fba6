"""The one training loop, shared by pre-training and every fine-tuning task.

It takes a model whose ``forward(**batch)`` returns an object with ``.loss``, a stateful batch source
(``__iter__``, ``state_dict()``, ``load_state_dict()``) and a :class:`TrainConfig`, and owns everything
else: optimizer and schedule, precision, gradient accumulation and clipping, skipping non-finite steps,
data parallelism, evaluation, best-model selection, logging, checkpoints, resume and signals.

Exactness: every source of randomness the loop touches (python, numpy and torch generators of every
process, the batch source's position, the optimizer and scaler) goes into each checkpoint, so a run that
is killed and resumed on CPU retraces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import contextlib
import math
import random
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from bertkit.errors import BertkitError, CheckpointError, ConfigError
from bertkit.model import PreTrainedMixin
from bertkit.training import distributed
from bertkit.training.checkpoint import latest_valid_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from bertkit.training.config import TrainConfig
from bertkit.training.metrics import MetricsLogger, notice
from bertkit.training.optim import build_optimizer, lr_multiplier, set_lr
from bertkit.training.precision import resolve_precision
from bertkit.weights import save_pretrained

MetricValue = float | torch.Tensor | tuple[Any, Any]
"""A logged value: a number, or ``(numerator, denominator)`` so that ratios add up exactly over batches."""


class TrainingDiverged(BertkitError):
    """Too many consecutive updates had a non-finite loss or gradient."""


@dataclass
class TrainResult:
    """What a call to :func:`train` did."""

    step: int
    """Optimizer updates done in total (including those of earlier, resumed runs)."""
    stop_reason: str
    """``max_steps``, ``max_time``, ``signal`` (SIGTERM/SIGINT: a checkpoint was written, resume later) or the
    reason ``should_stop`` gave (``early_stopping`` in fine-tuning)."""
    checkpoint: Path | None
    """The last checkpoint written."""
    elapsed: float
    """Training wall-clock seconds over all resumed runs."""
    skipped_steps: int
    """Updates skipped because of a non-finite loss or gradient."""
    best_metric: float | None = None
    """Best value of ``config.best_metric`` seen."""
    history: list[dict[str, Any]] = field(default_factory=list)
    """Every record logged (train and eval), as in ``metrics.jsonl``."""
    model: nn.Module | None = None
    """The trained model, unsharded, on the main process (the model passed in, unless ``fsdp`` sharded it;
    then a gathered full copy). None on the other processes of a sharded run."""


# ---------------------------------------------------------------------------------------- RNG states
def rng_state() -> dict[str, Any]:
    """States of the python, numpy and torch (CPU and CUDA) generators, as plain values and tensors."""
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]), int(np_state[3]),
                  float(np_state[4])],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# ------------------------------------------------------------------------------------------ helpers
class _StopFlag:
    """SIGTERM/SIGINT set a flag that the loop checks between updates; a second signal interrupts at once."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopFlag":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signal is not None:  # asked twice: stop now, without the checkpoint
            raise KeyboardInterrupt
        self.signal = signum
        notice(f"received {signal.Signals(signum).name}: saving a checkpoint after this update, then stopping")

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


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


class _Window:
    """Sums of logged values over the updates since the last log line."""

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
        names = sorted(self.sums)
        flat = [float(x) for n in names for x in self.sums[n]]
        flat = distributed.all_reduce_sum(env, flat)
        return {n: (flat[2 * i] / flat[2 * i + 1] if flat[2 * i + 1] else float("nan")) for i, n in enumerate(names)}


def _default_export(model: nn.Module, directory: Path) -> None:
    if isinstance(model, PreTrainedMixin):
        save_pretrained(model, directory)
    else:
        from safetensors.torch import save_model

        directory.mkdir(parents=True, exist_ok=True)
        save_model(model, str(directory / "model.safetensors"))


# ------------------------------------------------------------------------------------------ the loop
def train(
    model: nn.Module,
    batches: Iterable[Any],
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
    """Train ``model`` on ``batches`` as ``config`` says; return when a stop condition is met.

    Args:
        model: ``forward(**batch)`` returns an object with a scalar ``.loss`` (the bertkit heads do).
        batches: stateful source of micro-batches for this process (``state_dict``/``load_state_dict``);
            a finite one defines epochs, and is re-iterated when exhausted.
        evaluate: ``evaluate(model) -> {name: value}``, called on the main process in eval mode under
            ``no_grad`` every ``eval_every`` updates, at epoch ends and at the end; values are logged with
            ``split="eval"`` and ``config.best_metric`` among them selects the model exported to ``best/``.
        output_metrics: ``output_metrics(output, batch) -> {name: value or (num, den)}`` logged with the loss.
        flops_per_token: training FLOPs per token, for the MFU column (with ``config.peak_flops``).
        extra_files: writes additional files (tokenizer) into each checkpoint directory.
        export: ``export(model, directory)`` writes a model directory (``best/``); default ``save_pretrained``.
        on_epoch_end: ``on_epoch_end(epoch, model)`` after each finished epoch (main process).
        should_stop: asked before every update on the main process; a returned reason (e.g. "early_stopping")
            ends the run there, as the end of its budget does: final checkpoint, logs and curves.
        env: the process group; default :func:`distributed.setup` from ``torchrun``'s environment.
    """
    env = env or distributed.setup(config.device)
    device = env.device
    output_dir = config.output_dir
    accum = config.accumulation(env.world_size)
    precision = resolve_precision(config.precision, device)
    export = export or _default_export
    sharded = config.fsdp and env.distributed
    if sharded and precision.scaler is not None:
        raise ConfigError("fsdp with fp16 loss scaling is not supported; use precision bf16 or fp32")
    if config.fsdp and not env.distributed and env.is_main:
        notice("fsdp shards over several processes (torchrun); with one process it trains unsharded")

    # ---------------------------------------------------------------- state: fresh or resumed
    # Rank 0 decides, so that every process resumes from the same checkpoint.
    resume_from = distributed.broadcast_object(env, _find_resume(config) if env.is_main else None)
    bare = model.to(device)

    def new_optimizer(fused: bool = True) -> torch.optim.Optimizer:
        return build_optimizer(bare, config.optimizer, config.lr, config.weight_decay,
                               (config.adam_beta1, config.adam_beta2), config.adam_eps, fused=fused)

    step, epoch, elapsed_before, skipped, tokens_total, best = 0, 0, 0.0, 0, 0, None
    seed_everything(config.seed + env.rank)
    state: dict[str, Any] = {}
    if resume_from is not None:
        state = load_checkpoint(resume_from, bare, map_location=device)
    optimizer_state = state.get("optimizer")
    gathered = None
    if sharded:
        from bertkit.training import sharding

        if optimizer_state is not None and not sharding.keyed_by_name(optimizer_state):  # an unsharded run's
            optimizer_state = sharding.by_name(bare, new_optimizer(), optimizer_state)
        gathered = sharding.Gathered(bare, env.is_main)
        sharding.shard(bare)
    optimizer = new_optimizer(fused=not sharded)  # after sharding: it must hold the sharded parameters
    if optimizer_state is not None:
        _load_optimizer_state(bare, optimizer, optimizer_state)
    if resume_from is not None:
        if precision.scaler is not None and state.get("scaler"):
            precision.scaler.load_state_dict(state["scaler"])
        step, epoch = int(state["step"]), int(state["epoch"])
        elapsed_before, skipped = float(state["elapsed"]), int(state["skipped_steps"])
        tokens_total, best = int(state["tokens"]), state.get("best")
        if hasattr(batches, "load_state_dict"):
            batches.load_state_dict(state["loader"])
        if isinstance(getattr(batches, "epoch", None), int):
            epoch = batches.epoch  # type: ignore[attr-defined]
        rngs = state["rng"]
        if len(rngs) == env.world_size:
            set_rng_state(rngs[env.rank])
        else:
            warnings.warn(f"resuming {len(rngs)}-process checkpoint on {env.world_size} processes: data order is "
                          "kept, dropout streams are re-seeded", stacklevel=2)
            seed_everything(config.seed + env.rank + 1_000_003 * step)
        if env.is_main:
            notice(f"resumed from {resume_from} at step {step}")
    model_for_step: nn.Module = bare
    if env.distributed and not sharded:
        model_for_step = nn.parallel.DistributedDataParallel(
            bare, device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=config.ddp_find_unused_parameters)
    bare.train()

    logger = MetricsLogger(output_dir, enabled=env.is_main, tensorboard=config.tensorboard,
                           resume_step=step if resume_from is not None else None,
                           resume_history=state.get("history") if resume_from is not None else None)
    if env.is_main:
        notice(f"training: micro-batch {config.micro_batch_size} x {accum} accumulation x {env.world_size} "
               f"process(es) = global batch {config.micro_batch_size * accum * env.world_size}; precision "
               f"{precision.name} on {device}; optimizer {config.optimizer}")
    params = [p for p in bare.parameters() if p.requires_grad]
    warmup_fixed = config.warmup_steps
    run_start = time.perf_counter()
    elapsed = lambda: elapsed_before + time.perf_counter() - run_start  # noqa: E731
    last_saved: Path | None = resume_from
    last_saved_step = step if resume_from is not None else -1
    bad_in_a_row = 0
    window = _Window()
    progress = _progress_bar(config, step, enabled=env.is_main)
    iterator = iter(batches)
    epoch_ended = False

    def next_batch() -> Any:
        nonlocal iterator, epoch_ended
        try:
            return next(iterator)
        except StopIteration:
            epoch_ended = True
            iterator = iter(batches)
            try:
                return next(iterator)
            except StopIteration:
                raise BertkitError("the batch source yielded no batches; is the dataset empty?") from None

    def unsharded() -> nn.Module | None:
        """The full model on the main process (collective under FSDP: every process calls it)."""
        return gathered.refresh(bare) if gathered is not None else bare

    def save(reason: str) -> Path | None:
        nonlocal last_saved, last_saved_step
        rngs = distributed.all_gather_object(env, rng_state())
        snapshot = unsharded()
        path = None
        if sharded:
            from bertkit.training import sharding

            optimizer_state = sharding.full_optimizer_state(bare, optimizer)
        else:
            optimizer_state = optimizer.state_dict() if env.is_main else None
        if env.is_main:
            trainer_state = {
                "format": 1, "step": step, "epoch": epoch, "elapsed": elapsed(), "skipped_steps": skipped,
                "tokens": tokens_total, "best": best, "optimizer": optimizer_state,
                "scaler": precision.scaler.state_dict() if precision.scaler is not None else {},
                "rng": rngs, "loader": batches.state_dict() if hasattr(batches, "state_dict") else {},
                "history": logger.history, "config": config.to_dict(), "world_size": env.world_size,
                "reason": reason,
            }
            path = save_checkpoint(output_dir, step, snapshot, trainer_state, extra_files=extra_files,
                                   keep_last=config.keep_last)
        distributed.barrier(env)
        last_saved, last_saved_step = path or last_saved, step
        return path

    # A checkpoint saved right after an evaluation at its step already holds that evaluation: resuming
    # there (e.g. at the very end of a run) must not evaluate and log it a second time.
    last_eval_step = step if resume_from is not None and any(
        r.get("split") == "eval" and r.get("step") == step for r in state.get("history") or []) else -1

    # Callers may give ``evaluate`` on the main process only; every process must agree on when to gather.
    evaluates = distributed.broadcast_object(env, evaluate is not None)

    def run_evaluation() -> None:
        nonlocal best, last_eval_step
        if not evaluates or last_eval_step == step:
            return
        last_eval_step = step
        evaluated = unsharded()
        if env.is_main:
            evaluated.eval()
            # Evaluation must not move the training RNG streams: resume would diverge otherwise.
            saved_rng = rng_state()
            with torch.no_grad(), precision.autocast():
                results = dict(evaluate(evaluated))
            set_rng_state(saved_rng)
            bare.train()
            logger.log({"step": step, "split": "eval", "epoch": epoch, **results})
            if config.best_metric is not None and config.best_metric in results:
                value = float(results[config.best_metric])
                better = best is None or (value > best if config.best_mode == "max" else value < best)
                if better:
                    best = value
                    export(evaluated, output_dir / "best")
            if progress is not None:
                progress.write(f"step {step} eval: " + ", ".join(f"{k} {v:.4g}" for k, v in results.items()))
        distributed.barrier(env)

    stop_reason = "max_steps"
    with _StopFlag() as stop:
        while True:
            # --------------------------------------------------------- agree on stopping
            time_up = config.max_time is not None and elapsed() >= config.max_time
            asked = should_stop() if should_stop is not None and env.is_main else None
            flags = distributed.all_reduce_max(env, [float(stop.signal is not None), float(time_up),
                                                     float(asked is not None)])
            if config.max_steps is not None and step >= config.max_steps:
                stop_reason = "max_steps"
                break
            if flags[0]:
                stop_reason = "signal"
                break
            if flags[1]:
                stop_reason = "max_time"
                break
            if flags[2]:
                stop_reason = asked or "should_stop"  # other ranks only know that the main process asked
                break

            # --------------------------------------------------------- one update
            total = config.max_steps or _estimated_total(step, elapsed(), config.max_time)
            warmup = warmup_fixed if warmup_fixed is not None else int((config.warmup_ratio or 0) * total)
            lr = config.lr * lr_multiplier(step, schedule=config.schedule, warmup_steps=warmup,
                                           total_steps=total, power=config.schedule_power)
            set_lr(optimizer, lr)
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            update_tokens = 0
            for micro in range(accum):
                batch = _to_device(next_batch(), device)
                if sharded:  # reduce-scatter gradients on the last micro-batch only
                    bare.set_requires_gradient_sync(micro == accum - 1)
                sync = (model_for_step.no_sync() if env.distributed and not sharded and micro < accum - 1
                        else contextlib.nullcontext())
                with sync:
                    with precision.autocast():
                        output = model_for_step(**batch)
                    loss = output.loss.float()
                    scaled = loss / accum
                    if precision.scaler is not None:
                        scaled = precision.scaler.scale(scaled)
                    scaled.backward()
                loss_sum += loss.detach()
                update_tokens += _count_tokens(batch)
                if output_metrics is not None:
                    for name, value in output_metrics(output, batch).items():
                        window.add(name, value)
            if precision.scaler is not None:
                precision.scaler.unscale_(optimizer)
            if config.clip_grad_norm:
                grad_norm = nn.utils.clip_grad_norm_(params, config.clip_grad_norm)
            else:
                grad_norm = nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
            if hasattr(grad_norm, "full_tensor"):  # FSDP: a DTensor norm over the shards
                grad_norm = grad_norm.full_tensor()
            loss_value = float(loss_sum) / accum
            finite_loss = math.isfinite(loss_value)
            finite = finite_loss and bool(torch.isfinite(grad_norm))
            if precision.scaler is not None:
                precision.scaler.step(optimizer)  # skips the update itself on inf/nan gradients
                precision.scaler.update()
            elif finite:
                optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tokens_total += update_tokens * env.world_size
            window.tokens += update_tokens

            if finite:
                step += 1
                bad_in_a_row = 0
                window.add("loss", loss_value)
                window.add("grad_norm", float(grad_norm))
                window.updates += 1
            else:
                skipped += 1
                # fp16 overflows at a too-high loss scale are routine; only a non-finite loss counts as failure.
                if precision.scaler is None or not finite_loss:
                    bad_in_a_row += 1
                    warnings.warn(f"non-finite loss or gradient at step {step} (loss {loss_value}, grad norm "
                                  f"{float(grad_norm)}): update skipped ({skipped} so far)", stacklevel=2)
                    if bad_in_a_row >= config.max_bad_steps:
                        raise TrainingDiverged(
                            f"{bad_in_a_row} consecutive updates had a non-finite loss or gradient; stopped. Last "
                            f"good checkpoint: {last_saved or 'none'}. Lower --lr, raise warmup, or use fp32/bf16"
                        )
                continue

            # --------------------------------------------------------- epoch end, logging, eval, save
            loader_epoch = getattr(batches, "epoch", None)
            if isinstance(loader_epoch, int):  # sources that count epochs tell us at the epoch's last batch
                epoch_ended, epoch_before, epoch = loader_epoch != epoch, epoch, loader_epoch
            elif epoch_ended:
                epoch_before, epoch = epoch, epoch + 1
            if epoch_ended:
                epoch_ended = False
                if env.is_main and on_epoch_end is not None:
                    on_epoch_end(epoch_before, bare)
                if config.eval_each_epoch and not config.eval_every:
                    run_evaluation()
            if progress is not None:
                progress.update(1)
            if step % config.log_every == 0 or (config.max_steps is not None and step == config.max_steps):
                _log_window(window, env, logger, progress, step, lr, config, flops_per_token, epoch, elapsed())
                window = _Window()
            if config.eval_every and step % config.eval_every == 0:
                run_evaluation()
            if config.save_every and step % config.save_every == 0:
                save("periodic")

    if progress is not None:
        progress.close()
    if stop_reason != "signal":
        run_evaluation()
    if last_saved_step != step:  # the same decision on every process (last_saved is the main's only)
        save(stop_reason)
    trained = unsharded()
    logger.close(plot=config.plot)
    if env.is_main:
        notice(f"stopped ({stop_reason}) at step {step} after {elapsed():.0f}s; checkpoint {last_saved}")
    return TrainResult(step=step, stop_reason=stop_reason, checkpoint=last_saved, elapsed=elapsed(),
                       skipped_steps=skipped, best_metric=best, history=list(logger.history), model=trained)


def _load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """An optimizer state as ``Optimizer.state_dict`` writes it, or keyed by parameter name (FSDP runs)."""
    from bertkit.training import sharding

    if sharding.keyed_by_name(state):
        sharding.load_optimizer_state(model, optimizer, state)
    else:
        optimizer.load_state_dict(state)


def _find_resume(config: TrainConfig) -> Path | None:
    if config.resume is None:
        if list_checkpoints(config.output_dir):
            raise CheckpointError(
                f"{config.output_dir} already holds checkpoints; pass --resume to continue that run or choose "
                "another --output"
            )
        return None
    if config.resume == "auto":
        return latest_valid_checkpoint(config.output_dir)
    path = Path(config.resume)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} does not exist")
    return path


def _estimated_total(step: int, elapsed: float, budget: float | None) -> int:
    """Total updates a time budget allows, extrapolated from the pace so far (schedules need a length)."""
    if budget is None or step < 5 or elapsed <= 0:
        return 10**9 if step < 5 else step + 1
    return max(step + 1, int(step * budget / elapsed))


def _progress_bar(config: TrainConfig, step: int, enabled: bool):
    if not (enabled and config.progress):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=config.max_steps, initial=step, unit="step", dynamic_ncols=True, desc="train")


def _log_window(window: _Window, env: distributed.DistEnv, logger: MetricsLogger, progress, step: int,
                lr: float, config: TrainConfig, flops_per_token: float | None, epoch: int, elapsed: float) -> None:
    values = window.reduce(env)
    seconds = max(time.perf_counter() - window.start, 1e-9)
    tokens = distributed.all_reduce_sum(env, [float(window.tokens)])[0]
    record: dict[str, Any] = {"step": step, "split": "train", **values, "lr": lr, "epoch": epoch,
                              "elapsed_s": round(elapsed, 3), "tokens_per_s": tokens / seconds}
    if flops_per_token and config.peak_flops:
        record["mfu"] = tokens / seconds * flops_per_token / (config.peak_flops * env.world_size)
    logger.log(record)
    if progress is not None:
        postfix = {"loss": f"{values.get('loss', float('nan')):.4f}", "tok/s": f"{record['tokens_per_s']:.0f}"}
        if "mfu" in record:
            postfix["mfu"] = f"{record['mfu']:.1%}"
        if config.max_time is not None:
            postfix["left"] = f"{max(config.max_time - elapsed, 0):.0f}s"
        progress.set_postfix(postfix)
