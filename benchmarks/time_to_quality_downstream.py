"""``bench_time_to_quality --downstream``: each side's final weights fine-tuned on the demo's tasks, and the
scores merged into a result file."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

from bertkit.config import BertConfig
from bertkit.demo.demo_config import DemoConfig, DemoScale
from bertkit.demo.finetuning import Recipe, finetune_once, polarity_recipe, punctuation_task
from bertkit.models.bert import BertForPreTraining
from bertkit.tokenizer import Tokenizer
from bertkit.weights import save_pretrained
from harness import ROOT, scratch_folder, write_json
from machine_info import machine

# ------------------------------------------------------------------------------------------ downstream
RANDOM_INIT = "random init"
TASKS = {"polarity": "accuracy", "punctuation": "f1"}
"""The demo's two fine-tuning tasks and the dev metric each is scored by (punctuation: F1 of the marks)."""


def folder_of(models: Path, side: str) -> Path:
    return models / side.replace(" ", "-")


def keep_model(setup: Any, side: str, model: Any) -> Path:
    """``side``'s weights as a model directory with the benchmark's tokenizer: bertkit's ``save_pretrained`` for
    a bertkit model; for a transformers one its own ``save_pretrained`` and the tokenizer files it trained with
    (a Hugging Face layout, which bertkit loads)."""
    assert setup.models is not None
    folder = folder_of(setup.models, side)
    if side.startswith("hf-"):
        from transformers import BertTokenizerFast

        model.save_pretrained(folder)
        BertTokenizerFast(str(setup.tokenizer_dir / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    else:
        save_pretrained(model, folder, tokenizer=Tokenizer.from_pretrained(setup.tokenizer_dir))
    return folder


def keep_random_init(setup: Any) -> Path:
    """The network every side trains, at random initialisation (seeded by ``--seed``): the baseline row."""
    torch.manual_seed(setup.args.seed)
    return keep_model(setup, RANDOM_INIT, BertForPreTraining(BertConfig.load(setup.model_config)))


def demo_config(args: argparse.Namespace, work: Path) -> DemoConfig:
    """The demo's fine-tuning recipe (``DemoConfig``'s defaults) with the sizes given on the command line."""
    dev = ROOT / "data" / "polarity" / "dev.tsv"
    if args.polarity_dev_examples:  # a smoke run: the first rows of the dev file
        rows = dev.read_text(encoding="utf-8").splitlines(keepends=True)[: args.polarity_dev_examples + 1]
        dev = work / "polarity-dev.tsv"
        dev.write_text("".join(rows), encoding="utf-8")
    sizes = {
        "finetune_examples": args.polarity_examples,
        "finetune_epochs": args.polarity_epochs,
        "punctuation_examples": args.punctuation_examples,
        "punctuation_epochs": args.punctuation_epochs,
    }
    dev_windows = {"punctuation_dev_examples": args.punctuation_dev_examples} if args.punctuation_dev_examples else {}
    return DemoConfig(
        labeled_train=str(ROOT / "data" / "polarity" / "train.tsv"),
        labeled_dev=str(dev),
        output=str(work),
        punctuation_text=str(ROOT / "data" / "punctuation"),
        reference_model=None,
        finetune_seeds=tuple(args.downstream_seeds),
        threads=args.threads,
        scale=DemoScale(finetune_curves=False, **dev_windows),
        **{name: value for name, value in sizes.items() if value is not None},
    )


def fine_tune_side(config: DemoConfig, side: str, start: Path, task: str, recipe: Recipe) -> dict[str, Any]:
    """``start`` fine-tuned on ``task`` with each seed: each seed's dev score after the last epoch (not the best
    epoch's, which ``FinetuneResult.metrics`` holds: the dev set picks nothing), their mean and sample sd."""
    scores, seconds, examples = [], [], 0
    for seed in config.finetune_seeds:
        run = finetune_once(config, f"{task} {side}", start, seed, recipe)
        scores.append(round(float(run.evaluations[-1][TASKS[task]]), 5))
        seconds.append(round(run.train_seconds, 1))
        examples = run.num_train_examples
    print(f"{side} {task}: {TASKS[task]} {scores}", flush=True)
    row = {"seeds": list(config.finetune_seeds), "scores": scores, "train_seconds": seconds}
    return with_stats({**row, "train_examples": examples})


def with_stats(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the mean and the sample sd of its scores."""
    scores = row["scores"]
    sd = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return {**row, "mean": round(statistics.mean(scores), 5), "sd": round(sd, 5)}


def downstream(args: argparse.Namespace, models: Path, sides: list[str]) -> dict[str, Any]:
    """Every kept model and the random start fine-tuned on the demo's tasks (``--downstream-tasks``), the same
    way: the scores, the settings and the command."""
    order = [*sides, RANDOM_INIT]
    starts = {side: folder_of(models, side) for side in order if (folder_of(models, side) / "config.json").is_file()}
    work = scratch_folder("bertkit-ttq-downstream-")
    config = demo_config(args, work)
    recipes: dict[str, Recipe] = {}
    settings: dict[str, Any] = {
        "seeds": list(config.finetune_seeds),
        "batch": config.finetune_batch_size,
        "max_seq_length": config.finetune_max_seq_length,
    }
    if "polarity" in args.downstream_tasks:
        recipes["polarity"] = polarity_recipe(config)
        dev_rows = len(Path(config.labeled_dev).read_text(encoding="utf-8").splitlines()) - 1
        settings["polarity"] = {"train": "data/polarity/train.tsv", "dev_examples": dev_rows}
    if "punctuation" in args.downstream_tasks:
        task = punctuation_task(config, work)
        assert task is not None
        splits, recipes["punctuation"] = task
        settings["punctuation"] = {"text": "data/punctuation", "train_examples": splits.train_examples,
                                   "dev_examples": splits.dev_examples, "tag_counts": splits.tag_counts}  # fmt: skip
    for name, recipe in recipes.items():
        settings[name].update({k: v for k, v in dataclasses.asdict(recipe).items() if not k.endswith("_file")})
    results = {side: {name: fine_tune_side(config, side, start, name, r) for name, r in recipes.items()}
               for side, start in starts.items()}  # fmt: skip
    command = "python benchmarks/bench_time_to_quality.py " + shlex.join(args.argv)
    run = {"command": command, "machine": machine(), "note": args.note, "tasks": list(recipes)}
    return {"settings": settings, "results": results, "runs": [run]}


def merge_downstream(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` scores beside ``old`` ones, by task and seed (new wins): fine-tuning split into commands, one
    for some tasks or seeds each."""
    if old is None:
        return new
    for side, row in new["results"].items():
        for task, scores in row.items():
            before = old["results"].setdefault(side, {}).get(task)
            if before is not None:
                kept = [i for i, seed in enumerate(before["seeds"]) if seed not in scores["seeds"]]
                scores = {**scores, **{k: [before[k][i] for i in kept] + scores[k] for k in ("seeds", "scores", "train_seconds")}}  # fmt: skip
            old["results"][side][task] = with_stats(scores)
    seeds = sorted({*old["settings"]["seeds"], *new["settings"]["seeds"]})
    old["settings"].update({**new["settings"], "seeds": seeds})
    old["runs"] += new["runs"]
    return old


def downstream_only(args: argparse.Namespace, sides: list[str]) -> int:
    """Fine-tune the models kept by an earlier run in ``--keep-models`` and add the scores to its ``--output``
    (beside those of the other task, where another command added them)."""
    import fcntl

    if not (args.keep_models and args.output and Path(args.output).is_file()):
        raise SystemExit("--downstream-only needs --keep-models DIR and --output RESULT of the run that kept them")
    path = Path(args.output)
    scores = downstream(args, Path(args.keep_models), sides)
    with open(
        Path(tempfile.gettempdir()) / f"{path.name}.lock", "w"
    ) as lock:  # two commands, one task each, may end together
        fcntl.flock(lock, fcntl.LOCK_EX)
        payload = json.loads(path.read_text(encoding="utf-8"))
        payload["downstream"] = merge_downstream(payload.get("downstream"), scores)
        write_json(path, payload)
    print(json.dumps({side: {k: v["mean"] for k, v in row.items()} for side, row in scores["results"].items()}))
    return 0


def downstream_options(parser: argparse.ArgumentParser) -> None:
    """The fine-tuning of ``--downstream``; a size left out is the demo's (``DemoConfig``)."""
    parser.add_argument(
        "--downstream", action="store_true", help="fine-tune each side's final weights on the demo's tasks"
    )
    parser.add_argument(
        "--downstream-only",
        action="store_true",
        help="only fine-tune the models in --keep-models; the scores go into --output (which must exist)",
    )
    parser.add_argument("--keep-models", default=None, help="folder to keep each side's final weights in")
    parser.add_argument("--downstream-seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--downstream-tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--polarity-examples", type=int, default=None, help="training sentences (default: all)")
    parser.add_argument("--polarity-dev-examples", type=int, default=None, help="dev sentences (default: all)")
    parser.add_argument("--polarity-epochs", type=float, default=None, help="default: the demo's")
    parser.add_argument("--punctuation-examples", type=int, default=None, help="training windows (default: the demo's)")
    parser.add_argument("--punctuation-dev-examples", type=int, default=None, help="dev windows (default: the demo's)")
    parser.add_argument("--punctuation-epochs", type=float, default=None, help="default: the demo's")  # fmt: skip
