"""The tagging family's inference pipeline: ``tag`` (word tags and the entities decoded from them, with
character offsets into the text), and ``word_spans`` (the words BERT's pre-tokenizer sees).

It runs the model's own task at the length it was fine-tuned with, through the same runner and post-processing
as ``bertkit predict``; ``bertkit.tag`` loads a model directory and calls it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bertkit.errors import BertkitError
from bertkit.features.runner import run_model
from bertkit.tasks.ner.task import NerExample, NerTask
from bertkit.tasks.pipeline import LoadedModel, as_list, check_texts, input_length, with_options
from bertkit.tokenizer import Tokenizer


# ------------------------------------------------------------------------------------------ tag
@dataclass
class TaggedWord:
    word: str
    start: int
    end: int
    """Character span ``[start, end)`` in the input text."""
    tag: str
    score: float = 1.0
    """Probability of ``tag`` (softmax at the word's first sub-token); 1.0 for a word the model does not see."""


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
    return [_without_spaces(text, start, end) for start, end in spans]


def _without_spaces(text: str, start: int, end: int) -> tuple[int, int]:
    """A word's span less the whitespace a byte-level token carries (``Ġsmith`` covers `` smith``)."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def tag(
    texts: str | Sequence[str],
    loaded: LoadedModel,
    *,
    batch_size: int = 32,
    max_length: int | None = None,
    window_stride: int | None = None,
) -> Any:
    """Named entities (or any word-level tags) in raw text, as ``TagResult`` per text.

    Words are what BERT's pre-tokenizer splits (whitespace and punctuation); each word's tag is read at its
    first sub-token; a text longer than ``max_length`` (default the model's length) is tagged in overlapping windows
    (``window_stride`` tokens between starts; default the model's, else 128) and every word keeps its
    prediction from the window where it has most context.
    """
    items = as_list(texts, "texts")
    check_texts(items)
    if any(isinstance(t, tuple) for t in items):
        raise BertkitError("tag takes single texts, not pairs")
    task = with_options(loaded.task, window_stride=window_stride)
    assert isinstance(task, NerTask)  # the token-classification head's task
    spans = [word_spans(loaded.tokenizer, text) for text in items]
    tagged = [i for i, s in enumerate(spans) if s]  # a text without words has nothing to tag
    examples = [NerExample([items[i][s:e] for s, e in spans[i]], None, "input", i) for i in tagged]
    from bertkit.tasks.prepare import featurize  # a floor up: it reads the family registry

    features = (
        featurize(task, examples, loaded.tokenizer, input_length(loaded, max_length), report=True).features
        if examples
        else []
    )
    rows = run_model(loaded.model, task, features, batch_size=batch_size, pad_id=loaded.tokenizer.pad_id)
    predictions = dict(zip(tagged, task.postprocess(examples, features, rows))) if examples else {}
    scores = dict(zip(tagged, task.word_scores(examples, features, rows))) if examples else {}
    results = []
    for i, text in enumerate(items):
        if i not in predictions:
            results.append(TagResult(text, [], []))
            continue
        prediction, word_span = predictions[i], spans[i]
        words = [TaggedWord(text[s:e], s, e, t, p) for (s, e), t, p in zip(word_span, prediction.tags, scores[i])]
        entities = []
        for entity in prediction.entities:
            start, end = word_span[entity["start"]][0], word_span[entity["end"] - 1][1]
            entities.append(Entity(entity["type"], text[start:end], start, end))
        results.append(TagResult(text, words, entities))
    return results[0] if isinstance(texts, str) else results
