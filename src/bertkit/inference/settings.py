"""How a fine-tuned model is run, read from its ``config.json`` the same way for a checkpoint and for its ONNX
export: the saved settings (``Settings``), the task of its head with its label names (``task_of_head``) and the
length its inputs are cut to (``input_limit``). Nothing here imports torch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bertkit.errors import ConfigError
from bertkit.tasks import Task
from bertkit.tasks.registry import CONFIG_KEY, family, head_family, make_task


@dataclass(frozen=True)
class Settings:
    """How a fine-tuned model is run: what ``bertkit finetune`` saved with it, or what the caller chose."""

    task: str | None = None
    """``classification``, ``regression``, ``ner`` or ``qa``; ``None``: the task of the model's head."""
    task_options: Mapping[str, Any] = field(default_factory=dict)
    """Options of the task class (``doc_stride``, ``max_query_length``, ``window_stride``, ``long_text``...)."""
    max_seq_length: int | None = None
    """Longest input in tokens, specials included; ``None``: not saved (see ``Loaded.max_length``)."""

    @classmethod
    def saved(cls, config: Any) -> Settings:
        """The settings in a model config (``BertConfig`` or ``ModernBertConfig``: ``config.extra["bertkit_finetune"]``),
        empty when there are none."""
        saved = config.extra.get(CONFIG_KEY) or {}
        length = saved.get("max_seq_length")
        return cls(saved.get("task"), dict(saved.get("task_options") or {}), int(length) if length else None)

    def override(
        self,
        *,
        task: str | None = None,
        task_options: Mapping[str, Any] | None = None,
        max_seq_length: int | None = None,
    ) -> Settings:
        """These settings with the caller's choices on top; another task drops the saved task's options."""
        options = dict(self.task_options) if task in (None, self.task) else {}
        options.update(task_options or {})
        return Settings(task or self.task, options, max_seq_length or self.max_seq_length)


def task_of_head(head: str | None, kind: str, config: Any, settings: Settings) -> Task | None:
    """The task of a model whose head is ``head`` (a Hugging Face class name, ``BertForTokenClassification``...;
    ``kind``: the model's own class name, for messages), configured with ``settings`` and the label names of
    ``config``; ``None`` for a model without a task head (an encoder, a pre-training model)."""
    own = head_family(head)
    if own is None:
        if settings.task is not None:
            raise ConfigError(
                f"the model is a {head or kind}, which has no {settings.task} head; "
                f"fine-tune it first with `bertkit finetune`"
            )
        return None
    name = settings.task or own.problem_types.get(config.problem_type or "", own.name)
    if family(name).head != head:
        raise ConfigError(f"the model holds a {head} ({own.name}), not a {name} model; use --task {own.name}")
    task = make_task(name, settings.task_options)
    task.load_config(config)
    return task


def input_limit(head: str | None, settings: Settings, max_positions: int) -> int:
    """The length inputs are cut (or windowed) to: the ``max_seq_length`` the model was fine-tuned with, else its
    head's default (QA: 384), else the model's full length; never more than its positions."""
    own = head_family(head)
    default = (own.default_length if own else None) or max_positions
    return min(settings.max_seq_length or default, max_positions)
