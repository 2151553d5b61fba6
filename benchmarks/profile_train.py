"""Where a training step's time goes: ``torch.profiler`` over bertkit's and transformers' steps, by category.

Two steps, each for bertkit and for ``transformers`` (attn "sdpa"), from identical weights, on the same data:

* ``pretrain``: ``BertForPreTraining``, the batch collated by bertkit's ``PretrainingCollator`` (15 % of the
  positions masked, sentence pairs), as ``bench_train_step.py`` times it: zero the gradients, forward and
  backward, clip to 1.0, fused AdamW (BERT's eps). bertkit is fed the masked positions; the peer dense labels.
* ``finetune``: ``BertForSequenceClassification`` on a padded batch of random lengths (the fine-tuning step of
  a GLUE task), with the same optimizer and clipping.

Each side runs ``--warmup`` steps, then ``--steps`` profiled ones; ``--compile`` adds bertkit under
``torch.compile`` (``bertkit.compiling``, inductor, kernel names recorded). Every profiled operator's
self CPU time is put into one category (matmul, attention, layer norm, elementwise, embedding, loss,
optimizer, data, framework ops) by its name and by the step phase it ran in; what the step's wall time holds
beyond all operators is the Python and autograd glue (``python``). Figures are milliseconds per step.

    python benchmarks/profile_train.py --sizes mini base --compile
    python benchmarks/performance_page.py       # docs/performance.md from the result

The profiler adds some overhead to every operator; the shares, not the absolute times, are what it is for
(``bench_train_step.py`` times steps without it).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.autograd.profiler import record_function

from bertkit.checkpoint_files import load_hf_state_dict
from bertkit.compiling import compile_model
from bertkit.config import BertConfig
from bertkit.data.loader import PretrainingCollator
from bertkit.models.bert import BertForPreTraining, BertForSequenceClassification
from bertkit.training.optim import param_groups
from harness import RESULTS, add_options, output_path, write_json
from machine_info import git_commit, machine

BATCH = {"tiny": 32, "mini": 32, "small": 16, "base": 8}
STEP = "train_step"
PHASES = ("data", "zero_grad", "forward", "backward", "clip", "optimizer")
CATEGORIES = (
    "matmul",
    "attention",
    "layer_norm",
    "elementwise",
    "embedding",
    "loss",
    "optimizer",
    "data",
    "framework",
    "python",
)
"""``framework``: operators that move or view memory (copies, views, index, cat, empty...), the autograd
engine's own nodes; ``python``: step wall time outside every operator (Python, module calls, autograd glue)."""

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("attention", re.compile(r"attention|sdpa|_flash|baddbmm|\bbmm\b", re.I)),
    ("loss", re.compile(r"cross_entropy|nll_loss|log_softmax|mse_loss", re.I)),
    ("layer_norm", re.compile(r"layer_norm", re.I)),
    ("embedding", re.compile(r"embedding", re.I)),
    ("matmul", re.compile(r"addmm|\bmm\b|aten::mm|matmul|linear|mkldnn|_mm_|cpp_fused_mm|extern_kernels", re.I)),
    (
        "elementwise",
        re.compile(
            r"gelu|softmax|dropout|tanh|add|mul|div|sub|neg|where|fill|masked|threshold|erf|exp|sum|mean|"
            r"native_dropout|bernoulli|sigmoid|rsqrt|pow|clamp|argmax|eq|ne\b|cpp_fused",
            re.I,
        ),
    ),
)


def category(name: str, phase: str | None) -> str:
    """The category of one operator, by the step phase it ran in, then by its name."""
    if phase in ("clip", "optimizer", "zero_grad"):
        return "optimizer"
    if phase == "data":
        return "data"
    for label, pattern in _RULES:
        if pattern.search(name):
            return label
    return "framework"


# ------------------------------------------------------------------------------------------ the steps
def pretrain_items(config: BertConfig, batch: int, seq: int, seed: int = 0) -> list[dict[str, Any]]:
    """``batch`` instances as bertkit's ``PretrainingDataset`` yields them: sentence pairs filling ``seq``."""
    rng = np.random.default_rng(seed)
    predictions = max(1, round(0.15 * seq))
    items = []
    for _ in range(batch):
        ids = rng.integers(5, config.vocab_size, seq)
        positions = np.sort(rng.permutation(seq - 2)[:predictions] + 1)
        labels = ids[positions].copy()
        ids[positions] = 4  # [MASK]
        items.append(
            {
                "input_ids": ids.astype(np.int64),
                "a_length": seq // 2 - 1,
                "next_sentence_label": int(rng.integers(0, 2)),
                "masked_positions": positions.astype(np.int64),
                "masked_labels": labels.astype(np.int64),
            }
        )
    return items


