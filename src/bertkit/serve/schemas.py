"""The JSON of every endpoint: one request and one response model per pipeline, and the bodies of the APIs
retrieval stacks call: OpenAI's ``/v1/embeddings`` and text-embeddings-inference's (TEI) ``/embed``,
``/rerank`` and ``/tokenize``.

Requests forbid fields they do not name (a typo or an extra field gets 422) and reject empty inputs; the
limits on how much they may ask are checked after parsing (:mod:`bertkit.serve.checks`). Responses are
what the OpenAPI page at ``/docs`` shows.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StringConstraints, Tag, field_validator

Text = Annotated[str, StringConstraints(min_length=1)]
Inputs = str | list[str] | list[int] | list[list[int]]
"""A text, texts, one input's token ids, or several inputs' token ids (OpenAI's and TEI's ``input(s)``)."""


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


def check_inputs(value: Any, name: str) -> Any:
    """``value`` when it is a non-empty text, list of non-empty texts, list of token ids (ints from 0) or list
    of such lists; else a ``ValueError`` that says which of them was meant."""
    if isinstance(value, str):
        if not value:
            raise ValueError(f"{name} is an empty string: give some text")
        return value
    if not isinstance(value, list) or not value:
        raise ValueError(f"{name} must be a text, a non-empty list of texts, or token ids (a list of ints or lists)")
    if all(isinstance(v, str) for v in value):
        blank = next((i for i, v in enumerate(value) if not v), None)
        if blank is not None:
            raise ValueError(f"{name}[{blank}] is an empty string: give some text")
        return value
    if all(_is_id(v) for v in value):
        return value
    if all(isinstance(v, list) and v and all(_is_id(i) for i in v) for v in value):
        return value
    raise ValueError(
        f"{name} must be a text, a list of texts, a list of token ids (ints from 0) or a list of non-empty such "
        f"lists, not a mix"
    )


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def as_batch(inputs: Inputs) -> list[str] | list[list[int]]:
    """Checked ``inputs`` as a list of texts or a list of token-id lists."""
    if isinstance(inputs, str):
        return [inputs]
    if inputs and isinstance(inputs[0], int):
        return [inputs]  # one input's token ids
    return cast(list[str] | list[list[int]], inputs)


class OpenAIEmbeddingRequest(_Strict):
    """OpenAI's embeddings request (``POST /v1/embeddings``)."""

    input: Inputs = Field(description="A text, a list of texts, token ids, or a list of token-id lists.")
    model: str | None = Field(None, description="Any name: the served model answers (its name is in the reply).")
    encoding_format: Literal["float", "base64"] = Field(
        "float", description="base64: each vector as little-endian float32 bytes, base64-encoded."
    )
    dimensions: int | None = Field(None, ge=1, description="Keep the first k dimensions (Matryoshka).")
    user: str | None = Field(None, description="Accepted and ignored.")

    @field_validator("input", mode="before")
    @classmethod
    def _input(cls, value: Any) -> Any:
        return check_inputs(value, "input")


class TeiEmbedRequest(_Strict):
    """text-embeddings-inference's embed request (``POST /embed`` with ``inputs``)."""

    inputs: Inputs = Field(description="A text, a list of texts, token ids, or a list of token-id lists.")
    normalize: bool = Field(True, description="L2-normalise the vectors (TEI's default: true).")
    truncate: bool | None = Field(None, description="Cut inputs longer than the model's length (default: refuse).")
    truncation_direction: Literal["right", "left", "Right", "Left"] = Field(
        "right", description="Which end of a long input is kept: right keeps the start, left the end."
    )
    dimensions: int | None = Field(None, ge=1, description="Keep the first k dimensions (Matryoshka).")
    prompt_name: str | None = Field(None, description="Not supported: bertkit models have no prompts.")

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        return check_inputs(value, "inputs")


def _embed_body(value: Any) -> str:
    """Which ``/embed`` body this is: TEI's (it has ``inputs``) or bertkit's (``texts``)."""
    return "tei" if isinstance(value, dict) and "inputs" in value else "bertkit"


AnyEmbedRequest = Annotated[
    Annotated[EmbedRequest, Tag("bertkit")] | Annotated[TeiEmbedRequest, Tag("tei")], Discriminator(_embed_body)
]
"""``POST /embed`` takes bertkit's body (``texts``) or TEI's (``inputs``); the keys decide."""


class _TeiTruncation(_Strict):
    truncate: bool | None = Field(None, description="Cut inputs longer than the model's length (default: refuse).")
    truncation_direction: Literal["right", "left", "Right", "Left"] = Field(
        "right", description="Which end of a long input is kept: right keeps the start, left the end."
    )
    prompt_name: str | None = Field(None, description="Not supported: bertkit models have no prompts.")


