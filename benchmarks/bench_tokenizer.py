"""Tokenizer throughput: bertkit ``encode_batch`` vs raw ``tokenizers`` and ``transformers.BertTokenizerFast``.

All contestants run in one process on the same lines of the Gutenberg books (bodies only, header/footer
stripped) with the bert-base-uncased vocabulary, in the same chunks, taking turns chunk by chunk, over
several rounds; the median round counts. Every contestant produces the ids of every line (the consumer's view):

- ``bertkit encode_batch``: ``[e.ids for e in tok.encode_batch(chunk)]`` (with [CLS]/[SEP]);
- ``bertkit ids_batch``: ``tok.ids_batch(chunk)`` (no special tokens; the data-preparation path);
- ``tokenizers (same pipeline)``: bertkit's ``tokenizer.json`` loaded into a bare ``tokenizers.Tokenizer``,
  so the ratio to it is exactly bertkit's wrapper overhead;
- ``tokenizers (stock Bert*)``: ``BertNormalizer`` + ``BertPreTokenizer``, as Hugging Face ships it;
- ``transformers BertTokenizerFast``: ``fast(chunk)["input_ids"]``.

Usage: python benchmarks/bench_tokenizer.py [--mb 10] [--rounds 3] [--chunk 4096] [--no-freeze] [--smoke]
Writes benchmarks/results/tokenizer.json.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, write_json
from machine_info import cpu_model, git_commit

BOOKS = SHARED / "gutenberg" / "books"
VOCAB = SHARED / "bert_vocab" / "vocab.txt"
Contestant = Callable[[list[str]], list[list[int]]]


def book_lines(books: Path, megabytes: float) -> list[str]:
    """Non-empty lines of the book bodies, the books in file-name order, until ``megabytes`` of characters."""
    budget, lines = int(megabytes * 1_000_000), []
    for book in sorted([*books.glob("*.txt"), *books.glob("*.txt.gz")]):
        raw = book.read_bytes()
        text = (gzip.decompress(raw) if book.suffix == ".gz" else raw).decode("utf-8")
        start, end = text.find("*** START OF"), text.find("*** END OF")
        body = text[text.find("\n", start) + 1 : end] if start >= 0 and end > start else text
        for line in body.splitlines():
            if line.strip():
                lines.append(line)
                budget -= len(line)
                if budget <= 0:
                    return lines
    return lines


def contestants(vocab: Path) -> dict[str, Contestant]:
    import transformers
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    from bertkit.tokenizer import Tokenizer

    tok = Tokenizer.from_vocab(vocab)
    same = RawTokenizer.from_str(tok.backend.to_str())
    stock = BertWordPieceTokenizer(str(vocab), lowercase=True)._tokenizer
    fast = transformers.BertTokenizerFast(str(vocab))
    return {
        "bertkit encode_batch": lambda c: [e.ids for e in tok.encode_batch(c)],
        "bertkit ids_batch": tok.ids_batch,
        "tokenizers (same pipeline)": lambda c: [e.ids for e in same.encode_batch(c)],
        "tokenizers (stock Bert*)": lambda c: [e.ids for e in stock.encode_batch(c)],
        "transformers BertTokenizerFast": lambda c: fast(c)["input_ids"],
    }


def race(sides: dict[str, Contestant], chunks: list[list[str]], rounds: int) -> tuple[dict, dict, dict[str, int]]:
    """Wall and CPU seconds of every round, per contestant, and the tokens each produced."""
    walls: dict[str, list[float]] = {k: [] for k in sides}
    cpus: dict[str, list[float]] = {k: [] for k in sides}
    tokens: dict[str, int] = {}
    names = list(sides)
    for r in range(rounds):
        wall, cpu, count = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
        # Contestants take turns on every chunk (rotating who goes first), so that load from other processes
        # on a shared machine falls on all of them alike.
        for i, chunk in enumerate(chunks):
            for k in range(len(names)):
                name = names[(i + r + k) % len(names)]
                w0, c0 = time.perf_counter(), time.process_time()
                out = sides[name](chunk)
                wall[name] += time.perf_counter() - w0
                cpu[name] += time.process_time() - c0
                count[name] += sum(map(len, out))
        for name in names:
            walls[name].append(wall[name])
            cpus[name].append(cpu[name])
            tokens[name] = count[name]
    return walls, cpus, tokens


def summary(walls: dict, cpus: dict, tokens: dict[str, int], chars: int) -> dict:
    rows, wall = [], {name: statistics.median(values) for name, values in walls.items()}
    for name in walls:
        cpu = statistics.median(cpus[name])
        rows.append({
            "name": name, "tokens": tokens[name], "wall_s": round(wall[name], 3), "cpu_s": round(cpu, 3),
            "tokens_per_s": round(tokens[name] / wall[name]), "mb_per_s": round(chars / wall[name] / 1e6, 3),
        })  # fmt: skip
    ours = wall["bertkit encode_batch"]
    return {
        "results": rows,
        "overhead_vs_raw_tokenizers_same_pipeline": ours / wall["tokenizers (same pipeline)"] - 1,
        "delta_vs_raw_tokenizers_stock_pipeline": ours / wall["tokenizers (stock Bert*)"] - 1,
        "hf_fast_time_over_bertkit_time": wall["transformers BertTokenizerFast"] / ours,
    }


def print_table(figures: dict) -> None:
    print(f"{'contestant':<32} {'wall s':>8} {'cpu s':>8} {'tokens/s':>12} {'MB/s':>7}")
    for r in figures["results"]:
        print(f"{r['name']:<32} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {r['tokens_per_s']:>12,} {r['mb_per_s']:>7.2f}")
    print(
        f"bertkit overhead over raw tokenizers (same pipeline): {figures['overhead_vs_raw_tokenizers_same_pipeline']:+.1%}"
    )
    print(
        f"bertkit vs raw tokenizers with the stock BertNormalizer pipeline: {figures['delta_vs_raw_tokenizers_stock_pipeline']:+.1%}"
    )
    print(f"BertTokenizerFast / bertkit wall time: {figures['hf_fast_time_over_bertkit_time']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0, help="MB of text (characters / 1e6)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=4096, help="lines per encode_batch call")
    parser.add_argument("--no-freeze", dest="freeze", action="store_false", help="leave the set-up heap to the GC")
    add_options(parser)
    args = parser.parse_args(argv)
    books, vocab = BOOKS, VOCAB
    if args.smoke:  # the shipped books and the vocabulary of all-MiniLM-L6-v2 where ../shared/data is absent
        args.mb, args.rounds, args.chunk, args.freeze = 0.02, 1, 64, False
        books, vocab = BOOKS if BOOKS.is_dir() else smoke_inputs.BOOKS, smoke_inputs.vocab_file()
    if not vocab.is_file() or not books.is_dir():
        print(f"shared data not found at {SHARED}; nothing to benchmark", file=sys.stderr)
        return 1
    import tokenizers
    import transformers

    lines = book_lines(books, args.mb)
    chunks = [lines[i : i + args.chunk] for i in range(0, len(lines), args.chunk)]
    chars = sum(map(len, lines))
    sides = contestants(vocab)
    # Move the set-up heap (transformers alone is hundreds of thousands of objects) out of the cyclic
    # collector's sight: otherwise every full collection triggered by a contestant's allocations scans it,
    # a cost of the benchmark process rather than of the contestant (--no-freeze to include it).
    if args.freeze:
        gc.collect()
        gc.freeze()
    figures = summary(*race(sides, chunks, args.rounds), chars)
    print(f"{len(lines)} lines, {chars / 1e6:.1f} MB, {figures['results'][0]['tokens']} tokens with [CLS]/[SEP]; "
          f"median of {args.rounds} rounds, chunks of {args.chunk} lines, {os.cpu_count()} cores")  # fmt: skip
    print_table(figures)
    result = {
        "benchmark": "tokenizer encode_batch throughput",
        "data": f"Gutenberg book bodies, first {args.mb} MB of non-empty lines in file order",
        "lines": len(lines), "characters": chars, "rounds": args.rounds, "chunk_lines": args.chunk,
        "gc_freeze_after_setup": args.freeze,
        **{k: round(v, 4 if k.startswith(("overhead", "delta")) else 3) if isinstance(v, float) else v
           for k, v in figures.items()},
        "machine": {
            "cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
        },
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }  # fmt: skip
    print(f"wrote {write_json(output_path(args, RESULTS / 'tokenizer.json'), result, indent=2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
