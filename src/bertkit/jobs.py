"""A Python function for each job of the ``bertkit`` command: :func:`finetune`, :func:`distill`,
:func:`pretrain`, :func:`prepare_data`, :func:`evaluate` and :func:`tokenize` (``predict`` and the other
inference commands are :mod:`bertkit.inference`'s).

Each takes the options of its command under the same flat names (``lr``, ``micro_batch_size``, ``epochs``,
``text_column``, ``threads``...; a flag ``--micro-batch-size`` is the keyword ``micro_batch_size``), builds the
same config dataclasses (``FinetuneConfig.from_options``, ``TrainConfig.from_options``, ``PrepareConfig``) and
returns what the run made. The commands parse their flags and call these. What a job tells while it works goes
to the ``bertkit`` loggers (:mod:`bertkit.notices`).

The training jobs take their many options as keywords read from the same dataclasses as the flags; their
signature and docstring list each one (:func:`with_option_signature`, applied when ``bertkit.finetune`` is first
looked up, since reading the dataclasses imports torch), so ``help(bertkit.finetune)`` and
``inspect.signature`` show them.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertkit.errors import ConfigError
from bertkit.option_groups import field_docs, help_text, option_leaves

if TYPE_CHECKING:
    from bertkit.tokenizer import Encoding
    from bertkit.training.distill import DistillConfig
    from bertkit.training.finetune import FinetuneConfig, FinetuneResult
    from bertkit.training.loop import TrainResult

PathLike = str | os.PathLike


# ------------------------------------------------------------------------------------------ finetune
def finetune_config(
    task: str | None = None,
    model: PathLike | None = None,
    train: PathLike | None = None,
    output: PathLike | None = None,
    *,
    dev: PathLike | None = None,
    config: PathLike | None = None,
    task_options: Mapping[str, Any] | None = None,
    **options: Any,
) -> FinetuneConfig:
    """The :class:`~bertkit.training.finetune.FinetuneConfig` of ``bertkit finetune``: ``config`` a TOML/YAML
    config file (``--config``) that the given options override; an option given as ``None`` is not given.
    ``options`` are the command's flat names (``train_file``/``dev_file`` may stand for ``train``/``dev``);
    a name that is no fine-tuning or training option is the task's (``text_column``, ``label_names``...), as
    are those of ``task_options``."""
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.train_config import TrainConfig, option_names

    given = {"task": task, "model": model, "train_file": train, "dev_file": dev, "output": output}
    flat: dict[str, Any] = {name: str(value) for name, value in given.items() if value is not None}
    # ``tensorboard`` is no option any more but old scripts pass it: the training options read it as report_to
    known = set(option_names(FinetuneConfig)) | set(option_names(TrainConfig)) | {"tensorboard"}
    own: dict[str, Any] = dict(task_options or {})
    for name, value in options.items():
        if value is not None:
            (flat if name in known else own)[name] = value
    return FinetuneConfig.from_file(config, task_options=own, **flat)


def finetune(
    task: str | None = None,
    model: PathLike | None = None,
    train: PathLike | None = None,
    output: PathLike | None = None,
    *,
    dev: PathLike | None = None,
    config: PathLike | None = None,
    task_options: Mapping[str, Any] | None = None,
    threads: int | None = None,
    **options: Any,
) -> FinetuneResult:
    """Fine-tune as ``bertkit finetune`` does, with its options as keywords::

        result = bertkit.finetune(task="classification", model="./minilm", train="sst2/train.tsv",
                                  dev="sst2/dev.tsv", output="runs/sst2", epochs=3, lr=5e-5)
        result.metrics  # the saved model's dev metrics

    ``dev``: labelled dev data; ``config``: a TOML/YAML config file the given options override;
    ``task_options``: the task's options as a mapping (each may also be given as a keyword); ``threads``: CPU
    threads (``--threads``). An option given as ``None`` is not given. Returns the run's
    :class:`~bertkit.training.finetune.FinetuneResult` (``output`` is ``None`` when a signal stopped the run:
    call again with ``resume=True``)."""
    from bertkit.threads import use_threads
    from bertkit.training.finetune import finetune as run

    use_threads(threads)
    settings = finetune_config(task, model, train, output, dev=dev, config=config, task_options=task_options, **options)
    return run(settings)


def _finetune_classes() -> list[type]:
    from bertkit.tasks.registry import option_classes
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.train_config import TrainConfig

    return [FinetuneConfig, TrainConfig, *option_classes()]


# ------------------------------------------------------------------------------------------ distill
def distill_settings(teacher: PathLike, options: dict[str, Any]) -> DistillConfig:
    """``bertkit distill``'s settings: the :class:`~bertkit.training.distill.DistillConfig` fields popped from
    ``options``, which then get the teacher's task, task options, sequence length and ``model`` (the teacher)
    where they give none."""
    from bertkit.tasks.registry import task_option_names
    from bertkit.training.distill import DistillConfig, teacher_directory, teacher_settings

    own = {f.name for f in dataclasses.fields(DistillConfig)} - {"teacher"}
    settings = DistillConfig(
        teacher=str(teacher), **{name: options.pop(name) for name in own if options.get(name) is not None}
    )
    for name in own:
        options.pop(name, None)
    task, task_options, max_seq_length = teacher_settings(teacher_directory(settings.teacher))
    for name in task_option_names():  # the teacher's task options, where none is given
        if options.get(name) is None and name in task_options:
            options[name] = task_options[name]
    options["task"] = options.get("task") or task
    options["max_seq_length"] = options.get("max_seq_length") or max_seq_length
    options["model"] = settings.teacher
    return settings


def distill(
    teacher: PathLike,
    train: PathLike,
    output: PathLike,
    *,
    dev: PathLike | None = None,
    config: PathLike | None = None,
    task_options: Mapping[str, Any] | None = None,
    threads: int | None = None,
    **options: Any,
) -> FinetuneResult:
    """Distil a fine-tuned ``teacher`` into a smaller student as ``bertkit distill`` does, with its options as
    keywords::

        result = bertkit.distill("runs/sst2", "sst2/train.tsv", "runs/sst2-3l", dev="sst2/dev.tsv", student="3",
                                 temperature=2.0, epochs=2)

    The task, its options and the sequence length default to the teacher's; the other arguments as
    :func:`finetune` takes them. Returns the run's :class:`~bertkit.training.finetune.FinetuneResult`."""
    from bertkit.threads import use_threads
    from bertkit.training.distill import distill as run

    use_threads(threads)
    given = dict(options)
    settings = distill_settings(teacher, given)
    task, model = given.pop("task"), given.pop("model")
    setup = finetune_config(task, model, train, output, dev=dev, config=config, task_options=task_options, **given)
    return run(setup, settings)


