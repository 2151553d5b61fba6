"""Abuse test of `bertkit serve` on loopback: sustained load while hostile clients attack the service.

Starts the service in a subprocess on a free port of 127.0.0.1 with a random-init ``mini`` BERT with its
pre-training heads (so ``/fill-mask``, ``/next-sentence``, ``/embed`` and ``/attention`` all exist), then
for ``--seconds`` runs ``--concurrency`` well-behaved callers (fill-mask and embed requests, latency
recorded) while attackers send, over and over: oversized bodies (declared and chunked), deeply nested
JSON, thousands of ``[MASK]`` tokens, empty strings, wrong and missing content types, invalid UTF-8,
absurd numbers, file paths and model names in the JSON, path traversal in URLs, and slowloris
connections that trickle their headers and never finish. Everything is bounded in count and time.

Records: requests by kind and status (-1: the connection was reset after the server refused an oversized
body before reading all of it; 0: no answer at all), 5xx count (must be 0), the good callers' p50/p99 latency alone
(baseline) and under attack, the server's peak RSS (sampled from /proc every 50 ms) against its RSS after
warm-up, server-side tracebacks, and whether the server is still alive.

    .venv/bin/python benchmarks/bench_serve_abuse.py [--seconds 60] [--concurrency 8] [--slowloris 200]

Writes ``benchmarks/results/reliability_serve_abuse.json``. ``--smoke``: a tiny model, every attack kind, one second.
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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import loopback
from harness import RESULTS, add_options, output_path, scratch_folder, write_json
from loopback import HOST, free_port, rss_bytes
from machine_info import record

Attack = Callable[[], Coroutine[Any, Any, tuple[int, float]]]
"""One hostile request: a coroutine factory whose result is (status, seconds)."""

SERVER = """
import sys
from bertkit.serve import ServeLimits, serve
serve(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
      limits=ServeLimits(request_timeout_s=30))
