"""Shared fixtures of the training tests: a toy model with dropout and a synthetic learnable dataset."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


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
