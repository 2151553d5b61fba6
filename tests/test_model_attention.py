"""Attention implementations and sequence packing (bertkit.models.bert, bertkit.data.packing): FlexAttention and
variable-length attention equal SDPA on padded batches, and a packed batch gives the loss and gradients of the
same sequences padded. They run on the device of the test mode (``pytest --device cuda``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.data.packing import first_fit_decreasing, pack_batch
from bertkit.errors import ConfigError
from bertkit.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForTokenClassification,
    BertModel,
    packed_positions,
)
from device_mode import no_host_sync

VOCAB = 97
IMPLEMENTATIONS = ("sdpa", "eager", "flex", "varlen")


def tiny(**overrides) -> BertConfig:
    values = dict(
        vocab_size=VOCAB, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    values.update(overrides)
    return BertConfig.preset("tiny", **values)


def padded(lengths=(9, 3, 14, 6, 1, 11), seed: int = 0) -> dict[str, torch.Tensor]:
    """A right-padded batch with [CLS]=2 first, segments A/B, 15 % of the real tokens masked for MLM."""
    g = torch.Generator().manual_seed(seed)
    seq_len = max(lengths)
    ids = torch.randint(5, VOCAB, (len(lengths), seq_len), generator=g)
    ids[:, 0] = 2
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        types[row, n // 2 : n] = 1
    ids = ids.masked_fill(mask == 0, 0)
    predictions = max(1, round(0.3 * seq_len))
    positions = torch.stack([torch.randperm(seq_len, generator=g)[:predictions].sort().values for _ in lengths])
    labels = torch.gather(ids, 1, positions).masked_fill(torch.gather(mask, 1, positions) == 0, -100)
    return {
        "input_ids": ids,
        "token_type_ids": types,
        "attention_mask": mask,
        "masked_positions": positions,
        "masked_labels": labels,
    }


def on(batch: dict, device: torch.device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def step(model: torch.nn.Module, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One forward and backward: the loss and every gradient."""
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def twin(cls: type, implementation: str, device: torch.device, **overrides) -> Any:
    torch.manual_seed(0)
    return cls(tiny(**overrides), attn_implementation=implementation).to(device)


def assert_same_step(got: tuple, want: tuple, tolerance: float) -> None:
    torch.testing.assert_close(got[0], want[0], atol=tolerance, rtol=tolerance)
    assert got[1].keys() == want[1].keys()
    for name, grad in want[1].items():
        torch.testing.assert_close(got[1][name], grad, atol=tolerance, rtol=10 * tolerance, msg=name)


@pytest.mark.parametrize("implementation", ["flex", "varlen", "eager"])
@pytest.mark.parametrize("unpad", [False, True])
def test_implementations_equal_sdpa_on_padded_batches(implementation, unpad, device):
    batch = on(padded(), device)
    mask = batch["attention_mask"].bool()
    reference = twin(BertModel, "sdpa", device).eval()
    model = twin(BertModel, implementation, device).eval()
    with torch.no_grad():
        want, got = reference(**_encoder_inputs(batch)), model(**_encoder_inputs(batch))
    torch.testing.assert_close(got.last_hidden_state[mask], want.last_hidden_state[mask], atol=2e-5, rtol=1e-4)
    if implementation == "flex" and device.type != "cuda":
        return  # FlexAttention has no backward on the CPU (the model says so: see the test below)
    train_want = twin(BertForMaskedLM, "sdpa", device).train()
    train_got = twin(BertForMaskedLM, implementation, device).train()
    train_got.bert.unpad = train_want.bert.unpad = unpad
    assert_same_step(step(train_got, batch), step(train_want, batch), 2e-5)


