"""torch.compile (bertkit.compiling): compiled outputs and gradients equal the eager ones, batches of other lengths
reuse the compiled graph, and training turns it on from its config."""

from __future__ import annotations

from typing import cast

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from bertkit.compiling import compile_model, is_compiled
from bertkit.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.bert import BertForPreTraining, BertForSequenceClassification, BertModel
from bertkit.training import ResumableBatches, TrainConfig
from bertkit.training.loop import Trainer
from training_helpers import ToyModel, collate, toy_dataset


def _config(**overrides) -> BertConfig:
    # Smaller than the tiny preset (one layer): inductor's compile time grows with the graph.
    values = dict(vocab_size=64, max_position_embeddings=64, num_hidden_layers=1, hidden_size=32, num_attention_heads=2)
    values.update(overrides)
    return BertConfig.preset("tiny", intermediate_size=128, **values)


def _batch(batch: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 64, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length - 2 :] = 0  # one padded row, as inference batches have
    return {"input_ids": ids, "attention_mask": mask}


def _twins(cls: type, **overrides) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    eager = cls(_config(**overrides))
    compiled = cls(_config(**overrides))
    compiled.load_state_dict(eager.state_dict())
    return eager, compiled


def test_compiled_inference_equals_eager():
    eager, compiled = _twins(BertModel)
    compile_model(compiled.eval(), frozen=True)
    eager.eval()
    for length in (9, 14):
        inputs = _batch(3, length)
        with torch.inference_mode():
            want, got = eager(**inputs), compiled(**inputs)
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(got.pooler_output, want.pooler_output, rtol=1e-4, atol=1e-5)
    assert is_compiled(compiled) and not is_compiled(eager)
    assert type(compiled) is BertModel  # compiled in place: code that asks for the head still gets it


@pytest.mark.slow  # inductor compiles forward and backward: about half a minute on two busy cores
def test_compiled_training_step_has_the_eager_loss_and_gradients():
    eager, compiled = _twins(BertForPreTraining, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    compile_model(compiled.train())
    eager.train()
    inputs = _batch(4, 12)
    inputs["masked_positions"] = torch.tensor([[1, 3], [2, 5], [4, 6], [1, 2]])
    inputs["masked_labels"] = torch.tensor([[7, 8], [9, 10], [11, -100], [12, 13]])
    inputs["next_sentence_label"] = torch.tensor([0, 1, 0, 1])
    want, got = eager(**inputs).loss, compiled(**inputs).loss
    want.backward()
    got.backward()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    theirs = dict(compiled.named_parameters())
    for name, param in eager.named_parameters():
        torch.testing.assert_close(theirs[name].grad, param.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_other_lengths_and_batch_sizes_reuse_one_graph():
    torch.manual_seed(0)
    model = BertForSequenceClassification(_config(num_labels=2)).eval()
    counter = CompileCounter()
    compile_model(model, frozen=True, backend=counter)
    with torch.inference_mode():
        for batch, length in ((3, 7), (3, 13), (5, 21), (2, 30), (4, 9)):
            model(**_batch(batch, length))
    assert counter.frame_count == 1


def test_train_config_compiles_the_model(tmp_path):
    config = TrainConfig.from_options(
        output_dir=tmp_path / "run", max_steps=1, progress=False, tensorboard=False, plot=False, compile=True
    )
    trainer = Trainer(ToyModel(), ResumableBatches(toy_dataset(), 8, collate, seed=1), config)
    assert is_compiled(trainer.bare)


def test_compile_is_a_training_flag(capsys):
    from bertkit.cli import main

    assert main(["finetune", "--help"]) == 0
    assert "--compile" in capsys.readouterr().out


def _layers_step(model: torch.nn.Module, inputs: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _mlm_inputs(batch: int, length: int) -> dict[str, torch.Tensor]:
    inputs = _batch(batch, length)
    inputs["masked_positions"] = torch.tensor([[1, 3]] * batch)
    inputs["masked_labels"] = torch.tensor([[7, 8]] * batch)
    return inputs


@pytest.mark.parametrize("unpad", [False, True])
def test_compiled_layers_train_as_eager_and_share_one_graph(unpad):
    """The ``layers`` scope: every layer runs the same two compiled functions (graphs counted by a backend that
    only counts), lengths and layer counts reuse them, and the loss and gradients are the eager ones."""
    eager, compiled = _twins(
        BertForPreTraining, num_hidden_layers=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    counter = CompileCounter()
    compile_model(compiled, scope="layers", backend=counter)
    assert is_compiled(compiled) and not is_compiled(eager)
    for model in (eager, compiled):
        cast(BertForPreTraining, model.train()).bert.unpad = unpad
    for length in (12, 17):
        inputs = _mlm_inputs(4, length)
        inputs["attention_mask"][1, 5:] = 0  # a third of a row padded: unpadded when asked
        want, got = _layers_step(eager, inputs), _layers_step(compiled, inputs)
        torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
        for name, grad in want[1].items():
            torch.testing.assert_close(got[1][name], grad, rtol=1e-4, atol=1e-6, msg=name)
    # residual_norm and feed_forward, whatever the layers and lengths; once more each for the unpadded [T, H]
    # tokens, as the last layer of a head that reads a few rows runs on the padded [B, K, H] layout
    assert counter.frame_count == (4 if unpad else 2)


@pytest.mark.slow  # inductor compiles the two layer steps forward and backward: seconds to tens of seconds
def test_compiled_layers_with_inductor_equal_eager():
    eager, compiled = _twins(BertForPreTraining, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    compile_model(compiled, scope="layers")
    inputs = _mlm_inputs(3, 10)
    want, got = _layers_step(eager.train(), inputs), _layers_step(compiled.train(), inputs)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    for name, grad in want[1].items():
        torch.testing.assert_close(got[1][name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_cuda_graphs_are_refused_off_cuda(scope):
    model = BertForPreTraining(_config())
    with pytest.raises(ConfigError, match="CUDA graphs replay GPU kernels; this model is on cpu"):
        compile_model(model, scope=scope, cuda_graphs=True)
    assert not is_compiled(model)
