"""Fine-tuning for every task family, on the one shared training loop.

``finetune(FinetuneConfig.from_options(...))`` reads and checks the data through ``bertkit.tasks`` (every
bad-input error is raised before anything is written), loads the starting model with the task's head (a fresh
head is initialised with a one-line notice), trains with :class:`bertkit.training.loop.Trainer` on
length-grouped batches (each batch pads only to its own longest feature), evaluates on dev after every epoch,
keeps the best model by the task's main metric, optionally stops early, and writes the output directory:

* the fine-tuned model in Hugging Face layout (``config.json`` with ``id2label``/``label2id``,
  ``model.safetensors``, tokenizer files), loadable by bertkit and ``transformers.BertFor...``,
* ``metrics.json`` (dev metrics of the saved model, per-epoch records, timings), ``metrics.jsonl`` (the
  training log), ``curves.png`` (when matplotlib is installed), ``finetune_config.json``,
* ``dev_predictions/`` (the task's prediction files for dev, from the saved model).

``finetune`` is its phases in order, each a function: ``read_data``, ``size_batches``,
``load_and_check_model``, ``train_model``, ``repredict_on_resume`` and the writing of the output.
What a run is given is ``finetune_config.FinetuneConfig``; how the saved model is chosen on dev is
``finetune_selection.DevSelection``.

Training runs in ``<output>.partial/`` (checkpoints, logs); the output directory is assembled under a
temporary name and renamed when complete, so a crash never leaves a half-written model. After a crash or
a signal, ``resume=True`` continues from the last checkpoint in ``<output>.partial/``.

Dev evaluation runs the model with ``bertkit.features.runner``, the runner ``bertkit.inference`` (``predict``,
``evaluate``, the pipelines) uses too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bertkit.checkpoint_files import SAFETENSORS_NAME
from bertkit.data.batch_sources import Ordering, RandomOrder, ResumableBatches
from bertkit.errors import CheckpointError, ConfigError, DataError
from bertkit.features import Feature
from bertkit.features.runner import predict_features
from bertkit.hub import resolve_model
from bertkit.io import atomic_write_text
from bertkit.models import registry
from bertkit.notices import notice, quiet_libraries
from bertkit.tasks import Task
from bertkit.tasks.batching import LengthGroupedOrder
from bertkit.tasks.prepare import featurize, read_examples
from bertkit.tasks.registry import CONFIG_KEY, make_task, name_of, saved_settings
from bertkit.training import distributed
from bertkit.training.checkpoint import latest_valid_checkpoint
from bertkit.training.finetune_config import FinetuneConfig
from bertkit.training.finetune_defaults import Sizing, size_to_data
from bertkit.training.finetune_selection import DevSelection, previous_evaluations
from bertkit.training.loop import Trainer, TrainResult
from bertkit.training.precision import precision_name
from bertkit.training.resume_options import check_resumed_options, record_options, run_options
from bertkit.training.tracking import STATE_FILE, log_model, run_context
from bertkit.weights import save_pretrained

if TYPE_CHECKING:
    from bertkit.tokenizer import Tokenizer

__all__ = ["FinetuneConfig", "FinetuneResult", "finetune", "groups_by_length", "training_batches"]


# ------------------------------------------------------------------------------------------ batches
def training_batches(
    features: Sequence[Mapping[str, Any]],
    batch_size: int,
    collate: Callable[[list], Any],
    *,
    seed: int = 0,
    group_by_length: bool = True,
    rank: int = 0,
    world_size: int = 1,
    chunk_batches: int = 50,
    order: Ordering | None = None,
) -> ResumableBatches:
    """Resumable training batches of ``features``: length-grouped (each pads only to its own longest feature;
    see ``LengthGroupedOrder``) or plain random, in a new order every epoch; ``order``: the task's own."""
    if order is None:
        order = (
            LengthGroupedOrder([len(f["input_ids"]) for f in features], chunk_batches)
            if group_by_length
            else RandomOrder()
        )
    return ResumableBatches(features, batch_size, collate, order=order, seed=seed, rank=rank, world_size=world_size)


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
    data: dict[str, dict[str, Any]] = field(default_factory=dict)
    """What was read of ``train`` and ``dev``: rows read, used, skipped by reason, truncated examples."""
    sizing: dict[str, Any] | None = None
    """Batch and epochs sized to the training set, with the reason (``None`` when the user set both)."""


