"""Token tagging (named entities, parts of speech, any word tags) on CoNLL-style column files.

Input: one word per line, columns separated by spaces or tabs, the tag in the last column (CoNLL-2003:
``word POS chunk NER``); a blank line ends a sentence; ``-DOCSTART-`` lines are skipped. Every line of a file
must have the same number of columns. Universal Dependencies CoNLL-U files (``.conllu``, or recognised by their
ten tab-separated columns) are read by ``readers.conllu``: FORM and the column ``tag_column`` names (default
UPOS). A tag ``_`` (an empty field) is an error, never a tag.

Chunked tags (IOB1, IOB2, BIOES: every tag ``O`` or ``B-``/``I-``/``E-``/``S-`` + type) are learnt as written,
entities are decoded from them with ``conlleval``'s chunk rules, and entity F1 is the headline. Tags that are
not chunked (UPOS ``NOUN``, ``VERB``...) are scored per word: token accuracy is the headline, with per-tag
precision, recall and F1 (see ``metrics.token_scores``).

Word labels and sub-tokens: each word is WordPiece-tokenized on its own (the same pieces BERT's tokenizer
gives inside the sentence, since it splits on whitespace first). Only the **first sub-token** of a word
carries its label in training and is read at prediction; the other pieces get -100 (ignored by the loss). A
word that tokenizes to nothing (say, only a zero-width character) is not seen by the model and is predicted
``O``.

Long sentences: when the pieces do not fit ``max_seq_length - 2``, the sentence is split at word boundaries
into windows whose starts are about ``window_stride`` tokens apart (the step between starts), so windows
overlap by the rest. Each word's prediction comes from the window where it has the most context on both
sides (SQuAD's max-context rule), and the windows are rejoined into one word-level tag sequence.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.errors import ConfigError, DataError
from bertkit.features import Feature
from bertkit.features.padding import pad_and_stack, to_numpy_rows
from bertkit.io import atomic_open, write_jsonl
from bertkit.tasks.base import Featurized, HeadTraining, Read
from bertkit.tasks.labels import LabelMap
from bertkit.tasks.ner import metrics
from bertkit.tasks.readers import ReadReport, read_text_file
from bertkit.tasks.readers.conllu import looks_like_conllu, read_conllu, what_it_is

if TYPE_CHECKING:  # the task's inference side runs without torch (bertkit[onnx])
    import torch

IGNORE_INDEX = -100


@dataclass
class NerExample:
    """A sentence: its words, their tags (``None`` when unlabelled), and the file and line of its first word."""

    words: list[str]
    tags: list[str] | None
    path: str
    line: int

    def where(self, word: int = 0) -> str:
        return f"{self.path}:{self.line + word}"


@dataclass
class NerPrediction:
    """Word-level tags and the entities decoded from them (``end`` is exclusive, in words)."""

    words: list[str]
    tags: list[str]
    entities: list[dict[str, Any]]


def read_conll(
    path: str | os.PathLike,
    *,
    labeled: bool = True,
    tag_column: int | str | None = None,
    report: ReadReport | None = None,
    format: str | None = None,
) -> list[NerExample]:
    """Sentences of a CoNLL column file: the word first, the tag in the last column or in ``tag_column``
    (0-based). A line with a tab is split on tabs, any other on runs of spaces. With ``labeled=False`` only
    the first column (the word) is used, so a file of bare words (one column) can be tagged. ``report`` (when
    given) counts the lines used and the ``-DOCSTART-`` lines skipped.

    A CoNLL-U file (``format="conllu"``, else its suffix or its lines tell) is read by ``readers.conllu``,
    ``tag_column`` a column name (``upos``, ``xpos``...) or number; ``format="conll"`` refuses one.
    """
    path = Path(path)
    text = read_text_file(path)
    report = report if report is not None else ReadReport(str(path), "conll")
    if format == "conllu" or (format is None and (_is_conllu_path(path) or looks_like_conllu(text))):
        sentences = read_conllu(path, text, labeled=labeled, column=tag_column, report=report)
        return [NerExample(words, tags, str(path), line) for words, tags, line in sentences]
    if looks_like_conllu(text):
        raise DataError(f"{what_it_is(path)}; leave --format out, or give --format conllu")
    tag_column = _plain_column(tag_column, path)
    lines = text.splitlines()
    report.format, report.unit = "conll", "lines"
    examples: list[NerExample] = []
    words: list[str] = []
    tags: list[str] = []
    first_line = 0
    width: int | None = None
    width_line = 0

    def flush() -> None:
        if words:
            examples.append(NerExample(list(words), list(tags) if labeled else None, str(path), first_line))
        words.clear()
        tags.clear()

    for number, line in enumerate(lines, start=1):
        columns = [c.strip() for c in line.split("\t")] if "\t" in line else line.split()
        if not any(columns):
            flush()
            continue
        if columns[0] == "-DOCSTART-":
            report.skip("-DOCSTART- lines")
            flush()
            continue
        if any(" " in c for c in columns):
            raise DataError(
                f"{path}:{number}: a field with spaces ({next(c for c in columns if ' ' in c)[:40]!r}): this looks "
                f"like a table of sentences, not CoNLL with one word per line; for a table use --task classification"
            )
        if width is None:
            width, width_line = len(columns), number
            if labeled and width < 2:
                raise DataError(
                    f"{path}:{number}: one column only; a labelled CoNLL file needs the word "
                    f"first and the tag last (or read it unlabelled)"
                )
            if labeled and tag_column is not None and not 0 < tag_column < width:
                raise DataError(f"{path}:{number}: --tag-column {tag_column} is not among columns 1..{width - 1}")
        elif len(columns) != width:
            raise DataError(f"{path}:{number}: {len(columns)} columns, but line {width_line} has {width}")
        if not words:
            first_line = number
        words.append(columns[0])
        tags.append(columns[-1] if tag_column is None or not labeled else columns[tag_column])
        _refuse_empty_tag(tags[-1] if labeled else None, columns[0], f"{path}:{number}")
        report.used += 1
    flush()
    if not examples:
        raise DataError(f"{path}: no sentences found (the file is empty or has only -DOCSTART- lines)")
    report.notes.append(f"{len(examples)} sentences")
    return examples


def _is_conllu_path(path: Path) -> bool:
    return ".conllu" in path.suffixes


def _refuse_empty_tag(tag: str | None, word: str, where: str) -> None:
    if tag == "_":
        raise DataError(
            f"{where}: the tag of {word!r} is '_' (an empty field), which is no tag; give --tag-column the "
            f"0-based column that holds the tags"
        )


def _plain_column(tag_column: int | str | None, path: Path) -> int | None:
    """A plain CoNLL file's tag column: a number (a name is for CoNLL-U)."""
    if not isinstance(tag_column, str):
        return tag_column
    if not tag_column.isdigit():
        raise DataError(
            f"--tag-column {tag_column!r}: column names are for CoNLL-U files, and {path} is a plain CoNLL "
            f"file; give the tag's 0-based column number"
        )
    return int(tag_column)


