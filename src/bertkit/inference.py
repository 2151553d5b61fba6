"""Pipelines a user calls on a trained model: fill_mask, next_sentence, embed, classify, tag, answer and
attentions.

Every pipeline takes either a model directory or already loaded ``Loaded`` objects (``load(path)``: load
once, call many times), sorts its inputs by length so that batches carry little padding, runs under
``torch.inference_mode()`` and returns results in the caller's order. A single input (a string, or a pair)
gives a single result; a list gives a list.

The head comes from the checkpoint's ``config.json`` (``architectures``), and a pipeline refuses, with one
clear line, a model that has no trained weights for its head (fill-mask on an encoder without an MLM head,
say). Task post-processing (labels, NER entities, SQuAD windows and spans) is ``bertkit.tasks``'s, shared
with fine-tuning and evaluation.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.tokenizer import Tokenizer, collate_encodings

TextInput = str | tuple[str, str]

MODEL_INPUTS = ("input_ids", "token_type_ids", "attention_mask")

PIPELINES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    # pipeline: (model classes that have the head, Hugging Face tensor names that must be in the checkpoint,
    #            what the head is called in messages)
    "fill_mask": (("BertForMaskedLM", "BertForPreTraining"),
                  ("cls.predictions.transform.dense.weight", "cls.predictions.bias"), "a masked-LM head"),
    "next_sentence": (("BertForPreTraining",), ("cls.seq_relationship.weight",), "a next-sentence head"),
    "classify": (("BertForSequenceClassification",), ("classifier.weight",), "a sequence-classification head"),
    "tag": (("BertForTokenClassification",), ("classifier.weight",), "a token-classification head"),
    "answer": (("BertForQuestionAnswering",), ("qa_outputs.weight",), "a question-answering head"),
}
"""What each head pipeline needs; ``embed`` and ``attention`` (``attentions()``) work with any model."""


# ------------------------------------------------------------------------------------------ loading
@dataclass
class Loaded:
    """A model and the tokenizer saved with it, ready for inference (eval mode)."""

    model: torch.nn.Module
    tokenizer: Tokenizer
    checkpoint_names: frozenset[str] | None = None
    """Tensor names (Hugging Face's) in the checkpoint the model came from; None when unknown (the model was
    built in memory), in which case every head of the model's class counts as trained."""
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def max_length(self) -> int:
        return self.model.config.max_position_embeddings

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def encoder(self) -> torch.nn.Module:
        """The ``BertModel`` inside the head (or the model itself)."""
        return getattr(self.model, "bert", self.model)

    def supports(self, pipeline: str) -> bool:
        """Whether the model has a trained head for ``pipeline`` (``embed`` and ``attention``: always)."""
        if pipeline in ("embed", "attention"):
            return True
        from bertkit.model import HEAD_CLASSES

        classes, names, _ = PIPELINES[pipeline]
        if not isinstance(self.model, tuple(HEAD_CLASSES[c] for c in classes)):
            return False
        return self.checkpoint_names is None or all(name in self.checkpoint_names for name in names)

    @property
    def pipelines(self) -> list[str]:
        """Pipelines this model can run, e.g. ``["fill_mask", "next_sentence", "embed", "attention"]``."""
        return [p for p in (*PIPELINES, "embed", "attention") if self.supports(p)]

    def require(self, pipeline: str) -> None:
        """Raise a one-line ``BertkitError`` when the model cannot run ``pipeline``."""
        if self.supports(pipeline):
            return
        classes, _, what = PIPELINES[pipeline]
        kind = type(self.model).__name__
        if self.checkpoint_names is not None and kind in classes:
            reason = f"its checkpoint has no trained weights for {what}"
        else:
            reason = f"it is a {kind}; {pipeline.replace('_', '-')} needs {what} ({' or '.join(classes)})"
        usable = ", ".join(p.replace("_", "-") for p in self.pipelines)
        raise BertkitError(f"this model cannot {pipeline.replace('_', '-')}: {reason}. It supports: {usable}")


