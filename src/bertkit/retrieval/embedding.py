"""Embedding many texts for retrieval: the model loaded once, its sentence-transformers settings honoured (as
``bertkit embed``), an optional prefix (``"query: "``), and the corpus embedded chunk by chunk so that a search
holds one chunk of vectors at a time."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from bertkit.errors import TruncationWarning
from bertkit.inference.encoder_outputs import EmbedSettings, embed, embed_settings
from bertkit.inference.loading import Loaded, load
from bertkit.notices import notice


@dataclass(frozen=True)
class EmbeddingOptions:
    """How queries and passages become vectors."""

    query_prefix: str = ""
    """Text put before every query (some models are trained with one, e.g. ``query: ``)."""
    passage_prefix: str = ""
    """Text put before every passage (e.g. ``passage: ``)."""
    batch_size: int = 32
    """Texts per forward pass."""
    max_length: int | None = None
    """Longest input in tokens (default: the model's sentence-transformers setting, else its length)."""
    score_function: str = "cos"
    """``cos`` (cosine) or ``dot`` (inner product) between a query and a passage."""
    chunk_size: int = 50_000
    """Passages embedded and searched at a time (bounds the memory of a search over a large corpus)."""


class Embedder:
    """A model loaded once for embedding, with the settings ``bertkit embed`` would use; counts cut inputs."""

    def __init__(
        self, model: str | os.PathLike | Loaded, options: EmbeddingOptions, device: str | torch.device = "cpu"
    ):
        self.loaded = model if isinstance(model, Loaded) else load(model, head="BertModel", device=device)
        self.options = options
        self.settings: EmbedSettings = embed_settings(self.loaded, max_length=options.max_length)
        self.cut = 0
        self.total = 0

    def __call__(self, texts: Sequence[str], prefix: str = "", progress: bool = False) -> np.ndarray:
        """``[texts, width]`` float32 vectors of ``prefix + text``."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TruncationWarning)
            vectors = embed(
                [prefix + text for text in texts],
                self.loaded,
                batch_size=self.options.batch_size,
                max_length=self.settings.max_length,
                progress=progress,
            )
        self.total += len(texts)
        self.cut += sum(w.message.count for w in caught if isinstance(w.message, TruncationWarning))
        return vectors

    def chunks(self, texts: Sequence[str], prefix: str = "", progress: bool = False) -> Iterator[np.ndarray]:
        """The vectors of ``texts``, ``chunk_size`` texts at a time, in order."""
        size = max(1, self.options.chunk_size)
        for start in range(0, len(texts), size):
            yield self(texts[start : start + size], prefix, progress)

    def tell(self) -> None:
        """One line on stderr: the settings, and how many inputs were cut at the length."""
        line = f"embedding with {self.settings.describe()}"
        if self.cut:
            line += f"; {self.cut:,} of {self.total:,} inputs were longer and were cut"
        notice(line)
