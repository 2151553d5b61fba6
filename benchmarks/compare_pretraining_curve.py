"""Training dynamics check: bertkit's and transformers' BertForPreTraining on the same prepared batches.

Both start from identical weights and run the same optimizer (AdamW, BERT's eps and decay groups, linear
warmup 10% then linear decay, clipping 1.0) over the same batches in the same order; only dropout masks
differ. The MLM accuracy on the training batches, averaged over windows of updates, should follow the same
curve: a gap would point at a modelling or loss bug, not at the optimisation budget.

    bertkit tokenizer train --input data/corpus --vocab-size 8000 --output runs/curve/tok
    bertkit prepare-data --input data/corpus --tokenizer runs/curve/tok --output runs/curve/data \
        --max-seq-length 64 --dupe-factor 5 --seed 1
    python benchmarks/compare_pretraining_curve.py --data runs/curve/data --size tiny --steps 1000
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import smoke_inputs
from bertkit.checkpoint_files import load_hf_state_dict
from bertkit.config import BertConfig
from bertkit.data.loader import PretrainingCollator, PretrainingDataset
from bertkit.models.bert import BertForPreTraining
from bertkit.training.optim import param_groups
from harness import RESULTS, add_options, output_path, smoke_folder, write_json
from machine_info import machine


def dense_labels(batch: dict) -> torch.Tensor:
    """transformers' label format: the masked token's id at its position, -100 elsewhere."""
    labels = torch.full_like(batch["input_ids"], -100)
    real = batch["masked_labels"] != -100
    rows = torch.arange(labels.shape[0]).unsqueeze(1).expand_as(real)
    labels[rows[real], batch["masked_positions"][real]] = batch["masked_labels"][real]
    return labels


def run(name: str, model: torch.nn.Module, batches: list[dict], lr: float, window: int) -> list[dict]:
    model.train()
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=lr, eps=1e-6, fused=True)
    steps, warmup = len(batches), max(1, len(batches) // 10)
    curve: list[dict] = []
    correct, count, started = 0, 0, time.perf_counter()
    for step, batch in enumerate(batches):
        scale = step / warmup if step < warmup else (steps - step) / (steps - warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr * scale
        if name == "bertkit":
            out = model(**batch)
            correct, count = correct + int(out.mlm_correct), count + int(out.mlm_count)
        else:
            labels = dense_labels(batch)
            out = model(
                input_ids=batch["input_ids"],
                token_type_ids=batch["token_type_ids"],
                attention_mask=batch["attention_mask"],
                labels=labels,
                next_sentence_label=batch["next_sentence_label"],
            )
            chosen = labels != -100
            correct += int((out.prediction_logits.detach().argmax(-1)[chosen] == labels[chosen]).sum())
            count += int(chosen.sum())
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % window == 0:
            curve.append(
                {
                    "step": step + 1,
                    "mlm_acc": round(correct / max(count, 1), 4),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            )
            print(name, curve[-1], flush=True)
            correct = count = 0
    return curve


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="a dataset written by `bertkit prepare-data` (required but with --smoke)")
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--window", type=int, default=250)
    parser.add_argument("--threads", type=int, default=1)
    add_options(parser)
    args = parser.parse_args(argv)
    if args.smoke:  # a prepared slice of a shipped book
        args.steps, args.batch, args.window = 4, 4, 2
        args.data = str(smoke_inputs.pretraining_data(smoke_folder()))
    elif not args.data:
        parser.error("--data is required")
    return args


def models(config: BertConfig) -> tuple[BertForPreTraining, torch.nn.Module]:
    """bertkit's and transformers' BertForPreTraining with identical starting weights."""
    from transformers import BertConfig as HFConfig
    from transformers import BertForPreTraining as HFBertForPreTraining

    torch.manual_seed(0)
    peer = HFBertForPreTraining(
        HFConfig(
            **{k: v for k, v in config.to_dict().items() if k not in ("architectures", "extra")},
            attn_implementation="sdpa",
        )
    )
    ours = BertForPreTraining(config)
    load_hf_state_dict(ours, peer.state_dict(), source="peer")
    return ours, peer


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    dataset = PretrainingDataset(args.data, "train")
    tokenizer_meta = dataset.meta["tokenizer"]
    config = BertConfig.preset(args.size, vocab_size=tokenizer_meta["vocab_size"])
    ours, peer = models(config)
    collate = PretrainingCollator(pad_id=tokenizer_meta["pad_id"], max_predictions=dataset.max_predictions)
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(1)).tolist()
    if len(order) < args.steps * args.batch:
        sys.exit(f"{args.data} has {len(order)} instances; {args.steps} steps of {args.batch} need more")
    batches = [collate([dataset[i] for i in order[s * args.batch : (s + 1) * args.batch]]) for s in range(args.steps)]
    curves = {
        "bertkit": run("bertkit", ours, batches, args.lr, args.window),
        "transformers": run("transformers", peer, batches, args.lr, args.window),
    }
    result = {
        "command": " ".join(["python", "benchmarks/compare_pretraining_curve.py", *(argv or sys.argv[1:])]),
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "machine": machine() | {"torch_threads": args.threads},
        "curves": curves,
    }
    write_json(output_path(args, RESULTS / "pretraining_curve.json"), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
