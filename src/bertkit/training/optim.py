"""Optimizers and learning-rate schedules for BERT.

* Parameter groups: decoupled weight decay on weight matrices and embeddings only; biases and LayerNorm
  parameters are excluded, as in google-research/bert (names matching ``bias``/``LayerNorm``/``layer_norm``)
  and NVIDIA's recipes (every 1-D tensor, i.e. gamma/beta/bias).
* AdamW: ``torch.optim.AdamW`` with BERT's eps 1e-6 (bias-corrected, as Hugging Face and NVIDIA train).
* LAMB: written here (PyTorch ships none), layer-wise trust ratio on top of Adam moments (You et al. 2019),
  NVIDIA's variant with bias correction; meant for global batches in the thousands.
* Schedules are pure functions of the update count, so their state is the step stored in a checkpoint.
"""

from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Iterable
from typing import Literal, overload

import torch
from torch import nn

from bertkit.errors import ConfigError

_NO_DECAY = re.compile(r"(bias|LayerNorm|layer_norm|layernorm|\bnorm\b)", re.IGNORECASE)

OptimizerName = Literal["adamw", "lamb"]
ScheduleName = Literal["linear", "poly", "cosine", "constant", "wsd", "onecycle"]
OPTIMIZERS: tuple[str, ...] = typing.get_args(OptimizerName)
SCHEDULES: tuple[str, ...] = typing.get_args(ScheduleName)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed weights, and biases/LayerNorm (and any other 1-D tensor) without decay.

    Shared (tied) parameters appear once: ``named_parameters`` already de-duplicates them.
    """
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim < 2 or _NO_DECAY.search(name) else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


class Lamb(torch.optim.Optimizer):
    """LAMB: Adam moments, decoupled weight decay, and a per-tensor trust ratio ||w|| / ||update||.

    Gradient clipping is the training loop's job (global norm before ``step``), as in NVIDIA's recipe.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        bias_correction: bool = True,
    ) -> None:
        if lr < 0 or eps <= 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1) or weight_decay < 0:
            raise ConfigError(f"invalid LAMB hyperparameters lr={lr} betas={betas} eps={eps} wd={weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, bias_correction=bias_correction)
        super().__init__(params, defaults)

    # As torch.optim.Optimizer.step: the closure's loss, None without a closure.
    @overload
    def step(self, closure: None = None) -> None: ...
    @overload
    def step(self, closure: Callable[[], float]) -> float: ...

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss: float | None = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if not state:
                    # step as a tensor, like torch's Adam, so state_dict is tensors only.
                    state["step"] = torch.zeros((), dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                step = int(state["step"].item())
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                if group["bias_correction"]:
                    m_hat = exp_avg / (1 - beta1**step)
                    v_hat = exp_avg_sq / (1 - beta2**step)
                else:
                    m_hat, v_hat = exp_avg, exp_avg_sq
                update = m_hat / (v_hat.sqrt() + group["eps"])
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                w_norm = p.norm()
                u_norm = update.norm()
                # Trust ratio 1 where either norm is zero (fresh zero-initialised biases, zero updates).
                trust = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.add_(update * trust, alpha=-group["lr"])
        return loss


def build_optimizer(
    model: nn.Module,
    name: str,
    lr: float,
    weight_decay: float = 0.01,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-6,
    fused: bool = True,
) -> torch.optim.Optimizer:
    """``adamw`` or ``lamb`` over :func:`param_groups` of ``model``."""
    groups = param_groups(model, weight_decay)
    if name == "adamw":
        # fused: one kernel per group for the whole update (CPU and CUDA), the fastest on both; it matters for
        # short fine-tuning steps, where the update is a large share of the time (docs/experiments.md).
        # Sharded FSDP parameters take the default implementation.
        return torch.optim.AdamW(
            groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True if fused else None
        )
    if name == "lamb":
        return Lamb(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    raise ConfigError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")


ONECYCLE_START = 1 / 25
"""The one-cycle schedule's first learning rate, as a share of the peak (PyTorch's ``OneCycleLR`` default)."""


def lr_multiplier(
    step: int, *, schedule: str, warmup_steps: int, total_steps: int, power: float = 1.0, decay_ratio: float = 0.2
) -> float:
    """The factor applied to the peak learning rate for the update with index ``step`` (0-based).

    * ``linear`` (google-research/bert): ``(1 - step/total)``, overridden by ``step/warmup`` during warmup,
      so the very first update has learning rate 0 exactly as in the reference.
    * ``poly`` (NVIDIA's PolyWarmUpScheduler): after warmup, ``((total - step)/(total - warmup)) ** power``.
    * ``cosine``: half a cosine from the end of warmup to 0. ``constant``: warmup then flat.
    * ``wsd`` (warmup-stable-decay): warmup, flat, then a linear decay to 0 over the last ``decay_ratio`` of the
      updates.
    * ``onecycle`` (Smith's one-cycle, as ``torch.optim.lr_scheduler.OneCycleLR`` with cosine annealing): half a
      cosine up from ``1/25`` of the peak over the warmup, then half a cosine down to 0.
    """
    if schedule not in SCHEDULES:
        raise ConfigError(f"unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}")
    total = max(total_steps, 1)
    if schedule == "onecycle":
        if warmup_steps > 0 and step < warmup_steps:
            rise = 0.5 * (1.0 - math.cos(math.pi * step / warmup_steps))
            return ONECYCLE_START + (1.0 - ONECYCLE_START) * rise
    elif schedule == "wsd":
        decay_start = total - int(decay_ratio * total)
        if step >= max(decay_start, warmup_steps):
            return max(0.0, (total - step) / max(total - max(decay_start, warmup_steps), 1))
    if warmup_steps > 0 and step < warmup_steps:
        return step / warmup_steps
    if schedule in ("constant", "wsd"):
        return 1.0
    if schedule == "linear":
        return max(0.0, 1.0 - step / total)
    span = max(total - warmup_steps, 1)
    progress = min(max((step - warmup_steps) / span, 0.0), 1.0)
    if schedule == "poly":
        return (1.0 - progress) ** power
    return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine and onecycle


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
