"""Training-step cost of padding: one MiniLM-shaped classifier step (forward + backward) on random batches of
mixed lengths, padded through every layer vs unpadded (``bertkit.model.Unpadded``), and on batches of the same
token count with no padding at all (what perfect length grouping would give).

    python benchmarks/bench_unpad.py --threads 1
"""

from __future__ import annotations

import argparse
import random
import time

import torch

from bertkit.config import BertConfig
from bertkit.model import BertForSequenceClassification


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        num_labels=1,
    )
    model = BertForSequenceClassification(config).train()
    rng = random.Random(0)
    # Pair lengths shaped like STS-B's (median about 30 tokens, a long tail), capped at 128.
    random_batches = [
        [min(128, max(8, int(rng.lognormvariate(3.4, 0.35)))) for _ in range(args.batch_size)]
        for _ in range(args.batches)
    ]
    no_padding = [[sum(b) // len(b)] * len(b) for b in random_batches]
    padding = 1 - sum(map(sum, random_batches)) / sum(max(b) * len(b) for b in random_batches)
    print(f"padding share of the random batches: {padding:.1%}")
    generator = torch.Generator().manual_seed(0)

    def tensors(lengths):
        ids = torch.randint(1000, 30000, (len(lengths), max(lengths)), generator=generator)
        mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
        return ids, mask

    def step(ids, mask) -> None:
        model(ids, attention_mask=mask, labels=torch.zeros(ids.shape[0])).loss.backward()

    def seconds_per_step(batches, unpad: bool) -> float:
        model.bert.unpad = unpad
        data = [tensors(b) for b in batches]
        step(*data[0])  # warm-up
        start = time.perf_counter()
        for ids, mask in data:
            step(ids, mask)
        return (time.perf_counter() - start) / len(data)

    for name, batches, unpad in [
        ("random, padded", random_batches, False),
        ("random, unpadded", random_batches, True),
        ("same tokens, no padding", no_padding, True),
    ] * 2:
        print(f"{name}: {seconds_per_step(batches, unpad) * 1000:.0f} ms per step")


if __name__ == "__main__":
    main()