"""

WORDS = (
    "the a of in on and to is was it he she they we paris france capital city john smith lived went home "
    "cat sat mat good bad great movie film hello world king queen castle quick brown fox jumps over lazy dog"
).split()


def make_model(directory: Path, preset: str = "mini") -> Path:
    """A random-init BertForPreTraining of size ``preset`` on a small word list, saved with its tokenizer."""
    import torch

    from bertkit.config import BertConfig
    from bertkit.models.bert import BertForPreTraining
    from bertkit.tokenizer import Tokenizer
    from bertkit.weights import save_pretrained

    directory.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *list(".,!?"), *sorted(set(WORDS)), "##s", "##ed"]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = Tokenizer.from_vocab(directory / "vocab.txt")
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.preset(preset, vocab_size=tokenizer.vocab_size)).eval()
    save_pretrained(model, directory, tokenizer=tokenizer)
    return directory


# ------------------------------------------------------------------------------------------ raw HTTP
async def request(
    port: int,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    chunked: bool = False,
    timeout: float = 60.0,
) -> tuple[int, float]:
    """One HTTP/1.1 request on a fresh connection; (status, seconds). Status 0: no answer (connection
    dropped or timed out)."""
    start = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), timeout)
    except (TimeoutError, OSError):
        return 0, time.perf_counter() - start
    head = {"Host": f"{HOST}:{port}", "Connection": "close", **(headers or {})}
    if chunked:
        head["Transfer-Encoding"] = "chunked"
    elif "Content-Length" not in head:
        head["Content-Length"] = str(len(body))
    data = (
        f"{method} {path} HTTP/1.1\r\n".encode() + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n"
    )
    try:
        try:
            writer.write(data)
            if chunked:
                for i in range(0, len(body), 65536):
                    piece = body[i : i + 65536]
                    writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
            else:
                writer.write(body)
            await writer.drain()
        except OSError:  # the server may answer (413) and close before the whole body is sent
            pass
        line = await asyncio.wait_for(reader.readline(), timeout)
        await asyncio.wait_for(reader.read(), timeout)  # the rest, until the server closes
        status = int(line.split()[1]) if line.startswith(b"HTTP/") else 0
    except ConnectionResetError:
        # The server answered 413 and closed while the client was still sending an oversized body: the
        # kernel then resets the connection and may drop the unread answer. Counted apart from silence.
        status = -1
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        status = 0
    finally:
        writer.close()
    return status, time.perf_counter() - start


def post_json(
    port: int, path: str, payload: object | bytes, content_type: str | None = "application/json", chunked: bool = False
) -> Coroutine[Any, Any, tuple[int, float]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    return request(port, "POST", path, body, headers, chunked=chunked)


# ------------------------------------------------------------------------------------------ attacks
def attacks(port: int) -> dict[str, Attack]:
    """name -> coroutine factory; every attack expects a 4xx answer."""
    masks_many = " ".join(["[MASK]"] * 3000)
    masks_fit = " ".join(["[MASK]"] * 500)
    nested = b'{"texts": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"  # 400 kB, under the body limit
    nested_obj = b'{"texts": ["a"], "x": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"}"
    return {
        "oversized_declared": lambda: request(
            port, "POST", "/embed", b"x" * 10, {"Content-Length": "50000000", "Content-Type": "application/json"}
        ),
        "oversized_sent": lambda: post_json(port, "/embed", {"texts": ["word " * 200] * 2000}),
        "oversized_chunked": lambda: post_json(port, "/embed", {"texts": ["word " * 200] * 2000}, chunked=True),
        "nested_json_arrays": lambda: post_json(port, "/embed", nested),
        "nested_json_objects": lambda: post_json(port, "/fill-mask", nested_obj),
        "masks_3000": lambda: post_json(port, "/fill-mask", {"texts": [masks_many]}),
        "masks_500_in_limit": lambda: post_json(port, "/fill-mask", {"texts": [masks_fit], "top_k": 50}),
        "masks_64_texts": lambda: post_json(port, "/fill-mask", {"texts": [masks_fit] * 64}),
        "empty_string": lambda: post_json(port, "/embed", {"texts": [""]}),
        "empty_list": lambda: post_json(port, "/fill-mask", {"texts": []}),
        "whitespace": lambda: post_json(port, "/fill-mask", {"texts": ["   \n\t"]}),
        "content_type_text": lambda: post_json(port, "/embed", {"texts": ["hello"]}, "text/plain"),
        "content_type_form": lambda: post_json(port, "/embed", b"texts=hello", "application/x-www-form-urlencoded"),
        "content_type_multipart": lambda: post_json(
            port, "/embed", b"--x\r\n\r\nhello\r\n--x--", "multipart/form-data; boundary=x"
        ),
        "content_type_missing": lambda: post_json(port, "/embed", {"texts": ["hello"]}, None),
        "invalid_utf8": lambda: post_json(port, "/embed", b'{"texts": ["\xff\xfe\xc3"]}'),
        "lone_surrogate": lambda: post_json(port, "/fill-mask", b'{"texts": ["a [MASK] \\ud800"]}'),
        "not_json": lambda: post_json(port, "/embed", b"\x00\x01\x02 garbage"),
        "top_k_huge": lambda: post_json(port, "/fill-mask", b'{"texts": ["a [MASK]"], "top_k": 1e308}'),
        "top_k_bignum": lambda: post_json(
            port, "/fill-mask", b'{"texts": ["a [MASK]"], "top_k": ' + b"9" * 5000 + b"}"
        ),
        "top_k_negative": lambda: post_json(port, "/fill-mask", {"texts": ["a [MASK]"], "top_k": -1}),
        "nan": lambda: post_json(port, "/fill-mask", b'{"texts": ["a [MASK]"], "top_k": NaN}'),
        "model_path_in_json": lambda: post_json(port, "/embed", {"texts": ["hello"], "model": "/etc/passwd"}),
        "file_path_as_text_field": lambda: post_json(port, "/embed", {"path": "/etc/passwd"}),
        "traversal_url": lambda: request(port, "GET", "/../../../../etc/passwd"),
        "traversal_static": lambda: request(port, "GET", "/static/..%2f..%2f..%2fpyproject.toml"),
        "unknown_method": lambda: request(port, "DELETE", "/embed"),
        "bad_content_length": lambda: request(port, "POST", "/embed", b"{}", {"Content-Length": "abc"}),
        "attention_long": lambda: post_json(port, "/attention", {"text": "hello world " * 400}),
    }


async def slowloris(port: int, stop: asyncio.Event, counts: collections.Counter[str]) -> None:
    """Open a connection and trickle header bytes every second until the server drops it or time is up."""
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        counts["refused"] += 1
        return
    counts["opened"] += 1
    writer.write(b"POST /embed HTTP/1.1\r\nHost: x\r\n")
    try:
        while not stop.is_set():
            writer.write(b"X-a: b\r\n")
            await writer.drain()
            try:
                data = await asyncio.wait_for(reader.read(1024), 1.0)
                if not data or data.startswith(b"HTTP/"):
                    counts["dropped_by_server"] += 1
                    return
            except TimeoutError:
                pass
        counts["still_open_at_end"] += 1
    except OSError:
        counts["dropped_by_server"] += 1
    finally:
        writer.close()


GOOD = [
    ("/fill-mask", lambda rng: {"texts": [f"the {rng.choice(WORDS)} [MASK] in {rng.choice(WORDS)}."]}),
    ("/embed", lambda rng: {"texts": [" ".join(rng.choices(WORDS, k=rng.randint(3, 30)))]}),
]


async def good_caller(
    port: int, rng: random.Random, until: float, latencies: list[float], counts: collections.Counter[int]
) -> None:
    while time.perf_counter() < until:
        path, make = rng.choice(GOOD)
        status, seconds = await post_json(port, path, make(rng))
        counts[status] += 1
        if status == 200:
            latencies.append(seconds)


async def attacker(
    port: int, rng: random.Random, until: float, table: dict[str, Attack], results: dict[str, collections.Counter[int]]
) -> None:
    names = sorted(table)
    while time.perf_counter() < until:
        name = rng.choice(names)
        status, _ = await table[name]()
        results[name][status] += 1


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def run(port: int, pid: int, args: argparse.Namespace) -> dict:
    rss: dict[str, list[int]] = {"samples": []}
    stop_sampling = asyncio.Event()

    async def sample() -> None:
        while not stop_sampling.is_set():
            rss["samples"].append(rss_bytes(pid))
            await asyncio.sleep(0.05)

    sampler = asyncio.create_task(sample())
    # Warm-up, then a baseline of the good callers alone.
    for _ in range(20):
        await post_json(port, "/fill-mask", {"texts": ["the [MASK] sat."]})
    rss_warm = rss_bytes(pid)
    base_lat: list[float] = []
    base_counts: collections.Counter[int] = collections.Counter()
    until = time.perf_counter() + args.baseline_seconds
    await asyncio.gather(
        *(good_caller(port, random.Random(i), until, base_lat, base_counts) for i in range(args.concurrency))
    )

    # Under attack: the same callers, plus attackers and slowloris connections.
    table = attacks(port)
    results: dict[str, collections.Counter] = {name: collections.Counter() for name in table}
    lat: list[float] = []
    counts: collections.Counter[int] = collections.Counter()
    loris: collections.Counter[str] = collections.Counter()
    stop = asyncio.Event()
    until = time.perf_counter() + args.seconds
    loris_tasks = []
    for i in range(args.slowloris):
        loris_tasks.append(asyncio.create_task(slowloris(port, stop, loris)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)
    await asyncio.gather(
        *(good_caller(port, random.Random(100 + i), until, lat, counts) for i in range(args.concurrency)),
        *(attacker(port, random.Random(200 + i), until, table, results) for i in range(args.attackers)),
    )
    stop.set()
    await asyncio.gather(*loris_tasks)
    alive, _ = await request(port, "GET", "/health")
    stop_sampling.set()
    await sampler
    by_status: collections.Counter[int] = collections.Counter()
    for counter in results.values():
        by_status.update(counter)
    by_status.update(counts)
    return {
        "baseline": {
            "requests": sum(base_counts.values()),
            "status": dict(base_counts),
            "p50_ms": 1000 * percentile(base_lat, 0.5),
            "p99_ms": 1000 * percentile(base_lat, 0.99),
        },
        "under_attack": {
            "good_requests": sum(counts.values()),
            "good_status": dict(counts),
            "p50_ms": 1000 * percentile(lat, 0.5),
            "p99_ms": 1000 * percentile(lat, 0.99),
            "max_ms": 1000 * max(lat, default=float("nan")),
        },
        "attacks": {name: dict(counter) for name, counter in results.items()},
        "attack_requests": sum(sum(c.values()) for c in results.values()),
        "slowloris": dict(loris),
        "status_totals": {str(k): v for k, v in sorted(by_status.items())},
        "server_5xx": sum(v for k, v in by_status.items() if 500 <= k < 600),
        "no_answer": by_status.get(0, 0),
        "reset_while_sending_oversized": by_status.get(-1, 0),
        "rss_after_warmup_mb": rss_warm / 2**20,
        "rss_peak_mb": max(rss["samples"]) / 2**20,
        "rss_end_mb": rss["samples"][-1] / 2**20,
        "alive_after": alive == 200,
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="Length of the attack phase.")
    parser.add_argument("--baseline-seconds", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=8, help="Well-behaved concurrent callers.")
    parser.add_argument("--attackers", type=int, default=8, help="Concurrent attacking callers.")
    parser.add_argument("--slowloris", type=int, default=200, help="Slow connections held open.")
    parser.add_argument("--model-size", default="mini", help="preset of the random-init model served")
    add_options(parser, "result file [benchmarks/results/reliability_serve_abuse.json]")
    args = parser.parse_args(argv)
    if args.smoke:  # a tiny model, every attack kind, for a second or two
        args.seconds, args.baseline_seconds, args.concurrency, args.attackers = 1.0, 0.5, 2, 4
        args.slowloris, args.model_size = 4, "tiny"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    work = scratch_folder("bertkit-abuse-")
    model = make_model(work / "model", args.model_size)
    port = free_port()
    threads = os.environ.get("OMP_NUM_THREADS", "2")
    with open(work / "server.log", "w+") as log:
        with loopback.server(SERVER, [str(model), str(port)], port, 120, log, threads) as process:
            started = time.time()
            result = asyncio.run(run(port, process.pid, args))
            result["wall_s"] = round(time.time() - started, 1)
            result["server_exited"] = process.poll() is not None
        log.seek(0)
        server_log = log.read()
    result["server_tracebacks"] = server_log.count("Traceback")
    result["server_log_tail"] = server_log[-1500:]
    result["settings"] = {k: v for k, v in vars(args).items() if k != "output"}
    result["machine"] = record()
    result["commit"] = result["machine"]["commit"]
    write_json(output_path(args, RESULTS / "reliability_serve_abuse.json"), result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("attacks", "server_log_tail")}, indent=1))
    print("attacks:", {k: v for k, v in result["attacks"].items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
