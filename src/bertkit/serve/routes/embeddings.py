"""The embedding endpoints, all with the defaults of ``inference.embed_settings`` (the same rule as ``bertkit
embed`` and ``bertkit.embed``): bertkit's ``/embed`` body (``texts``), text-embeddings-inference's (``inputs``,
on the same path, told apart by the keys) and OpenAI's ``/v1/embeddings``. Texts or token-id lists become
checked token-id rows (``token_rows``), embedded in batches with other requests that embed the same way
(``embedded``); TEI's other embedding routes (``tei``) share them."""

from __future__ import annotations

import base64
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit import inference
from bertkit.inference.encoder_outputs import EmbedSettings, embed_settings, truncate_dimensions
from bertkit.serve.routes.handling import ServiceDep, cut_count, json_response
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import (
    AnyEmbedRequest,
    EmbedResponse,
    OpenAIEmbeddingRequest,
    OpenAIEmbeddingResponse,
    TeiEmbedRequest,
    as_batch,
)
from bertkit.serve.service import Service

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def embed(request: AnyEmbedRequest, service: ServiceDep) -> Any:
    """bertkit's body (``texts``) -> ``{"embeddings", "dimension"}``; TEI's (``inputs``) -> a list of vectors."""
    if isinstance(request, TeiEmbedRequest):
        return await tei_embed(request, service)
    settings = embed_settings(service.loaded, request.pooling, request.normalize)
    rows = await token_rows(service, request.texts, settings, what="text")
    vectors = await embedded(service, rows, settings)
    truncated = cut_count([len(row) for row in rows], settings.max_length)
    return json_response({"embeddings": vectors.tolist(), "dimension": vectors.shape[1], "truncated": truncated})


async def tei_embed(request: TeiEmbedRequest, service: ServiceDep) -> Any:
    """text-embeddings-inference's ``/embed`` body -> a list of vectors (``truncate``, ``dimensions``...)."""
    service.checks.no_prompt(request.prompt_name)
    inputs = as_batch(request.inputs)
    settings = embed_settings(service.loaded, normalize=request.normalize)
    service.checks.dimensions(request.dimensions, service.loaded.config.hidden_size)
    if request.truncate:  # any length is cut to the model's; only the characters are bounded
        rows = await token_rows(service, inputs, settings, limit=0)
        truncated = cut_count([len(row) for row in rows], settings.max_length)
        if request.truncation_direction.lower() == "left":
            rows = keep_the_end(service, rows, settings.max_length)
    else:
        limit = min(settings.max_length, service.max_tokens)  # /info's max_input_length, for an embedding model
        rows = await token_rows(service, inputs, settings, limit, "shorten it, or send truncate: true")
        truncated = cut_count([len(row) for row in rows], settings.max_length)
    vectors = await embedded(service, rows, settings, request.dimensions)
    return json_response(vectors.tolist(), truncated)


async def openai_embeddings(request: OpenAIEmbeddingRequest, service: ServiceDep) -> Any:
    """OpenAI's embeddings API on the served model, with its defaults (``embed_settings``)."""
    inputs = as_batch(request.input)
    settings = embed_settings(service.loaded)
    service.checks.dimensions(request.dimensions, service.loaded.config.hidden_size)
    rows = await token_rows(service, inputs, settings)
    tokens = sum(min(len(row), settings.max_length) for row in rows)
    vectors = await embedded(service, rows, settings, request.dimensions)
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _base64(v) if request.encoding_format == "base64" else v.tolist(),
        }
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    content = {"object": "list", "data": data, "model": service.model_id, "usage": usage}
    return json_response(content, cut_count([len(row) for row in rows], settings.max_length))


def _base64(vector: np.ndarray) -> str:
    """A vector as OpenAI sends it with ``encoding_format: base64``: little-endian float32 bytes in base64."""
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")


async def token_rows(
    service: Service,
    inputs: list[str] | list[list[int]],
    settings: EmbedSettings,
    limit: int | None = None,
    hint: str = "shorten it",
    what: str = "input",
) -> list[list[int]]:
    """Texts or token-id lists checked against the limits (``limit`` tokens at most, default the server's;
    0: any length) as token-id rows: texts are tokenized off the event loop, with ``[CLS]`` and ``[SEP]``."""
    service.checks.count(inputs)
    if isinstance(inputs[0], str):
        texts = inputs
        service.checks.chars(texts)
        return await service.off_loop(service.checks.encoded, texts, what, limit, hint)
    rows = inputs
    if limit != 0:
        service.checks.token_ids(rows, service.loaded.config.vocab_size, limit)
    return rows


def keep_the_end(service: Service, rows: list[list[int]], length: int) -> list[list[int]]:
    """Token-id rows holding the last tokens that fit ``length`` (TEI's ``truncation_direction: left``)."""
    cls_id = service.loaded.tokenizer.cls_id
    kept = []
    for row in rows:
        if len(row) <= length:
            kept.append(row)
        elif row[0] == cls_id:
            kept.append([row[0], *row[len(row) - length + 1 :]])
        else:
            kept.append(row[len(row) - length :])
    return kept


async def embedded(
    service: Service, rows: list[list[int]], settings: EmbedSettings, dimensions: int | None = None
) -> np.ndarray:
    """The vectors of token-id rows, batched with other requests that embed the same way."""
    job = partial(_embed_ids_job, service.loaded, service.limits.batch_size, settings)
    key = ("embed", settings.pooling, settings.normalize, settings.max_length)
    lengths = [min(len(row), settings.max_length) for row in rows]
    vectors = await service.run(key, job, rows, lengths)
    return truncate_dimensions(np.stack(vectors), dimensions, settings.normalize)


def _embed_ids_job(loaded: Loaded, batch: int, settings: EmbedSettings, rows: list[list[int]]) -> list:
    pooling, normalize, length = settings.pooling, settings.normalize, settings.max_length
    vectors = inference.embed_token_ids(
        rows, loaded, batch_size=batch, pooling=pooling, normalize=normalize, max_length=length
    )
    return list(vectors)


ROUTES: dict[str, tuple[Route, ...]] = {
    "embed": (
        Route(
            "POST",
            "/embed",
            embed,
            "One vector per text. bertkit's body (texts) or text-embeddings-inference's (inputs).",
            EmbedResponse | list[list[float]],  # type: ignore[arg-type]  # a union is a response model too
        ),
        Route(
            "POST",
            "/v1/embeddings",
            openai_embeddings,
            "OpenAI-compatible embeddings (float or base64, dimensions, token-id input).",
            OpenAIEmbeddingResponse,
        ),
    ),
}
"""The embedding endpoints, under the ``embed`` pipeline every model runs."""
