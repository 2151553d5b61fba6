"""The model's endpoints, one per pipeline; an app has those its model supports (``PIPELINE_ROUTES``).

Each endpoint checks its request (:class:`RequestChecks`) before any model work, then hands the inputs to the
batcher with a job function (``_*_job``) that runs the library's pipeline on a whole batch; the batch key
holds every option that changes the result, so only requests asking the same thing share a batch.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

from fastapi import Depends

from bertkit import inference
from bertkit.inference import Loaded
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import (
    AnswerRequest,
    AnswerResponse,
    AttentionRequest,
    AttentionResponse,
    ClassifyRequest,
    ClassifyResponse,
    EmbedRequest,
    EmbedResponse,
    FillMaskRequest,
    FillMaskResponse,
    NextSentenceRequest,
    NextSentenceResponse,
    TagRequest,
    TagResponse,
)
from bertkit.serve.service import Service, get_service

ServiceDep = Annotated[Service, Depends(get_service)]


# ------------------------------------------------------------------------------------------ fill-mask
async def fill_mask(request: FillMaskRequest, service: ServiceDep) -> dict:
    service.checks.count(request.texts)
    service.checks.chars(request.texts)
    service.checks.masks(request.texts, request.top_k)
    service.checks.tokens(request.texts)
    job = partial(_fill_mask_job, service.loaded, service.limits.batch_size, request.top_k)
    return {"results": await service.run(("fill_mask", request.top_k), job, request.texts)}


def _fill_mask_job(loaded: Loaded, batch: int, top_k: int, texts: list[str]) -> list:
    out = inference.fill_mask(texts, loaded, top_k=top_k, batch_size=batch)
    return [[[c.to_dict() for c in mask] for mask in text] for text in out]


# ------------------------------------------------------------------------------------------ next-sentence
async def next_sentence(request: NextSentenceRequest, service: ServiceDep) -> dict:
    service.checks.count(request.pairs, "pairs")
    service.checks.chars([s for pair in request.pairs for s in pair], "sentence")
    service.checks.tokens(request.pairs, "pair")
    job = partial(_next_sentence_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("next_sentence",), job, request.pairs)}


def _next_sentence_job(loaded: Loaded, batch: int, pairs: list[tuple[str, str]]) -> list:
    probs = inference.next_sentence([a for a, _ in pairs], [b for _, b in pairs], loaded, batch_size=batch)
    return [{"probability": p} for p in (probs if isinstance(probs, list) else [probs])]


# ------------------------------------------------------------------------------------------ embed
async def embed(request: EmbedRequest, service: ServiceDep) -> dict:
    service.checks.count(request.texts)
    service.checks.chars(request.texts)
    service.checks.tokens(request.texts)
    default = service.loaded.sentence_config
    pooling = request.pooling or (default.pooling if default else "mean")
    normalize = request.normalize
    job = partial(_embed_job, service.loaded, service.limits.batch_size, pooling, normalize)
    vectors = await service.run(("embed", pooling, normalize), job, request.texts)
    return {"embeddings": vectors, "dimension": len(vectors[0])}


def _embed_job(loaded: Loaded, batch: int, pooling: str, normalize: bool | None, texts: list[str]) -> list:
    return inference.embed(texts, loaded, pooling=pooling, normalize=normalize, batch_size=batch).tolist()


# ------------------------------------------------------------------------------------------ classify
async def classify(request: ClassifyRequest, service: ServiceDep) -> dict:
    texts = [t if isinstance(t, str) else (t[0], t[1]) for t in request.texts]
    service.checks.count(texts)
    service.checks.chars([s for t in texts for s in ((t,) if isinstance(t, str) else t)])
    service.checks.tokens(texts)
    job = partial(_classify_job, service.loaded, service.limits.batch_size)
    return {"results": await service.run(("classify",), job, texts)}


def _classify_job(loaded: Loaded, batch: int, items: list) -> list:
    return [vars(p) for p in inference.classify(items, loaded, batch_size=batch)]


# ------------------------------------------------------------------------------------------ tag
async def tag(request: TagRequest, service: ServiceDep) -> dict:
    limits = service.limits
    service.checks.count(request.texts)
    service.checks.chars(request.texts, limit=limits.max_long_chars)
    service.checks.tokens(request.texts, limit=limits.max_long_tokens, special=0)
    job = partial(_tag_job, service.loaded, limits.batch_size)
    return {"results": await service.run(("tag",), job, request.texts)}


def _tag_job(loaded: Loaded, batch: int, texts: list[str]) -> list:
    return [r.to_dict() for r in inference.tag(texts, loaded, batch_size=batch)]


# ------------------------------------------------------------------------------------------ answer
async def answer(request: AnswerRequest, service: ServiceDep) -> dict:
    limits = service.limits
    contexts = [q.context for q in request.inputs]
    service.checks.count(request.inputs, "questions")
    service.checks.chars([q.question for q in request.inputs], "question")
    service.checks.chars(contexts, "context", limit=limits.max_long_chars)
    service.checks.tokens(contexts, "context", limit=limits.max_long_tokens, special=0)
    service.checks.top_k(request.top_k)
    job = partial(_answer_job, service.loaded, limits.batch_size, request.top_k)
    items = [(q.question, q.context) for q in request.inputs]
    return {"results": await service.run(("answer", request.top_k), job, items)}


def _answer_job(loaded: Loaded, batch: int, top_k: int, items: list[tuple[str, str]]) -> list:
    out = inference.answer([q for q, _ in items], [c for _, c in items], loaded, top_k=top_k, batch_size=batch)
    return [[a.to_dict() for a in (answers if isinstance(answers, list) else [answers])] for answers in out]


# ------------------------------------------------------------------------------------------ attention
async def attention(request: AttentionRequest, service: ServiceDep) -> dict:
    service.checks.chars([request.text])
    service.checks.tokens([request.text], limit=service.limits.attention_max_tokens)
    job = partial(_attention_job, service.loaded)
    return (await service.run(("attention",), job, [request.text]))[0]


def _attention_job(loaded: Loaded, texts: list[str]) -> list[dict[str, Any]]:
    out = []
    for text in texts:
        maps = inference.attentions(text, loaded)
        out.append({"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(4).tolist()})
    return out


# Pipeline -> its endpoint, in the order the endpoints are listed (the OpenAPI page, a 404's list of routes).
PIPELINE_ROUTES: dict[str, Route] = {
    "fill_mask": Route("POST", "/fill-mask", fill_mask, "Top predictions for every [MASK].", FillMaskResponse),
    "next_sentence": Route(
        "POST", "/next-sentence", next_sentence, "Probability that sentence B follows sentence A.", NextSentenceResponse
    ),
    "embed": Route("POST", "/embed", embed, "One vector per text (cls, mean or max pooling).", EmbedResponse),
    "classify": Route("POST", "/classify", classify, "Label probabilities of texts or pairs.", ClassifyResponse),
    "tag": Route("POST", "/tag", tag, "Word tags and entities with character offsets.", TagResponse),
    "answer": Route("POST", "/answer", answer, "Answer spans of questions in their contexts.", AnswerResponse),
    "attention": Route(
        "POST",
        "/attention",
        attention,
        "Attention probabilities of every layer and head over the tokens of one text.",
        AttentionResponse,
    ),
}