def _distill_classes() -> list[type]:
    from bertkit.training.distill import DistillConfig

    return [DistillConfig, *_finetune_classes()]


# ------------------------------------------------------------------------------------------ pretrain
def pretrain(
    data: PathLike | None = None,
    output: PathLike | None = None,
    *,
    config: PathLike | None = None,
    resume: bool = False,
    resume_from: PathLike | None = None,
    threads: int | None = None,
    **options: Any,
) -> TrainResult:
    """Pre-train as ``bertkit pretrain`` does: ``data`` a directory of ``prepare_data``, ``output`` the run
    directory, ``config`` a config file the given options override (``None``: not given), the other options
    the command's flat names (``model_config="mini"``, ``max_steps=1000``, ``lr=1e-4``...). ``resume``
    continues from the latest valid checkpoint in ``output``, ``resume_from`` from the given one. Returns the
    loop's :class:`~bertkit.training.loop.TrainResult` (``stop_reason``, ``step``, ``checkpoint``...);
    ``threads``: CPU threads (``--threads``)."""
    from bertkit.threads import use_threads
    from bertkit.training.pretrain import PretrainConfig, build_config
    from bertkit.training.pretrain import pretrain as run
    from bertkit.training.train_config import read_config_file

    use_threads(threads)

    flat = read_config_file(config, PretrainConfig) if config else {}
    given = {"data": data, "output": output, **options}
    flat.update(
        {
            name: str(value) if name in ("data", "output") else value
            for name, value in given.items()
            if value is not None
        }
    )
    if resume and resume_from:
        raise ConfigError("give --resume or --resume-from, not both")
    if resume or resume_from:
        flat["resume"] = str(resume_from) if resume_from else "auto"
    return run(build_config(flat))


def _pretrain_classes() -> list[type]:
    from bertkit.training.pretrain import PretrainConfig
    from bertkit.training.train_config import TrainConfig

    return [PretrainConfig, TrainConfig]


# ------------------------------------------------------------------------------------------ tokenize
def tokenize(text: str, model: PathLike, pair: str | None = None) -> Encoding:
    """The tokens of ``text`` (and ``pair``, segment B) as ``bertkit tokenize`` shows them: ``model`` a model
    directory or hub id, a ``vocab.txt`` or a ``tokenizer.json``. The :class:`~bertkit.tokenizer.Encoding`
    holds ``tokens``, ``ids``, ``type_ids``, ``offsets`` (character spans in their text), ``sequence_ids``,
    ``word_ids`` and ``special_tokens_mask``."""
    from bertkit.hub import resolve_model
    from bertkit.tokenizer import Tokenizer

    return Tokenizer.from_pretrained(resolve_model(str(model))).encode(text, pair)