def checkpoint_tensor_names(path: str | os.PathLike) -> frozenset[str]:
    """Names of the tensors in a model directory's weights (read from the file header, not the data)."""
    from bertkit.weights import read_state_dict, weights_file

    path = Path(path)
    file = weights_file(path) if path.is_dir() else path
    if file is None:
        return frozenset()
    if file.name.endswith(".safetensors"):
        from safetensors import safe_open

        with safe_open(str(file), framework="pt") as handle:
            names = list(handle.keys())
    elif file.name.endswith(".index.json"):
        names = list(json.loads(file.read_text(encoding="utf-8")).get("weight_map", {}))
    else:
        names = list(read_state_dict(file))
    # Encoder names may carry the head's ``bert.`` prefix; head names never do.
    return frozenset(n[5:] if n.startswith("bert.") else n for n in names)


def load(path: str | os.PathLike, head: str | None = None, device: str | torch.device = "cpu") -> Loaded:
    """Load a model directory (Hugging Face layout) with its tokenizer, in eval mode.

    ``head`` names the class to build (e.g. ``"BertModel"``, ``"BertForMaskedLM"``); by default the one
    recorded in ``config.json``.
    """
    from bertkit.weights import load_model

    model = load_model(path, head=head).to(device).eval()
    tokenizer = Tokenizer.from_pretrained(path)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise BertkitError(
            f"{path}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
            f"{model.config.vocab_size} embeddings; the tokenizer files belong to another model"
        )
    return Loaded(model, tokenizer, checkpoint_tensor_names(path))


def _as_loaded(model: "str | os.PathLike | Loaded", head: str | None = None) -> Loaded:
    return model if isinstance(model, Loaded) else load(model, head=head)


def _for(pipeline: str, model: "str | os.PathLike | Loaded") -> Loaded:
    loaded = _as_loaded(model)
    loaded.require(pipeline)
    return loaded


# ------------------------------------------------------------------------------------------ batching
def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding stays small."""
    if batch_size < 1:
        raise BertkitError(f"batch size must be at least 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def _run(loaded: Loaded, features: Sequence[dict[str, Any]], batch_size: int,
         forward: Callable[[dict[str, torch.Tensor], list[dict[str, Any]]], Any],
         unbatch: Callable[[Any, dict[str, torch.Tensor]], list]) -> list:
    """Feed ``features`` (dicts with ``input_ids``/``token_type_ids``/``attention_mask`` lists) through
    ``forward`` in length-sorted, padded batches; ``unbatch`` turns an output into per-feature rows, which
    come back in the features' order."""
    from bertkit.tasks.base import pad_and_stack

    device = loaded.device
    rows: list = [None] * len(features)
    for batch in length_sorted_batches([len(f["input_ids"]) for f in features], batch_size):
        chunk = [features[i] for i in batch]
        inputs = pad_and_stack(chunk, MODEL_INPUTS, {"input_ids": loaded.tokenizer.pad_id})
        inputs = {name: tensor.to(device) for name, tensor in inputs.items()}
        for index, row in zip(batch, unbatch(forward(inputs, chunk), inputs)):
            rows[index] = row
    return rows


def _single(inputs: Any) -> bool:
    return isinstance(inputs, (str, tuple))


def _as_list(inputs: Any, what: str) -> list:
    if _single(inputs):
        return [inputs]
    if not isinstance(inputs, Sequence):
        raise BertkitError(f"{what} must be a string or a list of strings, got {type(inputs).__name__}")
    return list(inputs)


def _check_texts(texts: Sequence[Any], what: str = "text") -> None:
    for i, text in enumerate(texts):
        parts = text if isinstance(text, tuple) else (text,)
        if len(parts) > 2 or not all(isinstance(p, str) for p in parts):
            raise BertkitError(f"{what} {i} must be a string or a pair of strings, got {text!r:.60}")


