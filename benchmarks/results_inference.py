"""Rows of the inference results: speed, latency, memory and first call against the peers, and int8 quality."""

from __future__ import annotations

from collections.abc import Callable

from results_render import Row, machine, num
from results_sources import CONTEXT, load

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
