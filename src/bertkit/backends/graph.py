"""A model's forward through an exported graph, whichever engine runs it.

``GraphForward`` replaces one model instance's ``forward``: a call with the three inputs only runs the graph
and returns the model's own output class; a call that asks for more (hidden states, attention maps, masked
positions, labels) runs the PyTorch weights, which stay loaded. The engine is a function from the output
names and the int64 input arrays to the output arrays, built on first call (the export happens then).

The engine runs the model in its own thread pool, sized to torch's thread count when the engine is put
behind the model; torch then keeps one thread for the light work around each call (pooling, copies), since
its idle OpenMP workers would otherwise spin on the cores the engine's threads need (on 2 cores, a third
of the throughput at batch 8).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from bertkit.errors import BertkitError
from bertkit.export import INPUT_NAMES, input_names, output_names
from bertkit.models import registry
from bertkit.models.heads import (
    BertOutput,
    MaskedLMOutput,
    PreTrainingOutput,
    QuestionAnsweringOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)

Runner = Callable[[list[str], dict[str, np.ndarray]], list[np.ndarray]]
"""An engine's run: output names and input arrays by name -> the output arrays, in the names' order."""

OUTPUT_CLASSES: dict[str, type] = {
    "BertModel": BertOutput,
    "BertForPreTraining": PreTrainingOutput,
    "BertForMaskedLM": MaskedLMOutput,
    "BertForSequenceClassification": SequenceClassifierOutput,
    "BertForTokenClassification": TokenClassifierOutput,
    "BertForQuestionAnswering": QuestionAnsweringOutput,
}
"""The output dataclass of each role (``bertkit.models.architecture.ROLES``); graph output names are its field
names."""


class GraphForward:
    """``model``'s forward through ``engine`` (see the module docstring); ``build(model, quantize, threads)``
    makes the engine's runner on first call."""

    def __init__(self, model: nn.Module, engine: str, quantize: str | None, build: Callable[..., Runner], threads: int):
        self.model = model
        self.engine = engine
        self.quantize = quantize
        self.threads = threads
        self.names = output_names(model)
        self.inputs = input_names(model)
        self.output_class = OUTPUT_CLASSES[registry.role_of(model) or ""]
        self._build = build
        self._run: Runner | None = None

    @property
    def run(self) -> Runner:
        if self._run is None:
            self._run = self._build(self.model, self.quantize, self.threads)
        return self._run

    def __call__(
        self,
        input_ids: Tensor,
        token_type_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        **more: Any,
    ) -> Any:
        if any(value is not None and value is not False for value in more.values()):  # not in the graph
            return type(self.model).forward(self.model, input_ids, token_type_ids, attention_mask, **more)
        ids = input_ids.to(torch.int64).cpu()
        inputs = (
            ids,
            torch.zeros_like(ids) if token_type_ids is None else token_type_ids.to(torch.int64).cpu(),
            torch.ones_like(ids) if attention_mask is None else attention_mask.to(torch.int64).cpu(),
        )
        arrays = {n: t.numpy() for n, t in zip(INPUT_NAMES, inputs)}
        got = self.run(self.names, {n: arrays[n] for n in self.inputs})
        values: dict[str, Any] = {name: torch.from_numpy(np.asarray(a)) for name, a in zip(self.names, got)}
        for field in dataclasses.fields(self.output_class):
            if field.default is dataclasses.MISSING and field.name not in values:
                values[field.name] = None  # losses, and a pooler the model was built without
        return self.output_class(**values)


def put_behind(model: nn.Module, engine: str, quantize: str | None, build: Callable[..., Runner]) -> nn.Module:
    """Put ``engine`` behind ``model``'s forward and, for a head, its encoder's; returns ``model``."""
    if registry.role_of(model) not in OUTPUT_CLASSES:
        raise BertkitError(f"--backend {engine} cannot run a {type(model).__name__}")
    threads = torch.get_num_threads()
    vars(model)["forward"] = GraphForward(model, engine, quantize, build, threads)  # before its class's forward
    encoder = registry.encoder_of(model)
    if encoder is not model:
        vars(encoder)["forward"] = GraphForward(encoder, engine, quantize, build, threads)
    torch.set_num_threads(1)  # the engine's threads do the model's work (module docstring)
    return model


def backend_of(model: nn.Module) -> tuple[str, str | None]:
    """``(engine, quantization)`` that runs ``model``'s forward: ``("onnxruntime", "int8")``, ``("torch",
    None)``... (torchao int8 is reported by ``bertkit.quantize.is_quantized``)."""
    forward = model.__dict__.get("forward")
    return (forward.engine, forward.quantize) if isinstance(forward, GraphForward) else ("torch", None)