def dense_labels(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The peer's form of a collated batch: ``labels [B, L]`` with -100 where nothing is predicted."""
    positions, targets = batch["masked_positions"], batch["masked_labels"]
    labels = torch.full_like(batch["input_ids"], -100).scatter_(1, positions, targets)
    labels[:, 0] = -100  # the collator's padding slots point at position 0 with label -100
    keep = ("input_ids", "token_type_ids", "attention_mask", "next_sentence_label")
    return {**{k: batch[k] for k in keep}, "labels": labels}


def classification_batch(config: BertConfig, batch: int, seq: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A padded batch of random lengths (half to all of ``seq``), two classes."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    lengths[0] = seq
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g) * mask
    return {
        "input_ids": ids,
        "token_type_ids": torch.zeros_like(ids),
        "attention_mask": mask,
        "labels": torch.randint(0, 2, (batch,), generator=g),
    }


class Step:
    """One model, its fused AdamW and its data source; ``__call__`` is one training update, phase by phase."""

    def __init__(self, model: torch.nn.Module, data: Callable[[], dict[str, torch.Tensor]]) -> None:
        self.model, self.data = model.train(), data
        self.optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-4, eps=1e-6, fused=True)

    def __call__(self) -> float:
        with record_function("data"):
            batch = self.data()
        with record_function("zero_grad"):
            self.optimizer.zero_grad(set_to_none=True)
        with record_function("forward"):
            loss = self.model(**batch).loss
        with record_function("backward"):
            loss.backward()
        with record_function("clip"):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        with record_function("optimizer"):
            self.optimizer.step()
        return float(loss.detach())


def peer_config(config: BertConfig) -> Any:
    from transformers import BertConfig as HFConfig

    fields = {k: v for k, v in config.to_dict().items() if k not in ("architectures", "extra")}
    return HFConfig(**fields, attn_implementation="sdpa")


def pretrain_steps(size: str, batch: int, seq: int, compiled: bool) -> dict[str, Step]:
    from transformers import BertForPreTraining as Peer

    config = BertConfig.preset(size)
    torch.manual_seed(0)
    peer = Peer(peer_config(config))
    collate = PretrainingCollator(pad_id=0, max_predictions=max(1, round(0.15 * seq)))
    items = pretrain_items(config, batch, seq)
    steps = {"transformers": Step(peer, lambda: dense_labels(collate(items)))}
    for name in ("bertkit", "bertkit_compiled") if compiled else ("bertkit",):
        ours = BertForPreTraining(config)
        load_hf_state_dict(ours, peer.state_dict(), source="peer")
        steps[name] = Step(compile_model(ours) if name.endswith("compiled") else ours, lambda: collate(items))
    return steps


def finetune_steps(size: str, batch: int, seq: int, compiled: bool) -> dict[str, Step]:
    from transformers import BertForSequenceClassification as Peer

    config = BertConfig.preset(size)
    config.num_labels = 2
    torch.manual_seed(0)
    peer = Peer(peer_config(config))
    data = classification_batch(config, batch, seq)
    steps = {"transformers": Step(peer, lambda: dict(data))}
    for name in ("bertkit", "bertkit_compiled") if compiled else ("bertkit",):
        ours = BertForSequenceClassification(config)
        load_hf_state_dict(ours, peer.state_dict(), source="peer")
        steps[name] = Step(compile_model(ours) if name.endswith("compiled") else ours, lambda: dict(data))
    return steps


# ------------------------------------------------------------------------------------------ profiling
def phase_of(event: Any) -> str | None:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name in PHASES:
            return str(parent.name)
        parent = parent.cpu_parent
    return None


