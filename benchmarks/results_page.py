"""Write docs/results.md from the raw benchmark results in benchmarks/results/*.json.

    python benchmarks/results_page.py            # rewrite docs/results.md
    python benchmarks/results_page.py --check    # exit 1 if either differs from what this writes
    python benchmarks/results_page.py --smoke    # write the page to a temporary folder

Every figure in the page's tables is read from a result file; this script only holds what those files
lack (a row's description, and the command where the file does not record it), keyed by file name.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from collections.abc import Callable
from pathlib import Path

from harness import page_main

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "results.md"
ENGINES_FILE = "engines.json"
ENGINES_COMMAND = (
    "python benchmarks/bench_engines.py --models minilm --threads 2 --sst2-limit 256 --squad-limit 32 --rounds 3"
)

Row = tuple[str, str, str, str]  # bertkit, peer (same run), ratio, machine and load


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def num(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def pct(share: float) -> str:
    return f"{100 * share:.1f} %"


def machine(info: dict, extra: dict | None = None) -> str:
    """CPU, cores and threads (or the GPU and torch), from whatever the file recorded."""
    info = {**info, **(extra or {})}
    if info.get("gpu"):  # a GPU run: the card and the torch build are what matter, not the host's threads
        parts = [f"{info['gpu']}, torch {info.get('torch', '?')}"]
    else:
        parts = [f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores"]
    if "torch_threads" in info and not info.get("gpu"):
        parts.append(f"{info['torch_threads']} thread(s)")
    return ", ".join(parts)


# ---- fine-tuning (bench_finetune.py files: a list of runs, one per task and seed) ----


def spread(values: list[float], digits: int = 3) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f} ({len(values)} seeds)"


def system_cell(runs: list[dict], key: str) -> str:
    systems = [r[key] for r in runs if key in r]
    if not systems:
        return ""
    main = runs[0]["main_metric"]
    digits = 1 if runs[0]["task"] == "squad" else 3
    scores = [r[f"{key}_main"] for r in runs if r.get(f"{key}_main") is not None]
    cell = f"{main} {spread(scores, digits)}; " if scores else ""
    epochs = [t for s in systems for t in s.get("epoch_seconds", [])]
    if epochs and runs[0].get("max_steps") is None:
        low, high = num(min(epochs), 0), num(max(epochs), 0)
        cell += f"{low} s per epoch" if low == high else f"{low}-{high} s per epoch"
    else:
        cell += f"{num(statistics.mean(s['train_seconds'] for s in systems))} s for {systems[0]['steps']} updates"
    return cell + f", {pct(statistics.mean(s['padding_share'] for s in systems))} padding"


def finetune_rows(name: str) -> list[tuple[str, Row]]:
    """One row per task (and step bound) of a bench_finetune.py file; seeds are pooled."""
    groups: dict[tuple[str, object, object], list[dict]] = {}
    for run in load(name)["runs"]:
        groups.setdefault((run["task"], run.get("max_steps"), run.get("epochs")), []).append(run)
    rows = []
    for (task, max_steps, epochs), runs in groups.items():
        first = runs[0]
        size = f"{max_steps} updates" if max_steps else f"{epochs:g} epoch(s)"
        if first.get("max_train_examples"):
            size += f", first {first['max_train_examples']:,} examples"
        what = f"MiniLM, {task}, {size}, batch {first['batch_size']}, lr {first['lr']:g}, seq {first['max_seq_length']}"
        if first.get("bertkit", {}).get("batches"):
            what += f"; bertkit batches: {first['bertkit']['batches']}"
        if first.get("bertkit_schedule"):
            what += f", schedule {first['bertkit_schedule']}"
        speedups = [r.get("speedup_per_epoch") or r.get("speedup_per_step") for r in runs]
        known = [s for s in speedups if s]
        ratio = ""
        if known:
            unit = "per epoch" if first.get("speedup_per_epoch") else "per update"
            ratio = f"{statistics.mean(known):.2f}x {unit}"
            if len(known) > 1:
                ratio += f" ({min(known):.2f}-{max(known):.2f})"
        commands = dict.fromkeys(r["command"] for r in runs if r.get("command"))  # seeds run apart: each command
        row = (system_cell(runs, "bertkit"), system_cell(runs, "peer"), ratio, machine(first["machine"]))
        rows.append((f"{what} | " + "; ".join(f"`{c}`" for c in commands), row))
    return rows


# ---- one extractor per other benchmark ----


def tokenizer_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    by = {r["name"]: r for r in d["results"]}
    ours, raw, fast = by["bertkit encode_batch"], by["tokenizers (same pipeline)"], by["transformers BertTokenizerFast"]
    row = (
        f"{num(ours['tokens_per_s'] / 1000)} k tok/s ({ours['tokens']:,} tokens)",
        f"raw `tokenizers`, same pipeline {num(raw['tokens_per_s'] / 1000)} k; `BertTokenizerFast` "
        f"{num(fast['tokens_per_s'] / 1000)} k",
        f"+{pct(d['overhead_vs_raw_tokenizers_same_pipeline'])} over raw `tokenizers`; "
        f"{d['hf_fast_time_over_bertkit_time']:.2f}x `BertTokenizerFast`",
        machine(d["machine"], {"commit": d["commit"]}),
    )
    return [(f"`encode_batch`, {d['data']} | `python benchmarks/bench_tokenizer.py`", row)]


def prepare_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    ours, corpus = d["bertkit"], d["bertkit"]["corpus_stats"]
    what = (
        f"{corpus['files']} books, {num(ours['corpus_MB'], 0)} MB, seq {d['settings']['max_seq_length']}, "
        f"dupe factor {d['settings']['dupe_factor_bertkit']}: {ours['instances']:,} instances, {ours['tokens']:,} tokens"
    )
    cell = f"{num(ours['tokens_per_s'] / 1000, 0)} k tok/s, {num(ours['peak_rss_MB'], 0)} MB peak RSS"
    cell += f"; sentence splitting {num(d['segmenter']['MB_per_s'])} MB/s"
    peer, ratio = "", ""
    if "peer" in d:
        peer = f"{d['peer']['what']}: {num(d['peer']['tokens_per_s'] / 1000, 0)} k tok/s"
        peer += f", {num(d['peer']['peak_rss_MB'], 0)} MB"
        ratio = f"{d['ratio']['tokens_per_s']:.1f}x tokens/s, {d['ratio']['peak_rss']:.2f}x memory"
    return [
        (f"{what} | `{CONTEXT[name]['command']}`", (cell, peer, ratio, machine(d["machine"], {"commit": d["commit"]})))
    ]


def step_speed(side: dict, datasheet: float | None) -> str:
    """Tokens/s and MFU against the measured peak; on a GPU also against the datasheet peak."""
    cell = f"{num(side['tokens_per_s'], 0)} tok/s, MFU {pct(side['mfu'])}"
    if datasheet:
        cell += f" ({pct(side['tokens_per_s'] * side['flops_per_token'] / datasheet)} of the datasheet peak)"
    return cell


def step_peak(d: dict) -> tuple[str, float | None]:
    """The machine cell's peak note, and the GPU's datasheet peak at the run's precision (None on a CPU)."""
    gpu = d["machine"].get("gpu")
    dtype = {"torch.float32": "fp32", "torch.bfloat16": "bf16"}.get(d.get("peak_dtype", "torch.float32"), "fp32")
    if not gpu:
        return f"{dtype} peak {num(d['peak_flops'] / 1e9, 0)} GFLOP/s", None
    from bertkit.training.run_log import datasheet_peak  # only here: it imports torch

    datasheet = datasheet_peak(gpu, dtype)
    label = "tf32" if dtype == "fp32" else dtype  # the benchmark runs fp32 matmuls in TF32 on a GPU
    note = f"measured {label} matmul peak {num(d['peak_flops'] / 1e12, 0)} TFLOP/s"
    if datasheet:
        note += f", datasheet {datasheet / 1e12:g}"
    return note, datasheet


