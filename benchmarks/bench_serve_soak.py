"""Soak run of `bertkit serve` on loopback: mixed traffic at the measured capacity for ten minutes, with API
keys, rate limits and malformed requests, watching for server errors, memory growth and latency drift.

A random-init ``mini`` BERT with its pre-training heads is served in a subprocess on a free port of 127.0.0.1.

1. Capacity: unless ``--rate`` is given, a server without rate limits answers good requests from
   ``--concurrency`` closed-loop callers for ``--capacity-seconds``; the capacity is its answers per second.
2. Soak: a server with four API keys and a per-key ``--rate-limit`` (default: 35 % of the rate, above the 27 %
   each good key sends, good and malformed requests together; the burst one second's worth) gets ``--load`` x capacity requests per second (open loop: each on its own schedule, whatever the
   answers take) for ``--duration`` seconds:

   * 70 % good: ``/embed``, ``/v1/embeddings`` and ``/fill-mask`` (a prediction) under one of three keys;
   * 10 % with a wrong or missing key (401 expected; 429 once their address is over the limit, as guesses are
     rate limited per address);
   * 10 % malformed: invalid JSON, wrong types, empty inputs, too many texts (4xx expected);
   * 10 % from a greedy fourth key, each a burst of ``GREEDY_BURST`` requests at once (429 once over its limit).

   The good keys' work and what the greedy key gets through add up to about the capacity.

Records: answers by kind and status, the 5xx count, dropped connections, the server's RSS every second, and
per window (``--window`` seconds, a minute by default) the good requests' count, p50 and p99 latency and RSS.
The verdict: no 5xx and no dropped connection, RSS growth after the first window at most ``--rss-bound-mb``,
and no window's p99 above ``--p99-factor`` times the median window's (p99 stable over time).

    .venv/bin/python benchmarks/bench_serve_soak.py [--duration 600] [--rate R] [--load 1.0]

Writes ``benchmarks/results/serve_soak.json`` and prints a markdown table of the windows; the table in
docs/reliability.md is made from that file by ``benchmarks/reliability_tables.py``. ``--smoke``: a tiny model,
3 s of capacity and 6 s of soak (``--duration`` still sets the soak's length), windows of 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import loopback
from bench_serve_abuse import make_model, percentile, request
from harness import RESULTS, add_options, output_path, scratch_folder, write_json
from loopback import free_port, rss_bytes
from machine_info import record

KEYS = ["soak-key-a", "soak-key-b", "soak-key-c"]
GREEDY = "soak-key-greedy"
GREEDY_BURST = 8

SERVER = """
import sys
from bertkit.serve import ServeLimits, serve
from bertkit.serve.access import ServeAccess
limit = sys.argv[4] if sys.argv[4] != "none" else None
burst = int(sys.argv[5]) if limit and sys.argv[5] != "none" else None
access = ServeAccess(api_key=sys.argv[3].split(","), rate_limit=limit, rate_burst=burst)
serve(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access=access,
      limits=ServeLimits(request_timeout_s=30))
