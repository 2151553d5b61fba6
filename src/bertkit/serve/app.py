"""The HTTP service: a FastAPI app with one endpoint per pipeline the loaded model supports.

Every endpoint validates its JSON (pydantic: wrong types and empty inputs get 422), checks the limits
(too many inputs, too long texts in characters or tokens: 413) before any model work, then hands its
inputs to the shared ``Batcher`` and waits at most ``request_timeout_s`` (504 after that). Errors are JSON
``{"error": "<one line saying what is wrong>"}``; a pipeline's ``BertkitError`` is a 422, never a 500.
The page at ``/`` (static files in ``serve/static``) calls the same endpoints.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from bertkit.errors import BertkitError
from bertkit.inference import MASK_PATTERN, Loaded, load
from bertkit.serve.batcher import Batcher, Overloaded
from bertkit.serve.limits import ServeLimits

try:
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse, Response
    from fastapi.staticfiles import StaticFiles
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as exc:  # pragma: no cover - the serve extra is optional
    raise BertkitError("the HTTP service needs FastAPI and uvicorn; pip install 'bertkit[serve]'") from exc

logger = logging.getLogger("bertkit.serve")

STATIC = Path(__file__).resolve().parent / "static"

# A 16x16 "B" tab icon: browsers ask for /favicon.ico on every page, and a 404 there is noise in their console.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" '
    'fill="#2b59c3"/><text x="8" y="12.5" font-size="12" font-family="sans-serif" font-weight="bold" '
    'text-anchor="middle" fill="#fff">B</text></svg>'
)
UNLISTED = {"/favicon.ico", "/docs/oauth2-redirect"}  # routes a 404 does not offer

Text = Annotated[str, StringConstraints(min_length=1)]


class Problem(Exception):
    """A request the service refuses: HTTP ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


# ------------------------------------------------------------------------------------------ schemas
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FillMaskRequest(_Strict):
    texts: list[Text] = Field(min_length=1, description="Texts with one or more [MASK].")
    top_k: int = Field(5, ge=1, description="Candidates per mask.")


class NextSentenceRequest(_Strict):
    pairs: list[tuple[Text, Text]] = Field(min_length=1, description="[sentence A, sentence B] pairs.")


class EmbedRequest(_Strict):
    texts: list[Text] = Field(min_length=1)
    pooling: Literal["cls", "mean", "max"] | None = Field(
        None, description="Default: the checkpoint's sentence-transformers pooling, else mean."
    )
    normalize: bool | None = Field(None, description="Default: as the checkpoint's sentence-transformers modules.")


class ClassifyRequest(_Strict):
    texts: list[Text | tuple[Text, Text]] = Field(min_length=1, description="Texts or [text, text_pair] pairs.")


class TagRequest(_Strict):
    texts: list[Text] = Field(min_length=1)


class QuestionContext(_Strict):
    question: Text
    context: Text


class AnswerRequest(_Strict):
    inputs: list[QuestionContext] = Field(min_length=1)
    top_k: int = Field(1, ge=1)


class AttentionRequest(_Strict):
    text: Text


class MaskCandidateOut(BaseModel):
    token: str
    token_id: int
    score: float
    text: str
    sequence: str


class FillMaskResponse(BaseModel):
    results: list[list[list[MaskCandidateOut]]] = Field(description="Per text, per [MASK], the candidates.")


class NextSentenceOut(BaseModel):
    probability: float = Field(description="Probability that B follows A.")


class NextSentenceResponse(BaseModel):
    results: list[NextSentenceOut]


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dimension: int


class ClassificationOut(BaseModel):
    label: str | None
    score: float
    probabilities: dict[str, float] | None = None


class ClassifyResponse(BaseModel):
    results: list[ClassificationOut]


class TaggedWordOut(BaseModel):
    word: str
    start: int
    end: int
    tag: str
    score: float = Field(description="Probability of the tag.")


class EntityOut(BaseModel):
    type: str
    text: str
    start: int
    end: int


class TagOut(BaseModel):
    text: str
    words: list[TaggedWordOut]
    entities: list[EntityOut]


class TagResponse(BaseModel):
    results: list[TagOut]


class AnswerOut(BaseModel):
    text: str
    start: int | None
    end: int | None
    score: float


class AnswerResponse(BaseModel):
    results: list[list[AnswerOut]] = Field(description="Per question, the top_k answers, best first.")


