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
import tempfile
import time
from pathlib import Path

import torch

from bertkit.training.finetune import FinetuneConfig, finetune
from machine_info import machine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--epochs", type=float, default=5.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for seed in (int(s) for s in args.seeds.split(",")):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as work:
            run = finetune(
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
        last = run.evaluations[-1]
        record = {
            "model": args.model,
            "seed": seed,
            "epochs": args.epochs,
            "lr": args.lr,
            **{k: last[k] for k in ("f1", "f1_COMMA", "f1_PERIOD", "f1_QUESTION") if k in last},
            "f1_per_epoch": [round(e["f1"], 4) for e in run.evaluations],
            "seconds": round(time.perf_counter() - started),
            "machine": machine(),
        }
        with args.output.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        print(json.dumps({k: v for k, v in record.items() if k != "machine"}), flush=True)


if __name__ == "__main__":
    main()