"""

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "john smith lived in paris",
    "a good movie about a king and a queen",
    "the cat sat on the mat",
]


def _good(rng: random.Random) -> tuple[str, dict[str, Any]]:
    texts = rng.sample(SENTENCES, rng.randint(1, 3))
    choices: list[tuple[str, dict[str, Any]]] = [
        ("/embed", {"texts": texts}),
        ("/v1/embeddings", {"input": texts, "model": "soak"}),
        ("/fill-mask", {"texts": ["the [MASK] sat on the mat"], "top_k": 3}),
    ]
    return rng.choice(choices)


MALFORMED: list[tuple[str, bytes]] = [
    ("/embed", b'{"texts": ["unterminated'),
    ("/embed", json.dumps({"texts": "not a list", "extra": [1, 2, 3]}).encode()),
    ("/embed", json.dumps({"texts": []}).encode()),
    ("/embed", json.dumps({"texts": ["x"] * 2049}).encode()),  # over the default --max-items, OpenAI's 2,048
    ("/v1/embeddings", json.dumps({"input": [[10**9]]}).encode()),
    ("/fill-mask", json.dumps({"texts": ["no mask here"], "top_k": -4}).encode()),
]


def plan_one(rng: random.Random, i: int) -> tuple[str, str, bytes, dict[str, str]]:
    """(kind, path, body, headers) of the ith request."""
    roll = rng.random()
    if roll < 0.7:
        path, payload = _good(rng)
        return "good", path, json.dumps(payload).encode(), {"Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}
    if roll < 0.8:
        path, payload = _good(rng)
        auth = rng.choice([{}, {"Authorization": "Bearer wrong-key"}, {"Authorization": KEYS[0]}])
        return "bad_key", path, json.dumps(payload).encode(), auth
    if roll < 0.9:
        path, body = rng.choice(MALFORMED)
        return "malformed", path, body, {"Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}
    path, payload = _good(rng)
    return "greedy", path, json.dumps(payload).encode(), {"Authorization": f"Bearer {GREEDY}"}


async def measure_capacity(port: int, seconds: float, concurrency: int) -> dict:
    """Good requests per second that ``concurrency`` closed-loop callers get answered (200) in ``seconds``."""
    rng = random.Random(1)
    answered: list[float] = []
    deadline = time.perf_counter() + seconds

    async def caller(i: int) -> None:
        while time.perf_counter() < deadline:
            path, payload = _good(rng)
            headers = {"Content-Type": "application/json", "Authorization": f"Bearer {KEYS[i % len(KEYS)]}"}
            status, latency = await request(port, "POST", path, json.dumps(payload).encode(), headers)
            if status == 200:
                answered.append(latency)

    start = time.perf_counter()
    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {
        "good_per_s": round(len(answered) / elapsed, 2),
        "seconds": round(elapsed, 1),
        "concurrency": concurrency,
        "p50_ms": round(percentile(answered, 0.5) * 1000, 1) if answered else None,
    }


async def run(port: int, pid: int, args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    window_s = args.window
    total = int(args.rate * args.duration)
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    good: dict[int, list[float]] = collections.defaultdict(list)
    rss: dict[int, list[int]] = collections.defaultdict(list)
    start = time.perf_counter()
    last = math.ceil(args.duration / window_s) - 1

    def window() -> int:  # what comes after the schedule's end (late sends, the final samples) is its last window's
        return min(int((time.perf_counter() - start) // window_s), last)

    async def one(kind: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        sent = window()
        status, seconds = await request(port, "POST", path, body, {"Content-Type": "application/json", **headers})
        statuses[kind][status] += 1
        if kind == "good" and status == 200:
            good[sent].append(seconds)

    async def sample_memory() -> None:
        while True:
            rss[window()].append(rss_bytes(pid))
            await asyncio.sleep(1.0)

    sampler = asyncio.create_task(sample_memory())
    tasks = []
    for i in range(total):
        delay = start + i / args.rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        planned = plan_one(rng, i)
        for _ in range(GREEDY_BURST if planned[0] == "greedy" else 1):
            tasks.append(asyncio.create_task(one(*planned)))
    await asyncio.gather(*tasks)
    sampler.cancel()
    return {"scheduled": total, "sent": len(tasks), **summarize(statuses, good, rss, window_s)}


def summarize(
    statuses: dict[str, collections.Counter[int]],
    good: dict[int, list[float]],
    rss: dict[int, list[int]],
    window_s: float,
) -> dict:
    windows = []
    for w in sorted(set(good) | set(rss)):
        latencies = good.get(w, [])
        windows.append(
            {
                "window": w,
                "from_s": round(w * window_s, 1),
                "good_ok": len(latencies),
                "p50_ms": round(percentile(latencies, 0.5) * 1000, 1) if latencies else None,
                "p99_ms": round(percentile(latencies, 0.99) * 1000, 1) if latencies else None,
                "rss_mb": round(max(rss.get(w, [0])) / 2**20, 1),
            }
        )
    all_statuses = collections.Counter[int]()
    for counts in statuses.values():
        all_statuses.update(counts)
    measured = [w["rss_mb"] for w in windows if w["rss_mb"]]
    p99s = [w["p99_ms"] for w in windows if w["p99_ms"] is not None]
    return {
        "window_s": window_s,
        "statuses": {kind: {str(k): v for k, v in sorted(c.items())} for kind, c in statuses.items()},
        "server_5xx": sum(v for k, v in all_statuses.items() if k >= 500),
        "dropped": all_statuses.get(0, 0) + all_statuses.get(-1, 0),
        "windows": windows,
        "rss_first_mb": measured[0] if measured else None,
        "rss_last_mb": measured[-1] if measured else None,
        "rss_max_mb": max(measured) if measured else None,
        # after the first window (warm-up: first batches, allocator pools), how much higher memory ever got
        "rss_growth_mb": round(max(measured[1:]) - measured[0], 1) if len(measured) > 1 else 0.0,
        "p99_median_ms": round(statistics.median(p99s), 1) if p99s else None,
        "p99_max_ms": max(p99s) if p99s else None,
    }


def verdict(result: dict, args: argparse.Namespace) -> dict:
    """Each criterion of a passed soak, and whether all hold."""
    median, worst = result["p99_median_ms"], result["p99_max_ms"]
    checks = {
        "no_5xx": result["server_5xx"] == 0,
        "no_dropped": result["dropped"] == 0,
        "rss_within_bound": result["rss_growth_mb"] <= args.rss_bound_mb,
        "p99_stable": median is not None and worst <= args.p99_factor * median,
        "server_alive": result["alive_after"],
    }
    return {**checks, "passed": all(checks.values())}


def table(result: dict) -> str:
    """The windows as a markdown table, and the verdict under it."""
    lines = ["| window | from s | good answered | p50 ms | p99 ms | RSS MB |", "|---|---|---|---|---|---|"]
    for w in result["windows"]:
        lines.append(
            f"| {w['window']} | {w['from_s']:g} | {w['good_ok']} | {w['p50_ms']} | {w['p99_ms']} | {w['rss_mb']} |"
        )
    v = result["verdict"]
    lines.append(
        f"\n{result['rate']:g} req/s for {result['duration_s']:g} s ({result['sent']:,} requests): "
        f"{result['server_5xx']} 5xx, {result['dropped']} dropped, RSS growth {result['rss_growth_mb']} MB "
        f"(bound {result['settings']['rss_bound_mb']:g}), p99 max {result['p99_max_ms']} ms vs median "
        f"{result['p99_median_ms']} ms; {'PASSED' if v['passed'] else 'FAILED'}"
    )
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=None, help="seconds of soak (default 600; smoke 6)")
    parser.add_argument("--rate", type=float, default=None, help="requests per second (default: --load x capacity)")
    parser.add_argument("--load", type=float, default=1.0, help="the soak's rate as a share of the capacity")
    parser.add_argument("--capacity-seconds", type=float, default=30.0, help="length of the capacity measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop callers measuring the capacity")
    parser.add_argument("--window", type=float, default=None, help="seconds per latency window (default 60)")
    parser.add_argument("--rate-limit", default=None, help="the server's --rate-limit per key (default 35%% of rate)")
    parser.add_argument("--rate-burst", default="none", help="the server's --rate-burst (default: one second's worth)")
    parser.add_argument("--rss-bound-mb", type=float, default=64.0, help="allowed RSS growth after the first window")
    parser.add_argument("--p99-factor", type=float, default=2.0, help="allowed worst window p99 / median window p99")
    parser.add_argument("--model-size", default="mini", help="model preset")
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.model_size, args.capacity_seconds = "tiny", 3.0
    args.duration = args.duration or (6.0 if args.smoke else 600.0)
    args.window = args.window or (2.0 if args.smoke else 60.0)
    return args


def serve_and_run(model: Path, work: Path, limit: str, args: argparse.Namespace, measure: bool) -> dict:
    """One server (rate limit ``limit``, or ``none``) and either the capacity measurement or the soak."""
    port = free_port()
    threads = os.environ.get("OMP_NUM_THREADS", "2")
    argv_server = [str(model), str(port), ",".join([*KEYS, GREEDY]), limit, args.rate_burst]
    with open(work / ("capacity.log" if measure else "server.log"), "w+") as log:
        with loopback.server(SERVER, argv_server, port, 120, log, threads) as process:
            started = time.time()
            if measure:
                return asyncio.run(measure_capacity(port, args.capacity_seconds, args.concurrency))
            result = asyncio.run(run(port, process.pid, args))
            result["wall_s"] = round(time.time() - started, 1)
            result["alive_after"] = process.poll() is None
        log.seek(0)
        server_log = log.read()
    result["server_tracebacks"] = server_log.count("Traceback")
    result["keys_in_server_log"] = sum(server_log.count(k) for k in [*KEYS, GREEDY])
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = scratch_folder("bertkit-soak-")
    model = make_model(work / "model", args.model_size)
    capacity = None
    if args.rate is None:
        capacity = serve_and_run(model, work, "none", args, measure=True)
        args.rate = max(1.0, round(args.load * capacity["good_per_s"], 1))
        print(f"capacity: {capacity['good_per_s']} good requests/s; soak at {args.rate:g} req/s", file=sys.stderr)
    args.rate_limit = args.rate_limit or f"{max(1, math.ceil(0.35 * args.rate * 60))}/m"
    result = serve_and_run(model, work, args.rate_limit, args, measure=False)
    result.update(capacity=capacity, rate=args.rate, duration_s=args.duration)
    result["settings"] = {k: v for k, v in vars(args).items() if k != "output"}
    result["verdict"] = verdict(result, args)
    result["command"] = "python benchmarks/bench_serve_soak.py " + " ".join(sys.argv[1:] if argv is None else argv)
    result["machine"] = record()
    result["commit"] = result["machine"]["commit"]
    path = write_json(output_path(args, RESULTS / "serve_soak.json"), result)
    print(table(result))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
