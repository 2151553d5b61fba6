"""Fine-tuning, evaluation and prediction for every task family, on the one shared training loop.

``finetune(FinetuneConfig(...))`` reads and checks the data through ``bertkit.tasks`` (every bad-input error
is raised before anything is written), loads the starting model with the task's head (a fresh head is
initialised with a one-line notice), trains with :func:`bertkit.training.loop.train` on length-grouped
batches (each batch pads only to its own longest feature), evaluates on dev after every epoch, keeps the
best model by the task's main metric, optionally stops early, and writes the output directory:

* the fine-tuned model in Hugging Face layout (``config.json`` with ``id2label``/``label2id``,
  ``model.safetensors``, tokenizer files), loadable by bertkit and ``transformers.BertFor...``,
* ``metrics.json`` (dev metrics of the saved model, per-epoch records, timings), ``metrics.jsonl`` (the
  training log), ``curves.png`` (when matplotlib is installed), ``finetune_config.json``,
* ``dev_predictions/`` (the task's prediction files for dev, from the saved model).

Training runs in ``<output>.partial/`` (checkpoints, logs); the output directory is assembled under a
temporary name and renamed when complete, so a crash never leaves a half-written model. After a crash or
a signal, ``resume=True`` continues from the last checkpoint in ``<output>.partial/``.

``evaluate_model`` and ``predict`` run a fine-tuned model directory on a labelled file (metrics) or any
file in the task's format (one JSON line per input, with scores).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit.config import BertConfig
from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.io import atomic_write_text
from bertkit.tasks import HEAD_TO_TASK, LengthGroupedBatchSampler, Task, get_task
from bertkit.tasks.base import Feature, write_jsonl
from bertkit.tasks.ner import IGNORE_INDEX
from bertkit.training import distributed
from bertkit.training.config import PRECISIONS, TrainConfig, read_options_file
from bertkit.training.loop import TrainResult, train
from bertkit.training.metrics import notice
from bertkit.weights import save_pretrained

TASK_NAMES = ("classification", "regression", "ner", "qa")
"""Values of ``FinetuneConfig.task``; ``regression`` is classification with one output and MSE."""

CONFIG_KEY = "bertkit_finetune"
"""Key in a fine-tuned model's ``config.json`` holding the task, its options and ``max_seq_length``, so that
``evaluate``/``predict`` read files the way training did (``transformers`` ignores it)."""

# Fine-tuning decays the rate from the end of the warmup, as transformers does, not from step 0 as Google BERT
# does: Google's runs ~10 % below the peak throughout; on CoNLL-2003 that cost 0.002-0.004 entity F1 on each
# seed tried (docs/finetuning.md). Pre-training keeps Google's schedule.
DEFAULT_SCHEDULE = "poly"

_DEFAULTS = {  # Google BERT's recipes (bert-algorithms.md section 8): its README's SQuAD run for BERT-Base differs
    "qa": {"lr": 3e-5, "epochs": 2.0, "max_seq_length": 384, "micro_batch_size": 12},
    "other": {"lr": 5e-5, "epochs": 3.0, "max_seq_length": 128, "micro_batch_size": 32},
}


# ------------------------------------------------------------------------------------------ config
@dataclass
class FinetuneConfig:
    """Everything a fine-tuning run needs; the CLI and TOML/YAML config files fill the same fields."""

    task: str
    """``classification``, ``regression``, ``ner`` or ``qa``."""
    model: str
    """Starting model: a Hugging Face-layout BERT directory with its tokenizer files."""
    train_file: str
    """Training data in the task's format (TSV/CSV/JSONL table, CoNLL columns, SQuAD JSON)."""
    output: str
    """Directory to write the fine-tuned model, metrics and logs to (must not exist unless ``overwrite``)."""
    dev_file: str | None = None
    """Labelled dev data: evaluated after each epoch; its main metric picks the saved model."""
    task_options: dict[str, Any] = field(default_factory=dict)
    """Options of the task class (``text_column``, ``text_pair_column``, ``label_column``, ``main_metric``,
    ``doc_stride``, ``window_stride``, ``long_text``...); see ``docs/finetuning.md``."""
    max_seq_length: int | None = None
    """Longest feature in tokens, specials included; default 128 (384 for ``qa``)."""
    epochs: float | None = None
    """Passes over the training features; default 3 (2 for ``qa``)."""
    max_steps: int | None = None
    """Stop after this many optimizer updates instead (the schedule spans them); for bounded runs."""
    lr: float | None = None
    """Peak learning rate after warmup, linear decay to 0; default 5e-5 (3e-5 for ``qa``)."""
    micro_batch_size: int | None = None
    """Features per forward/backward pass; default 32 (12 for ``qa``)."""
    global_batch_size: int | None = None
    """Features per optimizer update (a multiple of ``micro_batch_size``); default ``micro_batch_size``."""
    warmup_ratio: float = 0.1
    """Share of the updates with linear warmup."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay (not on biases and LayerNorm)."""
    clip_grad_norm: float | None = 1.0
    """Global gradient-norm clip; ``None`` or 0 disables it."""
    seed: int = 42
    """Seed of the head's initialisation, dropout and the batch order."""
    precision: str = "auto"
    """``auto`` (bf16 on a GPU that has it, else fp32), ``fp32``, ``bf16`` or ``fp16`` (CUDA)."""
    group_by_length: bool | None = None
    """``True``: batch features of similar length (random order of batches), so that little compute goes to
    padding. ``False``: plain random batches, whose padding the model skips in training (``Unpadded``), at
    about 1.2x the cost of grouped ones. Default: random for ``regression`` (a score that correlates with
    length makes length-grouped batches a biased sample: docs/finetuning.md), grouped for the others."""
    eval_batch_size: int = 64
    """Features per forward pass when evaluating."""
    early_stopping_patience: int | None = None
    """Stop after this many evaluations in a row without a better main metric (needs ``dev_file``)."""
    max_train_examples: int | None = None
    """Use only the first N training examples (quick runs, benchmarks)."""
    overwrite: bool = False
    """Replace an existing output directory."""
    resume: bool = False
    """Continue an interrupted run from the last checkpoint in ``<output>.partial/``."""
    device: str | None = None
    """``cpu``, ``cuda``, ``cuda:N``; default this process's GPU if any, else CPU."""
    progress: bool = True
    """Show a progress bar."""
    log_every: int = 10
    """Log the training loss every N updates."""
    save_every: int = 0
    """Write a resumable checkpoint every N updates (0: only at the end and on SIGTERM/SIGINT)."""
    train_options: dict[str, Any] = field(default_factory=dict)
    """Any other :class:`~bertkit.training.config.TrainConfig` option (``optimizer``, ``schedule``,
    ``adam_eps``, ``tensorboard``...)."""

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise ConfigError(f"unknown task {self.task!r}; choose one of {', '.join(TASK_NAMES)}")
        defaults = _DEFAULTS["qa" if self.task == "qa" else "other"]
        for name, default in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, default)
        for name in ("micro_batch_size", "eval_batch_size", "max_seq_length", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        for name in ("global_batch_size", "max_steps", "early_stopping_patience", "max_train_examples"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.epochs <= 0:
            raise ConfigError(f"epochs must be positive, got {self.epochs}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; choose one of {', '.join(PRECISIONS)}")
        if self.early_stopping_patience is not None and self.dev_file is None:
            raise ConfigError("early stopping needs a dev set: give --dev or drop --early-stopping-patience")
        if self.overwrite and self.resume:
            raise ConfigError("give --overwrite or --resume, not both")
        reserved = {"output_dir", "micro_batch_size", "global_batch_size", "lr", "warmup_ratio", "weight_decay",
                    "clip_grad_norm", "seed", "precision", "max_steps", "num_epochs", "steps_per_epoch",
                    "best_metric", "best_mode", "resume", "device", "progress", "log_every", "save_every"}
        known = {f.name for f in dataclasses.fields(TrainConfig)}
        for key in self.train_options:
            if key in reserved:
                raise ConfigError(f"set {key} as a fine-tuning option, not in train_options")
            if key not in known:
                raise ConfigError(f"unknown training option {key!r} in train_options")

    @property
    def partial_dir(self) -> Path:
        """Where training runs (checkpoints, logs) before the output directory is assembled."""
        out = Path(self.output)
        return out.with_name(out.name + ".partial")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_FIELDS = {f.name for f in dataclasses.fields(FinetuneConfig)}
_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Options from a TOML (or YAML) file: ``FinetuneConfig`` fields as flat keys, a ``[task_options]``
    table, and other ``TrainConfig`` options flat or in a ``[train]`` table. ``train``/``dev`` are accepted
    for ``train_file``/``dev_file``."""
    data = read_options_file(path)
    data = {k.replace("-", "_"): v for k, v in data.items()}
    nested = data.pop("train", None)
    if isinstance(nested, str):  # ``train = "file"``: the training data
        data["train_file"] = nested
        nested = None
    if "dev" in data:
        data["dev_file"] = data.pop("dev")
    options: dict[str, Any] = {}
    train_options = dict(data.pop("train_options", {}) or {})
    for key, value in {**data, **(nested or {})}.items():
        if key in _FIELDS:
            options[key] = value
        elif key in _TRAIN_FIELDS:
            train_options[key] = value
        else:
            raise ConfigError(f"{path}: unknown option {key!r}")
    if train_options:
        options["train_options"] = train_options
    return options


# ------------------------------------------------------------------------------------------ tasks
def make_task(name: str, options: Mapping[str, Any] | None = None) -> Task:
    """The task object for a command-line task name (``regression`` is classification with MSE)."""
    options = dict(options or {})
    if name == "regression":
        options["regression"] = True
        name = "classification"
    return get_task(name, **options)


def read_examples(task: Task, path: str | os.PathLike, *, training: bool = False, labeled: bool = True) -> list:
    """Examples of ``path``; SQuAD training files check (and skip, counted) misaligned answers."""
    if not Path(path).is_file():
        raise DataError(f"{path}: no such file")
    if task.name == "qa":
        examples = task.read(path, labeled=labeled, training=training)  # type: ignore[call-arg]
    else:
        examples = task.read(path, labeled=labeled)
    if not examples:
        raise DataError(f"{path}: no examples found (is the file empty?)")
    return examples


def featurize(task: Task, examples: Sequence, tokenizer: Any, max_seq_length: int, *,
              training: bool = False) -> list[dict[str, Any]]:
    """Task features; SQuAD training features carry the answer positions."""
    if task.name == "qa":
        return task.featurize(examples, tokenizer, max_seq_length, training=training)  # type: ignore[call-arg]
    return task.featurize(examples, tokenizer, max_seq_length)


# ------------------------------------------------------------------------------------------ batches
class GroupedBatches:
    """Resumable training batches of ``features`` for the loop: length-grouped (or plain random) per epoch.

    Epoch ``e`` orders the features with seed ``(seed, e)`` (see ``LengthGroupedBatchSampler``) into global
    micro-batches; process ``r`` of ``W`` takes batches ``r, r + W, ...``. The state is the epoch and the
    global micro-batches consumed in it, so a resumed run sees exactly the batches it would have seen. As
    the loop expects, ``epoch`` is incremented just before the epoch's last batch is yielded.
    """

    def __init__(self, features: Sequence[Mapping[str, Any]], batch_size: int,
                 collate: Callable[[list], dict[str, torch.Tensor]], *, seed: int = 0, group_by_length: bool = True,
                 rank: int = 0, world_size: int = 1, chunk_batches: int = 50) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        self.features, self.batch_size, self.collate = features, batch_size, collate
        self.seed, self.group_by_length = seed, group_by_length
        self.rank, self.world_size, self.chunk_batches = rank, world_size, chunk_batches
        self.lengths = [len(f["input_ids"]) for f in features]
        self.epoch = 0
        self.position = 0  # global micro-batches consumed in this epoch
        if len(self) == 0:
            raise ConfigError(f"{len(features)} training features are too few for {world_size} process(es) x "
                              f"micro-batch {batch_size}")

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """Global micro-batches (feature indexes) of ``epoch``, cut to a multiple of the world size."""
        if self.group_by_length:
            sampler = LengthGroupedBatchSampler(self.lengths, self.batch_size, shuffle=True, seed=self.seed,
                                                chunk_batches=self.chunk_batches)
            sampler.set_epoch(epoch)
            batches = sampler.batches()
        else:
            order = np.random.default_rng([self.seed, epoch]).permutation(len(self.lengths))
            batches = [order[i:i + self.batch_size].tolist() for i in range(0, len(order), self.batch_size)]
        return batches[: len(batches) - len(batches) % self.world_size]

    def __len__(self) -> int:
        """Micro-batches this process gets per epoch."""
        n = -(-len(self.lengths) // self.batch_size)
        return (n - n % self.world_size) // self.world_size

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        batches = self.epoch_batches(self.epoch)
        last = False
        while not last:
            indexes = batches[self.position + self.rank]
            batch = self.collate([self.features[i] for i in indexes])
            self.position += self.world_size
            last = self.position >= len(batches)
            if last:  # the state after an epoch's last batch is "start of the next epoch"
                self.epoch += 1
                self.position = 0
            yield batch

    @property
    def consumed(self) -> int:
        """Micro-batches this process has taken since the start of training (resumed runs included)."""
        return self.epoch * len(self) + self.position // self.world_size

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "batch_size": self.batch_size,
                "num_features": len(self.features)}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        if state.get("batch_size", self.batch_size) != self.batch_size:
            raise ConfigError(f"the checkpoint was trained with micro-batch {state['batch_size']}, this run uses "
                              f"{self.batch_size}; resume with the same --micro-batch-size")
        if state.get("num_features", len(self.features)) != len(self.features):
            raise ConfigError(f"the checkpoint was trained on {state['num_features']} features, this run has "
                              f"{len(self.features)}; resume with the same data and --max-seq-length")
        self.epoch, self.position, self.seed = int(state["epoch"]), int(state["position"]), int(state["seed"])


# ------------------------------------------------------------------------------------------ inference
def run_model(model: torch.nn.Module, task: Task, features: Sequence[Mapping[str, Any]], *, batch_size: int = 64,
              pad_id: int = 0, device: torch.device | str | None = None) -> list:
    """The task's per-feature output rows (``task.unbatch``) in feature order.

    Features are run longest first in batches of similar length (little padding); labels are not passed.
    The caller chooses the mode (``model.eval()``) and the grad context.
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    names = ("input_ids", "token_type_ids", "attention_mask")
    sampler = LengthGroupedBatchSampler([len(f["input_ids"]) for f in features], batch_size, shuffle=False,
                                        sort_when_not_shuffled=True)
    rows: list[Any] = [None] * len(features)
    for indexes in sampler:
        chunk = [{k: features[i][k] for k in names} for i in indexes]
        batch = task.collate(chunk, pad_id=pad_id)  # type: ignore[call-arg]
        output = model(**{k: v.to(device) for k, v in batch.items()})
        for i, row in zip(indexes, task.unbatch(output, batch)):
            rows[i] = row
    return rows


def predict_examples(model: torch.nn.Module, task: Task, examples: Sequence, features: Sequence, *,
                     batch_size: int = 64, pad_id: int = 0) -> tuple[Any, list]:
    """``(predictions, rows)`` of the model on featurized examples (eval mode, no gradients)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            rows = run_model(model, task, features, batch_size=batch_size, pad_id=pad_id)
    finally:
        model.train(was_training)
    return task.postprocess(examples, features, rows), rows


# ------------------------------------------------------------------------------------------ results
@dataclass
class FinetuneResult:
    """What :func:`finetune` did."""

    output: Path | None
    """The output directory (``None`` when a signal stopped the run: resume it with ``resume=True``)."""
    metrics: dict[str, float]
    """Dev metrics of the saved model (empty without a dev set)."""
    best_step: int | None
    """Update after which the saved model was evaluated best (``None`` without a dev set)."""
    epoch_seconds: list[float]
    """Training wall-clock seconds of each finished epoch, evaluation time excluded."""
    evaluations: list[dict[str, Any]]
    """Every dev evaluation: ``step``, ``epoch``, ``seconds`` and the metrics."""
    train: TrainResult
    """The loop's result (steps, stop reason, history)."""
    train_seconds: float = 0.0
    """Training wall-clock of this run up to the last logged update, dev evaluations excluded."""
    num_train_examples: int = 0
    num_train_features: int = 0
    skipped_train_examples: int = 0
    """SQuAD training questions skipped because their answer did not align (counted, the convention)."""


# ------------------------------------------------------------------------------------------ fine-tuning
def _check_output(config: FinetuneConfig) -> Path:
    output = Path(config.output)
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} exists and is not a directory")
    partial = config.partial_dir
    if (output / "metrics.json").is_file() and partial.is_dir():
        # The run finished (its output is renamed into place last) and stopped before deleting its work dir.
        notice(f"removing {partial}, left over from the finished run in {output}")
        shutil.rmtree(partial)
    if output.is_dir() and any(output.iterdir()) and not config.overwrite:
        done = " (that run finished)" if config.resume and (output / "metrics.json").is_file() else ""
        raise ConfigError(f"--output {output} already exists and is not empty{done}; "
                          f"choose another or pass --overwrite")
    if partial.exists() and not config.resume and any(partial.glob("checkpoint-*")):
        raise CheckpointError(f"{partial} holds an interrupted run; continue it with --resume or delete it")
    return output


def _previous_evaluations(work: Path) -> list[dict[str, Any]]:
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


def _load_tokenizer(model_dir: Path):
    from bertkit.tokenizer import Tokenizer

    return Tokenizer.from_pretrained(model_dir)


def _jsonable(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if isinstance(v, (str, int, float, bool)) or v is None}


def _training_collate(task: Any, features: Sequence[Feature], config: FinetuneConfig, pad_id: int):
    """The task's collate; for per-token losses (NER) with the mean count of labeled tokens per batch added,
    so the model divides every batch's summed loss by the same number (see BertForTokenClassification)."""
    def collate(chunk: list) -> dict[str, torch.Tensor]:
        return task.collate(chunk, pad_id=pad_id)

    if task.head != "BertForTokenClassification" or not groups_by_length(config, task):
        return collate
    labeled = sum(sum(1 for label in f["labels"] if label != IGNORE_INDEX) for f in features)
    normalizer = torch.tensor(max(1.0, labeled * config.micro_batch_size / len(features)))

    def collate_with_normalizer(chunk: list) -> dict[str, torch.Tensor]:
        return {**collate(chunk), "label_normalizer": normalizer}

    return collate_with_normalizer


def groups_by_length(config: FinetuneConfig, task: Any) -> bool:
    """``config.group_by_length``, or by default whether ``task`` (with its labels fitted) batches by length:
    all but regression, whose score may follow length (see ``FinetuneConfig.group_by_length``)."""
    if config.group_by_length is not None:
        return config.group_by_length
    return not getattr(task, "regression", False)


def finetune(config: FinetuneConfig, *, env: distributed.DistEnv | None = None) -> FinetuneResult:
    """Fine-tune ``config.model`` on ``config.train_file`` and write ``config.output``; see the module doc."""
    from bertkit.weights import load_model

    model_dir = Path(config.model)
    if not model_dir.is_dir():
        raise CheckpointError(f"--model {model_dir} is not a directory; give a Hugging Face-layout BERT directory")
    output = _check_output(config)

    # ------------------------------------------------------------ read and check everything first
    task = make_task(config.task, config.task_options)
    tokenizer = _load_tokenizer(model_dir)
    train_examples = read_examples(task, config.train_file, training=True)
    skipped = int(getattr(task, "skipped", 0))
    if config.max_train_examples is not None:
        train_examples = train_examples[: config.max_train_examples]
    task.fit_labels(train_examples)
    config = dataclasses.replace(config, group_by_length=groups_by_length(config, task))
    train_features = featurize(task, train_examples, tokenizer, config.max_seq_length, training=True)
    skipped = int(getattr(task, "skipped", 0)) if task.name == "qa" else skipped
    if not train_features:
        raise DataError(f"{config.train_file}: no training features (every example was skipped)")
    dev_examples = dev_features = None
    if config.dev_file is not None:
        dev_examples = read_examples(task, config.dev_file)
        dev_features = featurize(task, dev_examples, tokenizer, config.max_seq_length)

    env = env or distributed.setup(config.device)
    torch.manual_seed(config.seed)  # the fresh head's initialisation
    model = load_model(model_dir, head=task.head, ignore_mismatched_sizes=True, **task.config_updates())
    if config.max_seq_length > model.config.max_position_embeddings:
        raise ConfigError(f"--max-seq-length {config.max_seq_length} exceeds the model's "
                          f"{model.config.max_position_embeddings} positions")
    if tokenizer.vocab_size > model.config.vocab_size:
        raise CheckpointError(f"{model_dir}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
                              f"{model.config.vocab_size} embeddings; the tokenizer belongs to another model")
    model.config.extra[CONFIG_KEY] = {"task": config.task, "max_seq_length": config.max_seq_length,
                                      "task_options": _jsonable(config.task_options)}
    model.train()

    # ------------------------------------------------------------ the loop's configuration
    collate = _training_collate(task, train_features, config, tokenizer.pad_id)
    batches = GroupedBatches(train_features, config.micro_batch_size, collate, seed=config.seed,
                             group_by_length=config.group_by_length, rank=env.rank, world_size=env.world_size)
    global_batch = config.global_batch_size or config.micro_batch_size * env.world_size
    probe = TrainConfig(micro_batch_size=config.micro_batch_size, global_batch_size=global_batch, max_steps=1)
    accum = probe.accumulation(env.world_size)
    micro_per_epoch = len(batches)
    steps_per_epoch = max(1, micro_per_epoch // accum)
    max_steps = config.max_steps or max(1, math.ceil(config.epochs * micro_per_epoch / accum))
    work = config.partial_dir
    train_config = TrainConfig(
        output_dir=work, micro_batch_size=config.micro_batch_size, global_batch_size=global_batch, lr=config.lr,
        warmup_ratio=config.warmup_ratio, weight_decay=config.weight_decay, clip_grad_norm=config.clip_grad_norm,
        seed=config.seed, precision=config.precision, max_steps=max_steps, steps_per_epoch=steps_per_epoch,
        best_metric=task.main_metric if dev_examples is not None else None, best_mode="max",
        resume="auto" if config.resume else None, device=config.device, progress=config.progress,
        log_every=config.log_every, save_every=config.save_every, extra={"task": config.task},
        **{"schedule": DEFAULT_SCHEDULE, **config.train_options},
    )

    # ------------------------------------------------------------ callbacks: evaluation, early stopping, timing
    evaluations = _previous_evaluations(work) if config.resume else []
    best: dict[str, Any] = {}
    stale = 0
    for record in evaluations:  # a resumed run continues the best-model and patience bookkeeping
        scores = {k: v for k, v in record.items() if k not in ("step", "epoch", "seconds")}
        if task.main_metric in scores and (not best or scores[task.main_metric] > best["metrics"][task.main_metric]):
            best.update(step=record["step"], epoch=record["epoch"], metrics=scores, predictions=None)
            stale = 0
        else:
            stale += 1
    epoch_ends: list[float] = []
    eval_seconds: list[float] = []  # evaluation time spent in this run
    eval_spans: list[tuple[float, float]] = []  # (start, seconds) of each evaluation in this run

    def evaluate(m: torch.nn.Module) -> dict[str, float]:
        nonlocal stale
        start = time.perf_counter()
        rows = run_model(m, task, dev_features, batch_size=config.eval_batch_size, pad_id=tokenizer.pad_id)
        predictions = task.postprocess(dev_examples, dev_features, rows)
        scores = {k: float(v) for k, v in task.evaluate(predictions, dev_examples).items()
                  if isinstance(v, (int, float))}
        step = batches.consumed // accum
        value = scores.get(task.main_metric)
        if value is None:
            raise ConfigError(f"main metric {task.main_metric!r} is not among the task's metrics "
                              f"({', '.join(scores)}); choose another main_metric")
        if not best or value > best["metrics"][task.main_metric]:
            best.update(step=step, epoch=batches.epoch, metrics=scores, predictions=predictions)
            stale = 0
        else:
            stale += 1
        seconds = time.perf_counter() - start
        eval_seconds.append(seconds)
        eval_spans.append((start, seconds))
        evaluations.append({"step": step, "epoch": batches.epoch, "seconds": round(seconds, 3), **scores})
        return scores

    def on_epoch_end(epoch: int, m: torch.nn.Module) -> None:
        epoch_ends.append(time.perf_counter() - sum(eval_seconds))

    def export(m: torch.nn.Module, directory: Path) -> None:
        save_pretrained(m, directory, tokenizer=tokenizer)

    def early_stop() -> str | None:
        patience = config.early_stopping_patience
        if patience is None or stale < patience:
            return None
        notice(f"early stopping: {stale} evaluations without a better {task.main_metric} "
               f"(best {best['metrics'][task.main_metric]:.4f} at step {best['step']})")
        return "early_stopping"

    if env.is_main:
        kind = "length-grouped" if config.group_by_length else "random"
        notice(f"fine-tuning {task.name} ({task.head}) on {len(train_examples)} examples -> {len(train_features)} "
               f"features, {micro_per_epoch} {kind} micro-batches per epoch, {max_steps} updates; lr {config.lr}")
    started = time.perf_counter()
    try:
        result = train(model, batches, train_config, evaluate=evaluate if dev_examples is not None else None,
                       export=export, on_epoch_end=on_epoch_end, should_stop=early_stop, env=env)
    except BaseException:
        if env.is_main and work.exists() and not any(work.glob("checkpoint-*")):
            shutil.rmtree(work, ignore_errors=True)  # nothing to resume from: leave nothing behind
        raise
    model = result.model if result.model is not None else model  # unsharded (a gathered copy under FSDP)
    epoch_seconds = [b - a for a, b in zip([started, *epoch_ends], epoch_ends)]
    metrics = dict(best.get("metrics", {}))
    logged = [r for r in result.history if r.get("split") == "train" and "elapsed_s" in r]
    train_seconds = 0.0
    if logged:  # elapsed_s counts from the loop's start and includes evaluations done before that update
        last = logged[-1]
        train_seconds = last["elapsed_s"] - sum(seconds for at, seconds in eval_spans if at - started < last["elapsed_s"])
    outcome = FinetuneResult(output=None, metrics=metrics, best_step=best.get("step"), epoch_seconds=epoch_seconds,
                             evaluations=evaluations, train=result, train_seconds=train_seconds,
                             num_train_examples=len(train_examples),
                             num_train_features=len(train_features), skipped_train_examples=skipped)
    if result.stop_reason == "signal":
        if env.is_main:
            notice(f"stopped by a signal; continue with --resume (state in {work})")
        return outcome
    if best and best.get("predictions") is None and (work / "best").is_dir() and env.is_main:
        # resumed without a better model since: predict dev again with the saved best weights
        from bertkit import weights

        weights.load_hf_state_dict(model, weights.read_state_dict(work / "best"), source=str(work / "best"))
        best["predictions"], _ = predict_examples(model, task, dev_examples, dev_features,
                                                  batch_size=config.eval_batch_size, pad_id=tokenizer.pad_id)
    if env.is_main:
        _write_output(config, output, work, model, tokenizer, task, outcome, best, dev_examples)
    distributed.barrier(env)
    outcome.output = output
    return outcome


def _write_output(config: FinetuneConfig, output: Path, work: Path, model: torch.nn.Module, tokenizer: Any,
                  task: Task, outcome: FinetuneResult, best: Mapping[str, Any], dev_examples: Sequence | None) -> None:
    """Assemble ``<output>.tmp`` (model, metrics, logs, dev predictions) and rename it to ``output``."""
    staging = output.with_name(output.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    best_dir = work / "best"
    if dev_examples is not None and (best_dir / "model.safetensors").is_file():
        shutil.copytree(best_dir, staging)
    else:
        save_pretrained(model, staging, tokenizer=tokenizer)
    for name in ("metrics.jsonl", "curves.png", "tensorboard"):
        source = work / name
        if source.is_dir():
            shutil.copytree(source, staging / name)
        elif source.is_file():
            shutil.copyfile(source, staging / name)
    if best.get("predictions") is not None:
        task.write_predictions(best["predictions"], staging / "dev_predictions", dev_examples)  # type: ignore[call-arg]
    train_records = [r for r in outcome.train.history if r.get("split") == "train"]
    summary = {
        "task": config.task, "main_metric": task.main_metric, "dev": outcome.metrics,
        "best_step": outcome.best_step, "best_epoch": best.get("epoch"),
        "evaluations": outcome.evaluations,
        "train": {
            "steps": outcome.train.step, "stop_reason": outcome.train.stop_reason,
            "seconds": round(outcome.train.elapsed, 3), "epoch_seconds": [round(s, 3) for s in outcome.epoch_seconds],
            "examples": outcome.num_train_examples, "features": outcome.num_train_features,
            "skipped_examples": outcome.skipped_train_examples,
            "final_loss": train_records[-1].get("loss") if train_records else None,
        },
    }
    atomic_write_text(staging / "metrics.json", json.dumps(summary, indent=2) + "\n")
    atomic_write_text(staging / "finetune_config.json", json.dumps(config.to_dict(), indent=2, default=str) + "\n")
    if output.exists():
        shutil.rmtree(output)  # empty, or --overwrite
    os.replace(staging, output)
    shutil.rmtree(work, ignore_errors=True)
    where = f"; dev {task.main_metric} {outcome.metrics[task.main_metric]:.4f}" if outcome.metrics else ""
    notice(f"wrote the fine-tuned model to {output}{where}")


# ------------------------------------------------------------------------------------------ evaluate / predict
@dataclass
class FinetunedModel:
    """A fine-tuned model directory loaded for evaluation or prediction, with its task and tokenizer."""

    model: torch.nn.Module
    tokenizer: Any
    task: Task
    max_seq_length: int


def load_finetuned(path: str | os.PathLike, *, task: str | None = None, task_options: Mapping[str, Any] | None = None,
                   max_seq_length: int | None = None, device: str | torch.device = "cpu") -> FinetunedModel:
    """Load a fine-tuned model directory; the task, its options and ``max_seq_length`` default to those it was
    trained with (``config.json``'s ``bertkit_finetune``), else to the task of its head.

    Raises ``CheckpointError`` when the directory's head was never trained (no head weights).
    """
    from bertkit import weights
    from bertkit.model import HEAD_CLASSES

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"--model {path} is not a directory; give a fine-tuned model directory")
    config = BertConfig.load(path)
    saved = config.extra.get(CONFIG_KEY) or {}
    head = next((a for a in (config.architectures or []) if a in HEAD_TO_TASK), None)
    if head is None:
        raise CheckpointError(f"{path} is not a fine-tuned model (architectures {config.architectures}); "
                              f"fine-tune it first with `bertkit finetune`")
    head_task = HEAD_TO_TASK[head]
    name = task or saved.get("task") or ("regression" if config.problem_type == "regression" else head_task)
    family = "classification" if name == "regression" else name
    if family != head_task:
        raise ConfigError(f"{path} holds a {head} ({head_task}), not a {name} model; use --task {head_task}")
    options = dict(saved.get("task_options", {}) if saved.get("task") in (name, None) else {})
    options.update(task_options or {})
    the_task = make_task(name, options)
    the_task.load_config(config)  # type: ignore[attr-defined]
    model = HEAD_CLASSES[head](config)
    report = weights.load_hf_state_dict(model, weights.read_state_dict(path), source=str(path))
    untrained = [n for n in report.initialised if not n.startswith("pooler.")]
    if untrained:
        raise CheckpointError(f"{path} has no trained {head} weights ({', '.join(untrained[:2])}); "
                              f"fine-tune it first with `bertkit finetune`")
    tokenizer = _load_tokenizer(path)
    length = max_seq_length or int(saved.get("max_seq_length") or (384 if family == "qa" else 128))
    length = min(length, config.max_position_embeddings)
    return FinetunedModel(model.to(device).eval(), tokenizer, the_task, length)


def evaluate_model(model: str | os.PathLike | FinetunedModel, data: str | os.PathLike, *, task: str | None = None,
                   task_options: Mapping[str, Any] | None = None, max_seq_length: int | None = None,
                   batch_size: int = 64, device: str | torch.device = "cpu",
                   predictions_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """Metrics of a fine-tuned model on a labelled file (the task's ``evaluate``); optionally also write the
    task's prediction files into ``predictions_dir``."""
    loaded = model if isinstance(model, FinetunedModel) else load_finetuned(
        model, task=task, task_options=task_options, max_seq_length=max_seq_length, device=device)
    examples = read_examples(loaded.task, data)
    features = featurize(loaded.task, examples, loaded.tokenizer, loaded.max_seq_length)
    predictions, _ = predict_examples(loaded.model, loaded.task, examples, features, batch_size=batch_size,
                                      pad_id=loaded.tokenizer.pad_id)
    scores = {k: float(v) for k, v in loaded.task.evaluate(predictions, examples).items()
              if isinstance(v, (int, float))}
    if predictions_dir is not None:
        loaded.task.write_predictions(predictions, predictions_dir, examples)  # type: ignore[call-arg]
    return scores


def predict(model: str | os.PathLike | FinetunedModel, input: str | os.PathLike, output: str | os.PathLike, *,
            task: str | None = None, task_options: Mapping[str, Any] | None = None,
            max_seq_length: int | None = None, batch_size: int = 64, device: str | torch.device = "cpu") -> int:
    """Write one JSON line per input example of ``input`` (in the task's format; labels are ignored) to
    ``output``, atomically; return the number of lines.

    Rows: classification ``{index, text[, text_pair], label, score, probabilities}`` (regression: ``score``);
    NER ``{index, words, tags, scores, entities}`` (``scores``: probability of each word's tag); QA ``{index,
    id, question, answer, score, nbest}``.
    """
    loaded = model if isinstance(model, FinetunedModel) else load_finetuned(
        model, task=task, task_options=task_options, max_seq_length=max_seq_length, device=device)
    examples = read_examples(loaded.task, input, labeled=False)
    features = featurize(loaded.task, examples, loaded.tokenizer, loaded.max_seq_length)
    predictions, rows = predict_examples(loaded.model, loaded.task, examples, features, batch_size=batch_size,
                                         pad_id=loaded.tokenizer.pad_id)
    lines = list(_prediction_rows(loaded.task, examples, features, rows, predictions))
    write_jsonl(lines, output)
    return len(lines)


def _prediction_rows(task: Task, examples: Sequence, features: Sequence, rows: Sequence,
                     predictions: Any) -> Iterator[dict[str, Any]]:
    if task.name == "classification":
        for i, (example, p) in enumerate(zip(examples, predictions)):
            row: dict[str, Any] = {"index": i, "text": example.text}
            if example.text_pair is not None:
                row["text_pair"] = example.text_pair
            if p.label is None:
                row["score"] = p.score
            else:
                row.update(label=p.label, score=p.score, probabilities=p.probabilities)
            yield row
    elif task.name == "ner":
        scores = _word_scores(examples, features, rows)
        for i, (p, s) in enumerate(zip(predictions, scores)):
            yield {"index": i, "words": p.words, "tags": p.tags, "scores": s, "entities": p.entities}
    else:
        for i, example in enumerate(examples):
            nbest = predictions.nbest[example.qid]
            answer = predictions.predictions[example.qid]
            score = next((c["probability"] for c in nbest if c["text"] == answer), 0.0)
            yield {"index": i, "id": example.qid, "question": example.question, "answer": answer, "score": score,
                   "nbest": nbest[:5]}


def _word_scores(examples: Sequence, features: Sequence, rows: Sequence) -> list[list[float]]:
    """Softmax probability of each word's predicted tag, read where ``NerTask.postprocess`` reads the tag
    (the first sub-token, in the window that gives the word most context)."""
    scores = [[1.0] * len(e.words) for e in examples]
    for feature, row in zip(features, rows):
        sentence = scores[feature["example_index"]]
        for offset, (position, best) in enumerate(zip(feature["word_positions"], feature["max_context"])):
            if best and position >= 0:
                logits = np.asarray(row[position], dtype=np.float64)
                probs = np.exp(logits - logits.max())
                sentence[feature["first_word"] + offset] = float(probs.max() / probs.sum())
    return scores
