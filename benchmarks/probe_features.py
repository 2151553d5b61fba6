"""Linear probe: how much of a labeled task a model's frozen features already hold.

Each model embeds the training and dev sentences (``bertkit.inference.embed``; the [CLS] state of the last
layer, or the mean over tokens of a chosen layer). A logistic regression, trained on the standardised
training features, is scored on the dev sentences. Pre-training that taught the network something the
task needs shows up as a probe above the same network at random initialisation; fine-tuning cannot be
expected to find what the features lack.

    bertkit demo --output runs/demo
    python benchmarks/probe_features.py --model pre-trained=runs/demo/pretrain/final \
        --model random=runs/demo/random-init --examples 500,2000,all
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import torch

import smoke_inputs
from bertkit.inference import embed
from bertkit.tasks.classification import ClassificationTask
from harness import RESULTS, add_options, output_path, smoke_folder, write_json
from machine_info import machine

FEATURES = {"cls-last": ("cls", -1), "mean-last": ("mean", -1), "mean-embeddings": ("mean", 0)}


def logistic_probe(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    dev_x: torch.Tensor,
    dev_y: torch.Tensor,
    classes: int,
    l2: float = 1e-3,
    steps: int = 200,
) -> float:
    """Dev accuracy of an L2-regularised multinomial logistic regression fitted by L-BFGS."""
    mean, std = train_x.mean(0), train_x.std(0) + 1e-6
    train_x, dev_x = (train_x - mean) / std, (dev_x - mean) / std
    linear = torch.nn.Linear(train_x.shape[1], classes, dtype=torch.float64)
    optimizer = torch.optim.LBFGS(linear.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(train_x), train_y) + l2 * linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    with torch.no_grad():
        return (linear(dev_x).argmax(1) == dev_y).double().mean().item()


def features(examples: Sequence[Any], path: str, pooling: str, layer: int, max_length: int) -> torch.Tensor:
    rows = embed([e.text for e in examples], path, pooling=pooling, layers=(layer,), max_length=max_length)
    return torch.from_numpy(rows).double()


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", help="NAME=DIR (repeat; required but with --smoke)")
    parser.add_argument("--train", default="data/polarity/train.tsv")
    parser.add_argument("--dev", default="data/polarity/dev.tsv")
    parser.add_argument("--examples", default="500,2000,all", help="training sizes: the first N sentences")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    add_options(parser, "JSON file for the results")
    args = parser.parse_args(argv)
    if args.smoke:  # two random-init tiny models, a few sentences of the shipped polarity set
        work = smoke_folder()
        train, dev = smoke_inputs.polarity_slice(work / "data", train=32, dev=16)
        models = {name: smoke_inputs.tiny_model(work / name, "BertModel", seed=seed) for seed, name in enumerate("ab")}
        args.model = [f"{name}={path}" for name, path in models.items()]
        args.train, args.dev, args.examples, args.max_length = str(train), str(dev), "8,all", 32
    elif not args.model:
        parser.error("--model is required")
    return args


def probe(args: argparse.Namespace) -> list[dict]:
    task = ClassificationTask()
    train, dev = task.read(args.train).examples, task.read(args.dev).examples
    labels = sorted({str(example.label) for example in train})
    index = {label: i for i, label in enumerate(labels)}
    train_y = torch.tensor([index[str(e.label)] for e in train])
    dev_y = torch.tensor([index[str(e.label)] for e in dev])
    sizes = [len(train) if s == "all" else min(int(s), len(train)) for s in args.examples.split(",")]
    results = []
    for spec in args.model:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit(f"--model wants NAME=DIR, got {spec!r}")
        for feature, (pooling, layer) in FEATURES.items():
            train_x, dev_x = (features(examples, path, pooling, layer, args.max_length) for examples in (train, dev))
            for size in sizes:
                accuracy = logistic_probe(train_x[:size], train_y[:size], dev_x, dev_y, len(labels))
                results.append({"model": name, "features": feature, "train_examples": size, "dev_accuracy": accuracy})
                print(f"{name:>12}  {feature:<16} n={size:<6} dev accuracy {accuracy:.3f}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    results = probe(args)
    if args.output or args.smoke:
        record = {
            "command": "python " + " ".join(["benchmarks/probe_features.py", *(argv or sys.argv[1:])]),
            "machine": machine(),
            "train": args.train,
            "dev": args.dev,
            "results": results,
        }
        write_json(output_path(args, RESULTS / "probe.json"), record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
