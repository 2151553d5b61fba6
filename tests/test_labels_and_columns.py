"""What fine-tuning says about the labels and columns it reads, and the label columns it refuses, through the CLI.

The label set (or the score range) is said once; a label column whose values are nearly all distinct, or
scores given to a classification task, are one line of error naming the flag that fixes it, in every table
format and for any column; a table without a header names every missing column in one error, and with two
columns the text and label are told apart and the choice is said.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.errors import DataError
from bertkit.tasks.classification.task import MANY_CLASSES, ClassificationTask

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORDS = "good bad great movie film story very the lazy cat sat dog".split()
QUICK = ["--max-steps", "1", "--no-progress", "--report-to", "none", "--no-plot"]


def run_cli(args: list, capsys) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("bertkit: error:")]


def rows(n: int) -> list[dict[str, str]]:
    """``n`` rows with a two-class ``label``, a unique ``idx``, a ``score`` with fractions and a ``sentence``."""
    return [
        {
            "sentence": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} {WORDS[(i // 3) % len(WORDS)]}",
            "label": "pos" if i % 2 else "neg",
            "idx": str(i),
            "score": f"{(i % 11) / 2:.3f}",
        }
        for i in range(n)
    ]


def write_table(path: Path, table: list[dict[str, str]]) -> Path:
    """``table`` in the format the suffix names (TSV, CSV, JSONL or Parquet)."""
    columns = list(table[0])
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in table), encoding="utf-8")
    elif path.suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({c: [r[c] for r in table] for c in columns}), path)
    else:
        sep = "\t" if path.suffix == ".tsv" else ","
        path.write_text("".join(sep.join(r) + "\n" for r in [columns, *([r[c] for c in columns] for r in table)]))
    return path


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl", ".parquet"])
@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--label-column", "idx"], ["label column 'idx' has 60 distinct values in 60 rows", "--label-column"]),
        (["--label-column", "sentence"], ["label column 'sentence' has", "--label-column"]),
        (["--label-column", "score"], ["label column 'score' holds scores (0.500, 1.500", "--task regression"]),
    ],
)
def test_label_columns_that_are_not_classes_are_refused(encoder_dir, tmp_path, capsys, suffix, extra, expected):
    train = write_table(tmp_path / f"train{suffix}", rows(60))
    output = tmp_path / "out"
    args = ["finetune", "--task", "classification", "--model", encoder_dir, "--train", train, "-o", output]
    code, err = run_cli([*args, *extra, *QUICK], capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert all(text in errors(err)[0] for text in expected), err
    assert not output.exists()


def test_the_label_set_or_score_range_is_said_once(encoder_dir, tmp_path, capsys):
    train = write_table(tmp_path / "train.csv", rows(24))
    args = ["finetune", "--model", encoder_dir, "--train", train, *QUICK]
    code, err = run_cli([*args, "--task", "classification", "-o", tmp_path / "cls"], capsys)
    assert code == 0, err
    assert err.count("bertkit: labels: 2 classes: neg (12 rows), pos (12 rows)\n") == 1, err
    code, err = run_cli([*args, "--task", "regression", "--label-column", "score", "-o", tmp_path / "reg"], capsys)
    assert code == 0, err
    assert err.count("bertkit: labels: regression, scores 0 to 5\n") == 1, err
    assert "fine-tuning regression" in err and "fine-tuning classification" not in err


def test_many_classes_with_many_rows_each_are_kept(tmp_path):
    """20 classes on 2,000 rows (and a small set with a few classes) are classes; an id column is not."""
    many = [{"sentence": f"text {i}", "label": f"class{i % MANY_CLASSES}", "idx": str(i)} for i in range(2000)]
    path = write_table(tmp_path / "many.tsv", many)
    task = ClassificationTask()
    task.fit_labels(task.read(path, training=True).examples)
    assert task.num_labels == MANY_CLASSES
    small = write_table(tmp_path / "small.tsv", [{"sentence": f"t {i}", "label": str(i)} for i in range(MANY_CLASSES)])
    assert len(ClassificationTask().read(small, training=True).examples) == MANY_CLASSES
    with pytest.raises(DataError, match="'idx' has 2000 distinct values in 2000 rows"):
        ClassificationTask(label_column="idx").read(path, training=True)
    # Read for prediction or evaluation, any column may be the label: nothing is refused there.
    assert len(ClassificationTask(label_column="idx").read(path).examples) == 2000


@pytest.mark.skipif(not (DATA / "glue" / "RTE").is_dir(), reason="../shared/data/glue is absent")
def test_glue_mistakes_are_refused(encoder_dir, tmp_path, capsys):
    args = ["finetune", "--task", "classification", "--model", encoder_dir, "-o", tmp_path / "out", *QUICK]
    code, err = run_cli([*args, "--train", DATA / "glue/RTE/train.tsv", "--label-column", "idx"], capsys)
    assert code == 2 and "label column 'idx' has 2490 distinct values in 2490 rows" in err, err
    code, err = run_cli([*args, "--train", DATA / "glue/STS-B/train.tsv"], capsys)
    assert code == 2 and "label column 'score' holds scores" in err and "--task regression" in err, err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ columns without a header
@pytest.mark.parametrize("label_first", [False, True])
def test_two_headerless_columns_are_text_and_label_and_said(encoder_dir, tmp_path, capsys, label_first):
    table = [(r["sentence"], r["label"]) for r in rows(16)]
    train = tmp_path / "train.tsv"
    train.write_text("".join("\t".join(row[::-1] if label_first else row) + "\n" for row in table))
    args = ["finetune", "-t", "classification", "-m", encoder_dir, "--train", train, "-o", tmp_path / "o", *QUICK]
    code, err = run_cli([*args, "--no-header"], capsys)
    assert code == 0, err
    text, label = ("1", "0") if label_first else ("0", "1")
    said = [line for line in err.splitlines() if "two columns without a header" in line]
    assert len(said) == 1 and f"column {text} is the text and column {label} the label" in said[0], err
    assert "--text-column and --label-column choose otherwise" in said[0]
    assert "labels: 2 classes: neg (8 rows), pos (8 rows)" in err


@pytest.mark.parametrize("suffix", [".tsv", ".csv"])
def test_every_missing_column_is_named_in_one_error(encoder_dir, tmp_path, capsys, suffix):
    sep = "\t" if suffix == ".tsv" else ","
    train = tmp_path / f"train{suffix}"
    train.write_text("".join(sep.join([r["sentence"], r["idx"], r["label"]]) + "\n" for r in rows(12)))
    args = ["finetune", "-t", "classification", "-m", encoder_dir, "--train", train, "-o", tmp_path / "o", *QUICK]
    code, err = run_cli([*args, "--no-header"], capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert "no text column" in err and "no label column" in err
    assert "columns are '0', '1', '2'; name them with --text-column and --label-column" in err
    code, err = run_cli([*args, "--no-header", "--text-column", "0", "--label-column", "2"], capsys)
    assert code == 0, err
