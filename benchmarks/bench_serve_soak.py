"""Soak run of `bertkit serve` on loopback: mixed traffic at a fixed rate for minutes, with API keys, rate
limits and malformed requests, watching for server errors, memory growth and latency drift.

Starts the service in a subprocess on a free port of 127.0.0.1 (a random-init ``mini`` BERT with its
pre-training heads), with four API keys and ``--rate-limit`` per key, then sends ``--rate`` requests per
second (open loop: each on its own schedule, whatever the answers take) for ``--minutes``:

* 70 % good: ``/embed``, ``/v1/embeddings`` and ``/fill-mask`` with one of three keys (each under its limit);
* 10 % with a wrong or missing key (401 expected);
* 10 % malformed: invalid JSON, wrong types, empty inputs, too many texts (4xx expected);
* 10 % from a greedy fourth key, each a burst of ``GREEDY_BURST`` requests at once (429 once past its limit).

Records: answers by kind and status, the 5xx count (must be 0), dropped connections, per window (a
minute; a second under ``--smoke``) the good requests' count, p50 and p99 latency and the server's RSS,
and the RSS growth from the first window to the last.

    .venv/bin/python benchmarks/bench_serve_soak.py [--minutes 10] [--rate 40] [--rate-limit 20/s]

Writes ``benchmarks/results/serve_soak.json``. ``--smoke``: a tiny model, 3 seconds at 20 requests per second.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import sys
import time
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
access = ServeAccess(api_key=sys.argv[3].split(","), rate_limit=sys.argv[4], rate_burst=int(sys.argv[5]))
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
    ("/embed", json.dumps({"texts": ["x"] * 500}).encode()),
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
        return "malformed", path, body, {"Authorization": f"Bearer {KEYS[0]}"}
    path, payload = _good(rng)
    return "greedy", path, json.dumps(payload).encode(), {"Authorization": f"Bearer {GREEDY}"}


async def run(port: int, pid: int, args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    window_s = 1.0 if args.smoke else 60.0
    total = int(args.rate * args.minutes * 60)
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    good: dict[int, list[float]] = collections.defaultdict(list)
    rss: dict[int, int] = {}
    start = time.perf_counter()

    async def one(kind: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        sent = time.perf_counter()
        status, seconds = await request(port, "POST", path, body, {"Content-Type": "application/json", **headers})
        statuses[kind][status] += 1
        if kind == "good" and status == 200:
            good[int((sent - start) // window_s)].append(seconds)

    async def sample_memory() -> None:
        while True:
            rss[int((time.perf_counter() - start) // window_s)] = rss_bytes(pid)
            await asyncio.sleep(min(1.0, window_s / 4))

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
    rss: dict[int, int],
    window_s: float,
) -> dict:
    windows = []
    for w in sorted(set(good) | set(rss)):
        latencies = good.get(w, [])
        windows.append(
            {
                "window": w,
                "good_ok": len(latencies),
                "p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
                "p99_ms": round(percentile(latencies, 99) * 1000, 1) if latencies else None,
                "rss_mb": round(rss.get(w, 0) / 2**20, 1),
            }
        )
    all_statuses = collections.Counter[int]()
    for counts in statuses.values():
        all_statuses.update(counts)
    measured = [w["rss_mb"] for w in windows if w["rss_mb"]]
    return {
        "window_s": window_s,
        "statuses": {kind: {str(k): v for k, v in sorted(c.items())} for kind, c in statuses.items()},
        "server_5xx": sum(v for k, v in all_statuses.items() if k >= 500),
        "dropped": all_statuses.get(0, 0) + all_statuses.get(-1, 0),
        "windows": windows,
        "rss_first_mb": measured[0] if measured else None,
        "rss_last_mb": measured[-1] if measured else None,
        "rss_growth_mb": round(measured[-1] - measured[0], 1) if measured else None,
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the soak")
    parser.add_argument("--rate", type=float, default=40.0, help="requests per second, all kinds together")
    parser.add_argument("--rate-limit", default="20/s", help="the server's --rate-limit (per key)")
    parser.add_argument("--rate-burst", type=int, default=5, help="the server's --rate-burst")
    parser.add_argument("--model-size", default="mini", help="model preset")
    parser.add_argument("--seed", type=int, default=0)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.minutes, args.rate, args.model_size = 0.05, 20.0, "tiny"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = scratch_folder("bertkit-soak-")
    model = make_model(work / "model", args.model_size)
    port = free_port()
    threads = os.environ.get("OMP_NUM_THREADS", "2")
    keys = ",".join([*KEYS, GREEDY])
    argv_server = [str(model), str(port), keys, args.rate_limit, str(args.rate_burst)]
    with open(work / "server.log", "w+") as log:
        with loopback.server(SERVER, argv_server, port, 120, log, threads) as process:
            started = time.time()
            result = asyncio.run(run(port, process.pid, args))
            result["wall_s"] = round(time.time() - started, 1)
            result["alive_after"] = process.poll() is None
        log.seek(0)
        server_log = log.read()
    result["server_tracebacks"] = server_log.count("Traceback")
    result["keys_in_server_log"] = sum(server_log.count(k) for k in [*KEYS, GREEDY])
    result["settings"] = {k: v for k, v in vars(args).items() if k != "output"}
    result["machine"] = record()
    result["commit"] = result["machine"]["commit"]
    path = write_json(output_path(args, RESULTS / "serve_soak.json"), result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("windows", "machine")}, indent=1))
    for w in result["windows"]:
        print(f"window {w['window']}: {w['good_ok']} ok, p50 {w['p50_ms']} ms, p99 {w['p99_ms']} ms, {w['rss_mb']} MB")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
