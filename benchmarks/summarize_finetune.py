"""Summarise ``bench_finetune.py`` result files: per task, the main dev metric of each system over seeds
(mean, sample standard deviation, every seed) and the per-epoch speed ratio.

    python benchmarks/summarize_finetune.py benchmarks/results/finetune_full_rte.json \
        benchmarks/results/finetune_full_mrpc.json benchmarks/results/finetune_full_stsb.json

A system's metrics for a seed are those of its dev evaluation with the best main metric (the epoch
fine-tuning keeps). Runs
bounded by ``--max-steps`` or ``--max-train-examples`` are left out. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from harness import RESULTS, add_options, output_path

# Metrics the benchmarks also report besides the main one (GLUE: MRPC accuracy/F1, STS-B Pearson/Spearman).
ALSO = {"mrpc": ["f1"], "stsb": ["spearman"], "squad": ["exact_match"]}


def best(system: dict, main: str, metric: str) -> float | None:
    """``metric`` at the evaluation with the best ``main`` metric (the checkpoint fine-tuning keeps)."""
    evaluations = [e for e in system.get("evaluations", []) if main in e and metric in e]
    return max(evaluations, key=lambda e: e[main])[metric] if evaluations else None


def spread(values: list[float]) -> str:
    """Mean ± sample standard deviation (every seed's value), or the one value."""
    if not values:
        return ""
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    seeds = " / ".join(f"{v:.3f}" for v in values)
    return f"{mean:.3f} ± {sd:.3f} ({seeds})" if len(values) > 1 else f"{mean:.3f}"


def table(files: list[Path]) -> list[str]:
    """The markdown table of the runs in ``files``: a row per task and metric."""
    runs: dict[str, list[dict]] = defaultdict(list)
    for path in files:
        for run in json.loads(path.read_text())["runs"]:
            if run.get("max_steps") is None and run.get("max_train_examples") is None:
                runs[run["task"]].append(run)
    rows = [
        "| task | metric | seeds | bertkit | peer | speed per epoch (peer s / bertkit s) |",
        "|---|---|---|---|---|---|",
    ]
    for task, entries in runs.items():
        entries.sort(key=lambda r: r["seed"])
        ratios = [r["speedup_per_epoch"] for r in entries if r.get("speedup_per_epoch")]
        speed = f"{statistics.fmean(ratios):.2f}x ({' / '.join(f'{x:.2f}' for x in ratios)})" if ratios else ""
        main = entries[0]["main_metric"]
        for metric in [main, *ALSO.get(task, [])]:
            ours = [best(r["bertkit"], main, metric) for r in entries]
            peer = [best(r["peer"], main, metric) for r in entries if "peer" in r]
            rows.append(
                f"| {task} | {metric} | {', '.join(str(r['seed']) for r in entries)} | "
                f"{spread([v for v in ours if v is not None])} | {spread([v for v in peer if v is not None])} | "
                f"{speed} |"
            )
            speed = ""
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "files", nargs="*", type=Path, help="bench_finetune.py result files (required but with --smoke)"
    )
    add_options(parser, "also write the table to this markdown file")
    args = parser.parse_args(argv)
    if args.smoke:  # the measured GLUE files: a reader that no longer understands them shows up here
        args.files = [RESULTS / f"finetune_full_{task}.json" for task in ("rte", "mrpc", "stsb")]
    elif not args.files:
        parser.error("give at least one result file")
    rows = table(args.files)
    print("\n".join(rows))
    if args.output or args.smoke:
        path = output_path(args, Path("finetune_summary.md"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
