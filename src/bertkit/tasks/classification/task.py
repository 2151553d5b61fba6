"""Sentence and sentence-pair classification and regression (GLUE-style) on tables in any of the readers' formats.

Columns: ``text_column``, optional ``text_pair_column`` and ``label_column``; by default the first present of
the usual names (GLUE's ``sentence``/``sentence1``/``#1 String``, ``sentence2``/``#2 String``, ``label``/
``score``/``Quality``), so the GLUE files work as they are.

Labels: any strings; the sorted distinct training labels (numbers sorted numerically) get ids 0..K-1 and are
saved as ``config.id2label``. ``label_names`` renames them: the i-th name for the i-th sorted label (``0``/``1``
data with ``label_names="negative,positive"``), so that predictions carry the names; a gold label given as an
id (``0``/``1``) then still reads as its name when a saved model is evaluated. Regression (``num_labels == 1``, MSE) is chosen when every training label is a
number and at least one is not a whole number (STS-B's ``3.800``) and ``regression`` is ``None``, or explicitly
with ``regression=True``; with ``regression=False`` (``make_task("classification")``) scores are refused. A
training read refuses a label column whose values are nearly all distinct (``check_labels``).

Long inputs, ``long_text="truncate"`` (default): Google BERT's rule, drop the last token of the longer text
(the second on ties) until ``[CLS] A [SEP] B [SEP]`` fits ``max_seq_length``. ``long_text="windows"``: the
first text is cut into windows of the remaining room whose starts are ``window_stride`` tokens apart (the step,
as SQuAD's ``doc_stride``; windows overlap when it is smaller than the room); a second text is kept whole up
to half the room. Every window carries the example's label in training; at prediction the logits of an
example's windows are averaged.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bertkit.errors import ConfigError, DataError
from bertkit.features import Feature
from bertkit.features.padding import pad_and_stack, to_numpy_rows
from bertkit.features.pairs import build_pair, truncate_pair
from bertkit.features.windows import window_starts
from bertkit.io import write_jsonl
from bertkit.tasks import metrics
from bertkit.tasks.base import Featurized, HeadTraining, Read
from bertkit.tasks.labels import LabelMap
from bertkit.tasks.readers import ReadReport, Row, pick_column, read_table
from bertkit.tasks.readers.columns import missing_columns, text_and_label, unnamed

if TYPE_CHECKING:  # the task's inference side runs without torch (bertkit[onnx])
    import torch

TEXT_COLUMNS = ("sentence", "sentence1", "#1 String", "text", "text_a", "premise", "question", "sentence_a")
PAIR_COLUMNS = ("sentence2", "#2 String", "text_pair", "text_b", "hypothesis", "sentence_b")
LABEL_COLUMNS = ("label", "score", "Quality", "labels", "gold_label", "target")


@dataclass
class ClassificationExample:
    """One row: its text(s), its raw label string (``None`` when unlabelled) and ``file:line``."""

    text: str
    text_pair: str | None
    label: str | None
    where: str


@dataclass
class ClassificationPrediction:
    """A predicted label with its class probabilities, or a regression score (``label`` is then ``None``)."""

    label: str | None
    score: float
    probabilities: dict[str, float] | None = None
    logits: dict[str, float] | None = None
    """The head's raw scores by label name (averaged over an input's windows), before the softmax."""


def _is_number(text: str) -> bool:
    try:
        return np.isfinite(float(text))
    except ValueError:
        return False


SHOWN_LABELS = 12
"""Classes listed by name in the labels line; the rest are counted."""

MANY_CLASSES = 20
"""A label column with more distinct values than this, and than half its rows, is refused for classification:
nearly every row would be a class of its own (an id or a text column named by mistake). 20 classes on 2,000
rows pass; an ``idx`` column never does."""


def scores(labels: Sequence[str]) -> bool:
    """Whether labels are scores, not classes: all numbers, and at least one not a whole number (``3.800``)."""
    return all(_is_number(label) for label in labels) and any(float(label) != int(float(label)) for label in labels)


def check_labels(path: str | os.PathLike, column: str, labels: Sequence[str], regression: bool | None) -> None:
    """Refuse training labels that cannot be classes: scores under an explicit classification task
    (``regression=False``), or a column whose values are nearly all distinct (see ``MANY_CLASSES``)."""
    if not labels:
        return
    listed = next((label for label in labels if label.startswith("[") and label.endswith("]")), None)
    if listed is not None:
        raise DataError(
            f"{path}: label column {column!r} holds lists ({_shorten(listed)}), which would each become one class; "
            f'give one label per row as a plain value ("pos", not ["pos"])'
        )
    is_scores = scores(labels)
    if is_scores and regression is False:
        examples = ", ".join(dict.fromkeys(label for label in labels if float(label) != int(float(label))))
        raise DataError(
            f"{path}: label column {column!r} holds scores ({_shorten(examples)}), not classes; fine-tune them with "
            f"--task regression, or name the label column with --label-column"
        )
    distinct = len(set(labels))
    if not is_scores and distinct > MANY_CLASSES and distinct > len(labels) / 2:
        numeric = all(_is_number(label) for label in labels)
        also = " (or --task regression, if these numbers are scores)" if numeric else ""
        raise DataError(
            f"{path}: label column {column!r} has {distinct} distinct values in {len(labels)} rows, nearly one class "
            f"per row (an id or a text, not a label?); name the label column with --label-column{also}"
        )


def _rows(count: int) -> str:
    return f"{count:,} row{'' if count == 1 else 's'}"


def _shorten(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3].rsplit(", ", 1)[0] + ", ..."


def _gold_label(example: ClassificationExample) -> str:
    if example.label is None:
        raise DataError(f"{example.where}: no label to evaluate against (the file was read unlabelled)")
    return example.label


@dataclass
class ClassificationTask(HeadTraining):
    """Classification/regression over one text or a text pair; head ``BertForSequenceClassification``."""

    text_column: str | int | None = None
    text_pair_column: str | int | None = None
    """``None``: use a default pair column if present; ``""``: single text even if the file has a pair."""
    label_column: str | int | None = None
    format: str | None = None
    """``tsv``, ``csv``, ``jsonl``, ``json``, ``parquet``, ``arrow`` or ``hf``; ``None`` guesses from the path."""
    header: bool | None = None
    """Whether a TSV/CSV file's first line names the columns; ``None`` detects it (and reports how)."""
    regression: bool | None = None
    """``None``: decided by ``fit_labels`` from the training labels (see the module docstring)."""
    long_text: str = "truncate"
    window_stride: int = 128
    main_metric: str | None = None
    """Defaults to ``accuracy`` (classification) or ``pearson`` (regression); ``f1`` or ``mcc`` also work."""
    label_names: str | Sequence[str] | None = None
    """Names of the sorted training labels, in order (a comma-separated string or a list); saved as ``id2label``."""
    label_map: LabelMap | None = None

    name: str = field(default="classification", init=False)
    head: str = field(default="BertForSequenceClassification", init=False)
    model_input_names: tuple[str, ...] = field(
        default=("input_ids", "token_type_ids", "attention_mask", "labels"), init=False
    )

    def __post_init__(self) -> None:
        if self.long_text not in ("truncate", "windows"):
            raise ConfigError(f"--long-text must be truncate or windows, got {self.long_text!r}")
        if self.window_stride < 1:
            raise ConfigError(f"--window-stride must be at least 1, got {self.window_stride}")
        if self.main_metric is None:
            self.main_metric = "pearson" if self.regression else "accuracy"
        if isinstance(self.label_names, str):
            self.label_names = [name.strip() for name in self.label_names.split(",")]
        if self.label_names is not None:
            self.label_names = list(self.label_names)
            if not all(self.label_names) or len(set(self.label_names)) != len(self.label_names):
                raise ConfigError(f"--label-names must be distinct non-empty names, got {self.label_names}")
        self._renamed: dict[str, str] = {}

    # ------------------------------------------------------------------------------------ reading

    @property
    def batch_by_length(self) -> bool:
        """Not for regression: a score that follows length (STS-B's does) makes length-grouped batches a
        biased sample."""
        return not self.regression

    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[ClassificationExample]:
        """Examples of a table; with ``labeled=False`` the label column is ignored (GLUE test files).
        ``format`` and ``header`` override the task's own."""
        wanted = [c for c in (self.text_column, self.text_pair_column, self.label_column) if isinstance(c, str)]
        names = [c for c in wanted if c and not c.isdigit()] + [*TEXT_COLUMNS, *PAIR_COLUMNS, *LABEL_COLUMNS]
        report = ReadReport(str(path), "")
        columns, rows = read_table(
            path,
            format or self.format,
            header=self.header if header is None else header,
            names=names,
            report=report,
        )
        text, pair, label = self._columns(path, columns, rows, labeled, report)
        examples = []
        for row in rows:
            values = row.fields
            for column in (text, pair, label):
                if column is not None and column not in values:  # JSONL rows may lack keys
                    raise DataError(f"{row.where}: missing field {column!r}")
            examples.append(
                ClassificationExample(
                    text=values[text],
                    text_pair=values[pair] if pair else None,
                    label=values[label].strip() if label else None,
                    where=row.where,
                )
            )
        if training and label is not None and not self.regression:
            check_labels(path, label, [e.label for e in examples if e.label], self.regression)
        return Read(examples, report)

    def _columns(
        self, path: str | os.PathLike, columns: list[str], rows: Sequence[Row], labeled: bool, report: ReadReport
    ) -> tuple[str, str | None, str | None]:
        """The text, pair and label columns: the ones asked for, else the usual names; two unnamed columns
        (no header) are text and label, said in ``report``. Every role still missing is named in one error."""
        text = pick_column(path, columns, self.text_column, TEXT_COLUMNS, "text", required=False)
        pair = None
        if self.text_pair_column != "":
            required = self.text_pair_column is not None
            pair = pick_column(path, columns, self.text_pair_column, PAIR_COLUMNS, "text pair", required=required)
        label = pick_column(path, columns, self.label_column, LABEL_COLUMNS, "label", required=False)
        label = label if labeled else None
        if unnamed(columns) and len(columns) == 2 and (text is None or (labeled and label is None)):
            values = [[row.fields.get(c, "") for row in rows] for c in columns]
            text, guessed, said = text_and_label(columns, values, text)
            label = guessed if labeled else None
            report.assumptions.append(said)
        missing: list[tuple[str, Sequence[str]]] = [("text", TEXT_COLUMNS)] if text is None else []
        missing += [("label", LABEL_COLUMNS)] if labeled and label is None else []
        if missing or text is None:
            raise missing_columns(path, columns, missing)
        return text, pair, label

    # ------------------------------------------------------------------------------------ labels

    def fit_labels(self, examples: Sequence[ClassificationExample]) -> None:
        """Decide classification vs regression and build the label map from the training examples."""
        labels: list[str] = []
        for e in examples:
            if not e.label:
                raise DataError(f"{e.where}: empty label in the training data")
            labels.append(e.label)
        if self.regression is None:
            self.regression = scores(labels)
            if self.main_metric == "accuracy" and self.regression:
                self.main_metric = "pearson"
        if self.regression is False and scores(labels):
            raise ConfigError(
                f"the labels are scores ({_shorten(', '.join(labels))}), not classes; use --task regression"
            )
        if self.regression:
            for e, label in zip(examples, labels):
                if not _is_number(label):
                    raise DataError(f"{e.where}: regression label {label!r} is not a number")
            self.label_map = None
        else:
            self.label_map = LabelMap.fit(labels)
            if self.label_names is not None:
                self._rename(self.label_map)
        if self.regression and self.label_names is not None:
            raise ConfigError("--label-names is for classification; these labels are regression scores")

    def describe_labels(self, examples: Sequence[ClassificationExample]) -> str:
        """One line on the fitted labels: each class with its count of training rows, or the range of the
        regression scores."""
        if self.regression:
            values = [float(e.label) for e in examples if e.label]
            return f"labels: regression, scores {min(values):g} to {max(values):g}"
        counts = Counter(self._name(e.label) for e in examples if e.label)
        labels = self._fitted_label_map().labels
        shown = ", ".join(f"{label} ({_rows(counts.get(label, 0))})" for label in labels[:SHOWN_LABELS])
        more = f", ... and {len(labels) - SHOWN_LABELS} more" if len(labels) > SHOWN_LABELS else ""
        return f"labels: {len(labels)} classes: {shown}{more}"

    def _rename(self, fitted: LabelMap) -> None:
        names = list(self.label_names or ())
        if len(names) != len(fitted):
            raise ConfigError(
                f"--label-names gives {len(names)} names for {len(fitted)} labels "
                f"({', '.join(fitted.labels[:20])}): give one name per label, in sorted order"
            )
        self._renamed = dict(zip(fitted.labels, names))
        self.label_map = LabelMap(names)

    def _name(self, label: str) -> str:
        """The label name of a raw gold label: renamed by ``label_names``, or an id of a model with names."""
        if label in self._renamed:
            return self._renamed[label]
        known = self.label_map
        by_id = known is not None and label not in known.index and label.isdigit() and int(label) < len(known)
        if known is not None and by_id and not any(name.isdigit() for name in known.labels):
            return known.labels[int(label)]
        return label

    @property
    def num_labels(self) -> int:
        if self.regression:
            return 1
        return len(self._fitted_label_map())

    def _fitted_label_map(self) -> LabelMap:
        if self.label_map is None:
            raise DataError("labels are unknown: call fit_labels on the training data or load them from a config")
        return self.label_map

    def config_updates(self) -> dict[str, Any]:
        """Fields of ``BertConfig`` that describe this head."""
        if self.regression:
            return {"num_labels": 1, "problem_type": "regression", "id2label": None}
        return {
            "num_labels": self.num_labels,
            "problem_type": "single_label_classification",
            "id2label": self._fitted_label_map().id2label(),
        }

    def load_config(self, config: Any) -> None:
        """Restore the label map (or regression) from a fine-tuned model's ``BertConfig``."""
        if config.problem_type == "regression" or (config.num_labels == 1 and not config.id2label):
            self.regression, self.label_map = True, None
            if self.main_metric == "accuracy":
                self.main_metric = "pearson"
        else:
            if not config.id2label:
                raise DataError("the model config has no id2label; it was not fine-tuned for classification")
            self.regression, self.label_map = False, LabelMap.from_id2label(config.id2label)

    # ------------------------------------------------------------------------------------ features

    def featurize(
        self, examples: Sequence[ClassificationExample], tokenizer: Any, max_seq_length: int, *, training: bool = False
    ) -> Featurized:
        """Model inputs; ``labels`` is present when the examples are labelled and the labels are fitted.
        ``truncated`` counts the examples cut at ``max_seq_length`` (``long_text="truncate"``)."""
        if max_seq_length < 5:
            raise ConfigError(f"--max-seq-length {max_seq_length} leaves no room for text; raise it")
        ids_a = tokenizer.ids_batch([e.text for e in examples])
        ids_b: list[list[int] | None] = [None] * len(examples)
        paired = [i for i, e in enumerate(examples) if e.text_pair is not None]
        for i, ids in zip(paired, tokenizer.ids_batch([examples[i].text_pair for i in paired]) if paired else []):
            ids_b[i] = ids
        features: list[Feature] = []
        truncated = 0
        for index, (example, a, b) in enumerate(zip(examples, ids_a, ids_b)):
            room = max_seq_length - (2 if b is None else 3)
            label = self._label_id(example)
            if self.long_text == "truncate" or len(a) + len(b or ()) <= room:
                truncated += len(a) + len(b or ()) > room
                a, b = truncate_pair(a, b, room)
                windows = [(a, b)]
            else:
                b = None if b is None else b[: room // 2]
                width = room - len(b or ())
                windows = [(a[start : start + width], b) for start in window_starts(len(a), width, self.window_stride)]
            for wa, wb in windows:
                feature = build_pair(wa, wb, tokenizer.cls_id, tokenizer.sep_id)
                feature["example_index"] = index
                if label is not None:
                    feature["labels"] = label
                features.append(feature)
        return Featurized(features, truncated)

    def _label_id(self, example: ClassificationExample) -> int | float | None:
        if example.label is None:
            return None
        if self.regression:
            if not _is_number(example.label):
                raise DataError(f"{example.where}: regression label {example.label!r} is not a number")
            return float(example.label)
        if self.label_map is None:
            return None
        return self.label_map.encode(self._name(example.label), example.where)

    def collate(self, features: Sequence[Feature], pad_id: int = 0) -> dict[str, torch.Tensor]:
        names = [n for n in self.model_input_names if n in features[0]]
        import torch

        dtypes = {"labels": torch.float32 if self.regression else torch.long}
        return pad_and_stack(features, names, {"input_ids": pad_id}, dtypes)

    def loss_normalizer(self, features: Sequence[Feature], micro_batch_size: int) -> float | None:
        """``None``: the loss is one value per sequence, averaged over the batch."""
        return None

    def unbatch(self, outputs: Any, batch: Mapping[str, torch.Tensor]) -> list[np.ndarray]:
        """Per-feature logits rows from a head output (an object or dict with ``logits``)."""
        logits = outputs["logits"] if isinstance(outputs, Mapping) else outputs.logits
        return to_numpy_rows(logits)

    # ------------------------------------------------------------------------------------ predictions

    def postprocess(
        self, examples: Sequence[ClassificationExample], features: Sequence[Feature], rows: Sequence[np.ndarray]
    ) -> list[ClassificationPrediction]:
        """One prediction per example; the logits of an example's windows are averaged first."""
        if len(features) != len(rows):
            raise ValueError(f"{len(features)} features but {len(rows)} output rows")
        grouped: dict[int, list[np.ndarray]] = defaultdict(list)
        for feature, row in zip(features, rows):
            grouped[feature["example_index"]].append(np.asarray(row, dtype=np.float64))
        labels = None if self.regression else self._fitted_label_map().labels
        predictions = []
        for index in range(len(examples)):
            if index not in grouped:
                raise ValueError(f"no model output for example {index}")
            logits = np.mean(grouped[index], axis=0).reshape(-1)
            if labels is None:
                predictions.append(ClassificationPrediction(None, float(logits[0])))
                continue
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            best = int(np.argmax(probs))
            predictions.append(
                ClassificationPrediction(
                    labels[best],
                    float(probs[best]),
                    {name: float(p) for name, p in zip(labels, probs)},
                    {name: float(logit) for name, logit in zip(labels, logits)},
                )
            )
        return predictions

    def evaluate(
        self, predictions: Sequence[ClassificationPrediction], examples: Sequence[ClassificationExample]
    ) -> dict[str, float]:
        """Accuracy, MCC and (two labels) F1 of the second label, or Pearson/Spearman/MSE for regression."""
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
        gold = [_gold_label(e) for e in examples]
        if self.regression:
            gold_scores = [float(label) for label in gold]
            scores = [p.score for p in predictions]
            result = {
                "pearson": metrics.pearson(scores, gold_scores),
                "spearman": metrics.spearman(scores, gold_scores),
                "mse": float(np.mean((np.asarray(scores) - np.asarray(gold_scores)) ** 2)),
            }
            result["pearson_spearman"] = (result["pearson"] + result["spearman"]) / 2
            return result
        gold = [self._name(label) for label in gold]
        pred = [p.label for p in predictions]
        result = {"accuracy": metrics.accuracy(pred, gold), "mcc": metrics.matthews_corrcoef(pred, gold)}
        label_map = self._fitted_label_map()
        if len(label_map) == 2:
            result["f1"] = metrics.f1_binary(pred, gold, positive=label_map.labels[1])
            result["accuracy_f1"] = (result["accuracy"] + result["f1"]) / 2
        return result

    def prediction_rows(
        self,
        examples: Sequence[ClassificationExample],
        features: Sequence[Feature],
        rows: Sequence[np.ndarray],
        predictions: Sequence[ClassificationPrediction],
    ) -> list[dict[str, Any]]:
        """``{index, text[, text_pair], label, score, probabilities}`` per example (regression: ``score``)."""
        out = []
        for i, (example, p) in enumerate(zip(examples, predictions)):
            row: dict[str, Any] = {"index": i, "text": example.text}
            if example.text_pair is not None:
                row["text_pair"] = example.text_pair
            if p.label is None:
                row["score"] = p.score
            else:
                row.update(label=p.label, score=p.score, probabilities=p.probabilities)
            out.append(row)
        return out

    def write_predictions(
        self,
        predictions: Sequence[ClassificationPrediction],
        directory: str | os.PathLike,
        examples: Sequence[ClassificationExample] | None = None,
    ) -> list[Path]:
        """``predictions.jsonl``: one object per example with ``label`` and ``probabilities``, or ``score``."""

        def row(i: int, p: ClassificationPrediction) -> dict[str, Any]:
            out: dict[str, Any] = {"index": i}
            if examples is not None:
                out["text"] = examples[i].text
                if examples[i].text_pair is not None:
                    out["text_pair"] = examples[i].text_pair
            if p.label is None:
                out["score"] = p.score
            else:
                out.update(label=p.label, score=p.score, probabilities=p.probabilities)
            return out

        return [write_jsonl((row(i, p) for i, p in enumerate(predictions)), Path(directory) / "predictions.jsonl")]
