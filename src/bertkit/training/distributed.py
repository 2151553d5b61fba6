"""Data-parallel helpers: set up ``torch.distributed`` from ``torchrun``'s environment, and small collectives.

Launch: ``torchrun --nproc_per_node=N -m bertkit.cli pretrain ...`` (one node) or, on each of M nodes,
``torchrun --nnodes=M --node_rank=i --nproc_per_node=N --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 ...``.
Without ``torchrun`` (no ``WORLD_SIZE`` in the environment) everything here is a single-process no-op.
"""

from __future__ import annotations

import atexit
import os
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits: global ``rank`` of ``world_size``, ``local_rank`` on its node, and its device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def setup(device: str | None = None) -> DistEnv:
    """Initialise the process group if launched by ``torchrun`` (gloo on CPU, nccl on GPU) and pick the device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        dev = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    else:
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", local_rank)
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        # Destroy the group before the interpreter's finalisation, whichever way the program ends (torch
        # warns about a group left alive), for pretrain, finetune and any script of the user's alike.
        atexit.register(teardown)
    return DistEnv(rank, world_size, local_rank, dev)


def teardown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# Why the collectives below wait for gloo to let go of their tensors (``_settle``): gloo runs a collective on a
# worker thread, which drops the work (and its tensors) a moment after the caller saw it complete, and a
# ``dist.barrier`` keeps the works still in flight alive until the barrier is freed in turn. A tensor whose
# Python object is gone by then is freed on that thread, which must take the GIL to do it; once the
# interpreter is finalising, taking the GIL ends the thread and the process aborts ("terminate called without
# an active exception"; docs/experiments.md, "gloo at exit"). torch's DDP keeps the gloo group,
# and so its threads, alive past ``destroy_process_group``. Hence: no ``dist.barrier`` on gloo (an all-reduce
# of one number synchronises as well), and each all-reduce returns once gloo holds none of its tensor.


def barrier(env: DistEnv) -> None:
    if not env.distributed:
        return
    if _gloo():
        all_reduce_sum(env, [0.0])
    else:
        dist.barrier()


def all_reduce_max(env: DistEnv, values: list[float]) -> list[float]:
    """Element-wise max over processes (used to agree on stop flags)."""
    return _all_reduce(env, values, dist.ReduceOp.MAX)


def all_reduce_sum(env: DistEnv, values: list[float]) -> list[float]:
    """Element-wise sum over processes (metric numerators and denominators)."""
    return _all_reduce(env, values, dist.ReduceOp.SUM)


def all_gather_object(env: DistEnv, obj: T) -> list[T]:
    """``[obj of rank 0, obj of rank 1, ...]`` (a one-element list in a single process)."""
    if not env.distributed:
        return [obj]
    out: list[Any] = [None] * env.world_size  # filled with every process's obj
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(env: DistEnv, obj: T, src: int = 0) -> T:
    """Process ``src``'s ``obj`` on every process."""
    if not env.distributed:
        return obj
    box: list[Any] = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def _all_reduce(env: DistEnv, values: list[float], op: dist.ReduceOp.RedOpType) -> list[float]:
    if not env.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=_comm_device(env))
    dist.all_reduce(tensor, op=op)
    _settle(tensor)
    return tensor.tolist()


def _settle(*tensors: torch.Tensor, timeout: float = 10.0) -> None:
    """Wait (GIL released) until gloo's worker threads hold none of ``tensors``: see the note above."""
    if not _gloo():
        return
    deadline = time.monotonic() + timeout
    # _use_count (how many owners hold the tensor) is a private Tensor method that torch's stubs leave out.
    while any(t._use_count() > 1 for t in tensors) and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.0002)


def _gloo() -> bool:
    return dist.get_backend() == "gloo"


def _comm_device(env: DistEnv) -> torch.device:
    return env.device if dist.get_backend() == "nccl" else torch.device("cpu")
