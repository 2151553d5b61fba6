"""Attention for every architecture: the packed batch, the kernels, and the one policy that picks a kernel.

- ``Packed``: a padded ``[B, L]`` batch's real tokens flattened to ``[T]``, with where they sit (``indices``),
  each sequence's start (``cu_seqlens``), its longest sequence (``max_len``) and each token's position in its
  sequence. BERT unpads its training batches with it; ModernBERT runs every layer on it.
- The kernels, each taking an optional sliding window (``half_window`` tokens on each side):
  ``sdpa_packed`` (``scaled_dot_product_attention`` on the padded layout of packed tokens, long windowed layers
  in blocks of queries), ``flex_kernel`` (FlexAttention) and ``varlen_attention`` (FlashAttention's
  variable-length kernel, ``torch.nn.attention.varlen``).
- The policy: ``choose_attention`` is a pure function of the device, the requested implementation and whether
  the varlen kernel exists, so it is tested on any machine with the device given. Unrequested, it picks
  ``varlen`` on CUDA where the kernel exists and ``sdpa`` elsewhere. FlexAttention is compiled into one fused
  kernel on CUDA and runs uncompiled (inference only: PyTorch's CPU kernel has no backward) elsewhere.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from bertkit.errors import ConfigError

KERNELS = ("sdpa", "flex", "varlen")
"""The attention kernels every architecture can run (BERT adds ``eager``, which returns the probabilities)."""
LOCAL_BLOCK = 256
"""Queries per block of ``sdpa_packed``'s windowed layers on sequences longer than four blocks."""


# ------------------------------------------------------------------------------------------ the policy
@functools.cache
def varlen_kernel_exists() -> bool:
    """Whether this torch has ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention's varlen kernel)."""
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return True


def choose_attention(
    requested: str | None,
    device: torch.device | str | None,
    *,
    allowed: tuple[str, ...],
    varlen_exists: bool,
    attention_dropout: bool = False,
    architecture: str = "this model",
) -> str:
    """The attention implementation to run: ``requested`` when given (one of ``allowed``); otherwise ``varlen``
    on a CUDA device where the kernel exists and ``sdpa`` everywhere else, and ``sdpa`` when the attention
    probabilities are dropped out (``attention_dropout``: no other kernel does that)."""
    if requested is None:
        on_cuda = device is not None and torch.device(device).type == "cuda"
        fits = on_cuda and varlen_exists and not attention_dropout and "varlen" in allowed
        return "varlen" if fits else "sdpa"
    if requested not in allowed:
        raise ConfigError(
            f"attn_implementation {requested!r} is not supported for {architecture}; use one of {allowed}"
        )
    return requested


def attention_for(
    requested: str | None,
    device: torch.device | str | None,
    allowed: tuple[str, ...],
    attention_dropout: bool = False,
    architecture: str = "this model",
) -> str:
    """``choose_attention`` with this machine's torch asked whether the varlen kernel exists."""
    exists = varlen_kernel_exists()
    return choose_attention(
        requested, device, allowed=allowed, varlen_exists=exists, attention_dropout=attention_dropout,
        architecture=architecture,
    )  # fmt: skip


def refuse_dropout(implementation: str, dropout_p: float) -> None:
    """Flex and varlen have no attention-probability dropout: refuse to train them with it."""
    if dropout_p > 0:
        raise ConfigError(
            f"attn_implementation {implementation!r} has no attention dropout; train it with "
            f"attention_probs_dropout_prob=0 (or use sdpa)"
        )


