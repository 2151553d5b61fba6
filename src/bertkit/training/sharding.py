"""Fully sharded data parallelism (FSDP2, ``torch.distributed.fsdp.fully_shard``), opt-in with ``fsdp=True``.

Each process holds 1/W of the parameters, gradients and optimizer state; a layer's full weights exist only
during its forward and backward. Every encoder layer is a shard group of its own; the embeddings, the
pooler and the heads (the tied MLM decoder with its embedding) form the root group.

Checkpoints are the same as without FSDP: full Hugging Face weights, and the optimizer state in full, keyed
by parameter name, both gathered to the main process. A sharded run therefore resumes on any number of
processes, sharded or not, and a checkpoint of an unsharded run resumes sharded. Evaluation and the
``best/`` export run on the main process over a gathered full copy of the model (``Gathered``).
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.fsdp import FSDPModule, fully_shard

_TO_MAIN = StateDictOptions(full_state_dict=True, cpu_offload=True)  # gathered on rank 0, empty elsewhere
_FULL = StateDictOptions(full_state_dict=True)


def shard(model: nn.Module) -> nn.Module:
    """Shard ``model`` in place: each layer of a bertkit encoder, then the rest (any other model: as one group)."""
    from bertkit.weights import encoder_and_prefix

    try:
        encoder, _ = encoder_and_prefix(model)
    except TypeError:  # not a bertkit model: one group
        encoder = None
    stack = getattr(encoder, "encoder", encoder)  # BERT keeps its layers in an Encoder, ModernBERT in itself
    for layer in getattr(stack, "layers", ()):
        fully_shard(layer)
    fully_shard(model)
    # The loop only reads model outputs (mlm_logits is a view), never changes them in place.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    return model


def set_gradient_sync(model: nn.Module, sync: bool) -> None:
    """Whether the next backward of sharded ``model`` reduce-scatters its gradients (off while accumulating)."""
    assert isinstance(model, FSDPModule)  # shard() made it one
    model.set_requires_gradient_sync(sync)


def full_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The whole optimizer state keyed by parameter name, on the main process (collective: every rank calls)."""
    return get_optimizer_state_dict(model, optimizer, options=_TO_MAIN)


def load_optimizer_state(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load a full, name-keyed optimizer state (every rank passes all of it; each keeps its shard)."""
    set_optimizer_state_dict(model, optimizer, optim_state_dict=state, options=_FULL)


def keyed_by_name(state: dict[str, Any]) -> bool:
    """Whether an optimizer state is name-keyed (this module's) rather than ``Optimizer.state_dict``'s ids."""
    return any(isinstance(key, str) for key in state.get("state", {})) or any(
        isinstance(p, str) for group in state.get("param_groups", []) for p in group.get("params", [])
    )


def by_name(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> dict[str, Any]:
    """An unsharded ``optimizer.state_dict()`` ``state`` of ``model``, re-keyed by parameter name."""
    optimizer.load_state_dict(state)
    return get_optimizer_state_dict(model, optimizer, options=_FULL)


class Gathered:
    """A full, unsharded copy of a sharded model on the main process, refreshed on demand.

    ``refresh()`` is collective (every rank calls it); it returns the copy on the main process, None elsewhere.
    """

    def __init__(self, model: nn.Module, is_main: bool) -> None:
        # Taken before sharding; it holds no gradients or optimizer state, only weights.
        self.copy = copy.deepcopy(model) if is_main else None

    def refresh(self, sharded: nn.Module) -> nn.Module | None:
        state = get_model_state_dict(sharded, options=_TO_MAIN)
        if self.copy is None:
            return None
        device = next(self.copy.parameters()).device
        self.copy.load_state_dict(
            {name: t.to(device) if isinstance(t, torch.Tensor) else t for name, t in state.items()}
        )
        return self.copy
