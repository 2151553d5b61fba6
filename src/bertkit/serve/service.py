"""What the endpoints share: the loaded model, its limits and checks, and the batcher that runs the model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from fastapi import Request

from bertkit import __version__
from bertkit.errors import BertkitError
from bertkit.inference.encoder_outputs import EmbedSettings, embed_settings
from bertkit.serve.checks import RequestChecks
from bertkit.serve.dynamic_batching import Batcher, Overloaded, in_thread
from bertkit.serve.errors import Problem
from bertkit.serve.limits import ServeLimits
from bertkit.serve.prometheus import Metrics
from bertkit.tasks.classification.pipeline import can_rerank

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded

T = TypeVar("T")


def engine_of(loaded: Loaded) -> tuple[str, str | None]:
    """``(engine, "int8" or None)`` that runs ``loaded``: an export folder's own, else what runs the checkpoint's
    forward (torch is imported only for a checkpoint, which has loaded it already)."""
    if isinstance(getattr(loaded, "engine", None), str):
        return loaded.engine, loaded.quantize  # type: ignore[attr-defined]
    from bertkit.backends import backend_of
    from bertkit.quantize import is_quantized

    engine, quantization = backend_of(loaded.model)
    return engine, "int8" if is_quantized(loaded.model) else quantization


class Service:
    """One per app (``app.state.service``); routes reach it through :func:`get_service`."""

    def __init__(
        self, loaded: Loaded, limits: ServeLimits, model_id: str = "bertkit", load_seconds: float | None = None
    ):
        self.loaded = loaded
        self.limits = limits
        self.model_id = model_id
        """The model's name in answers (OpenAI's ``model``, TEI's ``model_id``)."""
        # What a request may send is bounded by the model's positions; each pipeline then cuts or windows its
        # inputs at the length the model was fine-tuned with, as `bertkit predict` does.
        self.max_tokens = min(limits.max_tokens or loaded.max_positions, loaded.max_positions)
        self.checks = RequestChecks(limits, loaded.tokenizer, self.max_tokens)
        self.batcher = Batcher(
            limits.batch_window_ms / 1000,
            limits.max_batch_items,
            limits.max_queue,
            max_batch=limits.batch_size,
            max_tokens=limits.max_batch_tokens,
            max_wait_s=limits.request_timeout_s / 2,
        )
        self.tokenizing = ThreadPoolExecutor(max_workers=2, thread_name_prefix="bertkit-tokenize")
        """Where requests are tokenized and checked, off the event loop (the Rust tokenizer frees the GIL)."""
        self.metrics = Metrics(self.batcher.depth, load_seconds)
        self.batcher.on_batch = self.metrics.batched
        self.checks.on_tokens = self.metrics.counted
        self.state = "ready"
        """``loading``, ``ready`` or ``draining`` (after SIGTERM): the readiness probe answers 503 unless ready."""

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the tokenizing threads: tokenization and the checks that need it."""
        return await in_thread(self.tokenizing, fn, *args)

    async def run(
        self, key: Hashable, fn: Callable[[list], list], items: Sequence[Any], lengths: Sequence[int] | None = None
    ) -> list:
        """``fn`` over ``items`` (``lengths``: their tokens, for the batch budget), batched with other requests'
        items of the same ``key``; 503 with ``Retry-After`` at once when the queue is full, 504 when it
        cannot be done in time."""
        try:
            return await asyncio.wait_for(self.batcher.submit(key, fn, items, lengths), self.limits.request_timeout_s)
        except TimeoutError:
            raise Problem(
                504,
                f"the request took longer than {self.limits.request_timeout_s:g} s and was "
                f"dropped; send fewer or shorter texts",
            ) from None
        except Overloaded as exc:
            headers = {"Retry-After": str(exc.retry_after)}
            raise Problem(503, f"the server is overloaded: {exc}", headers=headers) from None

    def info(self) -> dict[str, Any]:
        config = self.loaded.config
        try:
            settings: EmbedSettings | None = embed_settings(self.loaded)
        except BertkitError:  # sentence-transformers modules bertkit does not run: the caller must choose
            settings = None
        engine, quantization = engine_of(self.loaded)
        return {
            "model": {
                "architecture": getattr(self.loaded, "kind", type(self.loaded.model).__name__),
                "layers": config.num_hidden_layers,
                "hidden_size": config.hidden_size,
                "heads": config.num_attention_heads,
                "vocab_size": config.vocab_size,
                "max_position_embeddings": config.max_position_embeddings,
                "max_seq_length": self.loaded.max_length,
                "labels": [config.id2label[i] for i in sorted(config.id2label)] if config.id2label else None,
                "lowercase": self.loaded.tokenizer.lowercase,
            },
            "pipelines": [p.replace("_", "-") for p in self.loaded.pipelines],
            "limits": {**self.limits.to_dict(), "max_tokens": self.max_tokens},
            "batching": vars(self.batcher.stats),
            "embedding": {**vars(settings), "dimensions": config.hidden_size} if settings else None,
            # text-embeddings-inference's /info fields, for clients that read them
            "model_id": self.model_id,
            "model_dtype": "int8" if quantization == "int8" else "float32",
            "backend": engine,
            "model_type": self._model_type(settings),
            "max_input_length": self.tei_max_input_length,
            "max_client_batch_size": self.limits.max_items,
            "auto_truncate": False,
            "version": __version__,
        }

    @property
    def tei_max_input_length(self) -> int:
        """The most tokens TEI's routes take (``/info``'s ``max_input_length``): an embedding model's embedding
        length (its sentence-transformers ``max_seq_length``, say), else the server's ``max_tokens``."""
        if self.loaded.supports("classify"):
            return self.max_tokens
        try:
            return min(embed_settings(self.loaded).max_length, self.max_tokens)
        except BertkitError:  # sentence-transformers modules bertkit does not run
            return self.max_tokens

    def _model_type(self, settings: EmbedSettings | None) -> dict[str, Any]:
        """TEI's ``model_type``: ``reranker`` (a cross-encoder), ``classifier``, else ``embedding``."""
        config = self.loaded.config
        if self.loaded.supports("classify"):
            labels = {i: config.id2label[i] if config.id2label else f"LABEL_{i}" for i in range(config.num_labels)}
            kind = "reranker" if can_rerank(self.loaded) else "classifier"
            return {kind: {"id2label": labels, "label2id": {v: k for k, v in labels.items()}}}
        return {"embedding": {"pooling": settings.pooling if settings else None}}


def get_service(request: Request) -> Service:
    """The app's service, as a route dependency."""
    service: Service = request.app.state.service
    return service
