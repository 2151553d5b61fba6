"""Training-step cost of padding: one MiniLM-shaped classifier step (forward + backward) on random batches of
mixed lengths, padded through every layer vs unpadded (``bertkit.models.attention.Packed``), and on batches of the same
token count with no padding at all (what perfect length grouping would give).

    python benchmarks/bench_unpad.py --threads 1
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import torch

from bertkit.config import BertConfig
from bertkit.models.bert import BertForSequenceClassification
from harness import RESULTS, add_options, output_path, set_threads, write_json
from machine_info import record

MINILM_SHAPE = {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536}
Batch = tuple[torch.Tensor, torch.Tensor]


def lengths_like_stsb(batches: int, batch_size: int) -> list[list[int]]:
    """Pair lengths shaped like STS-B's (median about 30 tokens, a long tail), capped at 128."""
    rng = random.Random(0)
    return [[min(128, max(8, int(rng.lognormvariate(3.4, 0.35)))) for _ in range(batch_size)] for _ in range(batches)]


def tensors(lengths: list[int], generator: torch.Generator, vocab_size: int) -> Batch:
    ids = torch.randint(5, vocab_size, (len(lengths), max(lengths)), generator=generator)
    mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
    return ids, mask


def seconds_per_step(model: BertForSequenceClassification, data: list[Batch], unpad: bool) -> float:
    model.bert.unpad = unpad

    def step(ids: torch.Tensor, mask: torch.Tensor) -> None:
        model(ids, attention_mask=mask, labels=torch.zeros(ids.shape[0])).loss.backward()

    step(*data[0])  # warm-up
    start = time.perf_counter()
    for ids, mask in data:
        step(ids, mask)
    return (time.perf_counter() - start) / len(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.batches, args.batch_size = 1, 4
    set_threads(args.threads)
    shape = {} if args.smoke else MINILM_SHAPE
    config = BertConfig.preset("tiny", vocab_size=30522, num_labels=1, **shape)
    model = BertForSequenceClassification(config).train()
    random_batches = lengths_like_stsb(args.batches, args.batch_size)
    no_padding = [[sum(b) // len(b)] * len(b) for b in random_batches]
    padding = 1 - sum(map(sum, random_batches)) / sum(max(b) * len(b) for b in random_batches)
    print(f"padding share of the random batches: {padding:.1%}")
    generator = torch.Generator().manual_seed(0)
    cases = [
        ("random, padded", random_batches, False),
        ("random, unpadded", random_batches, True),
        ("same tokens, no padding", no_padding, True),
    ]
    timings: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    for name, batches, unpad in cases * 2:  # twice, interleaved: the machine's noise falls on every case
        data = [tensors(b, generator, config.vocab_size) for b in batches]
        timings[name].append(seconds_per_step(model, data, unpad))
        print(f"{name}: {timings[name][-1] * 1000:.0f} ms per step")
    out = output_path(args, RESULTS / "unpad.json")
    result = {
        "benchmark": "training step, padded vs unpadded",
        "model": "tiny" if args.smoke else "MiniLM-shaped (6 x 384)",
        "settings": {"batches": args.batches, "batch_size": args.batch_size, "threads": args.threads},
        "padding_share": padding,
        "ms_per_step": {name: 1000 * statistics.median(values) for name, values in timings.items()},
        "machine": record(),
    }
    print(f"wrote {write_json(out, result)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