# ------------------------------------------------------------------------------------------ fine-tuning
def finetune(
    config: FinetuneConfig,
    *,
    env: distributed.DistEnv | None = None,
    adapt_task: Callable[[Task], Task] | None = None,
    options: Mapping[str, Any] | None = None,
) -> FinetuneResult:
    """Fine-tune ``config.model`` on ``config.train_file`` and write ``config.output``; see the module doc.
    ``adapt_task`` wraps the task before anything is read (distillation's ``DistillTask``); ``options``: the
    run's options as a resume compares them (:mod:`bertkit.training.resume_options`), when the caller has
    compared them already (distillation's, which has options of its own)."""
    model_dir = _model_dir(config)
    output = _check_output(config)
    if options is None:
        options = run_options(config)
        if resumes(config):
            check_resumed_options(config.partial_dir, options)
    data = read_data(config, model_dir, adapt_task)
    env = env or distributed.setup(config.train.distributed.device)
    settled, sizing = size_batches(config, data, env)
    model = load_and_check_model(settled, model_dir, data)
    if env.is_main:
        record_options(settled.partial_dir, options)
    trained = train_model(settled, data, model, env)
    outcome = _outcome(data, trained, sizing)
    if trained.result.stop_reason == "signal":
        if env.is_main:
            notice(f"stopped by a signal; continue with --resume (state in {settled.partial_dir})")
        return outcome
    if env.is_main:
        repredict_on_resume(settled, data, trained)
        _write_output(settled, output, trained, data, outcome)
        log_model(output, output)
    distributed.barrier(env)
    outcome.output = output
    return outcome


@dataclass
class FinetuneData:
    """The task, the tokenizer and the data of a run, read, checked and featurized."""

    task: Task
    tokenizer: Tokenizer
    train_examples: list[Any]
    train_features: list[Feature]
    dev: tuple[list[Any], list[Feature]] | None
    """Dev examples and features (``None`` without a dev set)."""
    skipped: int
    """Training examples dropped and counted (SQuAD answers that do not align with their text)."""
    reports: dict[str, dict[str, Any]]
    """What was read of ``train`` and ``dev``: rows read, used, skipped by reason, truncated examples."""


def read_data(
    config: FinetuneConfig, model_dir: Path, adapt_task: Callable[[Task], Task] | None = None
) -> FinetuneData:
    """Read, check and featurize the training and dev data (every bad-input error comes before any writing);
    one report line per file, from the first process only (the loop's environment comes later)."""
    task = make_task(config.task, config.task_options)
    if adapt_task is not None:
        task = adapt_task(task)
    tokenizer = _load_tokenizer(model_dir)
    quiet = os.environ.get("RANK", "0") != "0"
    reading: dict[str, Any] = {"format": config.format, "header": config.header, "quiet": quiet}
    train = read_examples(task, config.train_file, training=True, **reading)
    if config.max_train_examples is not None and len(train.examples) > config.max_train_examples:
        left_out = train.examples[config.max_train_examples :]
        # counted in the report's unit (a CoNLL report counts word lines)
        count = sum(len(e.words) for e in left_out) if train.report.unit == "lines" else len(left_out)
        train.report.skip("beyond --max-train-examples", count)
        train.report.used -= count
        train.examples = train.examples[: config.max_train_examples]
    task.fit_labels(train.examples)
    labels = task.describe_labels(train.examples)
    if labels is not None and not quiet:
        notice(labels)
    max_seq_length = config.max_seq_length
    assert max_seq_length is not None  # FinetuneConfig fills it in from the task's defaults
    featurized = featurize(task, train.examples, tokenizer, max_seq_length, training=True, report=True)
    if not featurized.features:
        raise DataError(f"{config.train_file}: no training features (every example was skipped)")
    train.report.skip("examples with no usable features", featurized.dropped)
    train.report.used -= featurized.dropped
    train.report.truncated = featurized.truncated
    reports = {"train": train.report.to_dict()}
    dev = None
    if config.dev_file is not None:
        dev_read = read_examples(task, config.dev_file, **reading)
        dev_featurized = featurize(task, dev_read.examples, tokenizer, max_seq_length, report=True)
        dev_read.report.truncated = dev_featurized.truncated
        reports["dev"] = dev_read.report.to_dict()
        dev = (dev_read.examples, dev_featurized.features)
    skipped = train.dropped + featurized.dropped
    return FinetuneData(task, tokenizer, train.examples, featurized.features, dev, skipped, reports)


