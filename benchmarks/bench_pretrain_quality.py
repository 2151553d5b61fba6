"""Pre-training quality run: a `mini` BERT on the shared Gutenberg corpus for a fixed wall-clock budget.

The documented CLI end to end, as a user runs it: learn a WordPiece vocabulary on the corpus, prepare
MLM+NSP data (static masks), pre-train for ``--budget``, then ask the pre-trained model to fill masks in
sentences it has not seen. Records the held-out MLM/NSP curve, the final held-out metrics and the fill-mask
answers in ``benchmarks/results/pretrain_quality.json`` and copies the curves PNG next to it.

    python benchmarks/bench_pretrain_quality.py --budget 60m --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from machine_info import machine

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "gutenberg" / "books"
RESULTS = ROOT / "benchmarks" / "results"

# Sentences written for this benchmark (not from the corpus), one [MASK] each.
PROBES = [
    "the old man sat down by the [MASK] and warmed his hands.",
    "she was the most beautiful [MASK] he had ever seen.",
    "they walked for many miles until they came to a small [MASK].",
    "he took off his [MASK] and bowed to the lady.",
    "it was a cold and dark [MASK] in december.",
    "the ship sailed across the [MASK] to england.",
    "i shall never [MASK] the day we first met.",
    "the king sent his [MASK] to fight the enemy.",
]


def bertkit(*args: str, env: dict) -> None:
    command = [sys.executable, "-m", "bertkit", *args]
    print("$ bertkit " + " ".join(args), flush=True)
    subprocess.run(command, check=True, env=env)


def prepare(args, work: Path, env: dict, timings: dict) -> None:
    started = time.perf_counter()
    bertkit(
        "tokenizer",
        "train",
        "--input",
        str(CORPUS),
        "--vocab-size",
        str(args.vocab_size),
        "--output",
        str(work / "tokenizer"),
        env=env,
    )
    timings["vocabulary_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    bertkit(
        "prepare-data",
        "--input",
        str(CORPUS),
        "--tokenizer",
        str(work / "tokenizer"),
        "--output",
        str(work / "data"),
        "--max-seq-length",
        str(args.max_seq_length),
        "--dupe-factor",
        "1",
        "--seed",
        "1",
        "--workers",
        "1",
        "--quiet",
        env=env,
    )
    timings["prepare_seconds"] = round(time.perf_counter() - started, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", default="60m", help="pre-training wall-clock budget (--max-time)")
    parser.add_argument("--model", default="mini")
    parser.add_argument("--vocab-size", type=int, default=16000)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--micro-batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--workdir", default="runs/pretrain-quality")
    parser.add_argument(
        "--reuse-data",
        action="store_true",
        help="keep the vocabulary and data of an earlier run in --workdir (pre-train again only)",
    )
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"no corpus at {CORPUS}")
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    work = Path(args.workdir)
    timings = {}
    if args.reuse_data and (work / "data" / "dataset.json").is_file():
        shutil.rmtree(work / "run", ignore_errors=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        prepare(args, work, env, timings)

    started = time.perf_counter()
    bertkit(
        "pretrain",
        "--data",
        str(work / "data"),
        "--model-config",
        args.model,
        "--output",
        str(work / "run"),
        "--micro-batch-size",
        str(args.micro_batch_size),
        "--lr",
        str(args.lr),
        "--warmup-ratio",
        "0.05",
        "--max-time",
        args.budget,
        "--eval-every",
        "250",
        "--eval-batches",
        "50",
        "--save-every",
        "500",
        "--log-every",
        "25",
        "--seed",
        "1",
        "--precision",
        "fp32",
        "--no-progress",
        env=env,
    )
    timings["pretrain_seconds"] = round(time.perf_counter() - started, 1)

    from bertkit.inference import fill_mask

    final = work / "run" / "final"
    answers = fill_mask(PROBES, str(final), top_k=5)
    fills = [
        {"text": text, "top5": [{"token": c.text, "score": round(c.score, 4)} for c in per_text[0]]}
        for text, per_text in zip(PROBES, answers)
    ]
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines() if line]
    evals = [
        {k: v for k, v in m.items() if k in ("step", "mlm_acc", "nsp_acc", "mlm_loss", "nsp_loss")}
        for m in metrics
        if m.get("split") == "eval"
    ]
    data_meta = json.loads((work / "data" / "dataset.json").read_text())
    result = {
        "command": " ".join(["python", "benchmarks/bench_pretrain_quality.py", *sys.argv[1:]]),
        "settings": vars(args),
        "timings": timings,
        "machine": machine() | ({"torch_threads": args.threads} if args.threads else {}),
        "data": {
            split: {k: info.get(k) for k in ("num_instances", "num_tokens")}
            for split, info in data_meta.get("splits", {}).items()
        },
        "updates": max((m.get("step", 0) for m in metrics), default=0),
        "eval_curve": evals,
        "final_eval": evals[-1] if evals else None,
        "fill_mask": fills,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pretrain_quality.json").write_text(json.dumps(result, indent=1) + "\n")
    curves = work / "run" / "curves.png"
    if curves.exists():
        shutil.copyfile(curves, RESULTS / "pretrain_quality_curves.png")
    print(json.dumps({"final_eval": result["final_eval"], "updates": result["updates"]}, indent=1))
    for fill in fills:
        print(fill["text"], "->", ", ".join(c["token"] for c in fill["top5"]))


if __name__ == "__main__":
    main()
