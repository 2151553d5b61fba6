"""The model's endpoints by pipeline; an app has those its model supports (``PIPELINE_ROUTES``, ``available``).

Embeddings come three ways, all with the defaults of ``inference.embed_settings`` (the same rule as ``bertkit
embed`` and ``bertkit.embed``): bertkit's ``/embed`` body (``texts``), text-embeddings-inference's (``inputs``,
on the same path, told apart by the keys) and OpenAI's ``/v1/embeddings``. A cross-encoder (a classifier with
one output or two labels) also gets TEI's ``/rerank``.

Each endpoint checks its request (:class:`RequestChecks`) before any model work, then hands the inputs to the
batcher with a job function (``_*_job``) that runs the library's pipeline on a whole batch; the batch key
holds every option that changes the result, so only requests asking the same thing share a batch.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from functools import partial
from typing import Annotated, Any

import numpy as np
from fastapi import Depends, Response

from bertkit import inference
from bertkit.inference import Loaded
from bertkit.inference.encoder_outputs import EmbedSettings, embed_settings, truncate_dimensions
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import (
    AnswerRequest,
    AnswerResponse,
    AnyEmbedRequest,
    AttentionRequest,
    AttentionResponse,
    ClassifyRequest,
    ClassifyResponse,
    EmbedResponse,
    FillMaskRequest,
    FillMaskResponse,
    NextSentenceRequest,
    NextSentenceResponse,
    OpenAIEmbeddingRequest,
    OpenAIEmbeddingResponse,
    RankOut,
    RerankRequest,
    TagRequest,
    TagResponse,
    TeiEmbedRequest,
    as_batch,
)
from bertkit.serve.service import Service, get_service
from bertkit.tasks.classification.pipeline import can_rerank, rank_scores

ServiceDep = Annotated[Service, Depends(get_service)]

try:  # orjson encodes the floats of a vector several times faster than json; the same numbers either way
    import orjson

    def _dumps(content: Any) -> bytes:
        return orjson.dumps(content)

except ImportError:  # pragma: no cover - an optional speed-up

    def _dumps(content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------ fill-mask
async def fill_mask(request: FillMaskRequest, service: ServiceDep) -> dict:
    service.checks.count(request.texts)
    service.checks.chars(request.texts)
    service.checks.masks(request.texts, request.top_k)
    lengths = await _lengths(service, request.texts)
    job = partial(_fill_mask_job, service.loaded, service.limits.batch_size, request.top_k)
    return {"results": await service.run(("fill_mask", request.top_k), job, request.texts, lengths)}


def _fill_mask_job(loaded: Loaded, batch: int, top_k: int, texts: list[str]) -> list:
    out = inference.fill_mask(texts, loaded, top_k=top_k, batch_size=batch)
    return [[[c.to_dict() for c in mask] for mask in text] for text in out]


async def _lengths(
    service: Service,
    texts: Sequence[str | tuple[str, str]],
    what: str = "text",
    limit: int | None = None,
    special: int | None = None,
    hint: str = "shorten it",
) -> list[int]:
    """``checks.tokens`` off the event loop; the lengths the model runs them at (for the batch budget)."""
    counts = await service.off_loop(service.checks.tokens, texts, what, limit, special, hint)
    return [min(count, service.loaded.max_length) for count in counts]


# ------------------------------------------------------------------------------------------ next-sentence
async def next_sentence(request: NextSentenceRequest, service: ServiceDep) -> dict:
    service.checks.count(request.pairs, "pairs")
    service.checks.chars([s for pair in request.pairs for s in pair], "sentence")
    lengths = await _lengths(service, request.pairs, "pair")
    job = partial(_next_sentence_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("next_sentence",), job, request.pairs, lengths)}


def _next_sentence_job(loaded: Loaded, batch: int, pairs: list[tuple[str, str]]) -> list:
    probs = inference.next_sentence([a for a, _ in pairs], [b for _, b in pairs], loaded, batch_size=batch)
    return [{"probability": p} for p in (probs if isinstance(probs, list) else [probs])]


# ------------------------------------------------------------------------------------------ embed
async def embed(request: AnyEmbedRequest, service: ServiceDep) -> Any:
    """bertkit's body (``texts``) -> ``{"embeddings", "dimension"}``; TEI's (``inputs``) -> a list of vectors."""
    if isinstance(request, TeiEmbedRequest):
        return await _tei_embed(request, service)
    settings = embed_settings(service.loaded, request.pooling, request.normalize)
    rows = await _rows(service, request.texts, settings, what="text")
    vectors = await _vectors(service, rows, settings)
    return _json({"embeddings": vectors.tolist(), "dimension": vectors.shape[1]})


async def _tei_embed(request: TeiEmbedRequest, service: ServiceDep) -> Any:
    service.checks.no_prompt(request.prompt_name)
    inputs = as_batch(request.inputs)
    settings = embed_settings(service.loaded, normalize=request.normalize)
    service.checks.dimensions(request.dimensions, service.loaded.config.hidden_size)
    if request.truncate:  # any length is cut to the model's; only the characters are bounded
        rows = await _rows(service, inputs, settings, limit=0)
        if request.truncation_direction.lower() == "left":
            rows = _keep_the_end(service, rows, settings.max_length)
    else:
        limit = min(settings.max_length, service.max_tokens)  # /info's max_input_length, for an embedding model
        rows = await _rows(service, inputs, settings, limit, "shorten it, or send truncate: true")
    vectors = await _vectors(service, rows, settings, request.dimensions)
    return _json(vectors.tolist())


async def openai_embeddings(request: OpenAIEmbeddingRequest, service: ServiceDep) -> Any:
    """OpenAI's embeddings API on the served model, with its defaults (``embed_settings``)."""
    inputs = as_batch(request.input)
    settings = embed_settings(service.loaded)
    service.checks.dimensions(request.dimensions, service.loaded.config.hidden_size)
    rows = await _rows(service, inputs, settings)
    tokens = sum(min(len(row), settings.max_length) for row in rows)
    vectors = await _vectors(service, rows, settings, request.dimensions)
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _base64(v) if request.encoding_format == "base64" else v.tolist(),
        }
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return _json({"object": "list", "data": data, "model": service.model_id, "usage": usage})