class AttentionResponse(BaseModel):
    tokens: list[str]
    offsets: list[tuple[int, int]]
    attentions: list[list[list[list[float]]]] = Field(description="[layer][head][from token][to token].")


# ------------------------------------------------------------------------------------------ middleware
class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with 413, whether announced by Content-Length or
    streamed in chunks, before the app parses anything."""

    def __init__(self, app: Any, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = f"the request body is over {self.max_bytes} bytes, this server's limit; send fewer or shorter texts"
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _send_json(send, 400, {"error": "the Content-Length header is not a number"})
                return
            if size > self.max_bytes:
                await _send_json(send, 413, {"error": too_big})
                return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _send_json(send, 413, {"error": too_big})
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _send_json(send: Callable, status: int, payload: dict) -> None:
    import json

    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------------------------------ the app
def _describe_validation(errors: Sequence[dict]) -> str:
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"the request body is not valid JSON ({first.get('ctx', {}).get('error', first.get('msg'))})"
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    if where == "body" and first.get("type") == "missing":
        return "the request body is empty: send a JSON object"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid value')}{more}"


class Service:
    """What the endpoints share: the model, the limits and the batcher."""

    def __init__(self, loaded: Loaded, limits: ServeLimits):
        self.loaded = loaded
        self.limits = limits
        # What a request may send is bounded by the model's positions; each pipeline then cuts or windows its
        # inputs at the length the model was fine-tuned with, as `bertkit predict` does.
        self.max_tokens = min(limits.max_tokens or loaded.max_positions, loaded.max_positions)
        self.batcher = Batcher(limits.batch_window_ms / 1000, limits.max_batch_items, limits.max_queue)

    # ---------------------------------------------------------------------------- checks
    def check_count(self, items: Sequence[Any], what: str = "texts") -> None:
        if len(items) > self.limits.max_items:
            raise Problem(
                413,
                f"{len(items)} {what} in one request; this server takes at most "
                f"{self.limits.max_items}: split the request",
            )

    def check_chars(self, texts: Sequence[str], what: str = "text", limit: int | None = None) -> None:
        limit = limit or self.limits.max_chars
        for i, text in enumerate(texts):
            if not text.strip():
                raise Problem(422, f"{what} {i} is blank: give some text")
            if len(text) > limit:
                raise Problem(413, f"{what} {i} is {len(text)} characters; this server takes at most {limit}")

    def check_tokens(
        self,
        texts: Sequence[str | tuple[str, str]],
        what: str = "text",
        limit: int | None = None,
        special: int | None = None,
    ) -> None:
        """Inputs with their special tokens must fit ``limit`` (default: the model's length)."""
        limit = limit or self.max_tokens
        flat = [part for t in texts for part in ((t,) if isinstance(t, str) else t)]
        ids = self.loaded.tokenizer.ids_batch(flat)
        cursor = 0
        for i, text in enumerate(texts):
            parts = 1 if isinstance(text, str) else 2
            count = sum(len(ids[cursor + k]) for k in range(parts)) + (special if special is not None else parts + 1)
            cursor += parts
            if count > limit:
                raise Problem(413, f"{what} {i} is {count} tokens; this server takes at most {limit}: shorten it")

    # ---------------------------------------------------------------------------- running
    async def run(self, key: Hashable, fn: Callable[[list], list], items: Sequence[Any]) -> list:
        try:
            return await asyncio.wait_for(self.batcher.submit(key, fn, items), self.limits.request_timeout_s)
        except TimeoutError:
            raise Problem(
                504,
                f"the request took longer than {self.limits.request_timeout_s:g} s and was "
                f"dropped; send fewer or shorter texts",
            ) from None
        except Overloaded as exc:
            raise Problem(503, f"the server is overloaded: {exc}") from None

    def info(self) -> dict[str, Any]:
        config = self.loaded.config
        return {
            "model": {
                "architecture": type(self.loaded.model).__name__,
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
        }


def create_app(model: str | os.PathLike | Loaded, limits: ServeLimits | None = None) -> FastAPI:
    """The FastAPI app serving ``model`` (a directory or a ``Loaded``): an endpoint for each pipeline it
    supports, ``/health``, ``/info``, the OpenAPI schema at ``/openapi.json`` and the web page at ``/``."""
    loaded = model if isinstance(model, Loaded) else load(model)
    limits = limits or ServeLimits()
    service = Service(loaded, limits)
    app = FastAPI(
        title="bertkit",
        version="0.1.0",
        description=f"BERT inference: {type(loaded.model).__name__}, pipelines {', '.join(loaded.pipelines)}.",
    )
    app.state.service = service
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    @app.exception_handler(BertkitError)
    async def _bertkit_error(request: Request, exc: BertkitError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{k: v for k, v in e.items() if k in ("type", "loc", "msg")} for e in exc.errors()]
        return JSONResponse({"error": _describe_validation(exc.errors()), "detail": errors}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404 and exc.detail == "Not Found":  # the router's (or a static file's) own 404
            routes = _routes(app)
            message = f"no route {request.method} {request.url.path}; routes: {', '.join(routes)}"
            return JSONResponse({"error": message, "routes": routes}, status_code=404, headers=exc.headers)
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error on %s", request.url.path)
        return JSONResponse({"error": f"internal error ({type(exc).__name__}); see the server log"}, status_code=500)

    @app.get("/health", summary="Liveness: the model is loaded.")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/info", summary="The model, its pipelines and the server's limits.")
    async def info() -> dict[str, Any]:
        return service.info()

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    _add_pipelines(app, service)

    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")

        @app.get("/", include_in_schema=False)
        async def page() -> FileResponse:
            return FileResponse(STATIC / "index.html")

    return app


def _routes(app: FastAPI) -> list[str]:
    """``METHOD /path`` of every route a caller may use: the page, the API, then the docs and page files."""
    routes: list[str] = []
    for route in app.routes:
        path = getattr(route, "path", "")
        if path in UNLISTED:
            continue
        methods = sorted(getattr(route, "methods", None) or ())
        if not methods:  # a mounted app: the web page's static files
            routes.append(f"GET {path}/...")
        for method in methods:
            if method != "HEAD":
                routes.append(f"{method} {path}")
    aside = ("/openapi.json", "/docs", "/redoc", "/static/...")
    return sorted(routes, key=lambda r: (r != "GET /", r.split(" ", 1)[1] in aside))  # stable: API order kept


def _add_pipelines(app: FastAPI, service: Service) -> None:
    """Register the endpoints of the pipelines the model supports (the others do not exist: 404)."""
    from bertkit import inference

    loaded, limits = service.loaded, service.limits
    batch = limits.batch_size

    if loaded.supports("fill_mask"):

        @app.post("/fill-mask", response_model=FillMaskResponse, summary="Top predictions for every [MASK].")
        async def fill_mask(request: FillMaskRequest) -> dict:
            service.check_count(request.texts)
            service.check_chars(request.texts)
            for i, text in enumerate(request.texts):
                if not MASK_PATTERN.search(text):
                    raise Problem(422, f"text {i} has no [MASK] to fill")
            if request.top_k > limits.max_top_k:
                raise Problem(422, f"top_k is {request.top_k}; this server gives at most {limits.max_top_k}")
            candidates = sum(len(MASK_PATTERN.findall(text)) for text in request.texts) * request.top_k
            if candidates > limits.max_mask_candidates:
                raise Problem(
                    413,
                    f"{candidates} [MASK] candidates asked ([MASK] tokens x top_k); this server "
                    f"gives at most {limits.max_mask_candidates} per request: send fewer masks",
                )
            service.check_tokens(request.texts)
            top_k = request.top_k

            def run(texts: list[str]) -> list:
                out = inference.fill_mask(texts, loaded, top_k=top_k, batch_size=batch)
                return [[[c.to_dict() for c in mask] for mask in text] for text in out]

            return {"results": await service.run(("fill_mask", top_k), run, request.texts)}

    if loaded.supports("next_sentence"):

        @app.post(
            "/next-sentence",
            response_model=NextSentenceResponse,
            summary="Probability that sentence B follows sentence A.",
        )
        async def next_sentence(request: NextSentenceRequest) -> dict:
            service.check_count(request.pairs, "pairs")
            service.check_chars([s for pair in request.pairs for s in pair], "sentence")
            service.check_tokens(request.pairs, "pair")

            def run(pairs: list[tuple[str, str]]) -> list:
                probs = inference.next_sentence([a for a, _ in pairs], [b for _, b in pairs], loaded, batch_size=batch)
                return [{"probability": p} for p in (probs if isinstance(probs, list) else [probs])]

            return {"results": await service.run(("next_sentence",), run, request.pairs)}

    @app.post("/embed", response_model=EmbedResponse, summary="One vector per text (cls, mean or max pooling).")
    async def embed(request: EmbedRequest) -> dict:
        service.check_count(request.texts)
        service.check_chars(request.texts)
        service.check_tokens(request.texts)
        default = loaded.sentence_config
        pooling = request.pooling or (default.pooling if default else "mean")
        normalize = request.normalize

        def run(texts: list[str]) -> list:
            return inference.embed(texts, loaded, pooling=pooling, normalize=normalize, batch_size=batch).tolist()

        vectors = await service.run(("embed", pooling, normalize), run, request.texts)
        return {"embeddings": vectors, "dimension": len(vectors[0])}

    if loaded.supports("classify"):

        @app.post("/classify", response_model=ClassifyResponse, summary="Label probabilities of texts or pairs.")
        async def classify(request: ClassifyRequest) -> dict:
            texts = [t if isinstance(t, str) else (t[0], t[1]) for t in request.texts]
            service.check_count(texts)
            service.check_chars([s for t in texts for s in ((t,) if isinstance(t, str) else t)])
            service.check_tokens(texts)

            def run(items: list) -> list:
                return [vars(p) for p in inference.classify(items, loaded, batch_size=batch)]

            return {"results": await service.run(("classify",), run, texts)}

    if loaded.supports("tag"):

        @app.post("/tag", response_model=TagResponse, summary="Word tags and entities with character offsets.")
        async def tag(request: TagRequest) -> dict:
            service.check_count(request.texts)
            service.check_chars(request.texts, limit=limits.max_long_chars)
            service.check_tokens(request.texts, limit=limits.max_long_tokens, special=0)

            def run(texts: list[str]) -> list:
                return [r.to_dict() for r in inference.tag(texts, loaded, batch_size=batch)]

            return {"results": await service.run(("tag",), run, request.texts)}

    if loaded.supports("answer"):

        @app.post("/answer", response_model=AnswerResponse, summary="Answer spans of questions in their contexts.")
        async def answer(request: AnswerRequest) -> dict:
            service.check_count(request.inputs, "questions")
            service.check_chars([q.question for q in request.inputs], "question")
            service.check_chars([q.context for q in request.inputs], "context", limit=limits.max_long_chars)
            service.check_tokens(
                [q.context for q in request.inputs], "context", limit=limits.max_long_tokens, special=0
            )
            if request.top_k > limits.max_top_k:
                raise Problem(422, f"top_k is {request.top_k}; this server gives at most {limits.max_top_k}")
            top_k = request.top_k

            def run(items: list[tuple[str, str]]) -> list:
                out = inference.answer(
                    [q for q, _ in items], [c for _, c in items], loaded, top_k=top_k, batch_size=batch
                )
                return [[a.to_dict() for a in (answers if isinstance(answers, list) else [answers])] for answers in out]

            items = [(q.question, q.context) for q in request.inputs]
            return {"results": await service.run(("answer", top_k), run, items)}

    @app.post(
        "/attention",
        response_model=AttentionResponse,
        summary="Attention probabilities of every layer and head over the tokens of one text.",
    )
    async def attention(request: AttentionRequest) -> dict:
        service.check_chars([request.text])
        service.check_tokens([request.text], limit=limits.attention_max_tokens)

        def run(texts: list[str]) -> list:
            out = []
            for text in texts:
                maps = inference.attentions(text, loaded)
                out.append(
                    {"tokens": maps.tokens, "offsets": maps.offsets, "attentions": maps.attentions.round(4).tolist()}
                )
            return out

        return (await service.run(("attention",), run, [request.text]))[0]


def serve(
    model: str | os.PathLike | Loaded,
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: ServeLimits | None = None,
    log_level: str = "info",
) -> None:
    """Serve ``model`` with uvicorn until interrupted. Binds to localhost unless ``host`` says otherwise."""
    try:
        import uvicorn
    except ImportError:
        raise BertkitError("the HTTP service needs uvicorn; pip install 'bertkit[serve]'") from None
    if host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning(
            "listening on %s: the service has no authentication; anyone who can reach this address can use the model",
            host,
        )
    app = create_app(model, limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
