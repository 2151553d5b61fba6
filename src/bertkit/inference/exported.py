"""The runtime of an export folder: a model that ``bertkit export onnx --output DIR`` wrote, run by ONNX Runtime
with no torch installed or imported.

The folder holds the graph (``model.onnx``, int8 or not), ``config.json`` (label names, what fine-tuning saved),
the tokenizer's files, the sentence-transformers files of an embedding model (pooling, normalisation, length) and
``bertkit_onnx.json`` (``RUNTIME_FILE``: the head the graph computes, its inputs and outputs, int8 or not).
``load_exported`` reads it into an ``Exported``, which the pipelines run as they run a loaded checkpoint: the
tokenizer, the task's featurization and post-processing, the runner and the numpy outputs
(``bertkit.features.outputs``) are the same code; only the forward is the graph's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bertkit.backends.sessions import onnx_session
from bertkit.config import load_config
from bertkit.errors import BertkitError, ConfigError
from bertkit.inference.settings import Settings, input_limit, task_of_head
from bertkit.sentence_config import SentenceConfig, read_sentence_config
from bertkit.tasks import Task
from bertkit.tasks.family import Family
from bertkit.tasks.registry import head_family, named
from bertkit.tokenizer import Tokenizer

RUNTIME_FILE = "bertkit_onnx.json"
"""What the runtime needs to know of an export folder's graph, beside ``config.json``."""
GRAPH_FILE = "model.onnx"

HEAD_PIPELINES = {
    "BertModel": "embed",
    "BertForSequenceClassification": "classify",
    "BertForTokenClassification": "tag",
    "BertForQuestionAnswering": "answer",
}
"""The pipeline each head of an export runs (a ModernBERT head counts as the BERT head of the same role)."""


def is_export_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder that ``bertkit export onnx --output DIR`` wrote."""
    return (Path(path) / RUNTIME_FILE).is_file()


class GraphOutputs(dict[str, Any]):
    """A graph's outputs by name, also readable as attributes (``out.logits``), as a model's output class is;
    an output the graph does not have (``hidden_states``) reads as ``None``."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


class Graph:
    """An exported graph in an ONNX Runtime session: called with the model's int64 input arrays by name, it
    returns ``GraphOutputs``. The runner (``bertkit.features.runner``) feeds it numpy arrays."""

    training = False

    def __init__(self, path: Path, inputs: list[str], outputs: list[str], threads: int | None):
        self.session = onnx_session(path, threads)
        self.inputs = inputs
        self.outputs = outputs

    def __call__(
        self,
        input_ids: np.ndarray,
        token_type_ids: np.ndarray | None = None,
        attention_mask: np.ndarray | None = None,
        **more: Any,
    ) -> GraphOutputs:
        if any(more.values()):
            raise BertkitError(
                f"an ONNX export computes {', '.join(self.outputs)} only; hidden layers and attention maps "
                f"need the checkpoint (run it with --model pointing to the model folder)"
            )
        given = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
        defaults = {"token_type_ids": np.zeros_like(input_ids), "attention_mask": np.ones_like(input_ids)}
        feed = {n: np.asarray(given[n] if given[n] is not None else defaults[n], dtype=np.int64) for n in self.inputs}
        return GraphOutputs(zip(self.outputs, self.session.run(self.outputs, feed)))

    def eval(self) -> Graph:
        return self

    def train(self, mode: bool = True) -> Graph:
        return self


