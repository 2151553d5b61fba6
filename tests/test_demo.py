"""The demo end to end, shrunk: every stage runs on tiny inputs (one book, a few hundred labeled sentences) at
the smoke scale (a few updates and held-out batches), so the report's sections and files are all there."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not (ROOT / "data" / "corpus" / "11-0.txt").is_file(), reason="the shipped corpus is absent")
def test_demo_runs_and_reports_the_comparison(tmp_path, caplog, capsys):
    from bertkit.demo import DemoConfig, DemoScale, run_demo

    config = DemoConfig(
        corpus=str(ROOT / "data" / "corpus" / "11-0.txt"),
        labeled_train=str(head(ROOT / "data" / "polarity" / "train.tsv", 200, tmp_path / "train.tsv")),
        labeled_dev=str(head(ROOT / "data" / "polarity" / "dev.tsv", 40, tmp_path / "dev.tsv")),
        punctuation_text=str(ROOT / "data" / "punctuation" / "219-0.txt.gz"),
        output=str(tmp_path / "demo"),
        vocab_size=2000,
        model="tiny",
        pretrain_time="60s",  # the cap of 10 updates ends it first, even on a loaded machine
        finetune_examples=64,
        finetune_seeds=(1, 2),
        finetune_epochs=1.0,
        threads=1,
        task_text=True,
        pretrain_dropout=0.0,
        reference_examples=32,
        reference_epochs=1.0,
        punctuation_examples=48,
        punctuation_epochs=1.0,
        pretrain_eval_every=5,
        recipe="modern",
        scale=DemoScale.smoke(),
    )
    with caplog.at_level(logging.INFO, logger="bertkit"):
        report = run_demo(config).read_text(encoding="utf-8")
    # the library logs its stages (a program silences or redirects them) and leaves stdout to the command
    stages = [r.getMessage() for r in caplog.records if r.name.startswith("bertkit.demo")]
    assert any(m.startswith("demo: pre-training stopped") for m in stages)
    assert any(m.startswith("demo: report: ") for m in stages)
    assert "[demo]" not in capsys.readouterr().out
    assert "pre-training recipe `modern`" in report
    assert "## Fill-mask, before and after pre-training" in report
    assert "## Fine-tuning on sentence polarity: pre-trained vs random initialisation" in report
    assert "64 labeled training sentences" in report
    own, reference_part = report.split("## The same comparison for a BERT pre-trained at scale")
    rows = [line for line in own.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2
    assert "| mean ± sd |" in report
    assert any(word in report for word in ("Pre-training helped", "did not help", "The result is mixed"))
    task_text = (tmp_path / "demo" / "task-text" / "train-sentences.txt").read_text(encoding="utf-8")
    assert task_text.startswith("because the film deliberately lacks irony")  # the first training sentence
    assert "\t" not in task_text and "positive" not in task_text.split("\n")  # labels dropped
    import json

    pretrained = json.loads((tmp_path / "demo" / "pretrain" / "final" / "config.json").read_text())
    assert pretrained["hidden_dropout_prob"] == pretrained["attention_probs_dropout_prob"] == 0.0
    assert pretrained["architectures"] == ["BertForMaskedLM"]  # the modern recipe: no next-sentence head
    assert pretrained["tie_word_embeddings"] is False and "output embeddings untied" in report  # the demo's default
    run_config = json.loads((tmp_path / "demo" / "pretrain" / "pretrain_config.json").read_text())
    assert run_config["train"]["schedule"] == "wsd"  # the recipe's learning-rate schedule
    for stage in ("pre-train", "fine-tune (pre-trained, seed 1)", "fine-tune (random init, seed 2)"):
        assert stage in config.timings
    # Punctuation restoration, built from books the pre-training did not read, the same two starts.
    punctuation = own.split("## Fine-tuning on punctuation restoration: pre-trained vs random initialisation")[1]
    assert "48 training and 64 dev windows of 30 words" in punctuation  # 64: the smoke scale's dev windows
    assert len([line for line in punctuation.splitlines() if line.startswith(("| seed 1 |", "| seed 2 |"))]) == 2
    assert "F1 points" in punctuation and "| question |" in punctuation
    assert (tmp_path / "demo" / "punctuation" / "train.conll").is_file()
    for stage in ("fine-tune (punctuation pre-trained, seed 1)", "fine-tune (punctuation random init, seed 2)"):
        assert stage in config.timings
    # Fine-tuning starts from the checkpoint with the best held-out loss, exported with its tokenizer.
    assert (tmp_path / "demo" / "pretrain" / "best" / "vocab.txt").is_file()
    assert "Fine-tuning starts from the checkpoint with the best held-out loss" in report
    assert "stopped by the 60s time budget" in report or "stopped by the cap of" in report
    assert "stopped by the cap of 10 updates" in report  # the smoke scale's cap ended it
    # The reference pair: all-MiniLM-L6-v2 (a dev dependency) against its architecture at random init.
    assert "all-MiniLM-L6-v2" in reference_part and "32 labeled training sentences, 1 epoch," in reference_part
    assert len([line for line in reference_part.splitlines() if line.startswith("| 1 |")]) == 1
    reference = json.loads((tmp_path / "demo" / "reference-random-init" / "config.json").read_text())
    assert (reference["num_hidden_layers"], reference["hidden_size"]) == (6, 384)
    assert (tmp_path / "demo" / "reference-random-init" / "vocab.txt").is_file()
    for stage in ("fine-tune (reference pre-trained, seed 1)", "fine-tune (reference random init, seed 1)"):
        assert stage in config.timings


def head(path: Path, rows: int, into: Path) -> Path:
    """The header and the first ``rows`` rows of a TSV file, written to ``into``."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    into.write_text("".join(lines[: rows + 1]), encoding="utf-8")
    return into


def test_demo_without_a_reference_model_skips_that_section(tmp_path):
    from bertkit.demo import reference_checkpoint
    from bertkit.errors import BertkitError

    assert reference_checkpoint(None) is None and reference_checkpoint("") is None
    with pytest.raises(BertkitError, match=r"no config\.json"):
        reference_checkpoint(str(tmp_path))
