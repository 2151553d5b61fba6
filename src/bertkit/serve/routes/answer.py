"""The question-answering head's endpoint: ``/answer``, answer spans of questions in their contexts."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bertkit import inference
from bertkit.serve.routes.handling import ServiceDep, token_lengths
from bertkit.serve.routes.route import Route
from bertkit.serve.schemas import AnswerRequest, AnswerResponse

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded


async def answer(request: AnswerRequest, service: ServiceDep) -> dict:
    limits = service.limits
    contexts = [q.context for q in request.inputs]
    service.checks.count(request.inputs, "questions")
    service.checks.chars([q.question for q in request.inputs], "question")
    service.checks.chars(contexts, "context", limit=limits.max_long_chars)
    lengths = await token_lengths(service, contexts, "context", limits.max_long_tokens, special=0)
    service.checks.top_k(request.top_k)
    job = partial(_answer_job, service.loaded, limits.batch_size, request.top_k)
    items = [(q.question, q.context) for q in request.inputs]
    return {"results": await service.run(("answer", request.top_k), job, items, lengths)}


def _answer_job(loaded: Loaded, batch: int, top_k: int, items: list[tuple[str, str]]) -> list:
    out = inference.answer([q for q, _ in items], [c for _, c in items], loaded, top_k=top_k, batch_size=batch)
    return [[a.to_dict() for a in (answers if isinstance(answers, list) else [answers])] for answers in out]


ROUTES: dict[str, tuple[Route, ...]] = {
    "answer": (Route("POST", "/answer", answer, "Answer spans of questions in their contexts.", AnswerResponse),),
}
"""The question-answering head's endpoint."""