# ------------------------------------------------------------------------------------------ signatures
OPTION_CLASSES: dict[str, Callable[[], list[type]]] = {
    "finetune": _finetune_classes,
    "distill": _distill_classes,
    "pretrain": _pretrain_classes,
    "prepare_data": lambda: _prepare_classes(),
}
"""For each job that takes ``**options``, the dataclasses whose fields those options are (the flags' too)."""

_RENAMED = {
    "train_file": "train",
    "dev_file": "dev",
    "block_bytes": "block_mb",
    "strip_gutenberg": "keep_gutenberg_boilerplate",
}
"""Fields a job takes under another name (its own parameters)."""


def with_option_signature(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a job of :data:`OPTION_CLASSES`) with a signature and a docstring that list its options:
    one keyword-only parameter per field of its dataclasses (default ``None``: not given), after its own
    parameters, each described in the docstring by its field's docstring. Done once per function."""
    classes = OPTION_CLASSES.get(function.__name__)
    if classes is None or "__signature__" in vars(function):
        return function
    own = inspect.signature(function)
    parameters = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    taken = {p.name for p in parameters}
    lines = []
    for leaf in (leaf for cls in classes() for leaf in option_leaves(cls)):
        if leaf.name in taken or _RENAMED.get(leaf.name) in taken or dataclasses.is_dataclass(leaf.hint):
            continue  # a parameter of its own, or a nested config (``train``) whose fields are listed
        taken.add(leaf.name)
        parameters.append(
            inspect.Parameter(leaf.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=leaf.hint)
        )
        doc = help_text(field_docs(leaf.owner).get(leaf.field.name, ""))
        lines.append(f"    {leaf.name}: {doc}")
    function.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
    function.__doc__ = f"{function.__doc__}\n\nOptions (``None``: the default)::\n\n" + "\n".join(lines)
    return function


# ------------------------------------------------------------------------------------------ prepare-data
@dataclass
class PreparedData:
    """What :func:`prepare_data` wrote."""

    output: Path
    """The dataset directory (``dataset.json``, shards, ``tokenizer/``), the ``data`` of :func:`pretrain`."""
    train_instances: int
    eval_instances: int
    tokens: int
    """Tokens of both splits."""
    complete: bool
    """False while a multi-machine preparation still misses blocks (``shard_index``/``num_shards``)."""
    meta: dict[str, Any]
    """The content of ``dataset.json``."""

    def summary(self) -> str:
        """``wrote 1200 train + 12 eval instances (151234 tokens) to data128 (complete)``."""
        blocks = self.meta.get("blocks", [])
        state = "complete" if self.complete else f"{len(blocks)} of {self.meta.get('expected_blocks')} blocks so far"
        return (
            f"wrote {self.train_instances} train + {self.eval_instances} eval instances "
            f"({self.tokens} tokens) to {self.output} ({state})"
        )


def prepare_data(
    inputs: PathLike | Sequence[PathLike],
    tokenizer: PathLike,
    output: PathLike,
    *,
    block_mb: float | None = None,
    keep_gutenberg_boilerplate: bool = False,
    progress: bool = True,
    **options: Any,
) -> PreparedData:
    """Turn a corpus into pre-training shards as ``bertkit prepare-data`` does: ``inputs`` files, directories
    or globs (``--input``), the other options the command's flat names (``max_seq_length=128``,
    ``dupe_factor=5``, ``masking="static"``, the corpus options ``format``, ``text_field``...); an option given
    as ``None`` is not given. ``progress``: show the progress display (where the ``bertkit`` loggers show
    INFO, :mod:`bertkit.notices`)."""
    from bertkit.data import PrepareConfig, prepare_dataset
    from bertkit.data.corpus import CorpusOptions

    corpus: dict[str, Any] = {"strip_gutenberg": not keep_gutenberg_boilerplate}
    corpus_fields = {f.name for f in dataclasses.fields(CorpusOptions)}
    given = {name: value for name, value in options.items() if value is not None}
    corpus.update({name: given.pop(name) for name in list(given) if name in corpus_fields})
    if block_mb is not None:
        given["block_bytes"] = max(1, int(block_mb * (1 << 20)))
    paths = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    config = PrepareConfig(
        inputs=[str(path) for path in paths],
        tokenizer=str(tokenizer),
        output=str(output),
        corpus=CorpusOptions(**corpus),
        **given,
    )
    meta = prepare_dataset(config, progress=progress)
    train, held = meta["splits"]["train"], meta["splits"]["eval"]
    return PreparedData(
        output=Path(config.output),
        train_instances=train["num_instances"],
        eval_instances=held["num_instances"],
        tokens=train["num_tokens"] + held["num_tokens"],
        complete=bool(meta["complete"]),
        meta=meta,
    )


