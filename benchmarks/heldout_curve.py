"""The held-out curve of a finished pre-training run, as a result file: every evaluation, where the loss was
lowest, whether it rose after that, how the run ended, the run's options and the machine.

    python benchmarks/heldout_curve.py runs/demo/pretrain --note "bertkit demo, 2 threads" \
        --output benchmarks/results/demo_heldout.json

Reads ``RUN/metrics.jsonl`` and ``RUN/pretrain_config.json`` as ``bertkit pretrain`` writes them. The load
average is the one at collection time; ``--note`` records how loaded the machine was while the run ran.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import smoke_inputs
from harness import RESULTS, add_options, output_path, smoke_folder, write_json
from machine_info import machine


def curve(run: Path, note: str) -> dict:
    """The held-out evaluations of the run at ``run`` and what they say, with its options and this machine."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    evals = [r for r in records if r.get("split") == "eval"]
    train = [r for r in records if r.get("split") == "train"]
    if not evals:
        raise SystemExit(f"{run}: no held-out evaluation in metrics.jsonl")
    best = min(evals, key=lambda r: r["loss"])
    after = [r["loss"] for r in evals if r["step"] > best["step"]]
    return {
        "run": str(run),
        "note": note,
        "options": json.loads((run / "pretrain_config.json").read_text(encoding="utf-8")),
        "updates": train[-1]["step"] if train else None,
        "elapsed_s": train[-1].get("elapsed_s") if train else None,
        "best": {"step": best["step"], "loss": best["loss"], "mlm_acc": best["mlm_acc"], "nsp_acc": best["nsp_acc"]},
        "last": {k: evals[-1][k] for k in ("step", "loss", "mlm_acc", "nsp_acc")},
        "rise_after_best": (max(after) - best["loss"]) if after else 0.0,
        "eval": [{k: r[k] for k in ("step", "loss", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc")} for r in evals],
        "machine": machine(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, nargs="?", help="a pre-training run folder (required but with --smoke)")
    parser.add_argument("--note", default="")
    add_options(parser, "result file (required but with --smoke)")
    args = parser.parse_args(argv)
    if args.smoke:  # a few updates of a tiny model on a slice of a shipped book
        args.run = smoke_inputs.pretraining_run(smoke_folder())
    elif args.run is None or args.output is None:
        parser.error("RUN and --output are required")
    result = curve(args.run, args.note)
    write_json(output_path(args, RESULTS / "heldout.json"), result)
    print(json.dumps({k: result[k] for k in ("updates", "best", "last", "rise_after_best")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
