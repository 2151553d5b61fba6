"""What the trainer saves besides the weights, and where it resumes from.

Exactness: every source of randomness the loop touches (python, numpy and torch generators of every
process, the batch source's position, the optimizer and scaler) goes into each checkpoint, so a run that
is killed and resumed on CPU retraces the uninterrupted run bit for bit.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit.errors import CheckpointError
from bertkit.training.checkpoint import latest_valid_checkpoint, list_checkpoints
from bertkit.training.train_config import TrainConfig

STATE_FORMAT = 1
"""Version of ``trainer_state.pt``; its keys: format, step, epoch, elapsed, skipped_steps, tokens, best,
optimizer, scaler, rng (one entry per process), loader, history, config, world_size, reason."""


def rng_state() -> dict[str, Any]:
    """States of the python, numpy and torch (CPU and CUDA) generators, as plain values and tensors."""
    np_state: Any = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [
            np_state[0],
            torch.from_numpy(np_state[1].astype(np.int64)),
            int(np_state[2]),
            int(np_state[3]),
            float(np_state[4]),
        ],
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


def find_resume(config: TrainConfig) -> Path | None:
    """The checkpoint ``config.checkpointing.resume`` names (``auto``: the latest valid one), or None for a fresh run."""
    if config.checkpointing.resume is None:
        if list_checkpoints(config.output_dir):
            raise CheckpointError(
                f"{config.output_dir} already holds checkpoints; pass --resume to continue that run or choose "
                "another --output"
            )
        return None
    if config.checkpointing.resume == "auto":
        return latest_valid_checkpoint(config.output_dir)
    path = Path(config.checkpointing.resume)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint {path} does not exist")
    return path