# ------------------------------------------------------------------------------------------ the packed batch
@dataclass
class Packed:
    """A padded batch's real tokens, and where they sit: ``[B, L]`` with its mask -> ``[T]``. What only some
    kernels need (lengths, positions, ``cu_seqlens``, the longest sequence) is computed on first use."""

    indices: Tensor
    """``[T]`` flat positions of the real tokens in ``[B * L]``."""
    mask: Tensor
    """``[B, L]`` boolean, True at real tokens."""
    batch: int
    seq_len: int
    cache: dict[Any, Any] = field(default_factory=dict)
    """Masks and rotary tables built once per forward, shared by the layers."""

    @classmethod
    def of(cls, attention_mask: Tensor) -> Packed:
        """From a ``[B, L]`` attention mask (1 = real token) or a boolean key mask ``[B, 1, 1, L]``."""
        batch, seq_len = attention_mask.shape[0], attention_mask.shape[-1]
        mask = attention_mask.reshape(batch, seq_len).bool()
        return cls(mask.reshape(-1).nonzero().squeeze(-1), mask, batch, seq_len)

    @functools.cached_property
    def lengths(self) -> Tensor:
        """``[B]`` real tokens per sequence."""
        return self.mask.sum(1)

    @functools.cached_property
    def positions(self) -> Tensor:
        """``[T]`` each token's position within its sequence, from 0."""
        return (self.mask.cumsum(1) - 1).reshape(-1)[self.indices]

    @functools.cached_property
    def sequence(self) -> Tensor:
        """``[T]`` the sequence each token belongs to."""
        return self.indices // self.seq_len

    @functools.cached_property
    def cu_seqlens(self) -> Tensor:
        """``[B + 1]`` int32 offsets of each sequence in the packed tokens."""
        return F.pad(self.lengths.cumsum(0, dtype=torch.int32), (1, 0))

    @functools.cached_property
    def max_len(self) -> int:
        """The longest sequence's real tokens (one host sync)."""
        return int(self.lengths.max()) if self.batch else 0

    @property
    def total(self) -> int:
        return int(self.indices.shape[0])

    @property
    def full(self) -> bool:
        """Whether no token is padding (``T == B * L``): then packing and unpacking are views."""
        return self.total == self.batch * self.seq_len

    def unpad(self, padded: Tensor) -> Tensor:
        """``[B, L, ...]`` -> ``[T, ...]``."""
        flat = padded.reshape(self.batch * self.seq_len, *padded.shape[2:])
        return flat if self.full else flat.index_select(0, self.indices)

    def pad(self, packed: Tensor) -> Tensor:
        """``[T, ...]`` -> ``[B, L, ...]``, zeros at the padding."""
        if self.full:
            return packed.view(self.batch, self.seq_len, *packed.shape[1:])
        out = packed.new_zeros(self.batch * self.seq_len, *packed.shape[1:]).index_copy(0, self.indices, packed)
        return out.view(self.batch, self.seq_len, *packed.shape[1:])


# ------------------------------------------------------------------------------------------ sdpa
def window_mask(length: int, half_window: int, device: torch.device) -> Tensor:
    """``[L, L]`` True where two positions are at most ``half_window`` apart."""
    rows = torch.arange(length, device=device)
    return (rows[:, None] - rows[None, :]).abs() <= half_window


def _grid_mask(packed: Packed, half_window: int | None, dtype: torch.dtype, device: torch.device) -> Tensor | None:
    """The ``[B|1, 1, M, M]`` additive mask of the padded layout (M = ``max_len``; 0 where seen, -inf where not,
    built once per forward: SDPA would turn a boolean mask into this in every layer): real keys, within the
    window; padded query rows see every key (their outputs are dropped; a fully masked row would give NaN)."""
    key = ("grid", half_window, dtype)
    if key in packed.cache:
        mask: Tensor | None = packed.cache[key]
        return mask
    m = packed.max_len
    allowed = window_mask(m, half_window, device)[None, None] if half_window is not None else None
    if not packed.full:
        valid = torch.arange(m, device=device)[None, :] < packed.lengths[:, None]
        allowed = valid[:, None, None, :] | ~valid[:, None, :, None]
        if half_window is not None:
            allowed = allowed & (window_mask(m, half_window, device) | ~valid[:, None, :, None])
    mask = None if allowed is None else torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill_(
        ~allowed, float("-inf"))  # fmt: skip
    packed.cache[key] = mask
    return mask


def _to_grid(x: Tensor, packed: Packed) -> Tensor:
    """``[T, ...]`` -> ``[B, M, ...]`` (zeros at the padding; a view when no sequence is shorter than M)."""
    if packed.full:
        return x.view(packed.batch, packed.max_len, *x.shape[1:])
    slots = packed.cache.get("slots")
    if slots is None:
        slots = packed.cache["slots"] = packed.sequence * packed.max_len + packed.positions
    grid = x.new_zeros(packed.batch * packed.max_len, *x.shape[1:]).index_copy(0, slots, x)
    return grid.view(packed.batch, packed.max_len, *x.shape[1:])


def _from_grid(grid: Tensor, packed: Packed) -> Tensor:
    """``[B, heads, M, d]`` -> ``[T, heads, d]``."""
    flat = grid.transpose(1, 2).reshape(packed.batch * packed.max_len, *grid.shape[1:2], grid.shape[-1])
    return flat if packed.full else flat[packed.cache["slots"]]


def sdpa_packed(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    packed: Packed,
    half_window: int | None,
    dropout: float,
    block: int = LOCAL_BLOCK,
) -> Tensor:
    """Attention within each sequence of packed ``[T, heads, d]`` tokens through ``scaled_dot_product_attention``
    on their padded layout (one scatter for the three); windowed layers longer than four ``block`` s run in
    blocks of queries."""
    qg, kg, vg = _to_grid(torch.stack((q, k, v), dim=1), packed).permute(2, 0, 3, 1, 4).unbind(0)
    if half_window is not None and packed.max_len > 4 * block:
        out = _blocked_local(qg, kg, vg, packed, half_window, dropout, block)
    else:
        mask = _grid_mask(packed, half_window, q.dtype, q.device)
        out = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=mask, dropout_p=dropout)
    return _from_grid(out, packed)