def train_step_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    peak_note, datasheet = step_peak(d)
    rows = []
    for r in d["results"]:
        precision = f"{r['precision']} (TF32 matmuls)" if datasheet and r["precision"] == "fp32" else r["precision"]
        what = f"`{r['size']}`, seq {r['seq_len']}, batch {r['batch']}, {precision}, AdamW"
        ours, peer = r["bertkit"], r["transformers"]
        row = (
            step_speed(ours, datasheet),
            f"`transformers.BertForPreTraining` (sdpa) {step_speed(peer, datasheet)}",
            f"{r['speedup']:.2f}x",
            machine(d["machine"], {"commit": d["commit"]}) + f", {peak_note}",
        )
        rows.append((f"{what} | `{CONTEXT[name]['command']}`", row))
        if "bertkit_compiled" in r:
            c = r["bertkit_compiled"]
            row = (
                f"`--compile` {step_speed(c, datasheet)} (first step {num(c['first_step_s'], 0)} s)",
                row[1],
                f"{r['speedup_compiled']:.2f}x",
                row[3],
            )
            rows.append((f"{what}, compiled | `{CONTEXT[name]['command']}`", row))
    return rows


def pretrain_metrics_rows(name: str) -> list[tuple[str, Row]]:
    """A ``bertkit pretrain`` run's ``metrics.jsonl``: its speed over the logged windows and its last evaluation."""
    records = [json.loads(line) for line in (RESULTS / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    train = [r for r in records if r["split"] == "train"]
    final = [r for r in records if r["split"] == "eval"][-1]
    windows = train[1:] or train  # the first window holds the start-up
    cell = (
        f"{train[-1]['step']:,} updates in {num(train[-1]['elapsed_s'])} s; median "
        f"{num(statistics.median(r['tokens_per_s'] for r in windows) / 1e6, 2)} M tok/s, MFU "
        f"{pct(statistics.median(r['mfu'] for r in windows))} of the datasheet peak; held-out MLM accuracy "
        f"{pct(final['mlm_acc'])}, loss {final['loss']:.3f}"
    )
    context = CONTEXT[name]
    return [(f"{context['what']} | `{context['command']}`", (cell, "", "", context["machine"]))]


def pretrain_quality_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    final = d["eval_curve"][-1]
    s = d["settings"]
    what = (
        f"`{s['model']}`, {s['budget']} on {s['threads']} thread, {d['data']['train']['num_tokens']:,} training tokens "
        f"at seq {s['max_seq_length']}"
    )
    cell = (
        f"{d['updates']:,} updates of {s['micro_batch_size']} x {s['max_seq_length']}; held-out MLM accuracy "
        f"{pct(final['mlm_acc'])}, NSP {pct(final['nsp_acc'])}"
    )
    return [(f"{what} | `{d['command']}`", (cell, "", "", machine(d["machine"])))]


def curve_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    ours, peer = d["curves"]["bertkit"], d["curves"]["transformers"]

    def cell(points: list[dict]) -> str:
        accs = " / ".join(f"{100 * p['mlm_acc']:.1f}" for p in points)
        steps = " / ".join(str(p["step"]) for p in points)
        return f"MLM accuracy {accs} % at {steps} updates, {num(points[-1]['seconds'], 0)} s"

    what = f"same batches, weights and optimizer: `{d['settings']['size']}`, {d['settings']['steps']:,} updates"
    ratio = f"{peer[-1]['seconds'] / ours[-1]['seconds']:.2f}x faster"
    return [(f"{what} | `{d['command']}`", (cell(ours), cell(peer), ratio, machine(d["machine"])))]


def probe_rows(name: str) -> list[tuple[str, Row]]:
    """Linear probe on frozen features: the best dev accuracy of each model at the largest training size."""
    d = load(name)
    most = max(r["train_examples"] for r in d["results"])
    best: dict[str, dict] = {}
    for r in d["results"]:
        if (
            r["train_examples"] == most
            and r["dev_accuracy"] > best.get(r["model"], {"dev_accuracy": -1})["dev_accuracy"]
        ):
            best[r["model"]] = r
    cells = [f"{m}: dev accuracy {r['dev_accuracy']:.3f} ({r['features']})" for m, r in best.items()]
    what = (
        f"linear probe on frozen features, a pre-trained `tiny` against random weights, {d['train']}, {most:,} examples"
    )
    return [(f"{what} | `{d['command']}`", ("; ".join(cells), "", "", machine(d["machine"])))]


INFERENCE_SIDES = {
    # side in the result file: (column, label)
    "bertkit": ("ours", "fp32"),
    "bertkit_compiled": ("ours", "`--compile`"),
    "bertkit_int8": ("ours", "`--quantize int8`"),
    "transformers": ("peer", "`transformers` fp32"),
    "onnxruntime": ("peer", "onnxruntime fp32 (bertkit's export)"),
    "onnxruntime_int8": ("peer", "onnxruntime int8 (bertkit's export)"),
    "st_onnx_int8": ("peer", "sentence-transformers ONNX int8"),
}


def _sides(values: dict, column: str, cell: Callable[[float], str]) -> str:
    return "; ".join(
        f"{label} {cell(values[side])}"
        for side, (where, label) in INFERENCE_SIDES.items()
        if where == column and side in values
    )


def inference_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    rows = []
    for key, w in d["workloads"].items():
        t, x = w["throughput_per_s"], w["speedup_vs_transformers"]
        cosine = w.get("cosine_vs_transformers_min", {})
        what = f"{d['model']}, {key.replace('_', ' ')} ({w['inputs']}, batch {w['batch_size']})"
        ours = _sides(t, "ours", lambda v: f"{num(v)} /s")
        if "bertkit_int8" in cosine:
            ours += f" (int8 cosine with fp32 >= {cosine['bertkit_int8']:.4f})"
        ratio = "; ".join(
            f"{label} {x[side]:.2f}x"
            for side, (where, label) in INFERENCE_SIDES.items()
            if side in x and side != "transformers"
        )
        rows.append(
            (
                f"{what} | `{CONTEXT[name]['command']}`",
                (ours, _sides(t, "peer", lambda v: f"{num(v)} /s"), ratio, machine(d["machine"])),
            )
        )
    lat = d["single_request_latency_ms"]
    p50_p99 = lambda v: f"{v['p50']:.1f}/{v['p99']:.1f} ms"  # noqa: E731
    row = (
        _sides(lat, "ours", p50_p99),
        _sides(lat, "peer", p50_p99),
        f"fp32 p50 {lat['transformers']['p50'] / lat['bertkit']['p50']:.2f}x",
        machine(d["machine"]),
    )
    rows.append((f"one short request, latency p50/p99 | `{CONTEXT[name]['command']}`", row))
    if d.get("peak_rss_mib"):
        rss = {k: v for k, v in d["peak_rss_mib"].items() if v is not None}
        row = (
            _sides(rss, "ours", lambda v: f"{num(v, 0)} MiB"),
            _sides(rss, "peer", lambda v: f"{num(v, 0)} MiB"),
            "",
            machine(d["machine"]),
        )
        rows.append((f"peak RSS, one process per side, SST-2 dev once | `{CONTEXT[name]['command']}`", row))
    if d.get("first_call_s"):
        first = d["first_call_s"]
        row = (
            _sides(first, "ours", lambda v: f"{num(v)} s"),
            _sides(first, "peer", lambda v: f"{num(v)} s"),
            "",
            machine(d["machine"]),
        )
        rows.append((f"first call (SST-2 dev; compiles the compiled sides) | `{CONTEXT[name]['command']}`", row))
    return rows


def int8_quality_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    engine = f" (`--backend {d['backend']}`)" if d.get("backend", "torch") != "torch" else ""
    rows = []
    for entry in d["tasks"].values():
        what = f"int8 quality{engine}: {entry['what']}, {d['base_model']} fine-tuned one epoch"
        cell = f"int8 {entry['int8_points']:.2f} ({entry['int8_minus_fp32_points']:+.2f} points)"
        row = (cell, f"bertkit fp32 {entry['fp32_points']:.2f}", "", machine(d["machine"], {"commit": d["commit"]}))
        rows.append((f"{what} | `{CONTEXT[name]['command']}`", row))
    for key, e in d.get("embed", {}).items():
        what = f"int8 quality{engine}: `embed` cosine with fp32, {key.replace('_', ' ')} ({e['texts']})"
        cell = f"min {e['cosine_min']:.4f}, mean {e['cosine_mean']:.4f}"
        rows.append(
            (f"{what} | `{CONTEXT[name]['command']}`", (cell, "", "", machine(d["machine"], {"commit": d["commit"]})))
        )
    return rows


# ---- CPU engines (bench_engines.py: every engine per model, input set and batch) ----


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
    if not (RESULTS / ENGINES_FILE).is_file():
        out.append(f"\nNot measured yet: run `{ENGINES_COMMAND}`, then `python benchmarks/performance_page.py`.\n")
    for name, command in ENGINE_FILES.items():
        if not (RESULTS / name).is_file():
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


def serve_load_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    what = f"{d['sent']:,} requests to {d['endpoint']}, concurrency {d['concurrency']}, {pct(d['malformed_fraction'])} malformed"
    if d.get("quantize"):
        what += f", `--quantize {d['quantize']}`"
    cell = (
        f"{d['server_errors_5xx']} 5xx, {d['dropped']} dropped, p50 {num(d['latency_ms']['p50'] / 1000, 2)} s, "
        f"p99 {num(d['latency_ms']['p99'] / 1000, 2)} s, {num(d['throughput_good_per_s'])} req/s"
    )
    ratio = f"{d['served_vs_offline']:.2f}x the offline one-at-a-time rate"
    return [(f"{what} | `{CONTEXT[name]['command']}`", (cell, "", ratio, machine(d["machine"])))]


def serve_engines_rows(name: str) -> list[tuple[str, Row]]:
    """One row per concurrency level: the bertkit servers against infinity-emb."""
    d = load(name)
    engines = {k: v for k, v in d["engines"].items() if isinstance(v, dict)}
    peer = engines.pop("infinity", None)

    def cell(r: dict) -> str:
        return f"{num(r['texts_per_s'])} /s, p50 {num(r['p50_ms'], 0)} ms, p99 {num(r['p99_ms'], 0)} ms, {r['errors']} errors"

    rows = []
    levels = next(iter(engines.values()))["levels"] if engines else {}
    for level in levels:
        what = (
            f"{d['model']}, {d['requests_per_level']:,} requests to {d['route']}, one text each (every "
            f"{d['long_every']}th a SQuAD context), {level} callers"
        )
        ours = "; ".join(f"{n} {cell(e['levels'][level])}" for n, e in engines.items() if level in e["levels"])
        theirs = cell(peer["levels"][level]) if peer and level in peer["levels"] else "not run"
        ratio = ""
        if peer and level in peer["levels"] and "bertkit" in engines:
            b, i = engines["bertkit"]["levels"][level], peer["levels"][level]
            ratio = f"bertkit fp32 {b['texts_per_s'] / i['texts_per_s']:.2f}x throughput, {b['p99_ms'] / i['p99_ms']:.2f}x p99"
        rows.append((f"{what} | `{CONTEXT[name]['command']}`", (ours, theirs, ratio, machine(d["machine"]))))
    return rows


def abuse_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    what = f"{len(d['attacks'])} attack kinds, {d['slowloris']['opened']} slowloris clients"
    cell = (
        f"{d['server_5xx']} 5xx over {d['attack_requests']:,} attack requests; normal callers p99 "
        f"{num(d['baseline']['p99_ms'], 0)} ms alone, {num(d['under_attack']['p99_ms'], 0)} ms during the attack; "
        f"RSS {num(d['rss_after_warmup_mb'], 0)} to {num(d['rss_peak_mb'], 0)} MB"
    )
    return [(f"{what} | `{CONTEXT[name]['command']}`", (cell, "", "", CONTEXT[name]["machine"]))]


def fuzz_rows(name: str) -> list[tuple[str, Row]]:
    d = load(name)
    slowest = max(t["slowest_input_s"] for t in d["targets"].values())
    what = f"fuzzing {len(d['targets'])} targets ({', '.join(d['targets'])})"
    cell = f"{d['total_inputs']:,} inputs, {d['failures']} failures, slowest input {slowest:.2f} s"
    return [(f"{what} | `{CONTEXT[name]['command']}`", (cell, "", "", machine(d["machine"], {"commit": d["commit"]})))]


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

Extractor = Callable[[str], list[tuple[str, Row]]]

# The current claims, area by area: (result file, how its rows are read, which row). One row a claim, the
# newest measurement of it; older files and the experiments that led here are in git's history.
CLAIMS: list[tuple[str, list[tuple[str, Extractor, int]]]] = [
    (
        "Pre-training step",
        [("train_step_cpu_quiet.json", train_step_rows, 0), ("train_step_cpu_quiet.json", train_step_rows, 2)],
    ),
    (
        "Pre-training on a GPU",
        [
            ("train_step_gpu_bf16_base.json", train_step_rows, 0),
            ("train_step_gpu_bf16_large.json", train_step_rows, 0),
            ("pretrain_gpu_small_bf16_metrics.jsonl", pretrain_metrics_rows, 0),
        ],
    ),
    ("Data preparation", [("prepare_data.json", prepare_rows, 0), ("prepare_data_x10.json", prepare_rows, 0)]),
    ("Tokenizer", [("tokenizer.json", tokenizer_rows, 0)]),
    (
        "Fine-tuning speed and quality",
        [
            ("finetune_full_sst2.json", finetune_rows, 0),
            ("finetune_full_mrpc.json", finetune_rows, 0),
            ("finetune_full_rte.json", finetune_rows, 0),
            ("finetune_stsb_unpadded.json", finetune_rows, 0),
            ("finetune_full_conll.json", finetune_rows, 0),
            ("finetune_full_squad_parity.json", finetune_rows, 0),
        ],
    ),
    (
        "Inference",
        [
            ("inference.json", inference_rows, 0),
            (ENGINES_FILE, engines_rows, 2),
            (ENGINES_FILE, engines_rows, 5),
            ("int8_quality.json", int8_quality_rows, 3),
            ("int8_quality_onnxruntime.json", int8_quality_rows, 0),
        ],
    ),
    (
        "Serving",
        [
            ("serve_engines.json", serve_engines_rows, 0),
            ("serve_engines.json", serve_engines_rows, 3),
            ("serve_load.json", serve_load_rows, 0),
        ],
    ),
    ("Reliability", [("reliability_serve_abuse.json", abuse_rows, 0), ("reliability_fuzz.json", fuzz_rows, 0)]),
    (
        "Pre-training quality",
        [
            ("pretrain_quality.json", pretrain_quality_rows, 0),
            ("pretraining_curve.json", curve_rows, 0),
            ("probe_demo_reviews.json", probe_rows, 0),
        ],
    ),
]

INTRO = """\
# Measured results

The current claims, area by area, one each: the newest measurement, with its command, its machine and the raw
result file it is read from. `python benchmarks/results_page.py` writes this page from `benchmarks/results/`, and
`make test` checks that it matches them; older measurements are in git's history, the experiments that chose
the defaults in [experiments.md](experiments.md), where a training step's time goes in
[performance.md](performance.md).

CPU runs are on 2 cores of an AMD EPYC (AVX2, no AVX-512), torch 2.13.0 CPU, fp32, unless the row says otherwise;
GPU runs on one NVIDIA H200 (`benchmarks/GPU.md`). Each benchmark runs bertkit and its peer in the same run on
the same inputs; the machine was shared with other jobs, so the same-run ratios are the figures to read. The peer
for fine-tuning is a plain PyTorch loop over `transformers` with the same recipe, for the pre-training step
`transformers.BertForPreTraining`; MFU is against the matmul peak measured in the same run (GPU rows add the
share of the datasheet peak, 989 TFLOP/s bf16). Fine-tuning rows pool a file's seeds: mean ± sample standard
deviation of the dev metric the kept checkpoint scored.

Correctness is tested rather than measured here: token ids identical to `transformers.BertTokenizer`
(`tests/test_tokenizer_parity.py`), all-MiniLM-L6-v2 outputs within 2.4e-6 of `transformers.BertModel`
(`tests/test_parity_hf.py`), Google's TensorFlow checkpoints read tensor for tensor (`tests/test_weights_tf.py`),
a run killed with SIGKILL and resumed ending with bit-identical weights (`tests/test_training_resume.py`).
"""


def claim(name: str, extract: Extractor, index: int) -> list[str]:
    """One claim as a list item: what, the ratio, both sides, the command, the machine and the raw file."""
    what_and_command, (ours, peer, ratio, where) = extract(name)[index]
    what, _, command = what_and_command.rpartition(" | `")
    text = f"- **{what}**" + (f": {ratio}" if ratio else "") + f". bertkit: {ours}"
    text += (f"; peer: {peer}" if peer else "") + f". `{command} on {where}"
    text += f"; raw result [{name}](../benchmarks/results/{name})."
    return textwrap.wrap(text, 116, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


# ---- fine-tuning defaults (bench_finetune_defaults.py: one JSON line per run) ----

DEFAULTS_FILE = "finetune_defaults.jsonl"
DEFAULTS_COMMAND = (
    "python benchmarks/bench_finetune_defaults.py --sets SET --recipes fixed,rule --seeds 1,2,3 --threads 1 "
    "--output benchmarks/results/finetune_defaults.jsonl"
)


DEFAULTS_SETS = {  # what the result rows name by a short key
    "rte": "RTE (2,490 examples)",
    "mrpc": "MRPC (3,668)",
    "stsb": "STS-B (5,749)",
    "conll": "CoNLL-2003 (14,041)",
    "sst2-1k": "SST-2, first 1,000",
    "sst2-3k": "SST-2, first 3,000",
    "conll-1k": "CoNLL-2003, first 1,000",
    "conll-3k": "CoNLL-2003, first 3,000",
}


def defaults_section() -> list[str]:
    """Before (batch 32, 3 epochs) against after (sized to the set), set by set; then the searches."""
    path = RESULTS / DEFAULTS_FILE
    if not path.is_file():
        return []
    runs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = [
        "\n## Fine-tuning defaults\n",
        "all-MiniLM-L6-v2 fine-tuned with batch 32 for 3 epochs (the paper's recipe, and the defaults before the",
        "size rule) and with nothing given (batch and epochs sized to the set: [finetuning.md](finetuning.md)),",
        f"lr 5e-5, dev metric of the kept epoch, mean ± sd over seeds. Command: `{DEFAULTS_COMMAND}`",
        f"on {machine(runs[0]['machine'])}; raw result [{DEFAULTS_FILE}](../benchmarks/results/{DEFAULTS_FILE}).\n",
        "| training set | metric | batch 32, 3 epochs | sized to the set | after - before | seconds before / after |",
        "|---|---|---|---|---|---|",
    ]
    sets = list(dict.fromkeys(r["set"] for r in runs if r["recipe"] in ("fixed", "rule")))
    for name in sets:
        before = [r for r in runs if r["set"] == name and r["recipe"] == "fixed"]
        after = [r for r in runs if r["set"] == name and r["recipe"] == "rule"]
        if not before or not after:
            continue
        metric = {"ner": "entity F1", "regression": "Pearson"}.get(before[0]["task"], "accuracy")

        def cell(rows: list[dict]) -> str:
            return f"{spread([r['best'] for r in rows])}; batch {rows[0]['batch_size']}, {rows[0]['epochs']:g} epochs, {rows[0]['updates']:,} updates"

        seeds = sorted({r["seed"] for r in before} & {r["seed"] for r in after})
        paired = [
            next(a["best"] for a in after if a["seed"] == s) - next(b["best"] for b in before if b["seed"] == s)
            for s in seeds
        ]
        gain = f"{statistics.mean(paired):+.3f}" + (
            f" ({sum(d > 0 for d in paired)} of {len(paired)} seeds up)" if len(paired) > 1 else ""
        )
        seconds = f"{num(statistics.mean(r['seconds'] for r in before), 0)} / {num(statistics.mean(r['seconds'] for r in after), 0)}"
        out.append(
            f"| {DEFAULTS_SETS.get(name, name)} | {metric} | {cell(before)} | {cell(after)} | {gain} | {seconds} |"
        )
    paragraphs = [
        "CoNLL-2003 (14,041) and SST-2 (67,349) keep batch 32 and 3 epochs under the rule (1,317 and 6,315 updates;"
        " `tests/test_finetune_defaults.py`), so their runs are the ones in the table above. Seconds include loading"
        " and the dev evaluations; two runs shared the 2 cores, one thread each."
    ]
    for row in (r for r in runs if r["recipe"] == "search"):
        grid = ", ".join(f"{k} {'/'.join(f'{v:g}' for v in values)}" for k, values in row["grid"].items())
        tried = "; ".join(
            f"{run['name']} ({', '.join(f'{k} {v:g}' for k, v in run['params'].items())}): {run['metric']:.3f} in {run['seconds']:.0f} s"
            for run in row["runs"]
        )
        single = [r for r in runs if (r["set"], r["recipe"], r["seed"]) == (row["set"], "rule", row["seed"])]
        against = (
            f" One run with the defaults (batch {single[0]['batch_size']}, {single[0]['epochs']:g} epochs), same seed: "
            f"{single[0]['best']:.3f} in {single[0]['seconds']:.0f} s."
            if single
            else ""
        )
        paragraphs.append(
            f"Search on {DEFAULTS_SETS.get(row['set'], row['set'])} (seed {row['seed']}, grid {grid}, batch sized to the"
            f" set; `python benchmarks/bench_finetune_defaults.py --sets {row['set']} --recipes search --grid "
            f"'{json.dumps(row['grid'])}'`): {tried}. Winner {row['winner']}, dev {row['best']:.3f}, the whole search "
            f"{row['seconds']:.0f} s ({machine(row['machine'])}).{against}"
        )
    for paragraph in paragraphs:
        out.extend(["", *textwrap.wrap(paragraph, 116, break_long_words=False, break_on_hyphens=False)])
    return out


def render() -> str:
    out = [INTRO]
    for area, claims in CLAIMS:
        out.append(f"\n## {area}\n")
        for name, extract, index in claims:
            out.extend(claim(name, extract, index))
        if area == "Fine-tuning speed and quality":
            out.extend(defaults_section())
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, __doc__, PAGE, render, "results_page.py")


if __name__ == "__main__":
    raise SystemExit(main())
