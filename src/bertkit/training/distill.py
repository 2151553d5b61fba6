"""Distillation: fine-tuning a student with the teacher's predictions as targets.

``distill(FinetuneConfig, DistillConfig)`` is ``finetune`` with two changes and nothing else: the starting
model is a student built from the teacher (``training.students``), and the task is wrapped in
:class:`DistillTask`, whose training module (:class:`Distiller`) runs the teacher (eval mode, no gradients)
beside the student on every batch and returns the distillation loss. Reading, batching, the loop, dev
selection, checkpoints and resume, ``metrics.jsonl``, ``--report-to`` and ``--search`` are fine-tuning's; the
output is an ordinary fine-tuned model directory (plus ``distillation.json``).

The loss of a batch (``distillation_loss``)::

    alpha * hard + (1 - alpha) * soft + hidden_weight * hidden + attention_weight * attention

* ``hard``: the head's own loss on the gold labels (rows from ``--unlabeled`` carry none);
* ``soft``: ``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` (Hinton et al.), averaged over the
  distributions: one per example (classification), per real token (NER), per start and end (QA, over the real
  positions); regression: the squared error to the teacher's score; embeddings: the squared error to the
  teacher's sentence vector (sentence-transformers' model distillation), ``alpha`` weighing the pair loss;
* ``hidden`` (TinyBERT): mean squared error of the embedding output and of each student layer's output to those
  of its teacher layer (``Student.layer_map``), over real tokens, through a learnt projection when the widths
  differ;
* ``attention`` (TinyBERT): mean squared error of each student layer's attention probabilities to its teacher
  layer's (averaged over heads when the head counts differ).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bertkit.config import BertConfig, ModernBertConfig, model_type_of
from bertkit.errors import ConfigError
from bertkit.features import Feature
from bertkit.hub import resolve_model
from bertkit.io import atomic_write_text
from bertkit.models.bert import BertModel
from bertkit.notices import notice
from bertkit.option_groups import above, at_least, between, check_numbers
from bertkit.sentence_config import read_sentence_config
from bertkit.tasks import Task
from bertkit.tasks.base import CONFIG_KEY, Featurized
from bertkit.tasks.embedding.encoder import EmbeddingOutput, SentenceEncoder
from bertkit.tasks.prepare import read_examples
from bertkit.tasks.registry import encoder_family, family
from bertkit.training.finetune import FinetuneConfig, FinetuneResult, finetune, resumes
from bertkit.training.resume_options import check_resumed_options, run_options
from bertkit.training.students import Student, build_student

__all__ = [
    "DistillConfig",
    "DistillTask",
    "Distiller",
    "distill",
    "distillation_loss",
    "soft_target_loss",
    "teacher_settings",
]

LABEL_KEYS = ("labels", "start_positions", "end_positions", "label_normalizer")
"""Batch keys that only the hard loss reads."""
UNLABELED = {"labels": -100, "start_positions": 1 << 30, "end_positions": 1 << 30}
"""What a row from ``--unlabeled`` carries in place of labels: values the heads' losses ignore."""


@dataclass
class DistillConfig:
    """What a distillation adds to a fine-tuning run."""

    teacher: str
    """The fine-tuned teacher: a model directory (``finetune``'s output, or a sentence-transformers folder)."""
    student: str = "3"
    """A number of the teacher's layers to keep (spread from first to last: 6 -> 3 keeps 0, 3, 5), a size
    preset (tiny, mini, small; initialised at random) or a model directory with the teacher's vocabulary."""
    temperature: float = field(default=2.0, metadata=above(0))
    """Softmax temperature of the soft targets; the KL term is multiplied by its square."""
    alpha: float | None = field(default=None, metadata=between(0, 1))
    """Weight of the hard-label loss, the soft targets getting 1 - alpha (default: 0.5; embedding 0, the
    teacher's vectors only)."""
    hidden_weight: float = field(default=0.0, metadata=at_least(0))
    """Weight of the hidden-state transfer (TinyBERT): MSE of each student layer's output to its teacher
    layer's, through a learnt projection when the widths differ (0: off)."""
    attention_weight: float = field(default=0.0, metadata=at_least(0))
    """Weight of the attention transfer (TinyBERT): MSE of the attention probabilities (0: off)."""
    unlabeled_file: str | None = None
    """More text in the task's format without labels, which the student learns from the teacher's
    predictions only (not for regression)."""

    def __post_init__(self) -> None:
        check_numbers(self)


