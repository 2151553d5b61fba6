"""Where the raw benchmark results are, and what they do not record (the command that wrote each file)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def result_path(name: str) -> Path:
    """A result file under ``RESULTS``, read when called, so a test can point ``RESULTS`` elsewhere."""
    return RESULTS / name


def load(name: str) -> dict:
    return json.loads(result_path(name).read_text(encoding="utf-8"))


# What the result files do not record: the command that wrote them (and, for one, the machine).
CONTEXT: dict[str, dict[str, str]] = {
    "prepare_data.json": {"command": "python benchmarks/bench_prepare_data.py"},
    "prepare_data_x10.json": {"command": "python benchmarks/bench_prepare_data.py --times 10 --skip-peer"},
    "train_step_cpu_quiet.json": {
        "command": "python benchmarks/bench_train_step.py --sizes mini small base --steps 8 "
        "--output benchmarks/results/train_step_cpu_quiet.json"
    },
    "train_step_gpu_bf16_base.json": {
        "command": "python benchmarks/bench_train_step.py --device cuda --precision bf16 --sizes base --batch 128 "
        "--steps 30 --warmup 3 --output benchmarks/results/train_step_gpu_bf16_base.json"
    },
    "train_step_gpu_bf16_large.json": {
        "command": "python benchmarks/bench_train_step.py --device cuda --precision bf16 --sizes large --batch 64 "
        "--steps 30 --warmup 3 --output benchmarks/results/train_step_gpu_bf16_large.json"
    },
    "pretrain_gpu_small_bf16_metrics.jsonl": {
        "what": "`small` pre-trained end to end on `data/corpus` (tokenizer of 16,000, 61,461 sequences of 128), "
        "batch 128, bf16",
        "command": "bertkit pretrain --data D --model-config small --output R --precision bf16 "
        "--micro-batch-size 128 --max-steps 500 --eval-every 250 --no-progress",
        "machine": "NVIDIA H200, torch 2.11.0+cu130 (the run's log; metrics.jsonl does not record it)",
    },
    "inference.json": {"command": "python benchmarks/bench_inference.py --threads 1 --repeats 2 --rss"},
    "int8_quality.json": {
        "command": "python benchmarks/bench_int8_quality.py --sst2 runs/q/sst2 --conll runs/q/conll --squad runs/q/squad "
        "--squad-questions 500"
    },
    "int8_quality_onnxruntime.json": {
        "command": "python benchmarks/bench_int8_quality.py --sst2 runs/q/sst2 --conll runs/q/conll --backend onnxruntime "
        "--output benchmarks/results/int8_quality_onnxruntime.json"
    },
    "serve_load.json": {"command": "python benchmarks/bench_serve_load.py"},
    "serve_engines.json": {"command": "python benchmarks/bench_serve_engines.py --requests 400 --max-seconds 100"},
    "reliability_serve_abuse.json": {
        "command": "python benchmarks/bench_serve_abuse.py",
        "machine": "AMD EPYC, 2 cores (not recorded in the file)",
    },
    "reliability_fuzz.json": {"command": "python benchmarks/fuzz_inputs.py --examples 10000 --seconds 90"},
}
