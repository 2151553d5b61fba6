"""A Python function for each job of the ``bertkit`` command: :func:`finetune`, :func:`pretrain`,
:func:`prepare_data` and :func:`evaluate`.

Each takes the options of its command under the same flat names (``lr``, ``micro_batch_size``, ``epochs``,
``text_column``...; a flag ``--micro-batch-size`` is the keyword ``micro_batch_size``), builds the same config
dataclasses (``FinetuneConfig.from_options``, ``TrainConfig.from_options``, ``PrepareConfig``) and returns what
the run made. The commands parse their flags and call these. What a job tells while it works goes to the
``bertkit`` loggers (:mod:`bertkit.notices`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertkit.errors import ConfigError

if TYPE_CHECKING:
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
    **options: Any,
) -> FinetuneResult:
    """Fine-tune as ``bertkit finetune`` does, with its options as keywords::

        result = bertkit.finetune(task="classification", model="./minilm", train="sst2/train.tsv",
                                  dev="sst2/dev.tsv", output="runs/sst2", epochs=3, lr=5e-5)
        result.metrics  # the saved model's dev metrics

    Options as :func:`finetune_config` takes them. Returns the run's
    :class:`~bertkit.training.finetune.FinetuneResult` (``output`` is ``None`` when a signal stopped the run:
    call again with ``resume=True``)."""
    from bertkit.training.finetune import finetune as run

    settings = finetune_config(task, model, train, output, dev=dev, config=config, task_options=task_options, **options)
    return run(settings)


# ------------------------------------------------------------------------------------------ pretrain
def pretrain(
    data: PathLike | None = None,
    output: PathLike | None = None,
    *,
    config: PathLike | None = None,
    resume: bool = False,
    resume_from: PathLike | None = None,
    **options: Any,
) -> TrainResult:
    """Pre-train as ``bertkit pretrain`` does: ``data`` a directory of ``prepare_data``, ``output`` the run
    directory, ``config`` a config file the given options override (``None``: not given), the other options
    the command's flat names (``model_config="mini"``, ``max_steps=1000``, ``lr=1e-4``...). ``resume``
    continues from the latest valid checkpoint in ``output``, ``resume_from`` from the given one. Returns the
    loop's :class:`~bertkit.training.loop.TrainResult` (``stop_reason``, ``step``, ``checkpoint``...)."""
    from bertkit.training.pretrain import PretrainConfig, build_config
    from bertkit.training.pretrain import pretrain as run
    from bertkit.training.train_config import read_config_file

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
    import dataclasses

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
