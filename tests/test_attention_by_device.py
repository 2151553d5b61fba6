"""Attention by device (bertkit.models.attention): the one policy, tested on the CPU with the device given; the
packed batch both architectures share; the kernels' portable paths against SDPA; and, under ``pytest --device
cuda``, ModernBERT's varlen path (FlashAttention's kernel in bf16) against SDPA."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bertkit.config import ModernBertConfig
from bertkit.errors import ConfigError
from bertkit.models import modernbert as mb
from bertkit.models.attention import Packed, choose_attention, sdpa_packed, varlen_attention, varlen_kernel_exists

SIZES: dict[str, Any] = dict(
    vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=2,
    pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, local_attention=8,
)  # fmt: skip
KERNELS = ("sdpa", "flex", "varlen")


@pytest.mark.parametrize(
    ("requested", "device", "exists", "dropout", "chosen"),
    [
        (None, "cuda", True, False, "varlen"),
        (None, "cuda:1", True, False, "varlen"),
        (None, "cuda", False, False, "sdpa"),  # a torch without the varlen kernel
        (None, "cuda", True, True, "sdpa"),  # only SDPA drops attention probabilities out
        (None, "cpu", True, False, "sdpa"),
        (None, None, True, False, "sdpa"),
        ("flex", "cpu", True, False, "flex"),
        ("varlen", "cpu", False, False, "varlen"),  # asked for: the kernel's portable path runs
    ],
)
def test_the_policy_is_a_function_of_device_request_and_kernel(requested, device, exists, dropout, chosen):
    got = choose_attention(requested, device, allowed=KERNELS, varlen_exists=exists, attention_dropout=dropout)
    assert got == chosen


def test_an_unknown_implementation_is_refused_with_the_choices():
    with pytest.raises(ConfigError, match=r"'eager' is not supported for ModernBERT; use one of \('sdpa'"):
        choose_attention("eager", "cpu", allowed=KERNELS, varlen_exists=True, architecture="ModernBERT")


def test_the_packed_batch_knows_where_each_token_sits():
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])  # left-padded, right-padded, full
    packed = Packed.of(mask)
    assert packed.total == 10 and not packed.full and packed.max_len == 5
    assert packed.cu_seqlens.tolist() == [0, 3, 5, 10] and packed.cu_seqlens.dtype == torch.int32
    assert packed.positions.tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 3, 4]
    assert packed.sequence.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2, 2]
    x = torch.randn(3, 5, 4)
    again = packed.pad(packed.unpad(x))
    assert torch.equal(again[mask.bool()], x[mask.bool()]) and not again[~mask.bool()].any()
    assert torch.equal(Packed.of(mask[:, None, None, :].bool()).indices, packed.indices)  # BERT's key mask


@pytest.mark.parametrize("half_window", [None, 1])
def test_varlen_portable_path_equals_sdpa_on_the_packed_layout(half_window):
    packed = Packed.of(torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0]]))
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(packed.total, 2, 8, generator=g) for _ in range(3))
    got = varlen_attention(q, k, v, packed.cu_seqlens, packed.max_len, half_window)
    torch.testing.assert_close(got, sdpa_packed(q, k, v, packed, half_window, 0.0), atol=1e-6, rtol=1e-5)


def _spy_kernels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    ran: list[str] = []
    for name, kernel in list(mb.ATTENTION.items()):

        def spy(*args: Any, _name: str = name, _kernel: Any = kernel) -> torch.Tensor:
            ran.append(_name)
            return _kernel(*args)

        monkeypatch.setitem(mb.ATTENTION, name, spy)
    return ran


def test_modernbert_built_by_bertkit_chooses_attention_by_the_device_it_runs_on(monkeypatch, device):
    ran = _spy_kernels(monkeypatch)
    model = mb.ModernBertForMaskedLM(ModernBertConfig(**SIZES)).to(device).eval()
    ids = torch.randint(3, 120, (2, 12), device=device)
    with torch.no_grad():
        model(ids, attention_mask=torch.ones_like(ids))
    expected = "varlen" if device.type == "cuda" and varlen_kernel_exists() else "sdpa"
    assert ran == [expected] * SIZES["num_hidden_layers"]


def test_modernbert_asked_for_varlen_on_the_cpu_gives_sdpa_values():
    torch.manual_seed(0)
    model = mb.ModernBertModel(ModernBertConfig(**SIZES)).eval()
    ids = torch.randint(3, 120, (3, 20))
    mask = (torch.arange(20)[None, :] < torch.tensor([[20], [7], [13]])).long()
    with torch.no_grad():
        model.set_attention("sdpa")
        want = model(ids, attention_mask=mask).last_hidden_state
        model.set_attention("varlen")
        got = model(ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_modernbert_varlen_kernel_matches_sdpa_in_bf16(device, monkeypatch):
    """On CUDA under bf16 autocast, ModernBERT's varlen path runs FlashAttention's kernel (global and windowed
    layers); its forward and a training step stay within bf16 tolerance of SDPA's."""
    if device.type != "cuda":
        pytest.skip("FlashAttention's varlen kernel runs on CUDA (pytest --device cuda)")
    calls: list[int | None] = []
    original = mb.varlen_attention

    def counted(*args: Any) -> torch.Tensor:
        calls.append(args[-1])
        return original(*args)

    monkeypatch.setattr(mb, "varlen_attention", counted)
    config = ModernBertConfig(**{**SIZES, "local_attention": 16})
    ids = torch.randint(3, 120, (4, 48), device=device)
    mask = (torch.arange(48, device=device)[None, :] < torch.tensor([[48], [30], [9], [41]], device=device)).long()
    labels = torch.where(torch.rand(ids.shape, device=device) < 0.3, ids, -100).masked_fill(mask == 0, -100)
    results = {}
    for implementation in ("sdpa", "varlen"):
        torch.manual_seed(0)
        model = mb.ModernBertForMaskedLM(config).to(device).train()
        model.set_attention(implementation)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(ids, attention_mask=mask, labels=labels)
        out.loss.backward()
        grads = {n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None}
        results[implementation] = (out.loss.detach().float(), grads)
    assert None in calls and 8 in calls  # global and windowed layers went through the kernel
    torch.testing.assert_close(results["varlen"][0], results["sdpa"][0], atol=3e-2, rtol=3e-2)
    for name, grad in results["sdpa"][1].items():
        torch.testing.assert_close(results["varlen"][1][name], grad, atol=5e-2, rtol=1e-1, msg=name)
