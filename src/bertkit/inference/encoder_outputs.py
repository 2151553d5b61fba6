"""Pipelines on the encoder of any model: ``embed`` (contextual vectors) and ``attentions`` (attention maps).

``embed`` runs a PyTorch model or an exported graph (``bertkit.inference.exported``) alike: the runner feeds
either, and the token vectors become sentence vectors through the numpy functions of
``bertkit.features.outputs`` in both cases. This module imports no torch.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from bertkit.errors import BertkitError, TruncationWarning
from bertkit.features import Feature
from bertkit.features.outputs import as_float32, join_windows, pool
from bertkit.features.outputs import normalize as normalize_rows
from bertkit.features.runner import run_batches
from bertkit.features.windows import window_starts
from bertkit.inference.opening import as_loaded
from bertkit.inference.settings import Settings
from bertkit.sentence_config import SentenceConfig
from bertkit.tasks.pipeline import LoadedModel, TextInput, check_texts, input_length
from bertkit.tokenizer import Encoding


class Loaded(LoadedModel, Protocol):
    """What ``embed`` reads of a loaded checkpoint (``bertkit.inference.Loaded``) or export folder
    (``bertkit.inference.exported.Exported``)."""

    @property
    def settings(self) -> Settings | None: ...

    @property
    def sentence_config(self) -> SentenceConfig | None: ...

    @property
    def encoder(self) -> Any:
        """What runs the encoder: the PyTorch encoder, or the export's graph."""


@dataclass
class _TextWindow:
    """One model input cut from a text longer than the model: ``[CLS] ids[start:start + width] [SEP]``."""

    start: int
    ids: list[int]


def _feature(ids: Sequence[int], type_ids: Sequence[int] | None = None, window: _TextWindow | None = None) -> Feature:
    """A runner feature; ``window`` marks an input that is one window of a longer text."""
    return {
        "input_ids": list(ids),
        "token_type_ids": list(type_ids or [0] * len(ids)),
        "attention_mask": [1] * len(ids),
        "window": window,
    }


def _cut_windows(
    encodings: Sequence[Encoding], max_length: int, stride: int, cls_id: int, sep_id: int
) -> list[tuple[int, Feature]]:
    """``(text index, feature)`` for ``encodings``, each one longer than ``max_length`` replaced by its
    overlapping ``_TextWindow`` s."""
    out: list[tuple[int, Feature]] = []
    width = max_length - 2
    for index, encoding in enumerate(encodings):
        if len(encoding.ids) <= max_length:
            out.append((index, _feature(encoding.ids, encoding.type_ids)))
            continue
        content = encoding.ids[1:-1]
        for start in window_starts(len(content), width, stride):
            window = _TextWindow(start, [cls_id, *content[start : start + width], sep_id])
            out.append((index, _feature(window.ids, window=window)))
    return out


DEFAULT_POOLING = "mean"
"""Pooling of a model whose files say nothing about it: the mean of the real tokens, which is what
sentence-transformers builds around a plain checkpoint (and a better sentence vector than an untrained [CLS])."""

GIVEN = "given"
SENTENCE_FILES = "the checkpoint's sentence-transformers files"
FINETUNE_RECORD = "the length the model was fine-tuned at"
DEFAULT = "bertkit's default"


@dataclass(frozen=True)
class EmbedSettings:
    """How ``embed`` makes one vector per text, and where each setting came from (``embed_settings``)."""

    pooling: str
    normalize: bool
    max_length: int
    sources: tuple[str, str, str] = (DEFAULT, DEFAULT, DEFAULT)
    """Where ``pooling``, ``normalize`` and ``max_length`` came from: ``GIVEN`` (the caller's option),
    ``SENTENCE_FILES``, ``FINETUNE_RECORD`` (length only) or ``DEFAULT``."""

    @property
    def from_checkpoint(self) -> bool:
        """Whether the checkpoint's sentence-transformers files gave any of the settings."""
        return SENTENCE_FILES in self.sources

    def describe(self) -> str:
        return f"pooling {self.pooling}, {'normalized' if self.normalize else 'not normalized'}, " + (
            f"max length {self.max_length}"
        )

    def notice(self) -> str:
        """``describe()`` with where the settings came from, e.g. ``pooling cls (given), normalized (from the
        checkpoint's sentence-transformers files), ...``."""
        if len(set(self.sources)) == 1:
            return f"{self.describe()} ({_source(self.sources[0])})"
        parts = self.describe().split(", ")
        return ", ".join(f"{part} ({_source(source)})" for part, source in zip(parts, self.sources))