class EmbedAllRequest(_TeiTruncation):
    """text-embeddings-inference's ``/embed_all``: every token's vector of the last layer."""

    inputs: Inputs = Field(description="A text, a list of texts, token ids, or a list of token-id lists.")

    @field_validator("inputs", mode="before")
    @classmethod
    def _inputs(cls, value: Any) -> Any:
        return check_inputs(value, "inputs")


class SimilarityInput(_Strict):
    source_sentence: Text = Field(description="The text the others are compared with.")
    sentences: list[Text] = Field(min_length=1, description="The texts compared with source_sentence.")


class SimilarityRequest(_Strict):
    """text-embeddings-inference's ``/similarity`` (Hugging Face's sentence-similarity task)."""

    inputs: SimilarityInput
    parameters: _TeiTruncation | None = Field(None, description="truncate, truncation_direction, prompt_name.")


class TextClassificationParameters(_Strict):
    """Hugging Face's text-classification parameters, as ``InferenceClient.text_classification`` sends them."""

    function_to_apply: Literal["softmax"] | None = Field(None, description="Only softmax: scores are probabilities.")
    top_k: int | None = Field(None, ge=1, description="Keep the k most probable labels.")


PredictInput = Text | list[Text]
"""A text, or a ``[text, text_pair]`` pair."""


class PredictRequest(_Strict):
    """text-embeddings-inference's ``/predict``. ``inputs``: a text, a pair ``[a, b]``, or a list of those (a
    list of exactly two texts is one pair, as in TEI)."""

    inputs: Text | list[PredictInput] = Field(description="A text, a [text, text_pair] pair, or a list of those.")
    truncate: bool | None = Field(None, description="Cut inputs longer than the model's length (default: refuse).")
    truncation_direction: Literal["right", "Right"] = Field("right", description="Only right (keep the start).")
    raw_scores: bool = Field(False, description="Score labels by the head's logits instead of probabilities.")
    parameters: TextClassificationParameters | None = None

    @field_validator("inputs")
    @classmethod
    def _shape(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError("inputs is an empty list: give a text")
            if any(isinstance(v, list) and len(v) != 2 for v in value):
                raise ValueError("inputs: a pair is a list of exactly two texts")
        return value


class RerankRequest(_Strict):
    """text-embeddings-inference's rerank request."""

    query: Text
    texts: list[Text] = Field(min_length=1, description="Texts to order by their relevance to the query.")
    raw_scores: bool = Field(False, description="The logit (or logit difference) instead of a probability.")
    return_text: bool = Field(False, description="Give each text back with its score.")
    truncate: bool | None = Field(None, description="Cut pairs longer than the model's limit (default: refuse).")
    truncation_direction: Literal["right", "Right"] = Field("right", description="Only right (keep the start).")
    top_n: int | None = Field(None, ge=1, description="Return the n best texts only.")


class TokenizeRequest(_Strict):
    """text-embeddings-inference's tokenize request."""

    inputs: Text | list[Text] = Field(description="A text or a list of texts.")
    add_special_tokens: bool = Field(True, description="Add [CLS] and [SEP] as the model sees them.")
    prompt_name: str | None = Field(None, description="Not supported: bertkit models have no prompts.")

    @field_validator("inputs")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("inputs is an empty list: give a text")
        return value


class ClassifyRequest(_Strict):
    texts: list[Text | tuple[Text, Text]] = Field(min_length=1, description="Texts or [text, text_pair] pairs.")


class TagRequest(_Strict):
    texts: list[Text] = Field(min_length=1)


class TextsRequest(_Strict):
    """The body of a task family's own pipeline (``Family.run``): the texts it runs on."""

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


TRUNCATED_FIELD = "Inputs longer than the model's length that were cut to it (start kept)."


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dimension: int
    truncated: int = Field(0, description=TRUNCATED_FIELD)


class ClassificationOut(BaseModel):
    label: str | None
    score: float
    probabilities: dict[str, float] | None = None


class ClassifyResponse(BaseModel):
    results: list[ClassificationOut]
    truncated: int = Field(0, description=TRUNCATED_FIELD)


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


class OpenAIEmbedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="The vector, or base64 of its little-endian float32 bytes.")


class OpenAIUsage(BaseModel):
    prompt_tokens: int = Field(description="Tokens run through the model, [CLS] and [SEP] included.")
    total_tokens: int


class OpenAIEmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage


class Prediction(BaseModel):
    score: float
    label: str


class RankOut(BaseModel):
    index: int = Field(description="Position of the text in the request.")
    text: str | None = Field(None, description="The text, with return_text.")
    score: float


class SimpleToken(BaseModel):
    id: int
    text: str = Field(description="The slice of the input the token covers; the token itself for a special one.")
    special: bool
    start: int | None = Field(description="Character offset in the input; null for a special token.")
    stop: int | None
