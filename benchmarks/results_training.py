"""Rows of the training results: fine-tuning, tokenizer, data preparation, the pre-training step and its quality."""

from __future__ import annotations

import json
import statistics

from results_render import Row, machine, num, pct, spread
from results_sources import CONTEXT, load, result_path

# ---- fine-tuning (bench_finetune.py files: a list of runs, one per task and seed) ----


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


# ---- one extractor per other training benchmark ----


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
    records = [json.loads(line) for line in result_path(name).read_text(encoding="utf-8").splitlines() if line.strip()]
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
