"""The demo from start to end: each stage in order, then the report."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.finetuning import polarity, punctuation
from bertkit.demo.pretraining import run_pretraining
from bertkit.demo.records import DemoResults
from bertkit.demo.reference import reference_pair
from bertkit.demo.report import render_report
from bertkit.demo.vocabulary import learn_vocabulary
from bertkit.errors import BertkitError
from bertkit.io import atomic_write_text
from bertkit.notices import notice


def run_demo(config: DemoConfig) -> Path:
    """Run every stage; returns the path of the report."""
    _check_inputs(config)
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    vocabulary = learn_vocabulary(config, out)
    pretraining, fill_mask = run_pretraining(config, vocabulary, out)
    polarity_runs = polarity(config, pretraining)
    punctuation_runs = punctuation(config, pretraining, out)
    reference = reference_pair(config, out)
    results = DemoResults(pretraining, fill_mask, polarity_runs, punctuation_runs, reference)

    report = render_report(config, results, out)
    path = out / "report.md"
    atomic_write_text(path, report)
    notice(f"demo: report: {path}")
    return path


def _check_inputs(config: DemoConfig) -> None:
    """Every file the demo reads exists, before it replaces the output directory."""
    given = [*config.corpus, config.labeled_train, config.labeled_dev]
    if config.punctuation_text:
        given.append(config.punctuation_text)
    for path in given:
        if not Path(path).exists():
            raise BertkitError(f"{path} does not exist; run the demo from the repository root or pass its path")