def _source(source: str) -> str:
    return source if source == GIVEN else f"from {source}"


def embed_settings(
    loaded: Loaded, pooling: str | None = None, normalize: bool | None = None, max_length: int | None = None
) -> EmbedSettings:
    """The one rule for how a model embeds, used by ``embed``, ``bertkit embed`` and every HTTP route.

    Each of pooling, normalisation and length is the caller's option when given (not ``None``), else what the
    checkpoint's sentence-transformers files say (``modules.json``...), else, for the length, the
    ``max_seq_length`` the model was fine-tuned at (``config.json``), else the default: ``mean`` pooling
    (``DEFAULT_POOLING``), not normalised, the model's full length. The length never exceeds the model's
    positions.
    """
    sentence = loaded.sentence_config if None in (pooling, normalize, max_length) else None
    if sentence is not None and sentence.unsupported and (pooling is None or normalize is None):
        raise BertkitError(
            f"the model's modules.json has {', '.join(sentence.unsupported)}, which bertkit does not run; "
            f"give the pooling and normalisation yourself (--pooling, --normalize/--no-normalize) to embed with "
            f"the encoder alone"
        )
    chosen_pooling, pooling_from = _first((pooling, GIVEN), (sentence and sentence.pooling, SENTENCE_FILES))
    chosen_normalize, normalize_from = _first((normalize, GIVEN), (sentence and sentence.normalize, SENTENCE_FILES))
    assert loaded.settings is not None
    length, length_from = _first(
        (max_length, GIVEN),
        (sentence and sentence.max_seq_length, SENTENCE_FILES),
        (loaded.settings.max_seq_length, FINETUNE_RECORD),
    )
    return EmbedSettings(
        chosen_pooling or DEFAULT_POOLING,
        bool(chosen_normalize),
        min(length or loaded.max_positions, loaded.max_positions),
        (pooling_from, normalize_from, length_from),
    )


def _first(*candidates: tuple[Any, str]) -> tuple[Any, str]:
    """The first ``(value, source)`` whose value is set (not ``None``), else ``(None, DEFAULT)``."""
    for value, source in candidates:
        if value is not None and value != "":
            return value, source
    return None, DEFAULT


def truncate_dimensions(vectors: np.ndarray, dimensions: int | None, normalize: bool) -> np.ndarray:
    """Matryoshka truncation: the first ``dimensions`` of each row, L2-normalised again when ``normalize``
    (the rows were normalised vectors); ``None`` keeps them whole. More than the width is refused."""
    if dimensions is None:
        return vectors
    check_dimensions(dimensions, vectors.shape[-1])
    cut = vectors[..., :dimensions].astype(np.float32)
    return np.ascontiguousarray(normalize_rows(cut) if normalize else cut, dtype=np.float32)


def check_dimensions(dimensions: int | None, width: int) -> None:
    """A one-line ``BertkitError`` unless ``dimensions`` is ``None`` or between 1 and the vectors' ``width``."""
    if dimensions is not None and not 1 <= dimensions <= width:
        raise BertkitError(
            f"dimensions (--dimensions) must be between 1 and the model's width {width}, got {dimensions}"
        )


def parse_layers(spec: str | Sequence[int]) -> list[int]:
    """``"-1,-2"`` or ``[-1, -2]`` -> ``[-1, -2]``."""
    if isinstance(spec, str):
        try:
            return [int(part) for part in spec.split(",") if part.strip()]
        except ValueError:
            raise BertkitError(f"layers must be comma-separated integers like -1,-2, got {spec!r}") from None
    return [int(layer) for layer in spec]


CPU_BATCH_TOKENS = 512
"""On a CPU, a batch of ``embed`` holds at most this many padded tokens (rows x the longest; a longer text
runs alone): per text, small batches of similar length run faster there than large ones, with every engine
(measured in docs/performance.md); a GPU takes the whole batch."""


