"""What each stage of the demo produced, as typed records the report reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertkit.data.punctuation import PunctuationSplits
from bertkit.inference import MaskCandidate
from bertkit.tokenizer import Tokenizer
from bertkit.training.finetune import FinetuneResult
from bertkit.training.loop import TrainResult

Predictions = list[list[list[MaskCandidate]]]
"""``fill_mask`` over several texts: per text, per [MASK], the candidates."""


@dataclass
class Vocabulary:
    """The WordPiece vocabulary the demo learned, and the text the pre-training reads."""

    tokenizer: Tokenizer
    directory: Path
    """The tokenizer files."""
    inputs: list[str]
    """Files and directories of pre-training text (the corpus, and the task text where asked)."""


@dataclass
class Pretraining:
    """The prepared data, the pre-training run and the checkpoint fine-tuning starts from."""

    data: dict[str, Any]
    """The prepared dataset's metadata (``dataset.json``: splits, tokenizer)."""
    run: TrainResult
    checkpoint: Path
    """The best held-out loss's export (``pretrain/best``), or the last weights where no evaluation ran."""
    random_init: Path
    """The same network at random initialisation, the other start of every comparison."""

    @property
    def evaluations(self) -> list[dict[str, Any]]:
        """The held-out evaluations, in order."""
        return [record for record in self.run.history if record.get("split") == "eval"]


@dataclass
class FillMask:
    """Fill-mask answers to the probe sentences, before and after pre-training."""

    texts: list[str]
    before: Predictions
    after: Predictions


@dataclass
class Comparison:
    """Fine-tuning runs of the two starts, the pre-trained one and the same network at random initialisation,
    trained the same way: one pair per seed."""

    seeds: tuple[int, ...]
    pretrained: list[FinetuneResult]
    random_init: list[FinetuneResult]


@dataclass
class Punctuation:
    """Punctuation restoration: the data built from books the pre-training never read, and its comparison."""

    data: PunctuationSplits
    comparison: Comparison


@dataclass
class Reference:
    """The comparison for a BERT pre-trained at scale, against its architecture at random initialisation."""

    checkpoint: str
    comparison: Comparison


@dataclass
class DemoResults:
    """Everything the report shows."""

    pretraining: Pretraining
    fill_mask: FillMask
    polarity: Comparison
    punctuation: Punctuation | None = None
    """None where the demo was told to skip it."""
    reference: Reference | None = None
    """None where there is no reference model to use."""
