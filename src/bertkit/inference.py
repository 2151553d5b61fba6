"""Pipelines a user calls on a trained model: embed (feature extraction), and the task pipelines.

Every pipeline takes either a model directory or already loaded ``(model, tokenizer)``, sorts its inputs
by length so that batches carry little padding, runs under ``torch.inference_mode()`` and returns results
in the caller's order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bertkit.errors import BertkitError
from bertkit.tokenizer import Tokenizer, collate_encodings

TextInput = str | tuple[str, str]


@dataclass
class Loaded:
    """A model and the tokenizer saved with it, ready for inference (eval mode)."""

    model: torch.nn.Module
    tokenizer: Tokenizer

    @property
    def max_length(self) -> int:
        return self.model.config.max_position_embeddings


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
    return Loaded(model, tokenizer)


def _as_loaded(model: "str | os.PathLike | Loaded", head: str | None = None) -> Loaded:
    return model if isinstance(model, Loaded) else load(model, head=head)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices grouped into batches of similar length (longest first), so padding stays small."""
    if batch_size < 1:
        raise BertkitError(f"batch size must be at least 1, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def _encode(loaded: Loaded, texts: Sequence[TextInput], max_length: int | None):
    max_length = min(max_length or loaded.max_length, loaded.max_length)
    firsts = [t if isinstance(t, str) else t[0] for t in texts]
    pairs = [None if isinstance(t, str) else t[1] for t in texts]
    if any(p is not None for p in pairs):
        return [loaded.tokenizer.encode(a, b, max_length=max_length, truncation=True) for a, b in zip(firsts, pairs)]
    return loaded.tokenizer.encode_batch(firsts, max_length=max_length, truncation=True)


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
) -> np.ndarray:
    """Contextual embeddings, one row per text (or ``(text_a, text_b)`` pair).

    ``pooling``: ``cls`` (the final hidden state of ``[CLS]``; not a trained sentence vector unless the
    model was trained for it), ``mean`` (average over real tokens, as sentence-transformers) or
    ``none`` (token vectors are not pooled: returns an object array of ``[tokens, width]`` arrays).
    ``layers``: hidden layers to use, counted like Python indices over the embedding output and the L
    layers (``-1`` the last); several layers are concatenated in the given order.
    ``normalize``: L2-normalise each row (for cosine similarity).
    """
    if pooling not in ("cls", "mean", "none"):
        raise BertkitError(f"pooling must be cls, mean or none, got {pooling!r}")
    loaded = _as_loaded(model, head="BertModel")
    layer_ids = parse_layers(layers)
    num_states = loaded.model.config.num_hidden_layers + 1
    for layer in layer_ids:
        if not -num_states <= layer < num_states:
            raise BertkitError(f"layer {layer} does not exist: the model has {num_states - 1} layers (use -1 for the last)")
    encoder = getattr(loaded.model, "bert", loaded.model)
    device = next(encoder.parameters()).device
    encodings = _encode(loaded, texts, max_length)
    rows: list = [None] * len(encodings)
    batches = list(length_sorted_batches([len(e.ids) for e in encodings], batch_size))
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="embed", unit="batch")
    for batch in batches:
        inputs = {k: v.to(device) for k, v in collate_encodings([encodings[i] for i in batch]).items()}
        out = encoder(**inputs, output_hidden_states=len(layer_ids) > 1 or layer_ids != [-1])
        states = [out.last_hidden_state] if out.hidden_states is None else [out.hidden_states[i] for i in layer_ids]
        hidden = torch.cat(states, dim=-1).float()
        mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        if pooling == "cls":
            pooled = hidden[:, 0]
        elif pooling == "mean":
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        else:
            for row, index in enumerate(batch):
                n = int(inputs["attention_mask"][row].sum())
                rows[index] = hidden[row, :n].cpu().numpy()
            continue
        if normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        for row, index in enumerate(batch):
            rows[index] = pooled[row].cpu().numpy()
    if pooling == "none":
        result = np.empty(len(rows), dtype=object)
        result[:] = rows
        return result
    width = sum(1 for _ in layer_ids) * loaded.model.config.hidden_size
    return np.stack(rows) if rows else np.zeros((0, width), dtype=np.float32)