def _prepare_classes() -> list[type]:
    from bertkit.data import PrepareConfig
    from bertkit.data.corpus import CorpusOptions

    return [PrepareConfig, CorpusOptions]


# ------------------------------------------------------------------------------------------ evaluate
EMBEDDING_TASKS = ("retrieval", "sts")
"""``evaluate`` tasks that measure an embedding model rather than a fine-tuned one's own task."""


def evaluate(
    model: PathLike,
    input: PathLike,
    *,
    task: str | None = None,
    output: PathLike | None = None,
    split: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
    ann: bool = False,
    format: str | None = None,
    header: bool | None = None,
    max_seq_length: int | None = None,
    batch_size: int = 64,
    predictions: PathLike | None = None,
    device: str = "cpu",
    quantize: str | None = None,
    compile: bool | None = None,
    backend: str | None = None,
    **task_options: Any,
) -> dict[str, float]:
    """A model's metrics on labelled data, as ``bertkit evaluate`` prints them: a fine-tuned model on a file in
    its task's format (``predictions``: also write the task's prediction files there), or with ``task`` =
    ``retrieval`` (a BEIR folder) or ``sts`` (scored sentence pairs) an embedding model. ``task_options``: the
    columns (``text_column``, ``label_column``...) and the task's reading options; ``None`` is not given.
    ``output``: also write the metrics to this JSON file."""
    from bertkit.io import atomic_write_text, check_output_file

    if output is not None:
        check_output_file(str(output), example="metrics.json")
    retrieval_only = {"--split": split, "--query-prefix": query_prefix, "--passage-prefix": passage_prefix}
    _check_options_fit(task, {**retrieval_only, "--ann": ann}, [predictions, quantize, backend])
    columns = {name: value for name, value in task_options.items() if value is not None}
    common: dict[str, Any] = dict(format=format, header=header, device=device)
    if task in EMBEDDING_TASKS:
        embedding = dict(split=split, query_prefix=query_prefix, passage_prefix=passage_prefix, ann=ann)
        settings = embedding | common | dict(max_length=max_seq_length, batch_size=batch_size)
        scores = _evaluate_embeddings(str(model), str(input), task, columns, settings)
    else:
        from bertkit.inference import evaluate_model

        scores = evaluate_model(
            str(model),
            str(input),
            task=task,
            task_options=columns,
            max_seq_length=max_seq_length,
            batch_size=batch_size,
            predictions_dir=predictions,
            quantize=quantize,
            compile=compile,
            backend=backend,
            **common,
        )
    if output is not None:
        atomic_write_text(output, json.dumps(scores, indent=1) + "\n")
    return scores


def _check_options_fit(task: str | None, retrieval_only: Mapping[str, object], finetuned_only: list[object]) -> None:
    """Refuse, in one line, an option given to a task that would ignore it."""
    if task != "retrieval":
        for flag, value in retrieval_only.items():
            if value:
                raise ConfigError(f"{flag} goes with --task retrieval")
    if task in EMBEDDING_TASKS:
        for flag, value in zip(("--predictions", "--quantize", "--backend"), finetuned_only):
            if value:
                raise ConfigError(f"{flag} goes with a fine-tuned model's task, not --task {task}")


def _evaluate_embeddings(
    model: str, data: str, task: str, columns: dict[str, object], settings: dict[str, Any]
) -> dict[str, float]:
    """``evaluate --task retrieval|sts``: an embedding model on a BEIR folder or on scored pairs."""
    from bertkit.retrieval import EmbeddingOptions, evaluate_retrieval, evaluate_sts

    options = EmbeddingOptions(
        query_prefix=settings["query_prefix"],
        passage_prefix=settings["passage_prefix"],
        batch_size=settings["batch_size"],
        max_length=settings["max_length"],
    )
    if task == "retrieval":
        return evaluate_retrieval(
            model, data, split=settings["split"], options=options, ann=settings["ann"], device=settings["device"]
        )
    return evaluate_sts(
        model,
        data,
        task_options=columns,
        format=settings["format"],
        header=settings["header"],
        options=options,
        device=settings["device"],
    )