def embed(
    texts: Sequence[TextInput],
    model: str | os.PathLike | Loaded,
    *,
    pooling: str | None = None,
    layers: str | Sequence[int] = (-1,),
    batch_size: int = 32,
    max_length: int | None = None,
    normalize: bool | None = None,
    progress: bool = False,
    long_text: str = "truncate",
    window_stride: int = 128,
    dimensions: int | None = None,
) -> np.ndarray:
    """Contextual embeddings, one row per text (or ``(text_a, text_b)`` pair).

    ``pooling``: ``cls`` (the final hidden state of ``[CLS]``; not a trained sentence vector unless the
    model was trained for it), ``mean`` (average over real tokens, as sentence-transformers), ``max``
    (element-wise maximum over real tokens) or ``none`` (token vectors are not pooled: returns an object
    array of ``[tokens, width]`` arrays). ``pooling``, ``normalize`` and ``max_length`` left at ``None``
    follow the one rule of ``embed_settings``: the checkpoint's sentence-transformers files
    (``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``), else the length the model
    was fine-tuned at, else ``mean``, not normalised, the model's full length.
    ``layers``: hidden layers to use, counted like Python indices over the embedding output and the L
    layers (``-1`` the last); several layers are concatenated in the given order.
    ``normalize``: L2-normalise each row (for cosine similarity).
    ``dimensions``: keep the first ``dimensions`` of each vector (Matryoshka), normalised again when the
    vectors are normalised (``truncate_dimensions``); more than the width is refused.
    ``long_text``: ``truncate`` (default) keeps the first ``max_length`` tokens; ``windows`` embeds a longer
    text in overlapping windows whose starts are ``window_stride`` tokens apart and takes each token's vector
    from the window where it has the most context (``mean`` and ``none`` then cover the whole text; ``cls``
    is the mean of the windows' ``[CLS]`` vectors). Pairs are always truncated.

    Inputs cut at the length are counted: a ``bertkit.errors.TruncationWarning`` (``warnings.warn``) says
    how many, with the number in its ``count`` attribute.
    """
    _check_options(pooling, long_text, window_stride)
    loaded = as_loaded(model, head="BertModel")
    settings = embed_settings(loaded, pooling, normalize, max_length)
    layer_ids = _layer_ids(loaded, layers)
    _check_dimensions_for(settings, dimensions, len(layer_ids) * loaded.config.hidden_size)
    truncation = long_text == "truncate"
    encodings = _encode_counting(loaded, list(texts), settings.max_length, truncation=truncation)
    pieces = [(i, _feature(e.ids, e.type_ids)) for i, e in enumerate(encodings)]  # (text index, model input)
    if not truncation:
        limit = settings.max_length
        if limit < 3:
            raise BertkitError(f"--max-length (max_length) {limit} leaves no room for text between [CLS] and [SEP]")
        pieces = _cut_windows(encodings, limit, window_stride, loaded.tokenizer.cls_id, loaded.tokenizer.sep_id)
    return _embed_pieces(loaded, settings, layer_ids, pieces, len(encodings), batch_size, progress, dimensions)


def embed_token_ids(
    ids: Sequence[Sequence[int]],
    model: str | os.PathLike | Loaded,
    *,
    pooling: str | None = None,
    batch_size: int = 32,
    max_length: int | None = None,
    normalize: bool | None = None,
    dimensions: int | None = None,
) -> np.ndarray:
    """``embed`` of inputs already tokenized: lists of the model's vocabulary ids, run as they are (give the
    ``[CLS]``/``[SEP]`` ids too, as ``Tokenizer.encode`` returns them, to get the vector of the text). A list
    longer than the length is cut there, keeping its last id when that is ``[SEP]``. Same defaults and
    options as ``embed``."""
    _check_options(pooling, "truncate", 1)
    loaded = as_loaded(model, head="BertModel")
    settings = embed_settings(loaded, pooling, normalize, max_length)
    _check_dimensions_for(settings, dimensions, loaded.config.hidden_size)
    vocab_size = loaded.config.vocab_size
    pieces = []
    for index, row in enumerate(ids):
        row = [int(i) for i in row]
        if not row or not all(0 <= i < vocab_size for i in row):
            raise BertkitError(f"token ids {index} must be a non-empty list of ids from 0 to {vocab_size - 1}")
        pieces.append((index, _feature(cut_ids(row, settings.max_length, loaded.tokenizer.sep_id))))
    return _embed_pieces(loaded, settings, [-1], pieces, len(pieces), batch_size, False, dimensions)


