"""The JSON of every endpoint: one request and one response model per pipeline.

Requests forbid fields they do not name (a typo or an extra field gets 422) and reject empty inputs; the
limits on how much they may ask are checked after parsing (:mod:`bertkit.serve.checks`). Responses are
what the OpenAPI page at ``/docs`` shows.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Text = Annotated[str, StringConstraints(min_length=1)]


# ------------------------------------------------------------------------------------------ requests
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


# ------------------------------------------------------------------------------------------ responses
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
