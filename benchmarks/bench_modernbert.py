"""bertkit's ModernBERT against transformers' ModernBERT on this CPU, same random weights, one run each:

- inference (``ModernBertForSequenceClassification`` forward) and one training step (forward, backward,
  AdamW) on a tiny and a base-sized config, on a padded batch (lengths spread from a quarter to all of the
  batch length, as real text is);
- peak memory of classification and embedding (mean-pooled ``ModernBertModel``) at 1k, 4k and 8k tokens:
  each library and length in a fresh process, the peak resident set (``VmHWM``, reset with the model loaded)
  during the forward less the resident set before it.

The result file is written after each part, so an interrupted run keeps what it measured; a child process
that dies (out of memory) is recorded as such instead of hanging the run.

    taskset -c 1 python benchmarks/bench_modernbert.py --threads 1   # writes benchmarks/results/modernbert.json
    python benchmarks/bench_modernbert.py --smoke              # tiny sizes, a temporary result file
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue as queues
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import RESULTS, add_options, output_path, set_threads, write_json
from machine_info import record

SIZES = {
    "tiny": dict(num_hidden_layers=3, hidden_size=128, num_attention_heads=2, intermediate_size=192),
    "base": dict(num_hidden_layers=22, hidden_size=768, num_attention_heads=12, intermediate_size=1152),
}
COMMON = dict(vocab_size=50368, pad_token_id=50283, local_attention=128, max_position_embeddings=8192)


def configs(size: str) -> tuple[Any, Any]:
    import transformers

    from bertkit.config import ModernBertConfig

    values: dict[str, Any] = {**COMMON, **SIZES[size]}
    return ModernBertConfig(**values), transformers.ModernBertConfig(**values, attn_implementation="sdpa")


def padded_batch(batch: int, length: int, seed: int = 0) -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 50000, (batch, length), generator=generator)
    lengths = torch.linspace(length // 4, length, batch).long()
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    return ids * mask + COMMON["pad_token_id"] * (1 - mask), mask


def pair(size: str) -> tuple[Any, Any]:
    """bertkit's and transformers' classifiers with the same random weights."""
    import torch
    import transformers

    from bertkit.models.modernbert import ModernBertForSequenceClassification, load_state

    ours_config, theirs_config = configs(size)
    torch.manual_seed(0)
    theirs = transformers.ModernBertForSequenceClassification(theirs_config)
    ours = ModernBertForSequenceClassification(ours_config)
    load_state(ours, theirs.state_dict(), source="transformers")
    return ours, theirs


REPEATS = [1]
"""Timed calls per measurement (``--repeats``); the median is kept."""


def timed(step: Any, warm_up: bool) -> float:
    if warm_up:
        step()
    times = []
    for _ in range(REPEATS[0]):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def speed(size: str, batch: int, length: int, warm_up: bool = True) -> dict[str, Any]:
    """Seconds of one inference forward and one training step for each library (after one warm-up call of
    each, when ``warm_up``)."""
    import torch

    ours, theirs = pair(size)
    ids, mask = padded_batch(batch, length)
    labels = torch.zeros(batch, dtype=torch.long)
    row: dict[str, Any] = {"size": size, "batch": batch, "length": length, "real_tokens": int(mask.sum())}
    for name, model in (("bertkit", ours), ("transformers", theirs)):
        model.eval()

        def infer(model: Any = model) -> None:
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=mask)

        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def train(model: Any = model, optimizer: Any = optimizer) -> None:
            model.train()
            model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        row[f"{name}_inference_s"] = round(timed(infer, warm_up), 4)
        row[f"{name}_train_step_s"] = round(timed(train, warm_up), 4)
    row["inference_speedup"] = round(row["transformers_inference_s"] / row["bertkit_inference_s"], 2)
    row["train_step_speedup"] = round(row["transformers_train_step_s"] / row["bertkit_train_step_s"], 2)
    return row


def _status_mib(field: str) -> float:
    """``VmHWM`` (peak resident set) or ``VmRSS`` of this process, from ``/proc/self/status``."""
    with open("/proc/self/status") as handle:
        line = next(line for line in handle if line.startswith(field + ":"))
    return int(line.split()[1]) / 1024


def _reset_peak() -> None:
    """Start the peak resident set afresh (Linux: writing 5 to ``clear_refs`` resets ``VmHWM``)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def memory_child(library: str, task: str, size: str, lengths: list[int], threads: int | None, queue: Any) -> None:
    """In a fresh process: the peak memory of ``task`` at each length, above the loaded model."""
    import torch
    import transformers

    from bertkit.models.modernbert import ModernBertForSequenceClassification

    set_threads(threads)
    ours_config, theirs_config = configs(size)
    torch.manual_seed(0)  # random weights: the memory does not depend on their values
    if library == "bertkit":
        classifier: Any = ModernBertForSequenceClassification(ours_config).eval()
    else:
        classifier = transformers.ModernBertForSequenceClassification(theirs_config).eval()
    encoder = classifier.model
    peaks = {}
    for length in lengths:
        ids, mask = padded_batch(1, length)
        mask[:] = 1
        loaded = _status_mib("VmRSS")
        _reset_peak()
        with torch.inference_mode():
            if task == "classification":
                classifier(input_ids=ids, attention_mask=mask)
            else:
                hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
                (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        peaks[str(length)] = round(_status_mib("VmHWM") - loaded, 1)
    queue.put(peaks)


def measure_in_child(library: str, task: str, size: str, lengths: list[int], threads: int | None) -> dict[str, Any]:
    """``memory_child`` for ``lengths`` in a fresh process (freed memory stays with the allocator); a child that
    dies (killed for memory) gives ``{length: "failed (exit code N)"}``."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=memory_child, args=(library, task, size, lengths, threads, queue))
    child.start()
    while True:
        try:
            got: dict[str, Any] = queue.get(timeout=5)
            break
        except queues.Empty:
            if not child.is_alive():
                got = {str(length): f"failed (exit code {child.exitcode})" for length in lengths}
                break
    child.join()
    return got


def memory(
    size: str, lengths: list[int], threads: int | None, done: Any = None, fresh: bool = True
) -> list[dict[str, Any]]:
    """Peak memory rows (library, task) at each length (each in a fresh process unless not ``fresh``: the smoke
    run's, to start fewer processes); ``done(rows)`` after each row."""
    rows: list[dict[str, Any]] = []
    for task in ("classification", "embedding"):
        for library in ("bertkit", "transformers"):
            peaks: dict[str, Any] = {}
            for group in [[length] for length in lengths] if fresh else [lengths]:
                peaks.update(measure_in_child(library, task, size, group, threads))
            rows.append({"library": library, "task": task, "size": size, "peak_mib_above_model": peaks})
            print(f"{library} {task} peak MiB above the model: {peaks}", flush=True)
            if done is not None:
                done(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per measurement (the median is kept)")
    parser.add_argument("--sizes", default="tiny,base", help="configs whose speed is measured")
    parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory part")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    REPEATS[0] = args.repeats
    if args.smoke:
        runs, memory_size, lengths = [("tiny", 4, 64, True)], "tiny", [256, 512]
    else:  # the base config's calls take tens of seconds each: measured once, without a warm-up call
        runs = [run for run in [("tiny", 16, 512, True), ("base", 4, 512, False)] if run[0] in args.sizes.split(",")]
        memory_size, lengths = "base", [1024, 4096, 8192]
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    path = output_path(args, RESULTS / "modernbert.json")
    result: dict[str, Any] = {
        "benchmark": "modernbert",
        "command": "python benchmarks/bench_modernbert.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {**record(), "cpu_affinity": affinity},
        "threads": args.threads,
        "speed": [],
        "memory": [],
        "complete": False,
        "repeats": args.repeats,
        "note": "tiny: the median of `repeats` timed calls after a warm-up call; base: the same without the "
        "warm-up; the machine was shared with other jobs (load_average), which also ran on the pinned core",
    }
    for run in runs:
        row = speed(*run)
        result["speed"].append(row)
        write_json(path, result)
        print(f"{row['size']}: inference x{row['inference_speedup']}, train step x{row['train_step_speedup']} "
              f"(bertkit {row['bertkit_inference_s']}s / {row['bertkit_train_step_s']}s)", flush=True)  # fmt: skip

    def save_memory(rows: list[dict[str, Any]]) -> None:
        result["memory"] = rows
        write_json(path, result)

    if args.memory:
        memory(memory_size, lengths, args.threads, done=save_memory, fresh=not args.smoke)
    result["complete"] = True
    write_json(path, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