def _encoder_inputs(batch: dict) -> dict:
    return {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("unpad", [False, True])
def test_packed_mlm_has_the_loss_and_gradients_of_the_padded_batch(implementation, unpad, device):
    batch = padded()
    packed = pack_batch(batch, row_length=24)
    assert packed["input_ids"].shape[0] < batch["input_ids"].shape[0]  # fewer rows: that is the point
    reference = twin(BertForMaskedLM, "sdpa", device).train()
    model = twin(BertForMaskedLM, implementation, device).train()
    model.bert.unpad = unpad
    if implementation == "flex" and device.type != "cuda":
        with pytest.raises(ConfigError, match="trains on CUDA only"):
            step(model, on(packed, device))
        return
    assert_same_step(step(model, on(packed, device)), step(reference, on(batch, device)), 2e-5)


@pytest.mark.parametrize("implementation", ["sdpa", "varlen"])
def test_packed_token_classification_has_the_padded_loss(implementation, device):
    batch = padded()
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(0, 3, batch["input_ids"].shape, generator=g).masked_fill(batch["attention_mask"] == 0, -100)
    dense = {**_encoder_inputs(batch), "labels": labels}
    packed = pack_batch(dense, row_length=20)
    reference = twin(BertForTokenClassification, "sdpa", device, num_labels=3).train()
    model = twin(BertForTokenClassification, implementation, device, num_labels=3).train()
    assert_same_step(step(model, on(packed, device)), step(reference, on(dense, device)), 2e-5)


def test_packed_hidden_states_are_each_sequence_alone(device):
    batch = padded(lengths=(5, 7, 3))
    packed = on(pack_batch(batch, row_length=16), device)
    model = twin(BertModel, "sdpa", device).eval()
    with torch.no_grad():
        rows = model(**{k: packed[k] for k in ("input_ids", "token_type_ids", "attention_mask", "sequence_ids")})
        for index, length in enumerate((5, 7, 3)):
            ids, types = (batch[k][index : index + 1, :length].to(device) for k in ("input_ids", "token_type_ids"))
            alone = model(ids, types)
            row, start = _find(packed["input_ids"], ids[0])
            torch.testing.assert_close(
                rows.last_hidden_state[row, start : start + length], alone.last_hidden_state[0], atol=2e-5, rtol=1e-4
            )


def _find(rows: torch.Tensor, sequence: torch.Tensor) -> tuple[int, int]:
    """Where ``sequence`` starts in ``rows``."""
    length = len(sequence)
    for row in range(rows.shape[0]):
        for start in range(rows.shape[1] - length + 1):
            if torch.equal(rows[row, start : start + length], sequence):
                return row, start
    raise AssertionError("sequence not found in the packed rows")


def test_positions_restart_with_every_sequence():
    ids = torch.tensor([[0, 0, 0, 1, 1, 2, -1, -1], [0, 0, 0, 0, 0, 0, 0, 0]])
    assert packed_positions(ids).tolist() == [[0, 1, 2, 0, 1, 0, 0, 1], list(range(8))]


def test_packer_fills_rows_longest_first_and_keeps_fixed_shapes():
    assert first_fit_decreasing([5, 9, 3, 7, 1], 10) == [[1, 4], [3, 2], [0]]
    batch = padded(lengths=(4, 8, 6))
    packed = pack_batch(batch, row_length=10, rows=4)
    assert packed["input_ids"].shape == (4, 10) and int(packed["attention_mask"].sum()) == 18
    # every sequence starts where cu_seqlens says, padding runs included, and the flat length closes it
    assert packed["cu_seqlens"].tolist() == [0, 8, 10, 16, 20, 30, 40]  # 8 | 6 4 | empty | empty
    with pytest.raises(ConfigError, match="too few"):
        pack_batch(batch, row_length=10, rows=1)
    with pytest.raises(ConfigError, match="does not fit"):
        pack_batch(batch, row_length=7)


def test_sequence_level_targets_are_refused():
    batch = {**padded(), "next_sentence_label": torch.zeros(6, dtype=torch.long)}
    with pytest.raises(ConfigError, match="next_sentence_label"):
        pack_batch(batch, row_length=24)
    model = BertForPreTraining(tiny())
    packed = pack_batch(padded(), row_length=24)
    with pytest.raises(ConfigError, match="unpacked"):
        model(**packed, next_sentence_label=torch.zeros(packed["input_ids"].shape[0], dtype=torch.long))


@pytest.mark.parametrize("implementation", ["flex", "varlen"])
def test_kernels_without_attention_dropout_refuse_to_train_with_it(implementation):
    model = BertForMaskedLM(tiny(attention_probs_dropout_prob=0.1), attn_implementation=implementation).train()
    with pytest.raises(ConfigError, match="attention_probs_dropout_prob=0"):
        model(**padded())
    with torch.no_grad():
        model.eval()(**padded())  # no dropout in evaluation: fine


def test_a_packed_step_with_its_cu_seqlens_makes_no_host_sync(device):
    """With the packer's ``cu_seqlens``, varlen attention needs nothing from the host: forward and backward of a
    packed batch run without one synchronisation (an error on CUDA; tensor reads raise on the CPU)."""
    packed = pack_batch(padded(lengths=(9, 14, 6, 11)), row_length=16)
    packed["attention_mask"] = None  # padding runs are sequences of their own: no mask needed, none to check
    # the CPU's varlen stand-in (a loop of SDPA calls) reads cu_seqlens on the host: check SDPA's packed path there
    model = twin(BertForMaskedLM, "varlen" if device.type == "cuda" else "sdpa", device).train()
    batch = on(packed, device)
    with no_host_sync(device):
        model(**batch).loss.backward()


@pytest.mark.parametrize("implementation", ["varlen", "flex"])
def test_gpu_kernels_in_bf16_match_sdpa(implementation, device):
    """On CUDA in bf16, varlen runs FlashAttention's varlen kernel and flex its compiled kernel (fp32 takes the
    portable paths the tests above check): a packed training step close to the padded one, to bf16 tolerance."""
    if device.type != "cuda":
        pytest.skip("the bf16 kernels run on CUDA (pytest --device cuda)")
    batch = padded(lengths=(40, 17, 33, 8, 25, 40))
    packed = pack_batch(batch, row_length=64)
    reference = twin(BertForMaskedLM, "sdpa", device).train()
    model = twin(BertForMaskedLM, implementation, device).train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got, want = step(model, on(packed, device)), step(reference, on(batch, device))
    torch.testing.assert_close(got[0], want[0], atol=3e-2, rtol=3e-2)