# ------------------------------------------------------------------------------------------ embed
def _paired_texts(first: Any, second: Any, first_name: str, second_name: str) -> tuple[list, list]:
    """Two inputs that go together (strings, or lists of equal length) as two checked lists of strings."""
    firsts, seconds = _as_list(first, first_name), _as_list(second, second_name)
    if len(firsts) != len(seconds):
        raise BertkitError(f"got {len(firsts)} {first_name}s but {len(seconds)} {second_name}s; give one of each per pair")
    _check_texts(firsts, first_name)
    _check_texts(seconds, second_name)
    return firsts, seconds


def _encode(loaded: Loaded, texts: Sequence[TextInput], max_length: int | None, truncation: bool = True):
    """Encodings of ``texts``; pairs are always cut to ``max_length``, single texts only with ``truncation``."""
    max_length = min(max_length or loaded.max_length, loaded.max_length)
    firsts = [t if isinstance(t, str) else t[0] for t in texts]
    pairs = [None if isinstance(t, str) else t[1] for t in texts]
    if any(p is not None for p in pairs):
        return [loaded.tokenizer.encode(a, b, max_length=max_length, truncation=truncation or b is not None)
                for a, b in zip(firsts, pairs)]
    return loaded.tokenizer.encode_batch(firsts, max_length=max_length, truncation=truncation)


@dataclass
class _Window:
    """One model input cut from a long text: ``[CLS] ids[start:start + width] [SEP]``."""

    start: int
    ids: list[int]

    @property
    def type_ids(self) -> list[int]:
        return [0] * len(self.ids)

    @property
    def attention_mask(self) -> list[int]:
        return [1] * len(self.ids)


def _cut_windows(encodings: Sequence[Any], max_length: int, stride: int, cls_id: int, sep_id: int) -> list:
    """``(text index, model input)`` for ``encodings``, each one longer than ``max_length`` replaced by its
    overlapping ``_Window`` s."""
    from bertkit.tasks.base import window_starts

    out: list = []
    width = max_length - 2
    for index, encoding in enumerate(encodings):
        if len(encoding.ids) <= max_length:
            out.append((index, encoding))
            continue
        content = encoding.ids[1:-1]
        out += [(index, _Window(start, [cls_id, *content[start:start + width], sep_id]))
                for start in window_starts(len(content), width, stride)]
    return out


def _join_windows(windows: Sequence[_Window], states: Sequence[torch.Tensor], pooling: str) -> torch.Tensor:
    """One long text's token vectors from its windows, each token taken from the window where it has the most
    context (as SQuAD does); ``cls`` pooling averages the windows' ``[CLS]`` vectors."""
    from bertkit.tasks.base import max_context

    if pooling == "cls":
        return torch.stack([state[0] for state in states]).mean(0)
    spans = [(w.start, len(w.ids) - 2) for w in windows]
    n_content = spans[-1][0] + spans[-1][1]
    best = max_context(n_content, spans)
    rows = [states[0][0]] + [states[best[t]][t - spans[best[t]][0] + 1] for t in range(n_content)] + [states[-1][-1]]
    tokens = torch.stack(rows)
    return tokens.mean(0) if pooling == "mean" else tokens


def parse_layers(spec: str | Sequence[int]) -> list[int]:
    """``"-1,-2"`` or ``[-1, -2]`` -> ``[-1, -2]``."""
    if isinstance(spec, str):
        try:
            return [int(part) for part in spec.split(",") if part.strip()]
        except ValueError:
            raise BertkitError(f"layers must be comma-separated integers like -1,-2, got {spec!r}") from None
    return [int(layer) for layer in spec]


