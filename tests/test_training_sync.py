"""No host synchronisation inside a training update (bertkit.training.loop): the forward and backward passes,
the clipping and the optimizer's update are queued on the device without the host waiting for a value; the
update reads its loss and gradient norm once, at its end. Checked with ``device_mode.no_host_sync``: on CUDA
``torch.cuda.set_sync_debug_mode("error")``, on the CPU every tensor read raises."""

from __future__ import annotations

import functools
import logging

import pytest
import torch

from bertkit.training import ResumableBatches, TrainConfig
from bertkit.training.loop import Trainer
from device_mode import HostSync, host_reads, no_host_sync
from training_helpers import ToyModel, collate, toy_dataset

FAST = dict(max_steps=4, progress=False, tensorboard=False, plot=False, warmup_steps=0, lr=1e-2)


def guarded(device: torch.device, method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        with no_host_sync(device):
            return method(*args, **kwargs)

    return call


def trainer(tmp_path, device: torch.device, model: ToyModel, **overrides) -> Trainer:
    """A trainer whose micro-batch passes, clipping and optimizer step fail on any host synchronisation."""
    torch.manual_seed(0)
    batches = ResumableBatches(toy_dataset(), 8, collate, seed=1, repeat=True)
    config = TrainConfig.from_options(
        output_dir=tmp_path, micro_batch_size=8, device=str(device), **{**FAST, **overrides}
    )
    run = Trainer(model, batches, config)
    run.forward_backward = guarded(device, run.forward_backward)  # type: ignore[method-assign]
    run.clip_gradients = guarded(device, run.clip_gradients)  # type: ignore[method-assign]
    run.optimizer.step = guarded(device, run.optimizer.step)  # type: ignore[method-assign]
    return run


@pytest.mark.parametrize("accumulation", [1, 2])
def test_an_update_waits_for_the_device_only_at_its_end(tmp_path, device, accumulation):
    result = trainer(tmp_path, device, ToyModel(), grad_accum_steps=accumulation).train()
    assert result.step == 4 and result.skipped_steps == 0
    losses = [r["loss"] for r in result.history if r.get("split") == "train"]
    assert losses and all(loss == loss for loss in losses)  # logged: read at each update's end


def test_an_update_reads_the_device_once(tmp_path, device):
    run = trainer(tmp_path, device, ToyModel(), grad_accum_steps=2)
    assert run.train_step()  # the first update builds the optimizer's state
    with host_reads(device) as reads:
        assert run.train_step()
    assert len(reads) == 1, reads  # the loss and gradient norm, read together after the update is queued


def test_a_non_finite_update_is_skipped_on_the_device(tmp_path, device, caplog):
    """Fused AdamW skips the update itself (``found_inf``): the weights and its moments stay as they were."""
    model = ToyModel(nan_at={1})
    run = trainer(tmp_path, device, model, max_steps=1)
    assert run.train_step()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = {k: v.clone() for k, v in run.optimizer.state[model.out.weight].items()}
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        assert not run.train_step()
    assert "update skipped" in caplog.text
    assert run.skipped == 1 and run.step == 1
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0, msg=name)
    for name, value in run.optimizer.state[model.out.weight].items():
        torch.testing.assert_close(value, moments[name], rtol=0, atol=0, msg=name)


def test_the_guard_catches_a_read_inside_a_step(tmp_path, device):
    run = trainer(tmp_path, device, ToyModel())
    reading = guarded(device, lambda: float(torch.ones((), device=device) * 2))
    with pytest.raises(HostSync if device.type == "cpu" else RuntimeError):
        reading()
    assert run.train_step()
