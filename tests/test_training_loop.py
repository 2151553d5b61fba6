"""The shared training loop on a toy model: learning, accumulation, resume, non-finite steps, signals, eval."""

from __future__ import annotations

import json
import logging
import math
import os
import signal

import pytest
import torch

from bertkit.errors import CheckpointError, ConfigError
from bertkit.training import ResumableBatches, TrainConfig, TrainingDiverged, list_checkpoints, train
from training_helpers import ToyModel, collate, toy_dataset

FAST = dict(progress=False, tensorboard=False, plot=False, lr=1e-2, warmup_steps=2)


def run(tmp_path, *, model=None, data_seed=1, dropout=0.1, **overrides):
    torch.manual_seed(0)
    model = model or ToyModel(dropout=dropout)
    micro = overrides.pop("micro_batch_size", 8)
    batches = ResumableBatches(toy_dataset(), micro, collate, seed=data_seed, repeat=True)
    cfg = TrainConfig.from_options(output_dir=tmp_path, micro_batch_size=micro, **{**FAST, **overrides})
    return model, train(model, batches, cfg, evaluate=overrides.pop("evaluate", None))


def weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_loss_goes_down_and_metrics_are_written(tmp_path):
    _, result = run(tmp_path, max_steps=60, log_every=10)
    losses = [r["loss"] for r in result.history if r["split"] == "train"]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0]
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [10, 20, 30, 40, 50, 60]
    assert {"loss", "lr", "grad_norm", "tokens_per_s", "epoch"} <= set(lines[0])
    assert result.stop_reason == "max_steps" and result.checkpoint == tmp_path / "checkpoint-60"


def test_accumulation_matches_a_larger_micro_batch(tmp_path):
    a, _ = run(tmp_path / "a", max_steps=8, micro_batch_size=4, grad_accum_steps=2, dropout=0.0)
    b, _ = run(tmp_path / "b", max_steps=8, micro_batch_size=8, dropout=0.0)
    for name, value in a.state_dict().items():
        assert torch.allclose(value, b.state_dict()[name], atol=1e-5), name


class Killer(ToyModel):
    """Sends itself SIGTERM during forward call number ``at``."""

    def __init__(self, at: int, **kwargs):
        super().__init__(**kwargs)
        self.at = at

    def forward(self, x, y):
        if self.calls == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().forward(x, y)


def test_resume_from_a_checkpoint_is_bit_exact(tmp_path):
    full, _ = run(tmp_path / "full", max_steps=12, save_every=4, log_every=1)
    torch.manual_seed(0)
    _, stopped = run(tmp_path / "part", model=Killer(at=5), max_steps=12, save_every=4, log_every=1)
    assert stopped.stop_reason == "signal" and stopped.step == 6
    # A fresh model with other initial weights continues from checkpoint-6.
    resumed, result = run(
        tmp_path / "part", max_steps=12, save_every=4, log_every=1, resume="auto", model=ToyModel(dim=8)
    )
    assert result.step == 12
    for name, value in full.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    assert losses(tmp_path / "full") == losses(tmp_path / "part") and len(losses(tmp_path / "full")) == 12


def losses(directory):
    lines = (directory / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["split"] == "train"]


def test_refuses_to_overwrite_a_run_without_resume(tmp_path):
    run(tmp_path, max_steps=2)
    with pytest.raises(CheckpointError, match="--resume"):
        run(tmp_path, max_steps=4)