def cut_ids(ids: list[int], max_length: int, sep_id: int) -> list[int]:
    """``ids`` cut to ``max_length``, keeping a final ``[SEP]`` as the tokenizer's truncation does."""
    if len(ids) <= max_length:
        return ids
    return [*ids[: max_length - 1], sep_id] if ids[-1] == sep_id else ids[:max_length]


def _check_dimensions_for(settings: EmbedSettings, dimensions: int | None, width: int) -> None:
    if dimensions is not None and settings.pooling == "none":
        raise BertkitError("dimensions (--dimensions) needs pooled vectors; pooling none keeps token vectors")
    check_dimensions(dimensions, width)


def _embed_pieces(
    loaded: Loaded,
    settings: EmbedSettings,
    layer_ids: list[int],
    pieces: list[tuple[int, Feature]],
    count: int,
    batch_size: int,
    progress: bool,
    dimensions: int | None,
) -> np.ndarray:
    """The vectors of ``count`` texts from their model inputs ``pieces`` (``(text index, feature)``)."""
    encoder = loaded.encoder

    def forward(inputs: dict[str, Any], chunk: list[Feature]) -> list[np.ndarray]:
        """Per input: its token vectors when it is a window or nothing is pooled, else its pooled vector."""
        out = encoder(**inputs, output_hidden_states=layer_ids != [-1])
        states = [out.last_hidden_state] if out.hidden_states is None else [out.hidden_states[i] for i in layer_ids]
        hidden = np.concatenate([as_float32(state) for state in states], axis=-1)
        mask = as_float32(inputs["attention_mask"])
        pooled = pool(hidden, mask, settings.pooling)
        lengths = mask.sum(1).astype(int).tolist()
        return [
            hidden[row, : lengths[row]] if settings.pooling == "none" or feature["window"] else pooled[row]
            for row, feature in enumerate(chunk)
        ]

    outputs = run_batches(
        encoder,
        [f for _, f in pieces],
        lambda rows, inputs: rows,
        batch_size=batch_size,
        pad_id=loaded.tokenizer.pad_id,
        forward=forward,
        progress="embed" if progress else None,
        max_tokens=CPU_BATCH_TOKENS if _on_cpu(encoder) else None,
    )
    rows = _text_rows(pieces, outputs, count, settings.pooling)
    vectors = _as_array(rows, settings, width=len(layer_ids) * loaded.config.hidden_size)
    return truncate_dimensions(vectors, dimensions, settings.normalize)


def _on_cpu(model: Any) -> bool:
    """Whether ``model`` runs on the CPU: an exported graph does, a PyTorch model where its weights are."""
    parameters = getattr(model, "parameters", None)
    return parameters is None or next(parameters()).device.type == "cpu"


def _check_options(pooling: str | None, long_text: str, window_stride: int) -> None:
    if pooling not in (None, "cls", "mean", "max", "none"):
        raise BertkitError(f"pooling must be cls, mean, max or none, got {pooling!r}")
    if long_text not in ("truncate", "windows"):
        raise BertkitError(f"--long-text (long_text) must be truncate or windows, got {long_text!r}")
    if window_stride < 1:
        raise BertkitError(f"--window-stride (window_stride) must be at least 1, got {window_stride}")


def _layer_ids(loaded: Loaded, layers: str | Sequence[int]) -> list[int]:
    """``layers`` as indices, each checked against the model's hidden states (embeddings and L layers)."""
    layer_ids = parse_layers(layers)
    num_states = loaded.config.num_hidden_layers + 1
    for layer in layer_ids:
        if not -num_states <= layer < num_states:
            raise BertkitError(
                f"layer {layer} does not exist: the model has {num_states - 1} layers (use -1 for the last)"
            )
    return layer_ids


def _text_rows(
    pieces: Sequence[tuple[int, Feature]], outputs: Sequence[np.ndarray], texts: int, pooling: str
) -> list[np.ndarray]:
    """One output per text: its own, or the join of its windows' token vectors once all of them are in."""
    rows: list[Any] = [None] * texts
    windows: dict[int, list[tuple[_TextWindow, np.ndarray]]] = {}  # long text -> its windows' token vectors
    for (text, feature), output in zip(pieces, outputs):
        if feature["window"] is not None:
            windows.setdefault(text, []).append((feature["window"], output))
        else:
            rows[text] = output
    for text, parts in windows.items():
        parts.sort(key=lambda part: part[0].start)
        spans = [(w.start, len(w.ids) - 2) for w, _ in parts]
        rows[text] = join_windows(spans, [state for _, state in parts], pooling)
    return rows