# ------------------------------------------------------------------------------------------ losses
def soft_target_loss(student: Tensor, teacher: Tensor, temperature: float, mask: Tensor | None = None) -> Tensor:
    """``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` over the last axis, averaged over the other
    positions (those where ``mask`` is 1 when given)."""
    log_student = F.log_softmax(student.float() / temperature, dim=-1)
    log_teacher = F.log_softmax(teacher.float() / temperature, dim=-1)
    kl = (log_teacher.exp() * (log_teacher - log_student)).sum(-1)
    if mask is None:
        mean = kl.mean()
    else:
        weights = mask.to(kl.dtype)
        mean = (kl * weights).sum() / weights.sum().clamp(min=1.0)
    return mean * temperature**2


def _masked_positions(logits: Tensor, mask: Tensor) -> Tensor:
    """QA logits with padded positions pushed out of both softmaxes."""
    return logits.float().masked_fill(mask == 0, -1e4)


def output_loss(student: Any, teacher: Any, attention_mask: Tensor, temperature: float, regression: bool) -> Tensor:
    """The soft-target term for a head's outputs (see the module doc)."""
    if hasattr(student, "start_logits"):
        pairs = ((student.start_logits, teacher.start_logits), (student.end_logits, teacher.end_logits))
        terms = [
            soft_target_loss(_masked_positions(s, attention_mask), _masked_positions(t, attention_mask), temperature)
            for s, t in pairs
        ]
        return (terms[0] + terms[1]) / 2
    if regression:
        return F.mse_loss(student.logits.float(), teacher.logits.float())
    mask = attention_mask if student.logits.dim() == 3 else None
    return soft_target_loss(student.logits, teacher.logits, temperature, mask)


def distillation_loss(
    hard: Tensor | None, soft: Tensor, alpha: float, extra: Sequence[tuple[float, Tensor]] = ()
) -> Tensor:
    """``alpha * hard + (1 - alpha) * soft + sum(weight * term)``; without labels, the hard term is left out."""
    loss = (1.0 - alpha) * soft
    if hard is not None:
        loss = loss + alpha * hard.float()
    for weight, term in extra:
        loss = loss + weight * term
    return loss


def hidden_loss(
    student: Sequence[Tensor], teacher: Sequence[Tensor], layer_map: Sequence[int], mask: Tensor, project: nn.Module
) -> Tensor:
    """MSE of the embedding output and each student layer's output to its teacher layer's, over real tokens."""
    pairs = [(0, 0), *((j + 1, t + 1) for j, t in enumerate(layer_map))]
    weights = mask.unsqueeze(-1).float()
    count = weights.sum().clamp(min=1.0)
    terms = [
        (((project(student[s].float()) - teacher[t].float()) ** 2 * weights).sum() / (count * teacher[t].shape[-1]))
        for s, t in pairs
    ]
    return torch.stack(terms).mean()


def attention_loss(
    student: Sequence[Tensor], teacher: Sequence[Tensor], layer_map: Sequence[int], mask: Tensor
) -> Tensor:
    """MSE of each student layer's attention probabilities to its teacher layer's, over real query rows."""
    rows = mask[:, None, :, None].float()
    terms = []
    for j, t in enumerate(layer_map):
        s_probs, t_probs = student[j].float(), teacher[t].float()
        if s_probs.shape[1] != t_probs.shape[1]:
            s_probs, t_probs = s_probs.mean(1, keepdim=True), t_probs.mean(1, keepdim=True)
        squared = (s_probs - t_probs) ** 2 * rows
        terms.append(squared.sum() / (rows.sum().clamp(min=1.0) * s_probs.shape[1] * s_probs.shape[-1]))
    return torch.stack(terms).mean()