@torch.inference_mode()
def embed(
    texts: Sequence[TextInput],
    model: "str | os.PathLike | Loaded",
    *,
    pooling: str = "cls",
    layers: str | Sequence[int] = (-1,),
    batch_size: int = 32,
    max_length: int | None = None,
    normalize: bool = False,
    progress: bool = False,
    long_text: str = "truncate",
    window_stride: int = 128,
) -> np.ndarray:
    """Contextual embeddings, one row per text (or ``(text_a, text_b)`` pair).

    ``pooling``: ``cls`` (the final hidden state of ``[CLS]``; not a trained sentence vector unless the
    model was trained for it), ``mean`` (average over real tokens, as sentence-transformers) or
    ``none`` (token vectors are not pooled: returns an object array of ``[tokens, width]`` arrays).
    ``layers``: hidden layers to use, counted like Python indices over the embedding output and the L
    layers (``-1`` the last); several layers are concatenated in the given order.
    ``normalize``: L2-normalise each row (for cosine similarity).
    ``long_text``: ``truncate`` (default) keeps the first ``max_length`` tokens; ``windows`` embeds a longer
    text in overlapping windows whose starts are ``window_stride`` tokens apart and takes each token's vector
    from the window where it has the most context (``mean`` and ``none`` then cover the whole text; ``cls``
    is the mean of the windows' ``[CLS]`` vectors). Pairs are always truncated.
    """
    if pooling not in ("cls", "mean", "none"):
        raise BertkitError(f"pooling must be cls, mean or none, got {pooling!r}")
    if long_text not in ("truncate", "windows"):
        raise BertkitError(f"long_text must be truncate or windows, got {long_text!r}")
    if window_stride < 1:
        raise BertkitError(f"window_stride must be at least 1, got {window_stride}")
    loaded = _as_loaded(model, head="BertModel")
    layer_ids = parse_layers(layers)
    num_states = loaded.model.config.num_hidden_layers + 1
    for layer in layer_ids:
        if not -num_states <= layer < num_states:
            raise BertkitError(f"layer {layer} does not exist: the model has {num_states - 1} layers (use -1 for the last)")
    encoder = loaded.encoder
    device = loaded.device
    texts = list(texts)
    encodings = _encode(loaded, texts, max_length, truncation=long_text == "truncate")
    rows: list = [None] * len(encodings)
    inputs_list: list = list(enumerate(encodings))  # (text index, model input)
    if long_text == "windows":
        limit = min(max_length or loaded.max_length, loaded.max_length)
        if limit < 3:
            raise BertkitError(f"max_length {limit} leaves no room for text between [CLS] and [SEP]")
        inputs_list = _cut_windows(encodings, limit, window_stride, loaded.tokenizer.cls_id, loaded.tokenizer.sep_id)
    window_states: dict[int, list] = {}  # long text -> [(window, token vectors)]
    batches = list(length_sorted_batches([len(item.ids) for _, item in inputs_list], batch_size))
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="embed", unit="batch")
    for batch in batches:
        items = [inputs_list[i] for i in batch]
        padded = collate_encodings([item for _, item in items], pad_id=loaded.tokenizer.pad_id)
        inputs = {k: v.to(device) for k, v in padded.items()}
        out = encoder(**inputs, output_hidden_states=layer_ids != [-1])
        states = [out.last_hidden_state] if out.hidden_states is None else [out.hidden_states[i] for i in layer_ids]
        hidden = torch.cat(states, dim=-1).float()
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        lengths = inputs["attention_mask"].sum(1).tolist()
        pooled = None
        if pooling == "cls":
            pooled = hidden[:, 0].cpu()
        elif pooling == "mean":
            pooled = ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)).cpu()
        for row, (text, item) in enumerate(items):
            if isinstance(item, _Window):  # pooled once all windows of its text are in
                window_states.setdefault(text, []).append((item, hidden[row, :lengths[row]].cpu()))
            else:
                rows[text] = hidden[row, :lengths[row]].cpu() if pooled is None else pooled[row]
    for text, parts in window_states.items():
        parts.sort(key=lambda part: part[0].start)
        rows[text] = _join_windows([w for w, _ in parts], [state for _, state in parts], pooling)
    if normalize and pooling != "none":
        rows = [torch.nn.functional.normalize(row, dim=-1) for row in rows]
    rows = [row.numpy() for row in rows]
    if pooling == "none":
        result = np.empty(len(rows), dtype=object)
        result[:] = rows
        return result
    width = len(layer_ids) * loaded.model.config.hidden_size
    return np.stack(rows) if rows else np.zeros((0, width), dtype=np.float32)