@dataclass
class NerTask(HeadTraining):
    """Word-level tagging of CoNLL or CoNLL-U sentences; head ``BertForTokenClassification``."""

    window_stride: int = 128
    """Tokens between the starts of the windows of a sentence too long for one sequence."""
    label_map: LabelMap | None = None
    main_metric: str = "f1"
    """``f1``: entity F1 for chunked tags; tags that are not chunked have none, and score ``accuracy`` instead."""
    tag_column: int | str | None = None
    """0-based column of the tag, or for CoNLL-U its name (``upos``, ``xpos``...); ``None``: the last column
    (CoNLL-U: UPOS)."""

    name: str = field(default="ner", init=False)
    head: str = field(default="BertForTokenClassification", init=False)
    model_input_names: tuple[str, ...] = field(
        default=("input_ids", "token_type_ids", "attention_mask", "labels"), init=False
    )
    batch_by_length: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        if self.window_stride < 1:
            raise ConfigError(f"--window-stride must be at least 1, got {self.window_stride}")

    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[NerExample]:
        """Sentences of a CoNLL or CoNLL-U file (the formats of this task)."""
        if format not in (None, "conll", "conllu"):
            raise ConfigError(f"--format {format}: the ner task reads conll files only (and CoNLL-U: --format conllu)")
        report = ReadReport(str(path), "conll")
        examples = read_conll(path, labeled=labeled, tag_column=self.tag_column, report=report, format=format)
        return Read(examples, report)

    def fit_labels(self, examples: Sequence[NerExample]) -> None:
        self.label_map = LabelMap.fit(tag for e in examples for tag in (e.tags or ()))
        self._headline_for_tags()

    @property
    def chunked(self) -> bool:
        """Whether the tags are chunks (IOB, BIOES) that make entities, rather than one label per word."""
        return metrics.is_chunked(self._fitted_label_map().labels)

    def _headline_for_tags(self) -> None:
        if self.main_metric == "f1" and not self.chunked:
            self.main_metric = "accuracy"  # entity F1 means nothing for tags that do not make chunks

    def describe_labels(self, examples: Sequence[NerExample]) -> str:
        """One line on the fitted tags."""
        tags = self._fitted_label_map().labels
        return f"tags: {len(tags)}: {', '.join(tags[:20])}{' ...' if len(tags) > 20 else ''}"

    @property
    def num_labels(self) -> int:
        return len(self._fitted_label_map())

    def _fitted_label_map(self) -> LabelMap:
        if self.label_map is None:
            raise DataError("tags are unknown: call fit_labels on the training data or load them from a config")
        return self.label_map

    def config_updates(self) -> dict[str, Any]:
        label_map = self._fitted_label_map()
        return {"num_labels": len(label_map), "id2label": label_map.id2label(), "problem_type": None}

    def load_config(self, config: Any) -> None:
        if not config.id2label:
            raise DataError("the model config has no id2label; it was not fine-tuned for tagging")
        self.label_map = LabelMap.from_id2label(config.id2label)
        self._headline_for_tags()

    # ------------------------------------------------------------------------------------ features

    def featurize(
        self, examples: Sequence[NerExample], tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        """One feature per window of each sentence (one window unless the sentence is too long); ``truncated``
        counts the sentences cut (a word longer than a whole sequence keeps only what fits).

        Bookkeeping keys: ``example_index``, ``word_positions`` (for each word of the sentence that the window
        holds, the position of its first sub-token, or -1), ``first_word`` and ``max_context`` (per held
        word: whether this window gives it the most context).
        """
        room = max_seq_length - 2
        if room < 1:
            raise ConfigError(f"--max-seq-length {max_seq_length} leaves no room for words; raise it")
        # Each word as it reads in running text: after a space where the tokenizer marks spaces (byte-level BPE).
        space = " " if getattr(tokenizer, "spaces_are_tokens", False) else ""
        flat = [space + w if i else w for e in examples for i, w in enumerate(e.words)]
        flat_ids = tokenizer.ids_batch(flat) if flat else []
        features: list[Feature] = []
        cursor = 0
        truncated = 0
        for index, example in enumerate(examples):
            truncated += any(len(ids) > room for ids in flat_ids[cursor : cursor + len(example.words)])
            word_ids = [ids[:room] for ids in flat_ids[cursor : cursor + len(example.words)]]
            cursor += len(example.words)
            tag_ids = None
            if example.tags is not None and self.label_map is not None:
                tag_ids = [self.label_map.encode(t, example.where(i)) for i, t in enumerate(example.tags)]
            spans = _word_windows([len(ids) for ids in word_ids], room, self.window_stride)
            best = _max_context_windows([len(ids) for ids in word_ids], spans)
            for number, (start, end) in enumerate(spans):
                input_ids = [tokenizer.cls_id]
                labels = [IGNORE_INDEX]
                positions = []
                for w in range(start, end):
                    positions.append(len(input_ids) if word_ids[w] else -1)
                    input_ids += word_ids[w]
                    if tag_ids is not None and word_ids[w]:
                        labels += [tag_ids[w]] + [IGNORE_INDEX] * (len(word_ids[w]) - 1)
                input_ids.append(tokenizer.sep_id)
                labels.append(IGNORE_INDEX)
                feature: Feature = {
                    "input_ids": input_ids,
                    "token_type_ids": [0] * len(input_ids),
                    "attention_mask": [1] * len(input_ids),
                    "example_index": index,
                    "first_word": start,
                    "word_positions": positions,
                    "max_context": [best[w] == number for w in range(start, end)],
                }
                if tag_ids is not None:
                    feature["labels"] = labels
                features.append(feature)
        return Featurized(features, truncated)

    def collate(self, features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]:
        names = [n for n in self.model_input_names if n in features[0]]
        return pad_and_stack(features, names, {"input_ids": pad_id, "labels": IGNORE_INDEX})

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        """The mean count of labelled tokens per micro-batch (at least 1): a batch of short sentences then
        weighs its tokens as much as one of long sentences does."""
        labeled = sum(sum(1 for label in f["labels"] if label != IGNORE_INDEX) for f in features)
        return max(1.0, labeled * micro_batch_size / len(features))

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list[np.ndarray]:
        """Per-feature ``[length, num_labels]`` logits, padding cut off."""
        logits = outputs["logits"] if isinstance(outputs, Mapping) else outputs.logits
        return to_numpy_rows(logits, batch["attention_mask"].sum(1).tolist())

    # ------------------------------------------------------------------------------------ predictions

    def postprocess(
        self, examples: Sequence[NerExample], features: Sequence[Feature], rows: Sequence[np.ndarray]
    ) -> list[NerPrediction]:
        if len(features) != len(rows):
            raise ValueError(f"{len(features)} features but {len(rows)} output rows")
        labels = self._fitted_label_map().labels
        tags = [["O"] * len(e.words) for e in examples]
        for feature, row in zip(features, rows):
            sentence = tags[feature["example_index"]]
            for offset, (position, best) in enumerate(zip(feature["word_positions"], feature["max_context"])):
                if best and position >= 0:
                    sentence[feature["first_word"] + offset] = labels[int(np.argmax(row[position]))]
        predictions = []
        chunked = self.chunked
        for example, sentence in zip(examples, tags):
            # Tags that are not chunks (parts of speech) span one word each: merging equal neighbours would
            # make "entities" the tags never meant.
            spans = metrics.get_entities(sentence) if chunked else [(t, i, i + 1) for i, t in enumerate(sentence)]
            entities = [{"type": t, "start": s, "end": e, "text": " ".join(example.words[s:e])} for t, s, e in spans]
            predictions.append(NerPrediction(list(example.words), sentence, entities))
        return predictions

    def evaluate(self, predictions: Sequence[NerPrediction], examples: Sequence[NerExample]) -> dict[str, float]:
        """Chunked tags: conlleval's entity-level precision/recall/F1 (overall and per type) and token accuracy.
        Other tags: token accuracy and per-tag token-level precision/recall/F1 (``metrics.token_scores``)."""
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} sentences")
        scores = metrics.entity_scores if self.chunked else metrics.token_scores
        return scores([p.tags for p in predictions], [_gold_tags(e) for e in examples])

    def word_scores(
        self, examples: Sequence[NerExample], features: Sequence[Feature], rows: Sequence[np.ndarray]
    ) -> list[list[float]]:
        """Softmax probability of each word's predicted tag, read where ``postprocess`` reads the tag (the first
        sub-token, in the window that gives the word most context); 1.0 for a word the model does not see."""
        scores = [[1.0] * len(e.words) for e in examples]
        for feature, row in zip(features, rows):
            sentence = scores[feature["example_index"]]
            for offset, (position, best) in enumerate(zip(feature["word_positions"], feature["max_context"])):
                if best and position >= 0:
                    logits = np.asarray(row[position], dtype=np.float64)
                    probs = np.exp(logits - logits.max())
                    sentence[feature["first_word"] + offset] = float(probs.max() / probs.sum())
        return scores

    def prediction_rows(
        self,
        examples: Sequence[NerExample],
        features: Sequence[Feature],
        rows: Sequence[np.ndarray],
        predictions: Sequence[NerPrediction],
    ) -> list[dict[str, Any]]:
        """``{index, words, tags, scores, entities}`` per sentence (``scores``: see ``word_scores``)."""
        scores = self.word_scores(examples, features, rows)
        return [
            {"index": i, "words": p.words, "tags": p.tags, "scores": s, "entities": p.entities}
            for i, (p, s) in enumerate(zip(predictions, scores))
        ]

    def write_predictions(
        self,
        predictions: Sequence[NerPrediction],
        directory: str | os.PathLike,
        examples: Sequence[NerExample] | None = None,
    ) -> list[Path]:
        """``predictions.jsonl`` (words, tags, entities per sentence) and ``predictions.conll`` (``word tag``,
        or ``word gold predicted`` when labelled examples are given: the input of ``conlleval``)."""
        directory = Path(directory)
        jsonl = write_jsonl(
            ({"words": p.words, "tags": p.tags, "entities": p.entities} for p in predictions),
            directory / "predictions.jsonl",
        )
        conll = directory / "predictions.conll"
        with atomic_open(conll) as handle:
            for i, p in enumerate(predictions):
                gold = examples[i].tags if examples is not None else None
                for w, (word, tag) in enumerate(zip(p.words, p.tags)):
                    handle.write(f"{word} {gold[w]} {tag}\n" if gold else f"{word} {tag}\n")
                handle.write("\n")
        return [jsonl, conll]