def _as_array(rows: list[np.ndarray], settings: EmbedSettings, width: int) -> np.ndarray:
    """``[texts, width]`` float32 (normalised when asked), or an object array of token matrices (``none``)."""
    arrays = [np.asarray(row, dtype=np.float32) for row in rows]
    if settings.pooling == "none":
        result = np.empty(len(arrays), dtype=object)
        result[:] = arrays
        return result
    if not arrays:
        return np.zeros((0, width), dtype=np.float32)
    vectors = np.stack(arrays)
    return normalize_rows(vectors) if settings.normalize else vectors


def encode(
    loaded: Loaded, texts: Sequence[TextInput], max_length: int | None, truncation: bool = True
) -> list[Encoding]:
    """Encodings of ``texts``; pairs are always cut to ``max_length``, single texts only with ``truncation``."""
    length = input_length(loaded, max_length)
    firsts = [t if isinstance(t, str) else t[0] for t in texts]
    pairs = [None if isinstance(t, str) else t[1] for t in texts]
    if any(p is not None for p in pairs):
        return [
            loaded.tokenizer.encode(a, b, max_length=length, truncation=truncation or b is not None)
            for a, b in zip(firsts, pairs)
        ]
    return list(loaded.tokenizer.encode_batch(firsts, max_length=length, truncation=truncation))


def _encode_counting(loaded: Loaded, texts: list[TextInput], max_length: int, truncation: bool) -> list[Encoding]:
    """``encode`` of ``texts``, warning (``TruncationWarning``) with the number of inputs that were cut."""
    whole = encode(loaded, texts, max_length, truncation=False)  # pairs are cut even so
    cut = [i for i, e in enumerate(whole) if truncation and len(e.ids) > max_length]
    for i, text in enumerate(texts):  # was a pair cut? encode it whole to see
        if isinstance(text, tuple) and len(loaded.tokenizer.encode(text[0], text[1]).ids) > max_length:
            cut.append(i)
    cut = sorted(set(cut))
    if truncation and cut:
        shorter = encode(loaded, [texts[i] for i in cut], max_length, truncation=True)
        whole = list(whole)
        for i, encoding in zip(cut, shorter):
            whole[i] = encoding
    if cut:
        message = (
            f"{len(cut)} of {len(texts)} inputs were longer than {max_length} tokens and were cut "
            f"(raise --max-seq-length / max_length=, or pass --long-text windows to embed single texts whole)"
        )
        warnings.warn(TruncationWarning(message, len(cut), len(texts), max_length), stacklevel=4)
    return whole


# ------------------------------------------------------------------------------------------ attentions
@dataclass
class AttentionMaps:
    """Attention probabilities of every layer and head over the tokens of one input."""

    tokens: list[str]
    offsets: list[tuple[int, int]]
    """Character span of each token in the input (``(0, 0)`` for specials)."""
    attentions: np.ndarray
    """``[layers, heads, tokens, tokens]`` float32; row ``i`` is where token ``i`` attends (sums to 1)."""


def attentions(text: TextInput, model: str | os.PathLike | Loaded, *, max_length: int | None = None) -> AttentionMaps:
    """Per-layer, per-head attention matrices of ``text`` (or a pair), over its tokens with specials."""
    loaded = as_loaded(model)
    check_texts([text])
    encoding = encode(loaded, [text], max_length)[0]
    encoder = loaded.encoder

    def forward(inputs: dict[str, Any], chunk: list[Feature]) -> Any:
        return encoder(**inputs, output_attentions=True)

    def unbatch(out: Any, inputs: Any) -> list[np.ndarray]:
        import torch  # attention maps come from the PyTorch model only

        return [torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()]

    (maps,) = run_batches(
        encoder,
        [_feature(encoding.ids, encoding.type_ids)],
        unbatch,
        batch_size=1,
        pad_id=loaded.tokenizer.pad_id,
        forward=forward,
    )
    return AttentionMaps(list(encoding.tokens), [(int(s), int(e)) for s, e in encoding.offsets], maps)
