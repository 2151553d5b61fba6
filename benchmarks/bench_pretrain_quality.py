"""Pre-training quality run: a `mini` BERT on the shared Gutenberg corpus for a fixed wall-clock budget.

The documented CLI end to end, as a user runs it: learn a WordPiece vocabulary on the corpus, prepare
MLM+NSP data (static masks), pre-train for ``--budget``, then ask the pre-trained model to fill masks in
sentences it has not seen. Records the held-out MLM/NSP curve, the final held-out metrics and the fill-mask
answers in ``benchmarks/results/pretrain_quality.json`` and copies the curves PNG next to it.

    python benchmarks/bench_pretrain_quality.py --budget 60m --threads 1
    python benchmarks/bench_pretrain_quality.py --smoke   # a tiny model, a few updates, on a shipped book
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

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, smoke_folder, write_json
from machine_info import machine

CORPUS = SHARED / "gutenberg" / "books"

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


def bertkit(*args: str, env: dict, smoke: bool = False) -> None:
    """``bertkit ARGS`` as a user runs it, in a fresh process (a smoke run: in this one, to skip the start-up)."""
    print("$ bertkit " + " ".join(args), flush=True)
    if smoke:
        smoke_inputs.bertkit(*args)
    else:
        subprocess.run([sys.executable, "-m", "bertkit", *args], check=True, env=env)


def prepare(args: argparse.Namespace, corpus: Path, work: Path, env: dict, timings: dict) -> None:
    # A smoke run's corpus is a slice of one book: it needs a larger share held out to hold any.
    held_out = ["--eval-fraction", "0.3", "--eval-unit-sentences", "40"] if args.smoke else []
    started = time.perf_counter()
    bertkit(
        "tokenizer", "train", "--input", str(corpus), "--vocab-size", str(args.vocab_size),
        "--output", str(work / "tokenizer"), env=env, smoke=args.smoke,
    )  # fmt: skip
    timings["vocabulary_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    bertkit(
        "prepare-data", "--input", str(corpus), "--tokenizer", str(work / "tokenizer"), "--output", str(work / "data"),
        "--max-seq-length", str(args.max_seq_length), "--dupe-factor", "1", "--seed", "1", "--workers", "1", "--quiet",
        *held_out, env=env, smoke=args.smoke,
    )  # fmt: skip
    timings["prepare_seconds"] = round(time.perf_counter() - started, 1)


def pretrain(args: argparse.Namespace, work: Path, env: dict, timings: dict) -> None:
    # A smoke run stops after a few updates instead of at the time budget, and evaluates every other one.
    every = {"eval": "2", "batches": "2", "save": "4", "log": "1"} if args.smoke else {}
    smoke = ["--max-steps", "4", "--no-plot", "--report-to", "none", "--peak-flops", "1e11"] if args.smoke else []
    started = time.perf_counter()
    bertkit(
        "pretrain", "--data", str(work / "data"), "--model-config", args.model, "--output", str(work / "run"),
        "--micro-batch-size", str(args.micro_batch_size), "--lr", str(args.lr), "--warmup-ratio", "0.05",
        "--max-time", args.budget, "--eval-every", every.get("eval", "250"),
        "--eval-batches", every.get("batches", "50"), "--save-every", every.get("save", "500"),
        "--log-every", every.get("log", "25"), "--seed", "1", "--precision", "fp32", "--no-progress", *smoke,
        env=env, smoke=args.smoke,
    )  # fmt: skip
    timings["pretrain_seconds"] = round(time.perf_counter() - started, 1)


def parse(argv: list[str] | None) -> argparse.Namespace:
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
    add_options(parser, "result file (default benchmarks/results/pretrain_quality.json)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.vocab_size, args.max_seq_length, args.micro_batch_size = "tiny", 800, 32, 4
        args.workdir, args.reuse_data = str(smoke_folder()), False
    return args


def fill_masks(final: Path) -> list[dict]:
    from bertkit.inference import fill_mask

    answers = fill_mask(PROBES, str(final), top_k=5)
    return [
        {"text": text, "top5": [{"token": c.text, "score": round(c.score, 4)} for c in per_text[0]]}
        for text, per_text in zip(PROBES, answers)
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    corpus = smoke_inputs.corpus_slice(Path(args.workdir) / "corpus") if args.smoke else CORPUS
    if not corpus.is_dir():
        sys.exit(f"no corpus at {corpus}")
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    work = Path(args.workdir)
    timings: dict[str, float] = {}
    if args.reuse_data and (work / "data" / "dataset.json").is_file():
        shutil.rmtree(work / "run", ignore_errors=True)
    else:
        shutil.rmtree(work / "tokenizer", ignore_errors=True)
        shutil.rmtree(work / "data", ignore_errors=True)
        shutil.rmtree(work / "run", ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        prepare(args, corpus, work, env, timings)
    pretrain(args, work, env, timings)
    fills = fill_masks(work / "run" / "final")
    metrics = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines() if line]
    evals = [
        {k: v for k, v in m.items() if k in ("step", "mlm_acc", "nsp_acc", "mlm_loss", "nsp_loss")}
        for m in metrics
        if m.get("split") == "eval"
    ]
    data_meta = json.loads((work / "data" / "dataset.json").read_text())
    result = {
        "command": " ".join(["python", "benchmarks/bench_pretrain_quality.py", *(argv or sys.argv[1:])]),
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
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
    out = write_json(output_path(args, RESULTS / "pretrain_quality.json"), result)
    curves = work / "run" / "curves.png"
    if curves.exists():
        shutil.copyfile(curves, out.with_name(out.stem + "_curves.png"))
    print(json.dumps({"final_eval": result["final_eval"], "updates": result["updates"]}, indent=1))
    for fill in fills:
        print(fill["text"], "->", ", ".join(c["token"] for c in fill["top5"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
