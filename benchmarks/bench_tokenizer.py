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

Usage: python benchmarks/bench_tokenizer.py [--mb 10] [--rounds 3] [--chunk 4096] [--no-freeze]
Writes benchmarks/results/tokenizer.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from machine_info import cpu_model, git_commit

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
VOCAB = DATA / "bert_vocab" / "vocab.txt"
RESULTS = ROOT / "benchmarks" / "results" / "tokenizer.json"


def gutenberg_lines(megabytes: float) -> list[str]:
    """Non-empty lines of the book bodies, the books in file-name order, until ``megabytes`` of characters."""
    budget, lines = int(megabytes * 1_000_000), []
    for book in sorted((DATA / "gutenberg" / "books").glob("*.txt")):
        text = book.read_text(encoding="utf-8")
        start, end = text.find("*** START OF"), text.find("*** END OF")
        body = text[text.find("\n", start) + 1 : end] if start >= 0 and end > start else text
        for line in body.splitlines():
            if line.strip():
                lines.append(line)
                budget -= len(line)
                if budget <= 0:
                    return lines
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0, help="MB of text (characters / 1e6)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=4096, help="lines per encode_batch call")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--no-freeze", dest="freeze", action="store_false", help="leave the set-up heap to the GC")
    args = parser.parse_args()
    if not VOCAB.is_file():
        print(f"shared data not found at {DATA}; nothing to benchmark", file=sys.stderr)
        return 1

    import tokenizers
    import transformers
    from tokenizers import Tokenizer as RawTokenizer
    from tokenizers.implementations import BertWordPieceTokenizer

    from bertkit.tokenizer import Tokenizer

    lines = gutenberg_lines(args.mb)
    chunks = [lines[i : i + args.chunk] for i in range(0, len(lines), args.chunk)]
    chars = sum(map(len, lines))
    tok = Tokenizer.from_vocab(VOCAB)
    same = RawTokenizer.from_str(tok.backend.to_str())
    stock = BertWordPieceTokenizer(str(VOCAB), lowercase=True)._tokenizer
    fast = transformers.BertTokenizerFast(str(VOCAB))

    contestants = {
        "bertkit encode_batch": lambda c: [e.ids for e in tok.encode_batch(c)],
        "bertkit ids_batch": tok.ids_batch,
        "tokenizers (same pipeline)": lambda c: [e.ids for e in same.encode_batch(c)],
        "tokenizers (stock Bert*)": lambda c: [e.ids for e in stock.encode_batch(c)],
        "transformers BertTokenizerFast": lambda c: fast(c)["input_ids"],
    }
    # Move the set-up heap (transformers alone is hundreds of thousands of objects) out of the cyclic
    # collector's sight: otherwise every full collection triggered by a contestant's allocations scans it,
    # a cost of the benchmark process rather than of the contestant (--no-freeze to include it).
    if args.freeze:
        gc.collect()
        gc.freeze()
    walls: dict[str, list[float]] = {k: [] for k in contestants}
    cpus: dict[str, list[float]] = {k: [] for k in contestants}
    tokens: dict[str, int] = {}
    names = list(contestants)
    for r in range(args.rounds):
        wall, cpu, count = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
        # Contestants take turns on every chunk (rotating who goes first), so that load from other processes
        # on a shared machine falls on all of them alike.
        for i, chunk in enumerate(chunks):
            for k in range(len(names)):
                name = names[(i + r + k) % len(names)]
                w0, c0 = time.perf_counter(), time.process_time()
                out = contestants[name](chunk)
                wall[name] += time.perf_counter() - w0
                cpu[name] += time.process_time() - c0
                count[name] += sum(map(len, out))
        for name in names:
            walls[name].append(wall[name])
            cpus[name].append(cpu[name])
            tokens[name] = count[name]

    with_specials = tokens["bertkit encode_batch"]
    rows = []
    for name in contestants:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        rows.append({
            "name": name, "tokens": tokens[name], "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "tokens_per_s": round(tokens[name] / wall), "mb_per_s": round(chars / wall / 1e6, 3),
        })  # fmt: skip
    by = {r["name"]: r for r in rows}
    overhead = by["bertkit encode_batch"]["wall_s"] / by["tokenizers (same pipeline)"]["wall_s"] - 1
    vs_stock = by["bertkit encode_batch"]["wall_s"] / by["tokenizers (stock Bert*)"]["wall_s"] - 1
    vs_hf = by["transformers BertTokenizerFast"]["wall_s"] / by["bertkit encode_batch"]["wall_s"]

    print(f"{len(lines)} lines, {chars / 1e6:.1f} MB, {with_specials} tokens with [CLS]/[SEP]; "
          f"median of {args.rounds} rounds, chunks of {args.chunk} lines, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'contestant':<32} {'wall s':>8} {'cpu s':>8} {'tokens/s':>12} {'MB/s':>7}")
    for r in rows:
        print(f"{r['name']:<32} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {r['tokens_per_s']:>12,} {r['mb_per_s']:>7.2f}")
    print(f"bertkit overhead over raw tokenizers (same pipeline): {overhead:+.1%}")
    print(f"bertkit vs raw tokenizers with the stock BertNormalizer pipeline: {vs_stock:+.1%}")
    print(f"BertTokenizerFast / bertkit wall time: {vs_hf:.2f}x")

    result = {
        "benchmark": "tokenizer encode_batch throughput",
        "data": f"Gutenberg book bodies, first {args.mb} MB of non-empty lines in file order",
        "lines": len(lines), "characters": chars, "rounds": args.rounds, "chunk_lines": args.chunk,
        "gc_freeze_after_setup": args.freeze,
        "results": rows,
        "overhead_vs_raw_tokenizers_same_pipeline": round(overhead, 4),
        "delta_vs_raw_tokenizers_stock_pipeline": round(vs_stock, 4),
        "hf_fast_time_over_bertkit_time": round(vs_hf, 3),
        "machine": {
            "cpu": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
        },
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    from bertkit.io import atomic_write_text

    atomic_write_text(args.output, json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
