"""Rows of the serving and reliability results: load, engines behind HTTP, abuse and fuzzing."""

from __future__ import annotations

from results_render import Row, machine, num, pct
from results_sources import CONTEXT, load


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
