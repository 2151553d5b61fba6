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

``--packed`` draws sequences of random lengths (a quarter of ``--seq-len`` to all of it; MLM only) and adds
bertkit on the same sequences packed into rows (``bertkit.data.packing``) with ``--attn`` (varlen by default).
Tokens per second count real tokens only, on every side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from bertkit.checkpoint_files import load_hf_state_dict
from bertkit.compiling import compile_model
from bertkit.config import BertConfig
from bertkit.data.packing import pack_batch
from bertkit.models.bert import BertForPreTraining
from bertkit.training.optim import param_groups
from bertkit.training.run_log import measure_matmul_peak, pretraining_flops_per_token
from harness import RESULTS, add_options, output_path, write_json
from machine_info import git_commit, machine

BATCH = {"tiny": 32, "mini": 32, "small": 16, "medium": 16, "base": 8, "large": 4}


def make_batch(
    config: BertConfig, batch: int, seq: int, device: torch.device, seed: int = 0, varied: bool = False
) -> tuple[dict, dict]:
    """The same data in both label formats: sparse positions (bertkit) and dense labels (transformers).

    ``varied``: sequences of random lengths between a quarter of ``seq`` and ``seq`` (right-padded, 15 % of each
    one's tokens masked), and no next-sentence task, so that the batch can also be packed."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, config.vocab_size, (batch, seq), generator=g)
    lengths = torch.randint(max(4, seq // 4), seq + 1, (batch,), generator=g) if varied else torch.full((batch,), seq)
    mask = (torch.arange(seq) < lengths[:, None]).long()
    predictions = max(1, round(0.15 * seq))
    positions = torch.stack(
        [torch.randperm(seq - 2, generator=g)[:predictions].sort().values + 1 for _ in range(batch)]
    )
    labels_sparse = torch.gather(ids, 1, positions).masked_fill(torch.gather(mask, 1, positions) == 0, -100)
    dense = torch.full_like(ids, -100).scatter_(1, positions, labels_sparse)
    masked = ids.clone().scatter_(1, positions, 4).masked_fill(mask == 0, 0)  # [MASK]; [PAD] after the end
    common = {
        "input_ids": masked,
        "token_type_ids": ((torch.arange(seq) >= lengths[:, None] // 2).long() * mask),
        "attention_mask": mask,
    }
    if not varied:
        common["next_sentence_label"] = torch.randint(0, 2, (batch,), generator=g)
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
            out = self.model(**self.batch)
            loss = out.loss
            if loss is None:  # transformers' BertForPreTraining without next_sentence_label: its MLM loss
                logits = out.prediction_logits
                loss = F.cross_entropy(logits.flatten(0, 1).float(), self.batch["labels"].flatten(), ignore_index=-100)
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


def twin_of(model: BertForPreTraining, config: BertConfig, attn: str) -> BertForPreTraining:
    """A copy of ``model`` with another attention implementation (dropout off where the kernel has none)."""
    if attn in ("flex", "varlen"):
        config = BertConfig.from_dict({**config.to_dict(), "attention_probs_dropout_prob": 0.0})
    twin = BertForPreTraining(config, attn_implementation=attn)
    twin.load_state_dict(model.state_dict())
    return twin


def packed_sides(
    config: BertConfig, ours: BertForPreTraining, batch: dict, seq: int, args: argparse.Namespace, device: torch.device
) -> dict:
    """``--packed``: the same sequences packed into rows of ``seq`` tokens, with ``--attn``, eager and compiled."""
    packed = {k: v.to(device) for k, v in pack_batch({k: v.cpu() for k, v in batch.items()}, seq).items()}
    sides = {"bertkit_packed": Stepper(twin_of(ours, config, args.attn), packed, args.precision, device)}
    if args.compile:
        model = compile_model(twin_of(ours, config, args.attn), scope=args.compile_scope)
        sides["bertkit_packed_compiled"] = Stepper(model, packed, args.precision, device)
    return sides


def bench_size(size: str, seq: int, batch: int, args: argparse.Namespace, device: torch.device) -> dict:
    config, ours, peer = pair(size)
    ours_batch, peer_batch = make_batch(config, batch, seq, device, varied=args.packed)
    runners = {
        "bertkit": Stepper(ours, ours_batch, args.precision, device),
        "transformers": Stepper(peer, peer_batch, args.precision, device),
    }
    compile_s = None
    if args.compile:
        twin = compile_model(twin_of(ours, config, "sdpa"), scope=args.compile_scope)
        runners["bertkit_compiled"] = Stepper(twin, ours_batch, args.precision, device)
        compile_s = runners["bertkit_compiled"].step()  # the first step compiles forward and backward
    if args.packed:
        runners.update(packed_sides(config, ours, ours_batch, seq, args, device))
        for name in runners:
            if name.startswith("bertkit_packed"):
                runners[name].step()  # compiles, or warms the packed shapes
    real_tokens = int(ours_batch["attention_mask"].sum())
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
    for name in runners:
        flops.setdefault(name, flops["bertkit"])
    result: dict = {"size": size, "seq_len": seq, "batch": batch, "precision": args.precision, "steps": args.steps}
    result.update(packed=args.packed, real_tokens=real_tokens, attn=args.attn, compile_scope=args.compile_scope)
    for name, values in times.items():
        median = statistics.median(values)
        result[name] = {
            "step_s_median": median,
            "step_s_all": values,
            "tokens_per_s": real_tokens / median,  # real tokens: padding is work no model needed
            "flops_per_token": flops[name],
        }
    result["speedup"] = result["bertkit"]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
    if args.compile:
        result["bertkit_compiled"]["first_step_s"] = compile_s
        result["speedup_compiled"] = result["bertkit_compiled"]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
    if args.profile:
        side = args.profile if args.profile in runners else "bertkit"
        result["profile"] = {"side": side, "top_kernels": top_kernels(runners[side], device)}
    for name in runners:
        if name.startswith("bertkit_packed"):
            result[f"speedup_{name[len('bertkit_') :]}"] = (
                result[name]["tokens_per_s"] / result["transformers"]["tokens_per_s"]
            )
    return result


def top_kernels(runner: Stepper, device: torch.device, steps: int = 3, top: int = 15) -> list[dict]:
    """``torch.profiler`` over ``steps`` steps of ``runner``: the operators (CPU) or kernels (CUDA) with the most
    self time, in milliseconds per step."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            runner.step()
    events = [e for e in prof.key_averages() if (e.device_type.name == "CUDA") == (device.type == "cuda")]
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events.sort(key=lambda e: getattr(e, attr), reverse=True)
    rows = [
        {"name": e.key, "self_ms_per_step": getattr(e, attr) / 1000 / steps, "calls": e.count} for e in events[:top]
    ]
    for row in rows:
        print(f"  {row['self_ms_per_step']:9.3f} ms  {row['calls']:6d}x  {row['name'][:90]}", file=sys.stderr)
    return rows


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
        for name in ("bertkit_packed", "bertkit_packed_compiled"):
            if name in r:
                c, label = r[name], "  " + name[len("bertkit_") :].replace("_", " ")
                speedup = r[f"speedup_{name[len('bertkit_') :]}"]
                print(f"{label:<13}{c['tokens_per_s']:>15.0f}{c['mfu']:>7.1%}{'':>22}{speedup:>6.2f}x  ({r['attn']})")


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
    parser.add_argument(
        "--compile-scope", choices=["model", "layers"], default=None, help="what --compile compiles [cuda: layers]"
    )
    parser.add_argument(
        "--packed", action="store_true", help="sequences of random lengths, no NSP; also time them packed"
    )
    parser.add_argument(
        "--profile", nargs="?", const="bertkit", default=None, help="also profile one side's steps (top kernels)"
    )
    parser.add_argument("--attn", choices=["sdpa", "flex", "varlen"], default="varlen", help="the packed side's")
    parser.add_argument("--peak-seconds", type=float, default=2.0, help="length of each matmul peak sample")
    add_options(parser, "JSON path (default benchmarks/results/train_step_<device>.json)")
    args = parser.parse_args(argv)
    args.compile_scope = args.compile_scope or ("layers" if args.device.startswith("cuda") else "model")
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
        for name in ("bertkit", "transformers", "bertkit_compiled", "bertkit_packed", "bertkit_packed_compiled"):
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