def breakdown(events: Any, steps: int) -> dict[str, Any]:
    """Milliseconds per step by category and by phase, the step's wall time and the heaviest operators."""
    by_category: dict[str, float] = collections.defaultdict(float)
    by_phase: dict[str, float] = collections.defaultdict(float)
    by_op: dict[str, float] = collections.defaultdict(float)
    wall = 0.0
    for event in events:
        if event.name == STEP:
            wall += event.cpu_time_total
            continue
        if event.name in PHASES:
            by_phase[event.name] += event.cpu_time_total
            continue  # its own self time is Python: counted as the wall time left over
        phase = phase_of(event)
        if phase is None:
            continue  # outside the step (the profiler's own calls)
        self_us = event.self_cpu_time_total
        by_category[category(event.name, phase)] += self_us
        by_op[event.name] += self_us
    by_category["python"] = max(0.0, wall - sum(by_category.values()))
    per_step = 1e-3 / steps
    return {
        "step_ms": wall * per_step,
        "categories_ms": {c: by_category.get(c, 0.0) * per_step for c in CATEGORIES},
        "phases_ms": {p: by_phase.get(p, 0.0) * per_step for p in PHASES},
        "top_ops_ms": [[name, us * per_step] for name, us in sorted(by_op.items(), key=lambda kv: -kv[1])[:12]],
    }


def profile(step: Step, warmup: int, steps: int) -> dict[str, Any]:
    start = time.perf_counter()
    step()  # under torch.compile, the first step compiles
    first_s = time.perf_counter() - start
    for _ in range(warmup):
        step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            with record_function(STEP):
                step()
    timed = []
    for _ in range(steps):  # the same steps without the profiler, for its overhead
        start = time.perf_counter()
        step()
        timed.append(time.perf_counter() - start)
    result = breakdown(prof.events(), steps)
    result["first_step_s"] = first_s
    result["unprofiled_step_ms"] = 1e3 * float(np.median(timed))
    return result


def run(args: argparse.Namespace, done: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    """Every task and size; ``done`` gets the runs so far after each (a long run keeps what it measured)."""
    runs: list[dict[str, Any]] = []
    builders = {"pretrain": pretrain_steps, "finetune": finetune_steps}
    for size in args.sizes:
        for task in args.tasks:
            batch = args.batch or BATCH[size]
            print(f"profiling {task} {size} (batch {batch} x {args.seq_len})...", file=sys.stderr)
            sides = builders[task](size, batch, args.seq_len, args.compile)
            entry: dict[str, Any] = {"task": task, "size": size, "batch": batch, "seq_len": args.seq_len}
            for name, step in sides.items():
                entry[name] = profile(step, args.warmup, args.steps)
            runs.append(entry)
            done(runs)
    return runs


def print_table(runs: list[dict[str, Any]]) -> None:
    for entry in runs:
        sides = [s for s in ("bertkit", "bertkit_compiled", "transformers") if s in entry]
        print(f"\n{entry['task']} {entry['size']} (batch {entry['batch']} x {entry['seq_len']}), ms per step")
        print(f"{'category':<13}" + "".join(f"{s:>18}" for s in sides))
        for c in CATEGORIES:
            print(f"{c:<13}" + "".join(f"{entry[s]['categories_ms'][c]:>18.1f}" for s in sides))
        print(f"{'step':<13}" + "".join(f"{entry[s]['step_ms']:>18.1f}" for s in sides))
        print(f"{'unprofiled':<13}" + "".join(f"{entry[s]['unprofiled_step_ms']:>18.1f}" for s in sides))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=["pretrain", "finetune"], default=["pretrain", "finetune"])
    parser.add_argument("--sizes", nargs="+", default=["mini", "base"])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=None, help="sequences per step (default: per size)")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps per side")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="also profile bertkit under torch.compile")
    add_options(parser, "JSON path (default benchmarks/results/profile_train.json)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.seq_len, args.batch, args.steps, args.warmup = ["tiny"], 16, 2, 1, 0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.compile:
        import torch._inductor.config as inductor

        inductor.cpp.enable_kernel_profile = True  # generated kernels appear by name in the profile
    out = output_path(args, RESULTS / "profile_train.json")
    command = "python benchmarks/profile_train.py " + " ".join(argv if argv is not None else sys.argv[1:])
    info = {"machine": machine(), "commit": git_commit()}

    def write(runs: list[dict[str, Any]]) -> None:
        payload = {"benchmark": "profile_train", **info, "command": command, "categories": list(CATEGORIES)}
        payload |= {"runs": runs, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_json(out, payload)

    print_table(run(args, write))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