def _gold_tags(example: NerExample) -> list[str]:
    if example.tags is None:
        raise DataError(f"{example.where()}: no tags to evaluate against (the file was read unlabelled)")
    return example.tags


def _word_windows(lengths: Sequence[int], room: int, stride: int) -> list[tuple[int, int]]:
    """Windows ``(first word, last word + 1)`` of at most ``room`` tokens, split at word boundaries.

    Each window holds as many words as fit; the next one starts at the first word at least ``stride`` tokens
    after the current start (never later than the current end, so no word is skipped).
    """
    n = len(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    windows: list[tuple[int, int]] = []
    start = 0
    while True:
        end = start
        while end < n and offsets[end + 1] - offsets[start] <= room:
            end += 1
        end = max(end, start + 1)  # never empty: a single word is capped to ``room`` pieces upstream
        windows.append((start, end))
        if end >= n:
            return windows
        nxt = start + 1
        while nxt < end and offsets[nxt] - offsets[start] < stride:
            nxt += 1
        start = nxt


def _max_context_windows(lengths: Sequence[int], windows: Sequence[tuple[int, int]]) -> list[int]:
    """For each word, the window where ``min(tokens left, tokens right) + 0.01 * window tokens`` is largest."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    best = [0] * len(lengths)
    best_score = [-1.0] * len(lengths)
    for number, (start, end) in enumerate(windows):
        size = offsets[end] - offsets[start]
        for w in range(start, end):
            left = offsets[w] - offsets[start]
            right = offsets[end] - offsets[w + 1]
            score = min(left, right) + 0.01 * size
            if score > best_score[w]:
                best[w], best_score[w] = number, score
    return best
