"""What every benchmark script shares: the ``--smoke`` and ``--output`` options, where a result goes, and
writing it.

A smoke run (``--smoke``) takes the script's real code path on tiny inputs (the ``tiny`` model preset, a
handful of inputs or steps) so that a test can run it in seconds; its result goes to a temporary folder,
never into ``benchmarks/results/``, whose files are the measured figures the results page is built from.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = ROOT.parent / "shared" / "data"

SMOKE_HELP = "tiny inputs and a few steps, the result to a temporary folder: checks that the script still runs"


def add_options(parser: argparse.ArgumentParser, output_help: str = "result file") -> None:
    """``--smoke`` and ``--output`` (``--out`` is the older spelling of some scripts)."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--output", "--out", dest="output", default=None, help=output_help)


def scratch_folder(prefix: str = "bertkit-bench-") -> Path:
    """A fresh temporary folder for a run's working files (models, data, logs), removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def smoke_folder() -> Path:
    """A scratch folder for a smoke run's tiny model and data."""
    return scratch_folder("bertkit-smoke-")


def output_path(args: argparse.Namespace, default: Path) -> Path:
    """``--output`` if given; otherwise ``default`` (under ``benchmarks/results/``), or for a smoke run a file
    of that name in a temporary folder. A smoke run refuses to write into ``benchmarks/results/``."""
    if args.output:
        path = Path(args.output)
    elif args.smoke:  # kept after the run, to be looked at
        path = Path(tempfile.mkdtemp(prefix="bertkit-smoke-result-")) / default.name
    else:
        path = default
    if args.smoke and path.resolve().is_relative_to(RESULTS):
        raise SystemExit(f"a smoke run does not write into {RESULTS}; give --output elsewhere")
    return path


def write_json(path: Path, payload: Any, indent: int = 1) -> Path:
    """``payload`` as JSON at ``path``, atomically (a reader never sees half a file); the folder is made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(payload, indent=indent) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def append_jsonl(path: Path, record: dict) -> None:
    """One JSON line at the end of ``path`` (runs that add a line each, so an interrupted series keeps its lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def shared_data(relative: str) -> Path | None:
    """``../shared/data/<relative>`` where that exists, else None."""
    path = SHARED / relative
    return path if path.exists() else None


def set_threads(threads: int | None) -> None:
    """torch threads for this process (one per process on a shared machine keeps the figures comparable)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def page_main(argv: list[str] | None, doc: str | None, page: Path, render: Callable[[], str], script: str) -> int:
    """The command line of a docs page generator: write ``page`` from ``render()``; ``--check`` exits 1 when
    the page on disk differs; ``--smoke``/``--output`` write it elsewhere."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if {page.name} is not up to date")
    add_options(parser, f"where to write the page (default docs/{page.name})")
    args = parser.parse_args(argv)
    text = render()
    if args.smoke or args.output:
        out = output_path(args, page)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}")
        return 0
    if args.check:
        if not page.is_file() or page.read_text(encoding="utf-8") != text:
            print(f"{page} is out of date: run python benchmarks/{script}", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page}")
    return 0
