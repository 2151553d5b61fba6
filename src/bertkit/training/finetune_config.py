"""What a fine-tuning run is given: ``FinetuneConfig``, built from the flat options of the command line and
config files by ``FinetuneConfig.from_options``, with the task's defaults for what is not given."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bertkit.errors import ConfigError
from bertkit.option_groups import at_least, check_numbers
from bertkit.tasks.registry import family
from bertkit.training.finetune_defaults import fixed_recipe, task_defaults, unset_defaults
from bertkit.training.train_config import NOT_AN_OPTION, TrainConfig, option_names, read_config_file, split_options


@dataclass
class FinetuneConfig:
    """Everything a fine-tuning run needs; the CLI and TOML/YAML config files fill the same fields.

    ``train`` holds the loop's options (batch, learning rate, precision...). Fields left at ``None`` take the
    task's defaults (:data:`~bertkit.training.finetune_defaults.DEFAULTS`). :meth:`from_options` builds one
    from flat keywords (``FinetuneConfig.from_options(task=..., lr=3e-5, micro_batch_size=16)``), as the command
    line and config files give them: what is not given comes from the task's defaults, then from
    :class:`TrainConfig`. The batch and the epochs the user leaves unset are sized to the training set once it
    is read (:func:`~bertkit.training.finetune_defaults.size_to_data`); ``sized`` names them.
    """

    FILE_ALIASES: ClassVar[Mapping[str, str]] = {"train": "train_file", "dev": "dev_file"}
    """Config-file keys accepted for fields: ``train``/``dev`` for ``train_file``/``dev_file``."""
    FILE_SECTIONS: ClassVar[tuple[str, ...]] = ("search",)
    """Config-file tables another reader owns: ``[search]``, the search grid's
    (:mod:`bertkit.training.hyperparameter_search`)."""

    task: str
    """``classification``, ``regression``, ``ner``, ``qa`` or ``embedding``."""
    model: str
    """Starting model: a Hugging Face-layout BERT directory with its tokenizer files."""
    train_file: str
    """Training data in the task's format (TSV/CSV/JSONL table, CoNLL columns, SQuAD JSON)."""
    output: str
    """Directory to write the fine-tuned model, metrics and logs to (must not exist unless ``overwrite``)."""
    train: TrainConfig
    """The loop's options; ``train.output_dir`` is ``<output>.partial``."""
    dev_file: str | None = None
    """Labelled dev data: evaluated after each epoch; its main metric picks the saved model."""
    format: str | None = None
    """How to read the train and dev data: ``tsv``, ``csv``, ``jsonl``, ``json``, ``parquet``, ``arrow``
    (a datasets save_to_disk directory) or ``hf`` (``hf:NAME[:CONFIG]:SPLIT``); default: from the path."""
    header: bool | None = None
    """Whether the first line of a TSV/CSV file names its columns; default: detected, and reported."""
    task_options: dict[str, Any] = field(default_factory=dict)
    """Options of the task class (``text_column``, ``text_pair_column``, ``label_column``, ``main_metric``,
    ``label_names``, ``doc_stride``, ``window_stride``, ``long_text``...); see ``docs/finetuning.md``."""
    max_seq_length: int | None = field(default=None, metadata=at_least(1))
    """Longest feature in tokens, specials included."""
    group_by_length: bool | None = None
    """``True``: batch features of similar length (random order of batches), so that little compute goes to
    padding. ``False``: plain random batches, whose padding the model skips in training (``Unpadded``), at
    about 1.2x the cost of grouped ones. Default: random for ``regression`` (a score that correlates with
    length makes length-grouped batches a biased sample: docs/finetuning.md), grouped for the others."""
    eval_batch_size: int = field(default=64, metadata=at_least(1))
    """Features per forward pass when evaluating."""
    early_stopping_patience: int | None = field(default=None, metadata=at_least(1))
    """Stop after this many evaluations in a row without a better main metric (needs ``dev_file``)."""
    max_train_examples: int | None = field(default=None, metadata=at_least(1))
    """Use only the first N training examples (quick runs, benchmarks)."""
    overwrite: bool = False
    """Replace an existing output directory."""
    resume: bool = False
    """Continue an interrupted run from the last checkpoint in ``<output>.partial/``."""
    sized: tuple[str, ...] = field(default=(), metadata=NOT_AN_OPTION)
    """Defaults that the training set's size decides (``micro_batch_size``, ``epochs``): those the user did not
    set, directly or through another option (``--global-batch-size``, ``--max-steps``...)."""

    @classmethod
    def from_options(
        cls,
        task: str,
        model: str,
        train_file: str,
        output: str,
        *,
        train: TrainConfig | None = None,
        train_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> FinetuneConfig:
        """A config from flat options, as the command line and config files give them: fields of this class
        and of :class:`TrainConfig` side by side (``None`` means "the default"), or training keywords in
        ``train_options``. A ``train`` given whole is taken as it is (flat training keywords then replace its
        fields); otherwise it is built from the task's defaults, and ``sized`` (unless given) names the sized
        defaults that no given option decides."""
        sized = options.pop("sized", None)
        own, flat = split_options(options, cls)
        flat = {**(train_options or {}), **flat}
        split_options(flat, TrainConfig)  # a fine-tuning field among train_options is an error too
        if train is None:
            train, sized = _default_train(task_defaults(task), flat, () if fixed_recipe(task) else sized)
        elif flat:
            train = train.with_options(**flat)
        given = {name: value for name, value in own.items() if value is not None}
        return cls(task, model, train_file, output, train, sized=tuple(sized or ()), **given)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike | None, *, task_options: Mapping[str, Any] | None = None, **options: Any
    ) -> FinetuneConfig:
        """A config from a config file (``None``: none) whose options the given ones override, as
        ``bertkit finetune --config FILE`` reads it: an option given as ``None`` is not given, and given task
        options override the file's ``[task_options]``. The task, model, training file and output must come
        from one of the two."""
        merged = read_config_file(path, cls) if path else {}
        file_task_options = merged.pop("task_options", None) or {}
        merged.update({name: value for name, value in options.items() if value is not None})
        for required, flag in (
            ("task", "--task"),
            ("model", "--model"),
            ("train_file", "--train"),
            ("output", "--output"),
        ):
            if required not in merged:
                raise ConfigError(f"{flag} is required (on the command line or in the config file)")
        return cls.from_options(**merged, task_options={**file_task_options, **(task_options or {})})

    def __post_init__(self) -> None:
        family(self.task)  # a ConfigError naming the choices for an unknown task
        defaults = task_defaults(self.task)
        for f in dataclasses.fields(self):
            if f.default is None and getattr(self, f.name) is None:
                setattr(self, f.name, defaults.get(f.name))
        self.sized = tuple(self.sized)
        check_numbers(self)
        if self.early_stopping_patience is not None and self.dev_file is None:
            raise ConfigError("early stopping needs a dev set: give --dev or drop --early-stopping-patience")
        if self.overwrite and self.resume:
            raise ConfigError("give --overwrite or --resume, not both")
        self.train.output_dir = self.partial_dir

    @property
    def partial_dir(self) -> Path:
        """Where training runs (checkpoints, logs) before the output directory is assembled."""
        out = Path(self.output)
        return out.with_name(out.name + ".partial")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "train"}
        out["train"] = self.train.to_dict()
        return out


def _default_train(
    defaults: Mapping[str, Any], flat: Mapping[str, Any], sized: Sequence[str] | None
) -> tuple[TrainConfig, Sequence[str]]:
    """The loop's options from the task's defaults and the given flat ones (``None``: the default), and the
    sized defaults (``sized`` when given, else those no given option decides)."""
    flat = {k: v for k, v in flat.items() if v is not None or k not in defaults}
    if sized is None:
        sized = unset_defaults([k for k, v in flat.items() if v is not None])
    train_defaults = {k: v for k, v in defaults.items() if k in option_names(TrainConfig) and k != "epochs"}
    if not any(flat.get(limit) is not None for limit in ("epochs", "max_steps", "max_time")):
        train_defaults["epochs"] = defaults["epochs"]
    if flat.get("warmup_steps") is not None:  # given warmup steps win over the default warmup ratio
        del train_defaults["warmup_ratio"]
    return TrainConfig.from_options(**{**train_defaults, **flat}), sized