# ------------------------------------------------------------------------------------------ the module
class Distiller(nn.Module):
    """What the loop trains: the student (saved), a projection for hidden-state transfer when the widths differ
    (trained, not saved), and the teacher, held outside the module's parameters and state (never trained, never
    checkpointed). Out of training it is the student alone (dev scoring)."""

    def __init__(self, student: nn.Module, teacher: nn.Module, settings: DistillConfig, layer_map: Sequence[int]):
        super().__init__()
        self.student = student
        self.__dict__["teacher"] = teacher.eval().requires_grad_(False)  # not a submodule: not trained or saved
        self.settings, self.layer_map = settings, list(layer_map)
        self.alpha = settings.alpha if settings.alpha is not None else 0.5
        widths = (_width(student), _width(teacher))
        self.project: nn.Module = (
            nn.Linear(*widths) if settings.hidden_weight and widths[0] != widths[1] else nn.Identity()
        )
        config = getattr(student, "config", None)
        self.regression = bool(config is not None and (config.problem_type == "regression" or config.num_labels == 1))

    @property
    def config(self) -> BertConfig:
        return cast(BertConfig, self.student.config)

    def _teacher(self, device: torch.device) -> nn.Module:
        teacher: nn.Module = self.__dict__["teacher"]
        if next(teacher.parameters()).device != device:
            teacher.to(device)
        return teacher

    def forward(self, **batch: Tensor) -> Any:
        inputs = {k: v for k, v in batch.items() if k not in LABEL_KEYS}
        if not self.training:
            return self.student(**inputs)
        states = {
            "output_hidden_states": bool(self.settings.hidden_weight),
            "output_attentions": bool(self.settings.attention_weight),
        }
        with torch.no_grad():
            taught = self._teacher(batch["input_ids"].device)(**inputs, **states)
        labelled = batch if _has_labels(batch) else inputs
        out = self.student(**labelled, **states)
        mask = batch["attention_mask"]
        soft = output_loss(out, taught, mask, self.settings.temperature, self.regression)
        extra = []
        if self.settings.hidden_weight:
            extra.append(
                (
                    self.settings.hidden_weight,
                    hidden_loss(out.hidden_states, taught.hidden_states, self.layer_map, mask, self.project),
                )
            )
        if self.settings.attention_weight:
            extra.append(
                (
                    self.settings.attention_weight,
                    attention_loss(out.attentions, taught.attentions, self.layer_map, mask),
                )
            )
        return dataclasses.replace(out, loss=distillation_loss(out.loss, soft, self.alpha, extra))


class EmbeddingDistiller(nn.Module):
    """The embedding task's distiller: the student encoder (``SentenceEncoder``, saved) learns the teacher
    encoder's sentence vectors (MSE, through a learnt projection when the widths differ), ``alpha`` weighing the
    task's own pair loss. Out of training it is the student encoder alone."""

    def __init__(self, student: SentenceEncoder, teacher: SentenceEncoder, settings: DistillConfig, normalize: bool):
        super().__init__()
        self.student = student
        self.__dict__["teacher"] = teacher.eval().requires_grad_(False)
        self.alpha = settings.alpha if settings.alpha is not None else 0.0
        self.normalize = normalize
        widths = (_width(student), _width(teacher))
        self.project: nn.Module = nn.Linear(*widths) if widths[0] != widths[1] else nn.Identity()

    @property
    def config(self) -> BertConfig | ModernBertConfig:
        return self.student.config

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        columns: Tensor | None = None,
        scores: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Any:
        if columns is None or not self.training:
            return self.student(input_ids, attention_mask)
        teacher: SentenceEncoder = self.__dict__["teacher"]
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        parts = self.student.mini_batches(attention_mask)
        order = torch.cat(parts)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order), device=order.device)
        vectors = torch.cat([self.student.embed(input_ids[p], attention_mask[p]) for p in parts])[inverse]
        with torch.no_grad():
            target = torch.cat([teacher.embed(input_ids[p], attention_mask[p]) for p in parts])[inverse]
        projected = self.project(vectors)
        if self.normalize:
            projected, target = F.normalize(projected, dim=-1), F.normalize(target, dim=-1)
        soft = F.mse_loss(projected.float(), target.float())
        hard = self.student.loss_fn(vectors[columns], scores) if self.alpha else None
        return EmbeddingOutput(distillation_loss(hard, soft, self.alpha), vectors[columns])


