"""The small pieces every architecture shares: the activation by its config name and the initialisation."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bertkit.errors import ConfigError

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def activation(name: str) -> Callable[[Tensor], Tensor]:
    """``transformers``' ``ACT2FN`` for the names bertkit's configs take: ``gelu`` is exact erf GELU (BERT and
    Hugging Face), ``gelu_new`` and ``gelu_pytorch_tanh`` the tanh approximation."""
    if name not in _ACTIVATIONS:
        raise ConfigError(f"activation {name!r} is not supported; use one of {sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


@torch.no_grad()
def init_weights(
    module: nn.Module, std: float = 0.02, pad_token_id: int | None = None, cutoff: float | None = None
) -> None:
    """One module's initialisation: normal(0, std) weights (truncated at ``cutoff`` std when given), zero biases,
    LayerNorm 1/0, a zero [PAD] embedding row when ``pad_token_id`` is given."""

    def normal(weight: Tensor) -> None:
        if cutoff is None:
            weight.normal_(0.0, std)
        else:
            nn.init.trunc_normal_(weight, mean=0.0, std=std, a=-cutoff * std, b=cutoff * std)

    if isinstance(module, nn.Linear):
        normal(module.weight)
        if module.bias is not None:
            module.bias.zero_()
    elif isinstance(module, nn.Embedding):
        normal(module.weight)
        if pad_token_id is not None and pad_token_id < module.num_embeddings:
            module.weight[pad_token_id].zero_()
    elif isinstance(module, nn.LayerNorm):
        module.weight.fill_(1.0)
        if module.bias is not None:
            module.bias.zero_()
