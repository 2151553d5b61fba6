"""Training machinery: optimizers and schedules, the shared Trainer, checkpoints, distributed, pre-training.

``bertkit.training.pretrain`` (the pre-training entry point) is imported on demand: it needs the model and
the data pipeline, which fine-tuning users of the loop do not. The batch-source contract the Trainer reads
(``BatchSource``, ``ResumableBatches``) lives one floor down, in ``bertkit.data.batch_sources``, because the
pre-training loader implements it too.
"""

from bertkit.data.batch_sources import BatchSource, ResumableBatches, Stateful
from bertkit.training.checkpoint import (
    latest_valid_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    validate_checkpoint,
)
from bertkit.training.loop import Hooks, Trainer, TrainingDiverged, TrainResult, train
from bertkit.training.optim import Lamb, build_optimizer, lr_multiplier, param_groups
from bertkit.training.train_config import TrainConfig, parse_duration

__all__ = [
    "BatchSource",
    "Hooks",
    "Lamb",
    "ResumableBatches",
    "Stateful",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "TrainingDiverged",
    "build_optimizer",
    "latest_valid_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "lr_multiplier",
    "param_groups",
    "parse_duration",
    "save_checkpoint",
    "train",
    "validate_checkpoint",
]
