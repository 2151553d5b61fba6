"""text-embeddings-inference's other routes, so that its clients (``huggingface_hub.InferenceClient``, which
posts every task to ``/``) work against ``bertkit serve``: ``/similarity``, ``/embed_all`` and ``/predict``, and
``POST /`` dispatched by the model's kind as TEI does (a classifier: ``/predict``; a cross-encoder: ``/rerank``
for a body with a ``query``; an embedding model: ``/embed``, or ``/similarity`` for a body whose ``inputs``
hold a ``source_sentence``). The length limit is the one ``/info`` reports as ``max_input_length``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from bertkit import inference
from bertkit.inference.encoder_outputs import EmbedSettings, embed_settings
from bertkit.serve.errors import Problem
from bertkit.serve.json_body import parse_json_body
from bertkit.serve.routes.embeddings import embedded, keep_the_end, tei_embed, token_rows
from bertkit.serve.routes.handling import ServiceDep, json_response, token_lengths
from bertkit.serve.routes.rerank import rerank
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import (
    EmbedAllRequest,
    Prediction,
    PredictRequest,
    RerankRequest,
    SimilarityRequest,
    TeiEmbedRequest,
    as_batch,
)
from bertkit.serve.service import Service
from bertkit.tasks.classification.pipeline import can_rerank

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded

TRUNCATE_HINT = "shorten it, or send truncate: true"


async def _tei_rows(
    service: Service, inputs: list[str] | list[list[int]], settings: EmbedSettings, truncate: bool, direction: str
) -> list[list[int]]:
    """Token-id rows of TEI inputs: refused past the embedding length (``/info``'s ``max_input_length`` for an
    embedding model) unless ``truncate`` (then cut at the ``direction`` TEI names: ``left`` keeps the end)."""
    if truncate:
        rows = await token_rows(service, inputs, settings, limit=0)
        return keep_the_end(service, rows, settings.max_length) if direction.lower() == "left" else rows
    return await token_rows(service, inputs, settings, min(settings.max_length, service.max_tokens), TRUNCATE_HINT)


# ------------------------------------------------------------------------------------------ similarity
async def similarity(request: SimilarityRequest, service: ServiceDep) -> Any:
    """The cosine similarity of ``source_sentence`` with each of ``sentences`` (TEI's ``/similarity``)."""
    parameters = request.parameters
    service.checks.no_prompt(parameters.prompt_name if parameters else None)
    texts = [request.inputs.source_sentence, *request.inputs.sentences]
    settings = embed_settings(service.loaded)
    truncate = bool(parameters and parameters.truncate)
    rows = await _tei_rows(service, texts, settings, truncate, parameters.truncation_direction if parameters else "")
    vectors = await embedded(service, rows, settings)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return json_response((unit[1:] @ unit[0]).tolist())


# ------------------------------------------------------------------------------------------ embed_all
async def embed_all(request: EmbedAllRequest, service: ServiceDep) -> Any:
    """Every token's vector of the last layer, ``[CLS]`` and ``[SEP]`` included, per input (TEI's ``/embed_all``)."""
    service.checks.no_prompt(request.prompt_name)
    settings = embed_settings(service.loaded)
    rows = await _tei_rows(
        service, as_batch(request.inputs), settings, bool(request.truncate), request.truncation_direction
    )
    job = partial(_embed_all_job, service.loaded, service.limits.batch_size, settings.max_length)
    lengths = [min(len(row), settings.max_length) for row in rows]
    matrices = await service.run(("embed_all", settings.max_length), job, rows, lengths)
    return json_response([matrix.tolist() for matrix in matrices])


def _embed_all_job(loaded: Loaded, batch: int, length: int, rows: list[list[int]]) -> list:
    return list(inference.embed_token_ids(rows, loaded, batch_size=batch, pooling="none", max_length=length))


# ------------------------------------------------------------------------------------------ predict
def _predict_items(inputs: str | list[Any]) -> tuple[list[str | tuple[str, str]], bool]:
    """TEI's ``PredictInput``: (the texts or pairs, whether one input was sent). A list of exactly two texts is
    one pair; any other list is a batch of texts and ``[a, b]`` pairs."""
    if isinstance(inputs, str):
        return [inputs], True
    if len(inputs) == 2 and all(isinstance(v, str) for v in inputs):
        return [(inputs[0], inputs[1])], True
    return [v if isinstance(v, str) else (v[0], v[1]) for v in inputs], False


async def predict(request: PredictRequest, service: ServiceDep) -> Any:
    """A classifier's labels by probability, best first, per input (TEI's ``/predict``)."""
    items, single = _predict_items(request.inputs)
    service.checks.count(items)
    service.checks.chars([s for item in items for s in ((item,) if isinstance(item, str) else item)])
    limit = 1 << 30 if request.truncate else service.tei_max_input_length
    lengths = await token_lengths(service, items, limit=limit, hint=TRUNCATE_HINT)
    top_k = request.parameters.top_k if request.parameters else None
    job = partial(_predict_job, service.loaded, service.limits.batch_size, request.raw_scores)
    results = await service.run(("predict",), job, items, lengths)
    results = [ranked[:top_k] for ranked in results]
    return json_response(results[0] if single else results)


def _predict_job(loaded: Loaded, batch: int, raw_scores: bool, items: list) -> list[list[dict[str, Any]]]:
    """Each input's labels, best first, scored by probability or, with ``raw_scores``, by the head's logits
    (TEI's choice; the order is the same)."""
    config = loaded.config
    out = []
    for prediction in inference.classify(items, loaded, batch_size=batch):
        scores = prediction.logits if raw_scores else prediction.probabilities
        if scores is None:  # a regression head: its one score, raw either way
            name = config.id2label[0] if config.id2label else "LABEL_0"
            out.append([{"score": prediction.score, "label": name}])
        else:
            ranked = sorted(scores.items(), key=lambda kv: -kv[1])
            out.append([{"score": score, "label": label} for label, score in ranked])
    return out


# ------------------------------------------------------------------------------------------ POST /
async def root(request: Request, service: ServiceDep) -> Any:
    """TEI's ``POST /``: the route of the model's kind (module docstring)."""
    body = parse_json_body(await request.body())
    if not isinstance(body, dict):
        raise Problem(422, "the body must be a JSON object with inputs")
    loaded = service.loaded
    if can_rerank(loaded) and "query" in body:
        return await rerank(_parsed(RerankRequest, body), service)
    if loaded.supports("classify"):
        return await predict(_parsed(PredictRequest, body), service)
    if loaded.supports("embed"):
        if isinstance(body.get("inputs"), dict):
            return await similarity(_parsed(SimilarityRequest, body), service)
        return await tei_embed(_parsed(TeiEmbedRequest, body), service)
    pipelines = ", ".join("/" + p.replace("_", "-") for p in loaded.pipelines)
    raise Problem(404, f"POST / answers for embedding models and classifiers; this model's routes are {pipelines}")


M = TypeVar("M", bound=BaseModel)


def _parsed(model: type[M], body: dict) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


TEI_ROUTES: dict[str, tuple[Route, ...]] = {
    "embed": (
        Route(
            "POST",
            "/similarity",
            similarity,
            "Cosine similarity of a sentence with others (text-embeddings-inference's API).",
            list[float],
        ),
        Route(
            "POST",
            "/embed_all",
            embed_all,
            "Every token's vector of the last layer (text-embeddings-inference's API).",
            list[list[list[float]]],
        ),
    ),
    "classify": (
        Route(
            "POST",
            "/predict",
            predict,
            "Labels by probability (text-embeddings-inference's API).",
            list[Prediction] | list[list[Prediction]],  # type: ignore[arg-type]  # a union is a response model too
        ),
    ),
}
"""Pipeline -> TEI's routes that need it."""
ROOT_ROUTE = Route("POST", "/", root, "text-embeddings-inference's POST /: /predict, /rerank, /embed or /similarity.")