# ------------------------------------------------------------------------------------------ fill-mask
MASK_PATTERN = re.compile(r"\[mask\]", re.IGNORECASE)
"""Where a user typed ``[MASK]`` (any case: an uncased model cannot tell, and users type ``[mask]``)."""


@dataclass
class MaskCandidate:
    """One prediction for one ``[MASK]``."""

    token: str
    """The WordPiece as in the vocabulary (``##ing`` continues the word before it)."""
    token_id: int
    score: float
    """Probability under the model (softmax over the whole vocabulary)."""
    text: str
    """What the candidate writes in place of the mask (``ing`` for ``##ing``)."""
    sequence: str
    """The input text with this mask replaced by ``text`` (other masks left as they are)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _vocab_filters(loaded: Loaded) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks over the model's vocabulary: tokens never proposed (specials, ``[unused]``, ids the
    tokenizer lacks), and word continuations (``##``)."""
    if "vocab_filters" not in loaded.cache:
        size = loaded.model.config.vocab_size
        excluded = torch.ones(size, dtype=torch.bool)
        continuation = torch.zeros(size, dtype=torch.bool)
        for token, index in loaded.tokenizer.vocab.items():
            if index >= size:
                continue
            bracketed = token.startswith("[") and token.endswith("]") and len(token) > 2
            excluded[index] = bracketed or not token.strip()
            continuation[index] = token.startswith("##") and len(token) > 2
        loaded.cache["vocab_filters"] = (excluded, continuation)
    return loaded.cache["vocab_filters"]


def _mask_features(loaded: Loaded, texts: Sequence[str], max_length: int) -> list[dict[str, Any]]:
    """``[CLS] text [SEP]`` with the mask id at every typed ``[MASK]``.

    Each stretch between masks is tokenized on its own: BERT splits words at ``[`` and ``]`` anyway, so
    the ids equal a tokenization that keeps ``[MASK]`` whole, whatever the tokenizer does with the string.
    """
    tokenizer = loaded.tokenizer
    pieces = [MASK_PATTERN.split(text) for text in texts]
    flat = tokenizer.ids_batch([p for parts in pieces for p in parts])
    features, cursor = [], 0
    for i, (text, parts) in enumerate(zip(texts, pieces)):
        if len(parts) == 1:
            raise BertkitError(f"text {i} has no [MASK] to fill: {text[:60]!r}")
        ids, positions = [tokenizer.cls_id], []
        for n, part in enumerate(parts):
            if n:
                positions.append(len(ids))
                ids.append(tokenizer.mask_id)
            ids.extend(flat[cursor])
            cursor += 1
        ids.append(tokenizer.sep_id)
        if len(ids) > max_length:
            raise BertkitError(f"text {i} is {len(ids)} tokens with [CLS] and [SEP], more than the model's "
                               f"{max_length}; shorten it around the [MASK]")
        spans = [m.span() for m in MASK_PATTERN.finditer(text)]
        features.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids),
                         "masked_positions": positions, "spans": spans, "text": text})
    return features


