"""Training-step speed: bertkit's BertForPreTraining vs transformers.BertForPreTraining (attn "sdpa").

Both models get the same config, the same initial weights, the same batch (random ids, 15% of positions
masked) and the same optimizer (AdamW, fused as bertkit's trainer uses it, BERT's eps) with global-norm clipping at 1.0, in the same
precision. bertkit is fed ``masked_positions``/``masked_labels`` and projects only those positions onto the
vocabulary; the peer is fed dense ``labels`` (-100 elsewhere) and, as transformers does, computes logits for
every token: that difference is what this benchmark measures. Steps are interleaved (bertkit, peer,
bertkit, ...) after warm-up steps so both share the machine's noise; the median step time is reported.
``--compile`` adds a third side, bertkit under ``torch.compile`` (``bertkit.compiling``, as ``--compile``
trains), from the same weights; its first step, which compiles the graph, is reported on its own.

MFU = achieved FLOP/s / measured peak, where the peak is a large fp32 ``torch.mm`` on this machine and the
FLOPs are those each implementation executes per token (bertkit: sparse MLM head; peer: dense head).

    python benchmarks/bench_train_step.py --sizes mini small base --seq-len 128 [--compile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from bertkit.checkpoint_files import load_hf_state_dict
from bertkit.compiling import compile_model
from bertkit.config import BertConfig
from bertkit.model import BertForPreTraining
from bertkit.training.metrics import measure_matmul_peak, pretraining_flops_per_token
from bertkit.training.optim import param_groups
from harness import RESULTS, add_options, output_path, write_json
from machine_info import git_commit, machine

BATCH = {"tiny": 32, "mini": 32, "small": 16, "medium": 16, "base": 8, "large": 4}


def make_batch(config: BertConfig, batch: int, seq: int, device: torch.device, seed: int = 0) -> tuple[dict, dict]:
    """The same data in both label formats: sparse positions (bertkit) and dense labels (transformers)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g)
    predictions = max(1, round(0.15 * seq))
    positions = torch.stack(
        [torch.randperm(seq - 2, generator=g)[:predictions].sort().values + 1 for _ in range(batch)]
    )
    labels_sparse = torch.gather(ids, 1, positions)
    dense = torch.full_like(ids, -100).scatter_(1, positions, labels_sparse)
    masked = ids.clone().scatter_(1, positions, 4)  # [MASK]
    common = {
        "input_ids": masked,
        "token_type_ids": (torch.arange(seq) >= seq // 2).long().expand(batch, -1).clone(),
        "attention_mask": torch.ones(batch, seq, dtype=torch.long),
        "next_sentence_label": torch.randint(0, 2, (batch,), generator=g),
    }
    ours = {**common, "masked_positions": positions, "masked_labels": labels_sparse}
    theirs = {**common, "labels": dense}
    return {k: v.to(device) for k, v in ours.items()}, {k: v.to(device) for k, v in theirs.items()}


class Stepper:
    """One model with its optimizer; ``step()`` is one full training update."""

    def __init__(self, model: torch.nn.Module, batch: dict, precision: str, device: torch.device) -> None:
        self.model, self.batch, self.device = model.to(device).train(), batch, device
        self.dtype = {"fp32": None, "bf16": torch.bfloat16}[precision]
        # Fused AdamW for both, as bertkit's trainer builds it: the update's cost is then the same on
        # both sides and the comparison is of the models' forward/backward.
        self.optimizer = torch.optim.AdamW(param_groups(self.model, 0.01), lr=1e-4, eps=1e-6, fused=True)

    def step(self) -> float:
        sync = torch.cuda.synchronize if self.device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        ctx = (
            torch.autocast(self.device.type, dtype=self.dtype)
            if self.dtype is not None
            else torch.autocast(self.device.type, enabled=False)
        )
        with ctx:
            loss = self.model(**self.batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        sync()
        return time.perf_counter() - start


def pair(size: str) -> tuple[BertConfig, BertForPreTraining, torch.nn.Module]:
    """bertkit's and transformers' BertForPreTraining of one preset size, with identical starting weights."""
    from transformers import BertConfig as HFConfig
    from transformers import BertForPreTraining as HFBertForPreTraining

    config = BertConfig.preset(size)
    torch.manual_seed(0)
    hf_config = HFConfig(
        **{k: v for k, v in config.to_dict().items() if k not in ("architectures", "extra")}, attn_implementation="sdpa"
    )
    peer = HFBertForPreTraining(hf_config)
    assert peer.config._attn_implementation == "sdpa", peer.config._attn_implementation
    ours = BertForPreTraining(config)
    load_hf_state_dict(ours, peer.state_dict(), source="peer")  # identical starting weights
    return config, ours, peer


def bench_size(size: str, seq: int, batch: int, args: argparse.Namespace, device: torch.device) -> dict:
    config, ours, peer = pair(size)
    ours_batch, peer_batch = make_batch(config, batch, seq, device)
    runners = {
        "bertkit": Stepper(ours, ours_batch, args.precision, device),
        "transformers": Stepper(peer, peer_batch, args.precision, device),
    }
    compile_s = None
    if args.compile:
        twin = BertForPreTraining(config)
        twin.load_state_dict(ours.state_dict())
        runners["bertkit_compiled"] = Stepper(compile_model(twin), ours_batch, args.precision, device)
        compile_s = runners["bertkit_compiled"].step()  # the first step compiles forward and backward
    for _ in range(args.warmup):
        for runner in runners.values():
            runner.step()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.steps):
        for name, runner in runners.items():
            times[name].append(runner.step())
    predictions = ours_batch["masked_positions"].shape[1]
    flops = {
        "bertkit": pretraining_flops_per_token(config, seq, predictions),
        # dense head: transform + decoder on every token
        "transformers": pretraining_flops_per_token(config, seq, seq),
    }
    flops["bertkit_compiled"] = flops["bertkit"]
    result: dict = {"size": size, "seq_len": seq, "batch": batch, "precision": args.precision, "steps": args.steps}
    for name, values in times.items():
        median = statistics.median(values)
        result[name] = {
            "step_s_median": median,
            "step_s_all": values,
            "tokens_per_s": batch * seq / median,
            "flops_per_token": flops[name],
        }
    result["speedup"] = result["bertkit"]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
    if args.compile:
        result["bertkit_compiled"]["first_step_s"] = compile_s
        result["speedup_compiled"] = result["bertkit_compiled"]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
    return result


def print_table(results: list[dict]) -> None:
    header = f"{'size':<7}{'batch':>6}{'bertkit tok/s':>15}{'MFU':>7}{'HF sdpa tok/s':>15}{'MFU':>7}{'ratio':>7}"
    print(header)
    for r in results:
        a, b = r["bertkit"], r["transformers"]
        print(
            f"{r['size']:<7}{r['batch']:>6}{a['tokens_per_s']:>15.0f}{a['mfu']:>7.1%}"
            f"{b['tokens_per_s']:>15.0f}{b['mfu']:>7.1%}{r['speedup']:>6.2f}x"
        )
        if "bertkit_compiled" in r:
            c = r["bertkit_compiled"]
            print(
                f"{'  compiled':<13}{c['tokens_per_s']:>15.0f}{c['mfu']:>7.1%}{'':>22}{r['speedup_compiled']:>6.2f}x"
                f"  (first step, compiling: {c['first_step_s']:.0f}s)"
            )


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["mini", "small", "base"])
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=None, help="sequences per step (default: per size)")
    parser.add_argument("--steps", type=int, default=6, help="timed steps per implementation")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", action="store_true", help="also time bertkit under torch.compile")
    parser.add_argument("--peak-seconds", type=float, default=2.0, help="length of each matmul peak sample")
    add_options(parser, "JSON path (default benchmarks/results/train_step_<device>.json)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.seq_len, args.batch, args.steps, args.warmup, args.peak_seconds = ["tiny"], 16, 2, 1, 1, 0.05
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    peak_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    peak_size = 256 if args.smoke else None
    # The peak is sampled before and after every size and the best sample kept: on a shared machine a
    # single sample taken at a busy moment would understate it and inflate MFU.
    peaks = [measure_matmul_peak(device, peak_dtype, peak_size, seconds=args.peak_seconds)]
    results = []
    for size in args.sizes:
        batch = args.batch or BATCH[size]
        print(f"benchmarking {size} (batch {batch} x {args.seq_len})...", file=sys.stderr)
        results.append(bench_size(size, args.seq_len, batch, args, device))
        peaks.append(measure_matmul_peak(device, peak_dtype, peak_size, seconds=args.peak_seconds))
    peak = max(peaks)
    print(
        f"measured {peak_dtype} matmul peak: {peak / 1e12:.3f} TFLOP/s on {device} "
        f"({torch.get_num_threads()} threads; samples {[round(p / 1e9) for p in peaks]} GFLOP/s)",
        file=sys.stderr,
    )
    for r in results:
        for name in ("bertkit", "transformers", "bertkit_compiled"):
            if name in r:
                r[name]["mfu"] = r[name]["tokens_per_s"] * r[name]["flops_per_token"] / peak
    print_table(results)
    out = output_path(args, RESULTS / f"train_step_{device.type}.json")
    payload = {
        "benchmark": "train_step",
        "machine": machine(),
        "commit": git_commit(),
        "peak_flops": peak,
        "peak_samples": peaks,
        "peak_dtype": str(peak_dtype),
        "results": results,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(f"wrote {write_json(out, payload)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
