"""Optimizers, parameter groups, schedules and TrainConfig validation."""

from __future__ import annotations

import math

import pytest
import torch

from bertkit.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.bert import BertForPreTraining
from bertkit.training import Lamb, TrainConfig, build_optimizer, lr_multiplier, param_groups, parse_duration


def test_param_groups_exclude_biases_and_layernorm_and_count_tied_weights_once():
    model = BertForPreTraining(BertConfig.preset("tiny"))
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    excluded = {names[id(p)] for p in no_decay["params"]}
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"])
    assert "bert.embeddings.word_embeddings.weight" in decayed
    assert all(n.endswith("bias") or "norm" in n for n in excluded)
    assert any("layer_norm" in n for n in excluded) and "mlm.decoder.bias" in excluded
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


@pytest.mark.parametrize(
    ("schedule", "step", "expected"),
    [
        ("linear", 0, 0.0),  # BERT: the first update runs at lr 0
        ("linear", 5, 0.5),  # halfway through a warmup of 10
        ("linear", 10, 0.9),  # GB decays over the whole run: 1 - 10/100
        ("linear", 50, 0.5),
        ("linear", 100, 0.0),
        ("poly", 55, math.sqrt(0.5)),  # ((100 - 55) / (100 - 10)) ** 0.5
        ("cosine", 55, 0.5),  # half way from warmup end to the end
        ("cosine", 10, 1.0),
        ("constant", 90, 1.0),
    ],
)
def test_lr_schedules(schedule, step, expected):
    got = lr_multiplier(step, schedule=schedule, warmup_steps=10, total_steps=100, power=0.5)
    assert got == pytest.approx(expected)


def test_unknown_schedule_and_optimizer_are_config_errors():
    with pytest.raises(ConfigError):
        lr_multiplier(0, schedule="step", warmup_steps=0, total_steps=1)
    with pytest.raises(ConfigError):
        build_optimizer(torch.nn.Linear(2, 2), "sgd", 0.1)


def test_lamb_first_step_by_hand():
    p = torch.nn.Parameter(torch.tensor([3.0, 4.0]))  # ||p|| = 5
    opt = Lamb([p], lr=0.1, weight_decay=0.0, eps=1e-6)
    p.grad = torch.tensor([2.0, -2.0])
    opt.step()
    # Step 1 with bias correction: m_hat = g, v_hat = g^2, update = g / (|g| + eps) = [1, -1] (to 1e-6),
    # trust = ||p|| / ||update|| = 5 / sqrt(2); p <- p - lr * trust * update.
    update = torch.tensor([2.0, -2.0]) / (2.0 + 1e-6)
    expected = torch.tensor([3.0, 4.0]) - 0.1 * (5 / update.norm()) * update
    assert torch.allclose(p.detach(), expected, atol=1e-6)


def test_lamb_weight_decay_enters_the_update_and_zero_weights_use_trust_one():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = Lamb([p], lr=0.5, weight_decay=0.01)
    p.grad = torch.ones(3)
    opt.step()
    assert torch.allclose(p.detach(), torch.full((3,), -0.5), atol=1e-5)  # trust ratio 1 for ||w|| = 0
    q = torch.nn.Parameter(torch.tensor([1.0, 0.0]))
    opt = Lamb([q], lr=0.1, weight_decay=0.5)
    q.grad = torch.zeros(2)
    opt.step()  # update = 0 + wd * w = [0.5, 0], trust = 1 / 0.5 -> step of exactly lr along w
    assert torch.allclose(q.detach(), torch.tensor([0.9, 0.0]), atol=1e-6)


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_optimizers_minimise_a_least_squares_problem(name):
    torch.manual_seed(0)
    x, w_true = torch.randn(64, 5), torch.randn(5, 1)
    model = torch.nn.Linear(5, 1)
    opt = build_optimizer(model, name, lr=0.05, weight_decay=0.0)
    first = None
    for _ in range(200):
        loss = torch.nn.functional.mse_loss(model(x), x @ w_true)
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first is not None
    assert loss.item() < 0.05 * first


def test_adamw_uses_bert_epsilon():
    opt = build_optimizer(torch.nn.Linear(2, 2), "adamw", 1e-3)
    assert all(g["eps"] == 1e-6 for g in opt.param_groups)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90m", 5400), ("1h30m", 5400), ("45s", 45), ("2d", 172800), ("3600", 3600), (120, 120.0)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "soon", "1x", "h"])
def test_parse_duration_rejects_garbage(bad):
    with pytest.raises(ConfigError):
        parse_duration(bad)


def test_accumulation_is_derived_from_the_global_batch():
    cfg = TrainConfig.from_options(micro_batch_size=8, global_batch_size=64, max_steps=1)
    assert cfg.accumulation(1) == 8 and cfg.accumulation(2) == 4 and 8 * 4 * cfg.accumulation(4) == 64
    with pytest.raises(ConfigError, match="multiple"):
        cfg.accumulation(3)
    assert 8 * 2 * TrainConfig.from_options(micro_batch_size=8, grad_accum_steps=3, max_steps=1).accumulation(2) == 48


def test_train_config_validation():
    with pytest.raises(ConfigError, match="needs an end"):
        TrainConfig.from_options()
    with pytest.raises(ConfigError, match="not both"):
        TrainConfig.from_options(max_steps=1, global_batch_size=8, grad_accum_steps=2)
    with pytest.raises(ConfigError):
        TrainConfig.from_options(max_steps=1, precision="fp8")
    with pytest.raises(ConfigError):
        TrainConfig.from_options(max_steps=1, micro_batch_size=0)
    assert TrainConfig.from_options(epochs=3).for_epoch(10).duration.max_steps == 30
    assert TrainConfig.from_options(max_time="1h").duration.max_time == 3600
    with pytest.raises(ConfigError, match="unknown training option"):
        TrainConfig.from_dict({"max_steps": 1, "learning_rate": 1})