@torch.inference_mode()
def fill_mask(texts: str | Sequence[str], model: "str | os.PathLike | Loaded", *, top_k: int = 5,
              batch_size: int = 32, whole_words: bool = True) -> Any:
    """The ``top_k`` most likely tokens for every ``[MASK]`` in each text.

    Returns, per text, one list per mask (in text order) of ``MaskCandidate`` (best first). Masks are filled
    independently, in one forward pass. ``whole_words``: a mask that stands as its own word gets only
    word-start tokens, a mask glued to the end of a word (``un[MASK]``) only continuations (``##...``), so
    every candidate reads as text; special and ``[unused]`` tokens are never proposed.
    """
    if top_k < 1:
        raise BertkitError(f"top_k must be at least 1, got {top_k}")
    loaded = _for("fill_mask", model)
    items = _as_list(texts, "texts")
    _check_texts(items)
    features = _mask_features(loaded, items, loaded.max_length)
    excluded, continuation = _vocab_filters(loaded)

    def forward(inputs: dict[str, torch.Tensor], chunk: list[dict[str, Any]]) -> torch.Tensor:
        width = max(len(f["masked_positions"]) for f in chunk)
        positions = torch.tensor([f["masked_positions"] + [0] * (width - len(f["masked_positions"]))
                                  for f in chunk], device=inputs["input_ids"].device)
        out = loaded.model(**inputs, masked_positions=positions)  # the vocabulary projection runs on masks only
        logits = out.mlm_logits if hasattr(out, "mlm_logits") else out.logits
        return logits.float().softmax(-1)  # [B, P, V]

    def unbatch(probs: torch.Tensor, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return list(probs.cpu())

    rows = _run(loaded, features, batch_size, forward, unbatch)
    results = []
    for feature, probs in zip(features, rows):
        text = feature["text"]
        per_mask = []
        for m, (start, end) in enumerate(feature["spans"]):
            allowed = ~excluded
            if whole_words:
                glued = start > 0 and text[start - 1].isalnum()
                allowed = allowed & (continuation if glued else ~continuation)
            scores = probs[m].masked_fill(~allowed, -1.0)
            best = scores.topk(min(top_k, int(allowed.sum()))).indices.tolist()
            candidates = []
            for index in best:
                token = loaded.tokenizer.convert_ids_to_tokens([index])[0]
                written = token[2:] if token.startswith("##") else token
                candidates.append(MaskCandidate(token, index, float(probs[m, index]), written,
                                                text[:start] + written + text[end:]))
            per_mask.append(candidates)
        results.append(per_mask)
    return results[0] if _single(texts) else results


# ------------------------------------------------------------------------------------------ next sentence
@torch.inference_mode()
def next_sentence(first: str | Sequence[str], second: str | Sequence[str], model: "str | os.PathLike | Loaded",
                  *, batch_size: int = 32, max_length: int | None = None) -> float | list[float]:
    """Probability that ``second`` follows ``first`` (BERT's next-sentence head, class 0 = "is next").

    Strings give one probability, equal-length lists one per pair. Pairs longer than the model are cut
    with Google's rule (drop the last token of the longer side).
    """
    from bertkit.tasks.base import build_pair, truncate_pair

    loaded = _for("next_sentence", model)
    firsts, seconds = _paired_texts(first, second, "first sentence", "second sentence")
    room = min(max_length or loaded.max_length, loaded.max_length) - 3
    tokenizer = loaded.tokenizer
    ids = tokenizer.ids_batch(firsts + seconds)
    features = []
    for a, b in zip(ids[:len(firsts)], ids[len(firsts):]):
        features.append(build_pair(*truncate_pair(a, b, room), tokenizer.cls_id, tokenizer.sep_id))

    def forward(inputs: dict[str, torch.Tensor], chunk: list) -> torch.Tensor:
        return loaded.model(**inputs).nsp_logits.float().softmax(-1)[:, 0]

    probs = _run(loaded, features, batch_size, forward, lambda out, inputs: out.tolist())
    return probs[0] if isinstance(first, str) else probs


# ------------------------------------------------------------------------------------------ classify
@torch.inference_mode()
def classify(texts: TextInput | Sequence[TextInput], model: "str | os.PathLike | Loaded", *,
             batch_size: int = 32, max_length: int | None = None) -> Any:
    """Label and class probabilities (or a regression score) for each text or ``(text, text_pair)``.

    Returns ``ClassificationPrediction`` (``label``, ``score`` = probability of the label or the regression
    value, ``probabilities`` by label name), one per input. Long inputs are cut as in fine-tuning.
    """
    from bertkit.tasks.classification import ClassificationExample, ClassificationTask

    loaded = _for("classify", model)
    items = _as_list(texts, "texts")
    _check_texts(items)
    task = ClassificationTask()
    task.load_config(loaded.model.config)
    examples = [ClassificationExample(t if isinstance(t, str) else t[0], None if isinstance(t, str) else t[1],
                                      None, f"input {i}") for i, t in enumerate(items)]
    max_length = min(max_length or loaded.max_length, loaded.max_length)
    features = task.featurize(examples, loaded.tokenizer, max_length)
    rows = _run(loaded, features, batch_size, lambda inputs, chunk: loaded.model(**inputs), task.unbatch)
    predictions = task.postprocess(examples, features, rows)
    return predictions[0] if _single(texts) else predictions


# ------------------------------------------------------------------------------------------ tag
@dataclass
class TaggedWord:
    word: str
    start: int
    end: int
    """Character span ``[start, end)`` in the input text."""
    tag: str


@dataclass
class Entity:
    type: str
    text: str
    """Exactly ``input[start:end]``."""
    start: int
    end: int


@dataclass
class TagResult:
    """Word-level tags and the entities decoded from them, with character offsets into the input."""

    text: str
    words: list[TaggedWord]
    entities: list[Entity]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def word_spans(tokenizer: Tokenizer, text: str) -> list[tuple[int, int]]:
    """Character spans of the words BERT's pre-tokenizer sees (split at whitespace and punctuation)."""
    encoding = tokenizer.encode(text, add_special_tokens=False)
    spans: list[tuple[int, int]] = []
    last = None
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets):
        if word is None:
            continue
        if word == last:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((start, end))
            last = word
    return spans


