"""Write the soak and start-up tables of docs/reliability.md from the raw results in benchmarks/results/.

    python benchmarks/reliability_tables.py            # rewrite the tables in docs/reliability.md
    python benchmarks/reliability_tables.py --check    # exit 1 if docs/reliability.md differs from what this writes
    python benchmarks/reliability_tables.py --smoke    # write the page to a temporary folder

Each table sits between ``<!-- table: NAME -->`` and ``<!-- end table: NAME -->``; everything else in the
page is left as it is. ``serve_soak.json`` (``bench_serve_soak.py``) makes the soak table and
``serve_startup.json`` (``bench_serve_startup.py``) the start-up table; a file not there yet gives one row
that says "not yet measured".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from harness import page_main
from results_page import machine

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "reliability.md"
SOAK_COMMAND = "python benchmarks/bench_serve_soak.py --duration 600"
STARTUP_COMMAND = "python benchmarks/bench_serve_startup.py"


def _raw(name: str) -> str:
    return f"[{name}](../benchmarks/results/{name})"


def soak_table(results: Path) -> list[str]:
    path = results / "serve_soak.json"
    out = [
        "| command | rate | requests | 5xx / dropped | RSS (growth after the first window, bound) "
        "| p50 / p99 per window, ms | verdict | machine | raw result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    if not path.is_file():
        return [*out, f"| `{SOAK_COMMAND}` | not yet measured | | | | | | | |"]
    d = json.loads(path.read_text(encoding="utf-8"))
    capacity = d.get("capacity")
    rate = f"{d['rate']:g} req/s for {d['duration_s']:g} s" + (
        f" (capacity {capacity['good_per_s']:g} good req/s)" if capacity else ""
    )
    windows = ", ".join(f"{w['p50_ms']:g} / {w['p99_ms']:g}" for w in d["windows"] if w["p99_ms"] is not None)
    memory = f"{d['rss_first_mb']:g} to {d['rss_max_mb']:g} MB (+{d['rss_growth_mb']:g}, bound {d['settings']['rss_bound_mb']:g})"
    verdict = (
        "passed" if d["verdict"]["passed"] else "FAILED: " + ", ".join(k for k, v in d["verdict"].items() if not v)
    )
    cells = [
        f"`{d.get('command', SOAK_COMMAND)}`",
        rate,
        f"{d['sent']:,}",
        f"{d['server_5xx']} / {d['dropped']}",
        memory,
        windows,
        verdict,
        machine(d["machine"]),
        _raw(path.name),
    ]
    return [*out, "| " + " | ".join(cells) + " |"]


def startup_table(results: Path) -> list[str]:
    path = results / "serve_startup.json"
    out = [
        "| case | command | port answers (/health/live) | ready (/health/ready 200) | first /embed answered "
        "| machine | raw result |",
        "|---|---|---|---|---|---|---|",
    ]
    if not path.is_file():
        return [*out, f"| every case | `{STARTUP_COMMAND}` | not yet measured | | | | |"]
    d = json.loads(path.read_text(encoding="utf-8"))
    for case in d["cases"]:
        cells = [
            case["name"],
            f"`{case['command']}`",
            f"{case['live_s']:.2f} s",
            f"{case['ready_s']:.2f} s",
            f"{case['first_embed_s']:.2f} s",
            machine(d["machine"]),
            _raw(path.name),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


TABLES: dict[str, Callable[[Path], list[str]]] = {"soak": soak_table, "startup": startup_table}


def render(page: str, results: Path = RESULTS) -> str:
    """``page`` with each table between its markers made anew from ``results``."""
    for name, make in TABLES.items():
        begin, end = f"<!-- table: {name} -->", f"<!-- end table: {name} -->"
        first, last = page.find(begin), page.find(end)
        if first < 0 or last < first:
            raise SystemExit(f"{PAGE} has no {begin} ... {end} block")
        page = page[:first] + "\n".join([begin, *make(results), end]) + page[last + len(end) :]
    return page


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, __doc__, PAGE, lambda: render(PAGE.read_text(encoding="utf-8")), "reliability_tables.py")


if __name__ == "__main__":
    raise SystemExit(main())