def size_batches(
    config: FinetuneConfig, data: FinetuneData, env: distributed.DistEnv
) -> tuple[FinetuneConfig, Sizing | None]:
    """``config`` as this run trains it: the batch order decided for the task, the precision this device runs,
    and the batch and epochs the user left unset sized to the training set (with the reason, on stderr)."""
    train = config.train.with_options(precision=precision_name(config.train.precision.mode, env.device))
    sizing = size_to_data(
        len(data.train_examples),
        len(data.train_features),
        sized=config.sized,
        batch_size=train.batch.micro_batch_size * env.world_size,
        epochs=train.duration.epochs,
    )
    if sizing is not None:
        micro = max(1, sizing.batch_size // env.world_size)
        train = train.with_options(micro_batch_size=micro, epochs=sizing.epochs, extra={"sizing": sizing.to_dict()})
        if env.is_main:
            notice(sizing.reason)
    settled = dataclasses.replace(config, group_by_length=groups_by_length(config, data.task), train=train)
    return settled, sizing


def load_and_check_model(config: FinetuneConfig, model_dir: Path, data: FinetuneData) -> torch.nn.Module:
    """The starting model with the task's head (a fresh head seeded by ``train.seed``), checked against the
    sequence length and the tokenizer, with the task's settings in its config, in training mode."""
    from bertkit.weights import load_model

    torch.manual_seed(config.train.seed)  # the fresh head's initialisation
    task = data.task
    resuming = resumes(config)
    # A resumed run takes every weight, its head's too, from the checkpoint: the loader's "newly initialised"
    # would point the wrong way, so it is kept quiet and the truth is said instead.
    with quiet_libraries("bertkit.weights") if resuming else contextlib.nullcontext():
        model = load_model(model_dir, head=task.head, ignore_mismatched_sizes=True, **task.config_updates())
    if resuming and os.environ.get("RANK", "0") == "0":
        notice(f"{type(model).__name__}: every weight, the task head's too, is restored from the checkpoint")
    model_config = registry.config_of(model)  # load_model builds bertkit's model classes
    max_seq_length = config.max_seq_length
    assert max_seq_length is not None  # FinetuneConfig fills it in from the task's defaults
    if max_seq_length > model_config.max_position_embeddings:
        raise ConfigError(
            f"--max-seq-length {max_seq_length} exceeds the model's {model_config.max_position_embeddings} positions"
        )
    if data.tokenizer.vocab_size > model_config.vocab_size:
        raise CheckpointError(
            f"{model_dir}: the tokenizer has {data.tokenizer.vocab_size} tokens but the model only "
            f"{model_config.vocab_size} embeddings; the tokenizer belongs to another model"
        )
    model_config.extra[CONFIG_KEY] = saved_settings(config.task, max_seq_length, config.task_options)
    model.train()
    return model


@dataclass
class Trained:
    """What the loop did: its result, the dev bookkeeping (best model, evaluations, timing) and the model."""

    result: TrainResult
    selection: DevSelection
    model: torch.nn.Module
    """The trained module (``task.training_module``), unsharded (a gathered copy under FSDP)."""
    started: float
    """``time.perf_counter()`` when the loop started."""


def train_model(
    config: FinetuneConfig, data: FinetuneData, model: torch.nn.Module, env: distributed.DistEnv
) -> Trained:
    """Train on resumable batches of the training features, evaluating on dev after every epoch; a run that
    fails before its first checkpoint leaves no work directory behind."""
    task = data.task
    collate = _training_collate(task, data.train_features, config, data.tokenizer.pad_id)
    batches = training_batches(
        data.train_features,
        config.train.batch.micro_batch_size,
        collate,
        seed=config.train.seed,
        group_by_length=bool(config.group_by_length),
        rank=env.rank,
        world_size=env.world_size,
        order=task.batch_order(data.train_features),
    )
    module = task.training_module(model)
    work = config.partial_dir
    train_config = config.train.with_options(
        best_metric=task.main_metric if data.dev is not None else None,
        best_mode="max",
        resume="auto" if config.resume else None,
        extra={**config.train.extra, "task": config.task, "config": run_context(config.to_dict())},
    ).for_epoch(len(batches), env.world_size)
    accum = train_config.accumulation(env.world_size)
    previous = previous_evaluations(work) if config.resume else []
    selection = DevSelection(task, config, data.tokenizer, batches, accum, data.dev, previous=previous)
    if env.is_main:
        kind = getattr(batches.order, "name", "length-grouped" if config.group_by_length else "random")
        notice(
            f"fine-tuning {name_of(task)} ({type(model).__name__}) on {len(data.train_examples)} examples -> "
            f"{len(data.train_features)} features, {len(batches)} {kind} micro-batches per epoch, "
            f"{train_config.duration.max_steps} updates; lr {config.train.optimizer.lr}"
        )
    started = time.perf_counter()
    try:
        trainer = Trainer(module, batches, train_config, selection.hooks(), env=env, temporary_checkpoints=True)
        result = trainer.train()
    except BaseException:
        if env.is_main and work.exists() and not any(work.glob("checkpoint-*")):
            shutil.rmtree(work, ignore_errors=True)  # nothing to resume from: leave nothing behind
        raise
    return Trained(result, selection, result.model if result.model is not None else module, started)


def repredict_on_resume(config: FinetuneConfig, data: FinetuneData, trained: Trained) -> None:
    """A resumed run that found no better model since predicts dev again with the saved best weights (the
    predictions of the interrupted run were not kept)."""
    best, best_dir = trained.selection.best, config.partial_dir / "best"
    if not best or best.get("predictions") is not None or not best_dir.is_dir() or data.dev is None:
        return
    from bertkit.weights import load_weights

    load_weights(data.task.saved_model(trained.model), best_dir)
    best["predictions"], _ = predict_features(
        trained.model, data.task, *data.dev, batch_size=config.eval_batch_size, pad_id=data.tokenizer.pad_id
    )


def _model_dir(config: FinetuneConfig) -> Path:
    model_dir = resolve_model(config.model)
    if not model_dir.is_dir():
        raise CheckpointError(f"--model {model_dir} is not a directory; give a Hugging Face-layout BERT directory")
    return model_dir


def _outcome(data: FinetuneData, trained: Trained, sizing: Sizing | None) -> FinetuneResult:
    selection = trained.selection
    best = selection.best
    epoch_ends = selection.epoch_ends
    return FinetuneResult(
        output=None,
        metrics=dict(best.get("metrics", {})),
        best_step=best.get("step"),
        epoch_seconds=[b - a for a, b in zip([trained.started, *epoch_ends], epoch_ends)],
        evaluations=selection.evaluations,
        train=trained.result,
        train_seconds=selection.train_seconds(trained.started, trained.result.history),
        num_train_examples=len(data.train_examples),
        num_train_features=len(data.train_features),
        skipped_train_examples=data.skipped,
        data=data.reports,
        sizing=sizing.to_dict() if sizing is not None else None,
    )


# ------------------------------------------------------------------------------------------ output
def _write_output(
    config: FinetuneConfig, output: Path, trained: Trained, data: FinetuneData, outcome: FinetuneResult
) -> None:
    """Assemble ``<output>.tmp`` (model, metrics, logs, dev predictions) and rename it to ``output``."""
    work, task = config.partial_dir, data.task
    best = trained.selection.best
    dev_examples = data.dev[0] if data.dev is not None else None
    staging = output.with_name(output.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    best_dir = work / "best"
    if dev_examples is not None and (best_dir / SAFETENSORS_NAME).is_file():
        shutil.copytree(best_dir, staging)
    else:
        assert config.max_seq_length is not None  # FinetuneConfig fills it in from the task's defaults
        sentence = task.sentence_config(config.max_seq_length)
        save_pretrained(task.saved_model(trained.model), staging, tokenizer=data.tokenizer, sentence=sentence)
    for name in ("metrics.jsonl", "curves.png", "tensorboard", STATE_FILE):
        source = work / name
        if source.is_dir():
            shutil.copytree(source, staging / name)
        elif source.is_file():
            shutil.copyfile(source, staging / name)
    if best.get("predictions") is not None:
        task.write_predictions(best["predictions"], staging / "dev_predictions", dev_examples)
    summary = _summary(config, task, outcome, best)
    atomic_write_text(staging / "metrics.json", json.dumps(summary, indent=2) + "\n")
    atomic_write_text(staging / "finetune_config.json", json.dumps(config.to_dict(), indent=2, default=str) + "\n")
    if output.exists():
        shutil.rmtree(output)  # empty, or --overwrite
    os.replace(staging, output)
    shutil.rmtree(work, ignore_errors=True)
    where = f"; dev {task.main_metric} {outcome.metrics[task.main_metric]:.4f}" if outcome.metrics else ""
    notice(f"wrote the fine-tuned model to {output}{where}")


def _summary(config: FinetuneConfig, task: Task, outcome: FinetuneResult, best: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics.json``: the dev metrics of the saved model, every evaluation, the training run and the data."""
    train_records = [r for r in outcome.train.history if r.get("split") == "train"]
    return {
        "task": config.task,
        "main_metric": task.main_metric,
        "dev": outcome.metrics,
        "best_step": outcome.best_step,
        "best_epoch": best.get("epoch"),
        "evaluations": outcome.evaluations,
        "train": {
            "steps": outcome.train.step,
            "stop_reason": outcome.train.stop_reason,
            "seconds": round(outcome.train.elapsed, 3),
            "epoch_seconds": [round(s, 3) for s in outcome.epoch_seconds],
            "examples": outcome.num_train_examples,
            "features": outcome.num_train_features,
            "skipped_examples": outcome.skipped_train_examples,
            "final_loss": train_records[-1].get("loss") if train_records else None,
        },
        "data": outcome.data,
        "sizing": outcome.sizing,
    }


# ------------------------------------------------------------------------------------------ helpers
def resumes(config: FinetuneConfig) -> bool:
    """Whether the run continues from a checkpoint: ``--resume``, and one in the work directory."""
    return config.resume and latest_valid_checkpoint(config.partial_dir) is not None


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
        raise ConfigError(
            f"--output {output} already exists and is not empty{done}; choose another or pass --overwrite"
        )
    if partial.exists() and not config.resume and any(partial.glob("checkpoint-*")):
        raise CheckpointError(f"{partial} holds an interrupted run; continue it with --resume or delete it")
    return output


def _load_tokenizer(model_dir: Path) -> Tokenizer:
    from bertkit.tokenizer import Tokenizer

    return Tokenizer.from_pretrained(model_dir)


def _training_collate(
    task: Task, features: Sequence[Feature], config: FinetuneConfig, pad_id: int
) -> Callable[[list], dict[str, torch.Tensor]]:
    """The task's collate; when batches are grouped by length and the task's loss is per token (NER), with
    the task's ``loss_normalizer`` added, so the model divides every batch's summed loss by the same number
    (see BertForTokenClassification)."""

    def collate(chunk: list) -> dict[str, torch.Tensor]:
        return task.collate(chunk, pad_id=pad_id)

    if not groups_by_length(config, task):
        return collate
    value = task.loss_normalizer(features, config.train.batch.micro_batch_size)
    if value is None:
        return collate
    normalizer = torch.tensor(value)

    def collate_with_normalizer(chunk: list) -> dict[str, torch.Tensor]:
        return {**collate(chunk), "label_normalizer": normalizer}

    return collate_with_normalizer


def groups_by_length(config: FinetuneConfig, task: Task) -> bool:
    """``config.group_by_length``, or by default whether ``task`` (with its labels fitted) batches by length:
    all but regression, whose score may follow length (see ``FinetuneConfig.group_by_length``)."""
    if config.group_by_length is not None:
        return config.group_by_length
    return task.batch_by_length
