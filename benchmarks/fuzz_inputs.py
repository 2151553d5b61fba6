"""Fuzzing at scale: the properties of ``tests/test_reliability_fuzz.py`` with many more inputs.

Each target (tokenizer, corpus reader, TSV/CSV/JSONL/CoNLL/SQuAD readers, SQuAD-shaped JSON, config.json,
weights files, damaged model directories with lying configs) runs under hypothesis for ``--examples``
inputs or ``--seconds`` per target, whichever comes first, with random seeds (not the CI's fixed ones).
A target passes when every input ended in a result or a ``BertkitError``; anything else is a failure
with the shrunk input. Each input is also timed: the slowest one is reported (nothing may hang).

    .venv/bin/python benchmarks/fuzz_inputs.py [--examples 5000] [--seconds 120] [--smoke]

Writes ``benchmarks/results/reliability_fuzz.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException

from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, write_json
from machine_info import record

# The properties live in the test module, so that the CI's fixed-seed run and this one check the same things.
sys.path.insert(0, str(ROOT / "tests"))
props = importlib.import_module("test_reliability_fuzz")

Target = tuple[dict[str, Any], Callable[..., None]]


class TimeUp(Exception):
    """Raised inside a property when the target's time budget is spent (not a failure)."""


def targets(work: Path) -> dict[str, Target]:
    tokenizer = props.make_tokenizer(work / "tok")
    model_dir = props.tiny_model_dir(work / "model")
    out: dict[str, Target] = {
        "tokenizer": (
            dict(text=props.any_text, pair=st.none() | props.any_text, max_length=st.none() | st.integers(1, 40)),
            lambda text, pair, max_length: props.check_tokenizer(tokenizer, text, pair, max_length),
        ),
        "squad_json_shapes": (
            dict(document=props.squad_like),
            lambda document: props.check_file("squad", work / "shape.json", json.dumps(document).encode()),
        ),
        "config_json_values": (
            dict(values=props.config_like),
            lambda values: props.check_file("config", work / "config.json", json.dumps(values).encode()),
        ),
        "damaged_model_dirs": (
            dict(
                cut=st.none() | st.integers(0, 10**6),
                flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=6),
                config_edit=st.dictionaries(
                    st.sampled_from(
                        [
                            "vocab_size",
                            "hidden_size",
                            "num_hidden_layers",
                            "intermediate_size",
                            "max_position_embeddings",
                            "num_attention_heads",
                            "type_vocab_size",
                        ]
                    ),
                    st.sampled_from([1, 2, 4, 31, 33, 64, 10**6, 10**9, 10**12]),
                    max_size=3,
                ),
            ),
            lambda cut, flips, config_edit: props.check_weights_mutation(
                model_dir, work / "damaged", cut, flips, config_edit
            ),
        ),
    }
    for kind, name in props.FILE_KINDS.items():
        out[f"bytes_as_{kind}"] = (
            dict(data=props.hostile_bytes),
            lambda data, kind=kind, name=name: props.check_file(kind, work / name, data),
        )
    return out


def run_target(strategies: dict[str, Any], check: Callable[..., None], examples: int, seconds: float) -> dict:
    count, slowest = 0, 0.0
    deadline = time.perf_counter() + seconds

    def body(**kwargs: Any) -> None:
        nonlocal count, slowest
        if time.perf_counter() > deadline:
            raise TimeUp
        start = time.perf_counter()
        check(**kwargs)
        slowest = max(slowest, time.perf_counter() - start)
        count += 1

    test = settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))(
        given(**strategies)(body)
    )
    started = time.perf_counter()
    failure = None
    try:
        test()
    except TimeUp:
        pass
    except (Exception, HypothesisException) as exc:  # a property failed: record the shrunk input
        failure = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-1500:]
    return {
        "inputs": count,
        "seconds": round(time.perf_counter() - started, 1),
        "slowest_input_s": round(slowest, 3),
        "failure": failure,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=5000, help="Inputs per target (at most).")
    parser.add_argument("--seconds", type=float, default=120.0, help="Time budget per target.")
    parser.add_argument("--only", nargs="*", help="Run only these targets.")
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.examples, args.seconds = 3, 60.0
    import torch

    torch.set_num_threads(1)
    work = scratch_folder("bertkit-fuzz-")
    results = {}
    for name, (strategies, check) in targets(work).items():
        if args.only and name not in args.only:
            continue
        results[name] = run_target(strategies, check, args.examples, args.seconds)
        outcome = "FAIL " + results[name]["failure"] if results[name]["failure"] else "ok"
        print(
            f"{name:<22} {results[name]['inputs']:>7} inputs  {results[name]['seconds']:>6}s  slowest "
            f"{results[name]['slowest_input_s']}s  {outcome}",
            flush=True,
        )
    summary = {
        "targets": results,
        "total_inputs": sum(r["inputs"] for r in results.values()),
        "failures": sum(1 for r in results.values() if r["failure"]),
        "settings": {"examples": args.examples, "seconds": args.seconds},
        "machine": record(),
    }
    summary["commit"] = summary["machine"]["commit"]
    write_json(output_path(args, RESULTS / "reliability_fuzz.json"), summary)
    print(f"total {summary['total_inputs']} inputs, {summary['failures']} failing target(s)")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
