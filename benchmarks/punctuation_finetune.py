"""Fine-tune one starting model on the demo's punctuation-restoration task; one JSON line per seed.

    python benchmarks/punctuation_finetune.py --model runs/demo/pretrain/best --data runs/demo/punctuation \
        --seeds 1,2,3 --epochs 5 --lr 1e-3 --output benchmarks/results/punctuation_pre.jsonl

``--data`` holds ``train.conll`` and ``dev.conll`` as ``bertkit.data.punctuation.build_punctuation_data`` writes
them (``bertkit demo`` leaves them in ``runs/demo/punctuation``). Each line: the model, seed, epochs, learning
rate, dev F1 of the marks after the last epoch (micro and per mark), F1 after each epoch, seconds, machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import torch

import smoke_inputs
from bertkit.training.finetune import FinetuneConfig, finetune
from harness import RESULTS, add_options, append_jsonl, output_path, smoke_folder
from machine_info import machine


def run(args: argparse.Namespace, seed: int) -> dict:
    """Fine-tune once with ``seed``: the record of the run."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        result = finetune(
            FinetuneConfig.from_options(
                task="ner",
                model=args.model,
                train_file=f"{args.data}/train.conll",
                dev_file=f"{args.data}/dev.conll",
                output=f"{work}/run",
                epochs=args.epochs,
                lr=args.lr,
                micro_batch_size=32,  # the demo's batch
                max_seq_length=64,
                seed=seed,
                precision="fp32",
                progress=False,
            )
        )
    last = result.evaluations[-1]
    return {
        "model": args.model,
        "seed": seed,
        "epochs": args.epochs,
        "lr": args.lr,
        **{k: last[k] for k in ("f1", "f1_COMMA", "f1_PERIOD", "f1_QUESTION") if k in last},
        "f1_per_epoch": [round(e["f1"], 4) for e in result.evaluations],
        "seconds": round(time.perf_counter() - started),
        "machine": machine(),
    }


def smoke_setup(args: argparse.Namespace) -> None:
    """A tiny model and a few windows of the shipped punctuated books, one epoch."""
    from bertkit.data.punctuation import build_punctuation_data

    work = smoke_folder()
    args.model = str(smoke_inputs.tiny_model(work / "model"))
    build_punctuation_data([str(smoke_inputs.PUNCTUATION)], work / "data", train_examples=16, dev_examples=8)
    args.data, args.seeds, args.epochs = str(work / "data"), "1", 1.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="starting model (required but with --smoke)")
    parser.add_argument("--data", help="folder with train.conll and dev.conll (required but with --smoke)")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--epochs", type=float, default=5.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    add_options(parser, "JSON lines file, one line per seed (required but with --smoke)")
    args = parser.parse_args(argv)
    if args.smoke:
        smoke_setup(args)
    elif not (args.model and args.data and args.output):
        parser.error("--model, --data and --output are required")
    torch.set_num_threads(args.threads)
    output = output_path(args, RESULTS / "punctuation.jsonl")
    for seed in (int(s) for s in args.seeds.split(",")):
        record = run(args, seed)
        append_jsonl(output, record)
        print(json.dumps({k: v for k, v in record.items() if k != "machine"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