@torch.inference_mode()
def tag(texts: str | Sequence[str], model: "str | os.PathLike | Loaded", *, batch_size: int = 32,
        window_stride: int = 128) -> Any:
    """Named entities (or any word-level tags) in raw text, as ``TagResult`` per text.

    Words are what BERT's pre-tokenizer splits (whitespace and punctuation); each word's tag is read at its
    first sub-token; a text longer than the model is tagged in overlapping windows (``window_stride`` tokens
    between starts) and every word keeps its prediction from the window where it has most context.
    """
    from bertkit.tasks.ner import NerExample, NerTask

    loaded = _for("tag", model)
    items = _as_list(texts, "texts")
    _check_texts(items)
    if any(isinstance(t, tuple) for t in items):
        raise BertkitError("tag takes single texts, not pairs")
    task = NerTask(window_stride=window_stride)
    task.load_config(loaded.model.config)
    spans = [word_spans(loaded.tokenizer, text) for text in items]
    tagged = [i for i, s in enumerate(spans) if s]  # a text without words has nothing to tag
    examples = [NerExample([items[i][s:e] for s, e in spans[i]], None, "input", i) for i in tagged]
    features = task.featurize(examples, loaded.tokenizer, loaded.max_length) if examples else []
    rows = _run(loaded, features, batch_size, lambda inputs, chunk: loaded.model(**inputs), task.unbatch)
    predictions = dict(zip(tagged, task.postprocess(examples, features, rows))) if examples else {}
    results = []
    for i, text in enumerate(items):
        if i not in predictions:
            results.append(TagResult(text, [], []))
            continue
        prediction, word_span = predictions[i], spans[i]
        words = [TaggedWord(text[s:e], s, e, t) for (s, e), t in zip(word_span, prediction.tags)]
        entities = []
        for entity in prediction.entities:
            start, end = word_span[entity["start"]][0], word_span[entity["end"] - 1][1]
            entities.append(Entity(entity["type"], text[start:end], start, end))
        results.append(TagResult(text, words, entities))
    return results[0] if isinstance(texts, str) else results