def _json(content: Any) -> Response:
    """An answer of plain lists, dicts, strings and numbers, encoded at once (the route's response model
    documents it; validating thousands of floats against it again only costs time)."""
    return Response(_dumps(content), media_type="application/json")


def _base64(vector: np.ndarray) -> str:
    """A vector as OpenAI sends it with ``encoding_format: base64``: little-endian float32 bytes in base64."""
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")


async def _rows(
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


def _keep_the_end(service: Service, rows: list[list[int]], length: int) -> list[list[int]]:
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


async def _vectors(
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


# ------------------------------------------------------------------------------------------ classify
async def classify(request: ClassifyRequest, service: ServiceDep) -> dict:
    texts = [t if isinstance(t, str) else (t[0], t[1]) for t in request.texts]
    service.checks.count(texts)
    service.checks.chars([s for t in texts for s in ((t,) if isinstance(t, str) else t)])
    lengths = await _lengths(service, texts)
    job = partial(_classify_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("classify",), job, texts, lengths)}


def _classify_job(loaded: Loaded, batch: int, items: list) -> list:
    return [vars(p) for p in inference.classify(items, loaded, batch_size=batch)]


# ------------------------------------------------------------------------------------------ rerank
async def rerank(request: RerankRequest, service: ServiceDep) -> list[dict[str, Any]]:
    """TEI's rerank on a cross-encoder: the texts by relevance to the query, best first."""
    pairs = [(request.query, text) for text in request.texts]
    service.checks.count(pairs, "texts")
    service.checks.chars([request.query], "query")
    service.checks.chars(request.texts)
    limit = 1 << 30 if request.truncate else None  # truncated: any length
    hint = "shorten it, or send truncate: true"
    lengths = await _lengths(service, pairs, "pair of the query and text", limit, hint=hint)
    job = partial(_rerank_job, service.loaded, service.limits.batch_size, request.raw_scores)
    scores = await service.run(("rerank", request.raw_scores), job, pairs, lengths)
    return [
        {"index": r.index, "score": r.score, "text": request.texts[r.index] if request.return_text else None}
        for r in rank_scores(scores, request.top_n)
    ]


def _rerank_job(loaded: Loaded, batch: int, raw_scores: bool, pairs: list[tuple[str, str]]) -> list[float]:
    return inference.pair_scores(pairs, loaded, raw_scores=raw_scores, batch_size=batch)


# ------------------------------------------------------------------------------------------ tag
async def tag(request: TagRequest, service: ServiceDep) -> dict:
    limits = service.limits
    service.checks.count(request.texts)
    service.checks.chars(request.texts, limit=limits.max_long_chars)
    lengths = await _lengths(service, request.texts, limit=limits.max_long_tokens, special=0)
    job = partial(_tag_job, service.loaded, limits.batch_size)
    return {"results": await service.run(("tag",), job, request.texts, lengths)}


def _tag_job(loaded: Loaded, batch: int, texts: list[str]) -> list:
    return [r.to_dict() for r in inference.tag(texts, loaded, batch_size=batch)]


# ------------------------------------------------------------------------------------------ answer
async def answer(request: AnswerRequest, service: ServiceDep) -> dict:
    limits = service.limits
    contexts = [q.context for q in request.inputs]
    service.checks.count(request.inputs, "questions")
    service.checks.chars([q.question for q in request.inputs], "question")
    service.checks.chars(contexts, "context", limit=limits.max_long_chars)
    lengths = await _lengths(service, contexts, "context", limits.max_long_tokens, special=0)
    service.checks.top_k(request.top_k)
    job = partial(_answer_job, service.loaded, limits.batch_size, request.top_k)
    items = [(q.question, q.context) for q in request.inputs]
    return {"results": await service.run(("answer", request.top_k), job, items, lengths)}


def _answer_job(loaded: Loaded, batch: int, top_k: int, items: list[tuple[str, str]]) -> list:
    out = inference.answer([q for q, _ in items], [c for _, c in items], loaded, top_k=top_k, batch_size=batch)
    return [[a.to_dict() for a in (answers if isinstance(answers, list) else [answers])] for answers in out]


# ------------------------------------------------------------------------------------------ attention
async def attention(request: AttentionRequest, service: ServiceDep) -> dict:
    service.checks.chars([request.text])
    lengths = await _lengths(service, [request.text], limit=service.limits.attention_max_tokens)
    job = partial(_attention_job, service.loaded)
    return (await service.run(("attention",), job, [request.text], lengths))[0]


def _attention_job(loaded: Loaded, texts: list[str]) -> list[dict[str, Any]]:
    out = []
    for text in texts:
        maps = inference.attentions(text, loaded)
        out.append({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(4).tolist()})
    return out


def available(loaded: Loaded, pipeline: str) -> bool:
    """Whether the app of ``loaded`` has the endpoints of ``pipeline`` (``rerank``: a cross-encoder's)."""
    return can_rerank(loaded) if pipeline == "rerank" else loaded.supports(pipeline)


# Pipeline -> its endpoints, in the order they are listed (the OpenAPI page, a 404's list of routes).
PIPELINE_ROUTES: dict[str, tuple[Route, ...]] = {
    "fill_mask": (Route("POST", "/fill-mask", fill_mask, "Top predictions for every [MASK].", FillMaskResponse),),
    "next_sentence": (
        Route(
            "POST",
            "/next-sentence",
            next_sentence,
            "Probability that sentence B follows sentence A.",
            NextSentenceResponse,
        ),
    ),
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
    "classify": (Route("POST", "/classify", classify, "Label probabilities of texts or pairs.", ClassifyResponse),),
    "rerank": (
        Route(
            "POST",
            "/rerank",
            rerank,
            "Texts ordered by a cross-encoder's relevance to a query (text-embeddings-inference's API).",
            list[RankOut],
            exclude_none=True,
        ),
    ),
    "tag": (Route("POST", "/tag", tag, "Word tags and entities with character offsets.", TagResponse),),
    "answer": (Route("POST", "/answer", answer, "Answer spans of questions in their contexts.", AnswerResponse),),
    "attention": (
        Route(
            "POST",
            "/attention",
            attention,
            "Attention probabilities of every layer and head over the tokens of one text.",
            AttentionResponse,
        ),
    ),
}