def _blocked_local(
    q: Tensor, k: Tensor, v: Tensor, packed: Packed, half_window: int, dropout: float, block: int
) -> Tensor:
    """Sliding-window attention in blocks of ``block`` queries, each against the keys within reach: the same
    values as the full window mask, in memory that grows with the window instead of the length squared."""
    m = packed.max_len
    valid = torch.arange(m, device=q.device)[None, :] < packed.lengths[:, None]  # [B, M]
    outs = []
    for start in range(0, m, block):
        stop = min(start + block, m)
        lo, hi = max(0, start - half_window), min(m, stop + half_window)
        rows = torch.arange(start, stop, device=q.device)
        cols = torch.arange(lo, hi, device=q.device)
        window = (rows[:, None] - cols[None, :]).abs() <= half_window
        q_valid, k_valid = valid[:, start:stop], valid[:, lo:hi]
        mask = (window[None] & k_valid[:, None, :]) | ~q_valid[:, :, None]
        outs.append(
            F.scaled_dot_product_attention(
                q[:, :, start:stop], k[:, :, lo:hi], v[:, :, lo:hi], attn_mask=mask[:, None], dropout_p=dropout
            )
        )
    return torch.cat(outs, dim=2)


# ------------------------------------------------------------------------------------------ flex
def flex_attention_module() -> Any:
    """``torch.nn.attention.flex_attention``, imported when first used."""
    import torch.nn.attention.flex_attention as flex

    return flex


@functools.cache
def _compiled_flex() -> Callable[..., Tensor]:
    return torch.compile(flex_attention_module().flex_attention, dynamic=True)


def flex_kernel(q: Tensor) -> Callable[..., Tensor]:
    """FlexAttention for ``q``'s device: compiled into one fused kernel on CUDA (uncompiled it materialises every
    score); uncompiled elsewhere, where it answers but has no backward (PyTorch's CPU kernel trains nothing)."""
    if q.is_cuda:
        return _compiled_flex()
    if q.requires_grad:
        raise ConfigError(
            "attn_implementation 'flex' trains on CUDA only (PyTorch's CPU FlexAttention has no backward): on the "
            "CPU use it under torch.no_grad, or train with sdpa or varlen"
        )
    return cast(Callable[..., Tensor], flex_attention_module().flex_attention)


def flex_packed(q: Tensor, k: Tensor, v: Tensor, packed: Packed, half_window: int | None, dropout: float) -> Tensor:
    """Attention within each sequence (and window) of packed ``[T, heads, d]`` tokens through FlexAttention with
    a block mask, so no padding is computed; the block mask is built once per forward."""
    refuse_dropout("flex", dropout)
    key = ("flex", half_window)
    block = packed.cache.get(key)
    if block is None:
        sequence, positions = packed.sequence, packed.positions

        def same_sequence(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
            return sequence[qi] == sequence[ki]

        def within_window(b: Tensor, h: Tensor, qi: Tensor, ki: Tensor) -> Tensor:
            near = (positions[qi] - positions[ki]).abs() <= (half_window or 0)
            return (sequence[qi] == sequence[ki]) & near

        rule = same_sequence if half_window is None else within_window
        block = flex_attention_module().create_block_mask(rule, None, None, packed.total, packed.total, q.device)
        packed.cache[key] = block
    grid = [t.transpose(0, 1)[None] for t in (q, k, v)]
    return torch.as_tensor(flex_kernel(q)(*grid, block_mask=block))[0].transpose(0, 1)


# ------------------------------------------------------------------------------------------ varlen
def varlen_kernel_applies(q: Tensor) -> bool:
    """Whether ``q`` runs FlashAttention's varlen kernel: on CUDA, in its dtypes (autocast gives them), with the
    kernel in this torch. Elsewhere attention runs through SDPA, which computes the same."""
    return q.is_cuda and q.dtype in (torch.float16, torch.bfloat16) and varlen_kernel_exists()


def varlen_attention(
    q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, max_seqlen: int, half_window: int | None = None
) -> Tensor:
    """Attention within each sequence of ``[T, heads, d]`` tokens whose starts are ``cu_seqlens`` (int32, 0
    first and ``T`` last): one FlashAttention varlen kernel where ``varlen_kernel_applies``, one SDPA call per
    sequence elsewhere (reading ``cu_seqlens`` on the host)."""
    if varlen_kernel_applies(q):
        from torch.nn.attention.varlen import varlen_attn

        window = (-1, -1) if half_window is None else (half_window, half_window)
        cu = cu_seqlens
        out = varlen_attn(q, k, v, cu, cu, max_seqlen, max_seqlen, window_size=window)
        return out if isinstance(out, Tensor) else out[0]
    pieces = []
    for start, end in itertools.pairwise(cu_seqlens.tolist()):
        query, key, value = (t[start:end].transpose(0, 1) for t in (q, k, v))
        mask = None if half_window is None else window_mask(end - start, half_window, q.device)
        pieces.append(F.scaled_dot_product_attention(query, key, value, attn_mask=mask).transpose(0, 1))
    return torch.cat(pieces)
