"""Shared fixtures of the training tests: a toy model with dropout and a synthetic learnable dataset."""

from __future__ import annotations

import os
import signal
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from bertkit.tokenizer import Tokenizer


@dataclass
class ToyOutput:
    loss: torch.Tensor
    logits: torch.Tensor


class ToyModel(nn.Module):
    """Linear -> LayerNorm -> dropout -> linear regression; dropout makes the torch RNG matter for resume."""

    def __init__(self, dim: int = 8, dropout: float = 0.1, nan_at: set[int] | None = None):
        super().__init__()
        self.inp = nn.Linear(dim, 16)
        self.norm = nn.LayerNorm(16)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(16, 1)
        self.nan_at = nan_at or set()  # forward calls (training) whose loss is NaN
        self.calls = 0

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> ToyOutput:
        pred = self.out(self.drop(torch.tanh(self.norm(self.inp(x))))).squeeze(-1)
        loss = nn.functional.mse_loss(pred, y)
        if self.training:
            if self.calls in self.nan_at:
                loss = loss * float("nan")
            self.calls += 1
        return ToyOutput(loss, pred)


def toy_dataset(n: int = 64, dim: int = 8, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(dim, generator=g)
    xs = torch.randn(n, dim, generator=g)
    return [(x, (x @ w).tanh()) for x in xs]


def collate(items):
    return {"x": torch.stack([i[0] for i in items]), "y": torch.stack([i[1] for i in items])}


def make_pretraining_dataset(
    directory,
    *,
    n_train: int = 96,
    n_eval: int = 16,
    seq: int = 32,
    vocab: int = 100,
    max_predictions: int = 5,
    seed: int = 0,
    masking: str = "static",
    nsp: bool = True,
):
    """A small prepared dataset in bertkit.data's shard format, built without a tokenizer.

    Ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK]; B follows A (label 0) when it continues A's arithmetic
    sequence of ids, so both MLM and NSP are learnable. ``masking="dynamic"`` stores no masks (the loader
    draws them); ``nsp=False`` stores full-sentence rows (one segment, never random), as ``--no-nsp`` does.
    """
    import random
    from pathlib import Path

    from bertkit.data.instances import Instance
    from bertkit.data.shards import index_dataset, pack_instances, write_block

    directory = Path(directory)
    rng = random.Random(seed)
    pad, _unk, cls, sep, mask = range(5)

    def instance() -> Instance:
        a_len = rng.randint(3, (seq - 3) // 2)
        b_len = rng.randint(3, seq - 3 - a_len)
        start, stride = rng.randrange(5, vocab), rng.choice([1, 2, 3])
        run = [5 + (start - 5 + stride * i) % (vocab - 5) for i in range(a_len + b_len)]
        is_random = nsp and rng.random() < 0.5
        b = [rng.randrange(5, vocab) for _ in range(b_len)] if is_random else run[a_len:]
        tokens = [cls, *run[:a_len], sep, *b, sep] if nsp else [cls, *run, sep]
        if not nsp:
            a_len = len(tokens) - 2
        if masking == "dynamic":
            return Instance(tokens, a_len, is_random)
        candidates = [i for i, t in enumerate(tokens) if t not in (cls, sep)]
        positions = sorted(rng.sample(candidates, min(max_predictions, max(1, round(0.15 * len(tokens))))))
        labels = [tokens[i] for i in positions]
        for i in positions:
            tokens[i] = mask
        return Instance(tokens, a_len, is_random, positions, labels)

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(5, vocab)]
    tokenizer = Tokenizer(words)
    stored = max_predictions if masking == "static" else None
    splits = {
        "train": pack_instances([instance() for _ in range(n_train)], vocab_size=vocab, max_predictions=stored),
        "eval": pack_instances([instance() for _ in range(n_eval)], vocab_size=vocab, max_predictions=stored),
    }
    header = {
        "settings": {
            "max_seq_length": seq,
            "max_predictions_per_seq": max_predictions,
            "masking": masking,
            "whole_word_mask": False,
            "masked_lm_prob": 0.15,
            "seed": seed,
            **({} if nsp else {"nsp": False}),
        },
        "settings_hash": "synthetic",
        "tokenizer": {
            "fingerprint": tokenizer.fingerprint,
            "vocab_size": vocab,
            "pad_id": pad,
            "cls_id": cls,
            "sep_id": sep,
            "mask_id": mask,
            "directory": "tokenizer",
        },
    }
    write_block(directory, 0, splits, settings_hash="synthetic", stats={})
    tokenizer.save_pretrained(directory / "tokenizer")
    index_dataset(directory, header, expected_blocks=1)
    return directory


def die_in_nth_forward(module_class: type[nn.Module], nth: int) -> None:
    """Set up a forked training child for a kill test: one thread (reproducible CPU reductions), no warnings, no
    fsync (a killed process's writes stay in the page cache), and a SIGKILL in ``module_class``'s ``nth``
    forward pass (0: never). The patch lives in the child only."""
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    os.fsync = lambda fd: None
    real_forward, calls = module_class.forward, {"n": 0}

    def forward(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_forward(self, *args, **kwargs)

    module_class.forward = forward