def test_non_finite_steps_are_skipped_and_counted(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        model, result = run(tmp_path, model=ToyModel(nan_at={3, 4}), max_steps=10)
    assert "update skipped (2 so far)" in caplog.text
    assert result.step == 10 and result.skipped_steps == 2
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_repeated_non_finite_steps_stop_with_the_last_good_checkpoint_intact(tmp_path, caplog):
    model = ToyModel(nan_at=set(range(6, 100)))
    with caplog.at_level(logging.WARNING, logger="bertkit"), pytest.raises(TrainingDiverged, match="checkpoint-5"):
        run(tmp_path, model=model, max_steps=50, save_every=5, max_bad_steps=4)
    assert "non-finite" in caplog.text
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-5"]


def test_sigterm_saves_a_checkpoint_and_stops(tmp_path):
    _, result = run(tmp_path, model=Killer(at=6), max_steps=50)
    assert result.stop_reason == "signal" and result.step == 7
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-7"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


def test_max_time_stops_the_run(tmp_path, monkeypatch):
    """The clock is the run's own (``Trainer.elapsed``), here 0.1 s a step: the run stops on the step where
    max_time is reached, however busy the machine is."""
    from bertkit.training.loop import Trainer

    monkeypatch.setattr(Trainer, "elapsed", lambda self: 0.1 * self.step)
    _, result = run(tmp_path, max_time=0.35, max_steps=None)
    assert result.stop_reason == "max_time" and result.step == 4 and result.checkpoint is not None


@pytest.mark.parametrize("limits", [{}, {"max_time": 60}], ids=["epochs only", "epochs and max_time"])
def test_epochs_not_turned_into_steps_are_a_config_error(tmp_path, limits):
    # Without for_epoch the loop cannot tell where an epoch ends: it would run forever, or to max_time alone.
    with pytest.raises(ConfigError, match=r"for_epoch\(len\(batches\), world_size\).*or set max_steps"):
        run(tmp_path, epochs=2, **limits)
    assert not tmp_path.joinpath("metrics.jsonl").exists()


def test_evaluation_epochs_and_best_export(tmp_path):
    scores = iter([0.2, 0.9, 0.5])
    seen = []

    def evaluate(model):
        assert not model.training
        seen.append(model.training)
        return {"accuracy": next(scores)}

    # 64 examples / 16 per batch = 4 updates per epoch; 12 updates = 3 epochs, evaluated at each end.
    model = ToyModel()
    batches = ResumableBatches(toy_dataset(), 16, collate, seed=0)
    cfg = TrainConfig.from_options(
        output_dir=tmp_path, micro_batch_size=16, epochs=3, best_metric="accuracy", **FAST
    ).for_epoch(len(batches))
    result = train(model, batches, cfg, evaluate=evaluate)
    evals = [r for r in result.history if r["split"] == "eval"]
    assert [r["step"] for r in evals] == [4, 8, 12] and result.best_metric == 0.9
    assert (tmp_path / "best" / "model.safetensors").is_file() and model.training


def test_lamb_and_bf16_autocast_train_on_cpu(tmp_path, caplog):
    _, lamb = run(tmp_path / "lamb", max_steps=30, optimizer="lamb", log_every=10)
    losses = [r["loss"] for r in lamb.history]
    assert losses[-1] < losses[0]
    with caplog.at_level(logging.WARNING, logger="bertkit"):
        _, bf16 = run(tmp_path / "bf16", max_steps=4, precision="bf16", log_every=2)
    assert "bf16 autocast on CPU" in caplog.text
    assert bf16.step == 4 and all(math.isfinite(r["loss"]) for r in bf16.history)


def test_fp16_needs_a_gpu(tmp_path):
    from bertkit.errors import ConfigError

    with pytest.raises(ConfigError, match="CUDA"):
        run(tmp_path, max_steps=1, precision="fp16", device="cpu")


def test_curves_png(tmp_path):
    pytest.importorskip("matplotlib")
    from bertkit.training.run_log import plot_curves

    history = [{"step": s, "split": "train", "loss": 1 / s, "mlm_acc": s / 10} for s in range(1, 10)]
    history.append({"step": 9, "split": "eval", "loss": 0.2, "mlm_acc": 0.8})
    path = plot_curves(history, tmp_path / "curves.png")
    assert path is not None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fp16_loss_scaling_skips_overflowing_updates_and_resumes_its_scale(tmp_path, monkeypatch):
    # fp16 needs a GPU in bertkit; this drives the same loop code with torch's CPU GradScaler and fp16
    # autocast, so the scaler's path (overflow skips, scale back-off, its state in checkpoints) is tested here.
    from bertkit.training import loop
    from bertkit.training.precision import Precision

    scalers = []

    def fp16_on_cpu(name, device):
        scalers.append(torch.amp.GradScaler("cpu", init_scale=2.0**126, growth_interval=1000))
        return Precision("fp16", device, scalers[-1])

    monkeypatch.setattr(loop, "resolve_precision", fp16_on_cpu)
    _, result = run(tmp_path, max_steps=6, save_every=3, dropout=0.0)
    # 2^126 times any loss overflows fp32 gradients: the scale halves on each skipped update until it fits.
    assert result.step == 6 and result.skipped_steps >= 1
    scale = scalers[-1].get_scale()
    assert scale < 2.0**126
    assert all(math.isfinite(r["loss"]) for r in result.history if "loss" in r)
    saved = torch.load(tmp_path / "checkpoint-6" / "trainer_state.pt", weights_only=False)
    assert saved["scaler"]["scale"] == scale and saved["skipped_steps"] == result.skipped_steps
    _, resumed = run(tmp_path, max_steps=8, dropout=0.0, resume="auto")
    # The resumed scaler starts from the saved scale, not from 2^126: no new overflow skips.
    assert resumed.step == 8 and resumed.skipped_steps == result.skipped_steps
    assert scalers[-1].get_scale() == scale


def test_trainer_hooks_stop_the_run_and_checkpoints_keep_their_keys(tmp_path):
    from bertkit.training.loop import Hooks, Trainer

    torch.manual_seed(0)
    batches = ResumableBatches(toy_dataset(), 16, collate, seed=0)
    ended = []
    hooks = Hooks(
        on_epoch_end=lambda epoch, model: ended.append(epoch), should_stop=lambda: "enough" if len(ended) == 2 else None
    )
    cfg = TrainConfig.from_options(output_dir=tmp_path, micro_batch_size=16, max_steps=50, **FAST)
    result = Trainer(ToyModel(), batches, cfg, hooks).train()
    # 64 examples / 16 = 4 updates per epoch: the hook asks to stop after the second epoch's last update.
    assert (result.stop_reason, result.step, ended) == ("enough", 8, [0, 1])
    saved = torch.load(tmp_path / "checkpoint-8" / "trainer_state.pt", weights_only=False)
    assert set(saved) == {
        "format",
        "step",
        "epoch",
        "elapsed",
        "skipped_steps",
        "tokens",
        "best",
        "optimizer",
        "scaler",
        "rng",
        "loader",
        "history",
        "config",
        "world_size",
        "reason",
    }
    assert (saved["reason"], saved["epoch"], saved["loader"]["epoch"], saved["loader"]["position"]) == (
        "enough",
        2,
        2,
        0,
    )


def test_a_time_budget_that_ends_first_shortens_the_schedule(tmp_path, monkeypatch):
    from bertkit.training.loop import Hooks, Trainer

    batches = ResumableBatches(toy_dataset(), 8, collate, seed=1, repeat=True)
    options = {**FAST, "warmup_steps": 0, "schedule": "linear"}
    cfg = TrainConfig.from_options(output_dir=tmp_path, micro_batch_size=8, max_steps=1000, max_time=100, **options)
    trainer = Trainer(ToyModel(), batches, cfg, Hooks())
    trainer.step = 100

    def lr_after_elapsed(seconds: float) -> float:
        monkeypatch.setattr(trainer, "elapsed", lambda: seconds)
        assert trainer.stop_reason() is None  # the stop check agrees on the elapsed time every schedule reads
        return trainer.learning_rate(trainer.horizon())

    # 2 updates/s: the 100 s budget ends at update 200, before the 1000 steps
    assert lr_after_elapsed(50.0) == pytest.approx(cfg.optimizer.lr * (1 - 100 / 200))
    # 20 updates/s: the steps end first, and the schedule is theirs
    assert lr_after_elapsed(5.0) == pytest.approx(cfg.optimizer.lr * (1 - 100 / 1000))


def test_progress_redirected_to_a_file_is_plain_lines(tmp_path, capsys):
    batches = ResumableBatches(toy_dataset(), 8, collate, seed=1, repeat=True)
    options = {**FAST, "progress": True}
    cfg = TrainConfig.from_options(output_dir=tmp_path, micro_batch_size=8, max_steps=20, eval_every=10, **options)
    train(ToyModel(), batches, cfg, evaluate=lambda model: {"accuracy": 0.5})
    err = capsys.readouterr().err
    assert "\r" not in err  # captured stderr is no terminal: no bar redraws
    assert "step 10 eval: accuracy 0.5" in err
    assert any(line.startswith("train: 20/20 step (100%)") and "loss " in line for line in err.splitlines())
