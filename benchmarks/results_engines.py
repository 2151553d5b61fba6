"""The CPU engine comparison (bench_engines.py: every engine per model, input set and batch): its claim rows and
the engine tables of docs/performance.md."""

from __future__ import annotations

from results_render import Row, machine, num
from results_sources import load, result_path

ENGINES_FILE = "engines.json"
ENGINES_COMMAND = (
    "python benchmarks/bench_engines.py --models minilm --threads 2 --sst2-limit 256 --squad-limit 32 --rounds 3"
)


def engine_cells(per_engine: dict, workload: str, ours: bool) -> str:
    return "; ".join(
        f"{engine} {num(f['workloads'][workload]['sentences_per_s'])} /s"
        for engine, f in per_engine.items()
        if "error" not in f and engine.startswith("bertkit") == ours and workload in f["workloads"]
    )


def best_speed(per_engine: dict, workload: str, ours: bool) -> tuple[str, float]:
    speeds = {
        e: f["workloads"][workload]["sentences_per_s"]
        for e, f in per_engine.items()
        if "error" not in f and e.startswith("bertkit") == ours and workload in f["workloads"]
    }
    best = max(speeds, key=lambda e: speeds[e], default="")
    return best, speeds.get(best, 0.0)


def engines_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    rows = []
    for model, per_engine in d["models"].items():
        workloads: dict = next((f["workloads"] for f in per_engine.values() if "workloads" in f), {})
        for workload in workloads:
            (ours, ours_speed), (peer, peer_speed) = (
                best_speed(per_engine, workload, True),
                best_speed(per_engine, workload, False),
            )
            what = f"{model}, {workload.replace('_b', ', batch ')} ({d['inputs'][workload.split('_')[0]]} texts)"
            ratio = f"{ours} / {peer}: {ours_speed / peer_speed:.2f}x" if peer_speed else ""
            row = (engine_cells(per_engine, workload, True), engine_cells(per_engine, workload, False), ratio)
            rows.append((f"{what} | `{ENGINES_COMMAND}`", (*row, machine(d["machine"]))))
    return rows


def engine_table(per_engine: dict, reference: str) -> list[str]:
    """One model's table: an engine per row; sentences/s and p50/p99 per workload, first call, RSS, cosine."""
    workloads = next((list(f["workloads"]) for f in per_engine.values() if "workloads" in f), [])
    head = ["engine", *[w.replace("_b", " b") for w in workloads], "first call (cached)", "peak RSS", "cosine min/mean"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for engine, f in per_engine.items():
        if "error" in f:
            out.append(f"| {engine} | failed: {f['error'][:120].replace('|', '/')} |")
            continue
        cells = [
            f"{num(w['sentences_per_s'])} /s, {w['p50_ms']:.0f}/{w['p99_ms']:.0f} ms" for w in f["workloads"].values()
        ]
        cached = f.get("first_call_cached_s")
        first = f"{num(f['first_call_s'])} s" + (f" ({num(cached)} s)" if cached else "")
        cos = f.get(f"cosine_vs_{reference}", {})
        quality = "; ".join(f"{k} {v['min']:.4f}/{v['mean']:.5f}" for k, v in cos.items())
        out.append(f"| {engine} | {' | '.join(cells)} | {first} | {num(f['peak_rss_mib'], 0)} MiB | {quality} |")
    return out


ENGINE_FILES = {
    ENGINES_FILE: ENGINES_COMMAND,
    "engines_base.json": "python benchmarks/bench_engines.py --models base --threads 2 --sst2-limit 64 "
    "--squad-limit 8 --output benchmarks/results/engines_base.json (every engine once), then the same with "
    "--rounds 3 --merge --engines transformers,onnxruntime_int8,st_onnx,bertkit_int8,bertkit_onnxruntime_int8",
    "engines_xeon.json": "python benchmarks/bench_engines.py --models base --threads 16 --sst2-limit 256 "
    "--squad-limit 32 --merge --engines E,F,... (three parts: the raw engines, bertkit's own, int8 and compiled)",
}
"""``bench_engines.py`` results, one a machine, with the command that wrote each: this AVX2 machine's first."""

ENGINES_INTRO = """\
## Inference engines

Generated from `benchmarks/results/engines*.json`, which `python benchmarks/bench_engines.py` writes (one run,
every installed engine, each in its own process, the same inputs; `--engines` runs a subset). Each cell:
sentences/s over the whole input set, and the p50/p99 time of one call (one batch, tokenization included) in
ms. First call: load, export or compile, one batch of 8, with a cold cache (in brackets: a second process, with
the cache bertkit left). Cosine: each vector against the first engine's (transformers float32), min/mean, at the
largest batch.
"""


def rounds_line(d: dict) -> str:
    """How many times each engine ran (``bench_engines.py --rounds``; a ``--merge`` may mix counts)."""
    counts = {
        len(w.get("rounds", [0]))
        for per_engine in d["models"].values()
        for figures in per_engine.values()
        for w in figures.get("workloads", {}).values()
    }
    if counts <= {1}:
        return ""
    if len(counts) == 1:
        return f", each figure the median of {counts.pop()} rounds of every engine run in turn"
    return (
        f", each figure the median of its engine's rounds, run in turn ({min(counts)} to {max(counts)} rounds by "
        "engine: the file's `rounds` lists say which)"
    )


def engines_section() -> str:
    """The engine tables of every machine measured, for docs/performance.md (``performance_page.py``)."""
    out = [ENGINES_INTRO]
    if not result_path(ENGINES_FILE).is_file():
        out.append(f"\nNot measured yet: run `{ENGINES_COMMAND}`, then `python benchmarks/performance_page.py`.\n")
    for name, command in ENGINE_FILES.items():
        if not result_path(name).is_file():
            continue
        d = load(name)
        info = {key: value for key, value in d["machine"].items() if key != "gpu"}  # a CPU benchmark
        host = (
            f" (the host CPU of a machine lent for GPU work; torch {info.get('torch')})"
            if d["machine"].get("gpu")
            else ""
        )
        out.append(f"\n### {machine(info)}{host}, `{name}`\n\nCPU flags: {info.get('cpu_features', '?')}; ")
        median = rounds_line(d)
        out.append(f"{d['threads']} thread(s){median}. Inputs: {d['inputs']}, batches {d['batches']}, ")
        out.append(f"at most {d['max_length']} tokens. Command: `{command}`.\n")
        for engine, why in d.get("skipped", {}).items():
            out.append(f"\n- skipped {engine}: {why}")
        for model, per_engine in d["models"].items():
            reference = next((e for e, f in per_engine.items() if "error" not in f), "")
            out.append(f"\n\n#### {model}\n\n")
            out.append("\n".join(engine_table(per_engine, reference)))
        out.append("\n")
    return "".join(out)