def _width(model: nn.Module) -> int:
    config: BertConfig = getattr(model, "config")  # noqa: B009 (heads, encoders and wrappers expose one)
    return config.hidden_size


def _has_labels(batch: Mapping[str, Tensor]) -> bool:
    """Whether any row of the batch has a label the head's loss counts (rows from ``--unlabeled`` do not)."""
    if "labels" in batch:
        labels = batch["labels"]
        return bool(labels.is_floating_point() or (labels != UNLABELED["labels"]).any())
    if "start_positions" in batch:
        return bool((batch["start_positions"] < batch["input_ids"].shape[1]).any())
    return False


# ------------------------------------------------------------------------------------------ the task
class DistillTask:
    """A task that distils: the wrapped task's reading, batching, scoring and writing, with the teacher's labels
    (not those fitted to the training file), ``--unlabeled`` rows added to the training features, and the
    :class:`Distiller` as the training module."""

    def __init__(
        self,
        task: Task,
        teacher: nn.Module,
        settings: DistillConfig,
        student: Student,
        teacher_config: BertConfig,
        reading: Mapping[str, Any],
    ):
        self.inner, self.teacher, self.settings, self.student = task, teacher, settings, student
        self.teacher_config, self.reading = teacher_config, dict(reading)
        self.embedding = family(task.name).trains_encoder

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def fit_labels(self, examples: Sequence) -> None:
        """The teacher's labels: the student's logits must mean what the teacher's do."""
        if self.embedding:
            self.inner.fit_labels(examples)
        else:
            self.inner.load_config(self.teacher_config)

    def featurize(
        self, examples: Sequence, tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        done = self.inner.featurize(examples, tokenizer, max_seq_length, training=training)
        if not training or self.settings.unlabeled_file is None:
            return done
        extra = self.unlabeled_features(tokenizer, max_seq_length)
        return Featurized([*done.features, *extra], done.truncated, done.dropped)

    def unlabeled_features(self, tokenizer: Any, max_seq_length: int) -> list[Feature]:
        """The ``--unlabeled`` rows as training features whose labels every head's loss ignores."""
        if self.embedding or getattr(self.inner, "regression", False):
            raise ConfigError("--unlabeled is for classification, ner and qa students")
        path = self.settings.unlabeled_file
        assert path is not None
        read = read_examples(self.inner, path, labeled=False, **self.reading)
        features = self.inner.featurize(read.examples, tokenizer, max_seq_length).features
        names = [n for n in self.inner.model_input_names if n in UNLABELED]
        for feature in features:
            for name in names:
                feature[name] = (
                    [UNLABELED[name]] * len(feature["input_ids"])
                    if name == "labels" and family(self.inner.name).tags_tokens
                    else UNLABELED[name]
                )
        notice(f"{path}: {len(read.examples)} unlabelled examples -> {len(features)} features the teacher labels")
        return features

    def training_module(self, model: nn.Module) -> nn.Module:
        student = self.inner.training_module(model)
        if self.embedding:
            assert isinstance(student, SentenceEncoder) and isinstance(self.teacher, BertModel)  # the embedding task's
            teacher = SentenceEncoder(
                self.teacher, student.loss_fn, pooling=student.pooling, mini_batch_size=student.mini_batch_size
            )
            return EmbeddingDistiller(student, teacher, self.settings, bool(getattr(self.inner, "normalize", True)))
        return Distiller(student, self.teacher, self.settings, self.student.layer_map)

    def saved_model(self, module: nn.Module) -> nn.Module:
        if isinstance(module, (Distiller, EmbeddingDistiller)):
            module = module.student
        return self.inner.saved_model(module)


# ------------------------------------------------------------------------------------------ the run
def teacher_directory(teacher: str | Path) -> Path:
    """The teacher's model folder (a hub id resolved), or a ``ConfigError`` that says what ``teacher`` is
    instead: a file, a folder without a model, or a ModernBERT model, whose students this module does not build
    (it takes BERT layers, presets and heads)."""
    path = resolve_model(str(teacher))
    if path.is_file():
        raise ConfigError(
            f"--teacher {teacher} is a file, not a model folder: give the directory a fine-tuning run wrote "
            f"(finetune's --output)"
        )
    if not path.is_dir():
        raise ConfigError(f"--teacher {teacher} does not exist; give a fine-tuned model's directory")
    if not (path / "config.json").is_file():
        raise ConfigError(f"--teacher {teacher} holds no config.json, so it is not a model folder")
    if model_type_of(path) == "modernbert":
        raise ConfigError(
            f"--teacher {teacher} is a ModernBERT model; bertkit distils BERT teachers only (a student is built "
            f"from BERT layers, presets and heads): fine-tune a smaller ModernBERT on the task instead"
        )
    return path


def teacher_settings(teacher_dir: Path) -> tuple[str, dict[str, Any], int | None]:
    """The task, task options and sequence length a teacher was fine-tuned with (the family that fine-tunes the bare
    encoder, ``embedding``, for a model with no task: a sentence-transformers folder)."""
    config = BertConfig.load(teacher_dir)
    saved = config.extra.get(CONFIG_KEY)
    if not saved:
        encoder = encoder_family().name
        sentence = read_sentence_config(teacher_dir)
        if sentence is None:
            return encoder, {}, min(256, config.max_position_embeddings)
        options = {"pooling": sentence.pooling, "normalize": sentence.normalize}
        return encoder, options, sentence.max_seq_length or min(256, config.max_position_embeddings)
    return saved["task"], dict(saved.get("task_options") or {}), saved.get("max_seq_length")


def distill(config: FinetuneConfig, settings: DistillConfig) -> FinetuneResult:
    """Distil ``settings.teacher`` into the student ``settings.student`` on ``config``'s data (``config.model``
    is not read: the student is); see the module doc."""
    from bertkit.weights import load_model

    teacher_dir = teacher_directory(settings.teacher)
    options = run_options(config, teacher=settings.teacher, student=settings.student, **_plain(settings))
    if resumes(config):  # before the student is built: a resume with another --student is refused as such
        check_resumed_options(config.partial_dir, options)
    partial = config.partial_dir
    # Beside the work dir, not in it: fine-tuning's output check clears a finished run's leftover work dir.
    student_dir = partial.with_name(partial.name + "-student")
    student = build_student(settings.student, teacher_dir, student_dir, seed=config.train.seed)
    teacher_config = BertConfig.load(teacher_dir)
    own = family(config.task)
    head = own.head if own.trains_encoder else None
    teacher = load_model(teacher_dir, head=head)
    reading = {"format": config.format, "header": config.header, "quiet": False}
    notice(
        f"distilling {teacher_dir} ({teacher_config.num_hidden_layers} layers, width {teacher_config.hidden_size}) "
        f"into {student.kind} student: {student.config.num_hidden_layers} layers, width {student.config.hidden_size}"
        + (f", teacher layers {student.layer_map}" if student.kind == "layers" else "")
    )

    def adapt(task: Task) -> Task:
        return cast(Task, DistillTask(task, teacher, settings, student, teacher_config, reading))

    run = dataclasses.replace(config, model=str(student.directory))
    try:
        result = finetune(run, adapt_task=adapt, options=options)
    finally:
        if student.kind != "directory" and not any(partial.glob("checkpoint-*")):
            shutil.rmtree(student.directory, ignore_errors=True)
    if result.output is not None:
        record = {"teacher": str(teacher_dir), "student": settings.student, **student.to_dict(), **_plain(settings)}
        atomic_write_text(result.output / "distillation.json", json.dumps(record, indent=2) + "\n")
    return result


def _plain(settings: DistillConfig) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in ("teacher", "student")}