# ------------------------------------------------------------------------------------------ answer
@dataclass
class Answer:
    """An answer span of the context. ``text == context[start:end]``; empty with ``start`` and ``end`` None
    when the model (trained on SQuAD v2) says the context holds no answer."""

    text: str
    start: int | None
    end: int | None
    score: float
    """Probability among the n-best candidates (softmax of start + end logits), as in SQuAD's n-best file."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@torch.inference_mode()
def answer(question: str | Sequence[str], context: str | Sequence[str], model: "str | os.PathLike | Loaded", *,
           top_k: int = 1, batch_size: int = 32, max_length: int = 384, doc_stride: int = 128,
           max_query_length: int = 64, max_answer_length: int = 30, allow_no_answer: bool = False,
           null_threshold: float = 0.0) -> Any:
    """Extractive question answering: the best span of ``context`` answering ``question``.

    Long contexts are cut into windows of ``max_length`` tokens whose starts are ``doc_stride`` tokens apart
    (SQuAD's pre- and post-processing, see ``bertkit.tasks.qa``). ``top_k=1`` gives an ``Answer`` per
    question, more a list of the ``top_k`` best. Questions keep their first ``max_query_length`` tokens (at most
    half the sequence). ``allow_no_answer`` (SQuAD v2 models): an empty answer
    when the null score beats the best span by more than ``null_threshold``.
    """
    from bertkit.tasks.qa import QuestionAnsweringTask, SquadExample

    if top_k < 1:
        raise BertkitError(f"top_k must be at least 1, got {top_k}")
    loaded = _for("answer", model)
    questions, contexts = _paired_texts(question, context, "question", "context")
    seq_len = min(max_length, loaded.max_length)
    # A short model keeps at least half of its length for the context.
    task = QuestionAnsweringTask(doc_stride=doc_stride, max_query_length=min(max_query_length, seq_len // 2),
                                 n_best_size=max(20, top_k), max_answer_length=max_answer_length,
                                 version_2_with_negative=allow_no_answer,
                                 null_score_diff_threshold=null_threshold)
    examples = [SquadExample(str(i), q, c, []) for i, (q, c) in enumerate(zip(questions, contexts))]
    features = task.featurize(examples, loaded.tokenizer, seq_len)
    rows = _run(loaded, features, batch_size, lambda inputs, chunk: loaded.model(**inputs), task.unbatch)
    predictions = task.postprocess(examples, features, rows)
    results = []
    for example in examples:
        answers = []
        for entry in predictions.nbest[example.qid]:
            if entry["text"] == "":  # SQuAD v2's null answer
                answers.append(Answer("", None, None, float(entry["probability"])))
            elif entry["start_char"] is not None:  # None: Google's "empty" placeholder when no span is valid
                answers.append(Answer(entry["text"], entry["start_char"], entry["end_char"],
                                      float(entry["probability"])))
        if allow_no_answer and predictions.predictions[example.qid] == "":
            answers.sort(key=lambda a: a.text != "")  # the thresholded decision comes first
        else:
            answers = [a for a in answers if a.text]
        if not answers:
            answers = [Answer("", None, None, 0.0)]
        results.append(answers[0] if top_k == 1 else answers[:top_k])
    return results[0] if isinstance(question, str) else results


# ------------------------------------------------------------------------------------------ attentions
@dataclass
class AttentionMaps:
    """Attention probabilities of every layer and head over the tokens of one input."""

    tokens: list[str]
    offsets: list[tuple[int, int]]
    """Character span of each token in the input (``(0, 0)`` for specials)."""
    attentions: np.ndarray
    """``[layers, heads, tokens, tokens]`` float32; row ``i`` is where token ``i`` attends (sums to 1)."""


@torch.inference_mode()
def attentions(text: TextInput, model: "str | os.PathLike | Loaded", *, max_length: int | None = None) -> AttentionMaps:
    """Per-layer, per-head attention matrices of ``text`` (or a pair), over its tokens with specials."""
    loaded = _as_loaded(model)
    _check_texts([text])
    encoding = _encode(loaded, [text], max_length)[0]
    padded = collate_encodings([encoding], pad_id=loaded.tokenizer.pad_id)
    inputs = {k: v.to(loaded.device) for k, v in padded.items()}
    out = loaded.encoder(**inputs, output_attentions=True)
    maps = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()
    return AttentionMaps(list(encoding.tokens), [tuple(o) for o in encoding.offsets], maps)