@dataclass
class Exported:
    """An export folder ready for inference: the graph, the tokenizer, the config and what fine-tuning saved; the
    pipelines take it where they take a loaded checkpoint (``bertkit.tasks.pipeline.LoadedModel``)."""

    model: Graph
    tokenizer: Tokenizer
    config: Any
    """``BertConfig`` or ``ModernBertConfig`` (``config.json``)."""
    head: str
    """The BERT head class the graph computes (``BertForSequenceClassification``...)."""
    kind: str
    """The exported class (``ModernBertForTokenClassification``...), for messages."""
    quantize: str | None
    directory: Path
    settings: Settings | None = None
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    engine = "onnxruntime"
    checkpoint_names = None
    device = "cpu"

    def __post_init__(self) -> None:
        if self.settings is None:
            self.settings = Settings.saved(self.config)

    @property
    def encoder(self) -> Graph:
        return self.model

    @property
    def max_positions(self) -> int:
        return int(self.config.max_position_embeddings)

    @property
    def max_length(self) -> int:
        assert self.settings is not None
        return input_limit(self.head, self.settings, self.max_positions)

    @property
    def sentence_config(self) -> SentenceConfig | None:
        if "sentence" not in self.cache:
            self.cache["sentence"] = read_sentence_config(self.directory)
        config: SentenceConfig | None = self.cache["sentence"]
        return config

    @property
    def task(self) -> Task:
        if "task" not in self.cache:
            assert self.settings is not None
            self.cache["task"] = task_of_head(self.head, self.kind, self.config, self.settings)
        if self.cache["task"] is None:
            raise BertkitError(f"the export is a {self.kind}, which has no task head; export a fine-tuned model")
        task: Task = self.cache["task"]
        return task

    def own_family(self) -> Family | None:
        assert self.settings is not None
        return named(self.settings.task) or head_family(self.head)

    def supports(self, pipeline: str) -> bool:
        return HEAD_PIPELINES.get(self.head) == pipeline

    @property
    def pipelines(self) -> list[str]:
        return [HEAD_PIPELINES[self.head]] if self.head in HEAD_PIPELINES else []

    def require(self, pipeline: str) -> None:
        """Raise a one-line ``BertkitError`` when the export cannot run ``pipeline``."""
        if not self.supports(pipeline):
            usable = ", ".join(self.pipelines) or "nothing bertkit runs"
            raise BertkitError(
                f"this export cannot {pipeline.replace('_', '-')}: its graph is a {self.kind}, which runs {usable}; "
                f"export the model with the head {pipeline.replace('_', '-')} needs"
            )


def read_runtime(directory: Path) -> dict[str, Any]:
    """``bertkit_onnx.json`` of an export folder, checked."""
    try:
        info = json.loads((directory / RUNTIME_FILE).read_text(encoding="utf-8"))
        return {key: info[key] for key in ("class", "head", "inputs", "outputs", "quantize", "graph")}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BertkitError(f"{directory / RUNTIME_FILE} is unreadable ({exc}); export the model again") from None


def check_engine_options(options: Mapping[str, Any], quantize: str | None) -> None:
    """Refuse, with one line, engine options an export folder cannot honour (its graph decides the engine and
    whether it is int8)."""
    backend = options.get("backend")
    if backend not in (None, "auto", "onnxruntime"):
        raise ConfigError(f"an ONNX export runs on ONNX Runtime; --backend {backend} needs the model's checkpoint")
    if options.get("compile"):
        raise ConfigError("--compile is for PyTorch; an ONNX export is optimised by ONNX Runtime")
    asked = options.get("quantize")
    if asked not in (None, quantize):
        raise ConfigError(
            f"this export is {quantize or 'float32'}; for {asked}, export it again with --quantize {asked}"
        )
    if str(options.get("device") or "cpu") != "cpu":
        raise ConfigError(f"an ONNX export runs on the CPU; use --device cpu, not {options['device']}")


def load_exported(
    path: str | os.PathLike,
    *,
    threads: int | None = None,
    task: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    max_seq_length: int | None = None,
    **engine: Any,
) -> Exported:
    """An export folder ready for the pipelines; ``threads``: ONNX Runtime's intra-op threads (default: bertkit's
    choice, ``bertkit.threads.chosen_threads``). ``engine``: ``backend``, ``quantize``, ``compile`` and ``device``
    as ``bertkit.inference.load`` takes them, refused when the export cannot honour them."""
    from bertkit.threads import chosen_threads

    directory = Path(path)
    info = read_runtime(directory)
    check_engine_options(engine, info["quantize"])
    config = load_config(directory)
    tokenizer = Tokenizer.from_pretrained(directory)
    graph = Graph(directory / info["graph"], list(info["inputs"]), list(info["outputs"]), threads or chosen_threads())
    settings = Settings.saved(config).override(task=task, task_options=task_options, max_seq_length=max_seq_length)
    return Exported(graph, tokenizer, config, info["head"], info["class"], info["quantize"], directory, settings)
