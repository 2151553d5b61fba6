"""Pre-training end to end on a tiny synthetic dataset: metrics, export, config files, CLI, phase 2."""

from __future__ import annotations

import json

import pytest
import torch

from bertkit.cli import main
from bertkit.errors import ConfigError, DataError
from bertkit.training.pretrain import PretrainConfig, build_config, build_model, pretrain
from bertkit.training.train_config import read_config_file
from training_helpers import make_pretraining_dataset

QUIET = dict(progress=False, tensorboard=False, plot=False, peak_flops=1e12)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_pretraining_dataset(tmp_path_factory.mktemp("data") / "d", n_train=48, n_eval=8, seq=24, vocab=60)


@pytest.fixture(scope="module")
def phase1(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "phase1"
    cfg = build_config(
        dict(
            data=str(data),
            output=str(out),
            model_config="tiny",
            micro_batch_size=8,
            max_steps=4,
            lr=1e-3,
            log_every=2,
            eval_every=2,
            eval_batches=1,
            **QUIET,
        )
    )
    return out, pretrain(cfg)


def test_metrics_cover_mlm_and_nsp_on_train_and_eval(phase1):
    out, result = phase1
    train = [r for r in result.history if r["split"] == "train"]
    evals = [r for r in result.history if r["split"] == "eval"]
    assert [r["step"] for r in train] == [2, 4] and [r["step"] for r in evals] == [2, 4]
    for record in train + evals:
        assert {"mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc"} <= set(record)
        assert 0 <= record["mlm_acc"] <= 1 and 0 <= record["nsp_acc"] <= 1
        assert record["loss"] == pytest.approx(record["mlm_loss"] + record["nsp_loss"], rel=1e-6)
    assert "mfu" in train[0] and train[0]["tokens_per_s"] > 0
    assert (out / "checkpoint-4" / "vocab.txt").is_file()  # checkpoints carry the tokenizer


def test_final_export_loads_in_bertkit_and_transformers_with_the_same_outputs(phase1):
    transformers = pytest.importorskip("transformers")
    from bertkit.weights import load_model

    final = phase1[0] / "final"
    assert {"config.json", "model.safetensors", "vocab.txt"} <= {p.name for p in final.iterdir()}
    ours = load_model(final).eval()
    theirs = transformers.BertForPreTraining.from_pretrained(final).eval()
    ids = torch.randint(5, 60, (2, 12))
    with torch.no_grad():
        a = ours(ids)
        b = theirs(input_ids=ids)
    assert torch.allclose(a.mlm_logits, b.prediction_logits, atol=1e-4)
    assert torch.allclose(a.nsp_logits, b.seq_relationship_logits, atol=1e-4)


def test_phase_two_starts_from_the_phase_one_weights(phase1, tmp_path):
    long_data = make_pretraining_dataset(tmp_path / "long", n_train=16, n_eval=0, seq=48, vocab=60)
    cfg = build_config(
        dict(
            data=str(long_data),
            output=str(tmp_path / "p2"),
            init_from=str(phase1[0] / "final"),
            micro_batch_size=8,
            max_steps=1,
            **QUIET,
        )
    )
    from bertkit.data import open_dataset
    from bertkit.weights import load_model

    model = build_model(cfg, open_dataset(long_data))
    reference = load_model(phase1[0] / "final")
    for (name, a), b in zip(model.state_dict().items(), reference.state_dict().values()):
        assert torch.equal(a, b), name
    result = pretrain(cfg)
    assert result.step == 1 and (tmp_path / "p2" / "final" / "model.safetensors").is_file()


def test_init_from_weights_with_another_vocabulary_is_refused(phase1, data, tmp_path):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(phase1[0] / "final", other)
    # Same size, one word replaced (as an extension into [unused] slots does): no shape check can tell.
    words = (other / "vocab.txt").read_text().splitlines()
    (other / "vocab.txt").write_text("\n".join([*words[:10], "zebra", *words[11:]]) + "\n")
    cfg = build_config(
        dict(
            data=str(data), output=str(tmp_path / "p2"), init_from=str(other), micro_batch_size=8, max_steps=1, **QUIET
        )
    )
    with pytest.raises(ConfigError, match=r"another tokenizer .* prepare the data with bertkit prepare-data"):
        pretrain(cfg)
    assert not (tmp_path / "p2" / "final").exists()


def test_a_dataset_smaller_than_one_micro_batch_is_a_data_error(data, tmp_path):
    cfg = build_config(
        dict(data=str(data), output=str(tmp_path / "o"), model_config="tiny", micro_batch_size=64, max_steps=1, **QUIET)
    )
    with pytest.raises(DataError, match="micro-batch"):
        pretrain(cfg)


def test_sequences_longer_than_the_position_table_are_rejected(tmp_path):
    data = make_pretraining_dataset(tmp_path / "d", n_train=8, n_eval=0, seq=40, vocab=60)
    (tmp_path / "small.json").write_text(
        json.dumps(
            {
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "max_position_embeddings": 32,
            }
        )
    )
    cfg = build_config(
        dict(
            data=str(data), output=str(tmp_path / "o"), model_config=str(tmp_path / "small.json"), max_steps=1, **QUIET
        )
    )
    from bertkit.data import open_dataset

    with pytest.raises(ConfigError, match="positions"):
        build_model(cfg, open_dataset(data))


def test_config_files_flat_nested_and_yaml(tmp_path):
    (tmp_path / "a.toml").write_text('data = "d"\nmax-steps = 5\n[train]\nlr = 0.001\noptimizer = "lamb"\n')
    assert read_config_file(tmp_path / "a.toml", PretrainConfig) == {
        "data": "d",
        "max_steps": 5,
        "lr": 0.001,
        "optimizer": "lamb",
    }
    pytest.importorskip("yaml")
    (tmp_path / "b.yaml").write_text("output: o\nmax_time: 90m\n")
    assert read_config_file(tmp_path / "b.yaml", PretrainConfig) == {"output": "o", "max_time": "90m"}
    (tmp_path / "c.toml").write_text("learning_rate = 1\n")
    with pytest.raises(ConfigError, match="learning_rate"):
        read_config_file(tmp_path / "c.toml", PretrainConfig)
    with pytest.raises(ConfigError, match="--data is required"):
        build_config({"output": "o", "max_steps": 1})


def test_cli_flags_override_the_config_file(data, tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(
        f'data = "{data}"\nmodel-config = "tiny"\nmax_steps = 50\nmicro_batch_size = 8\n'
        "peak_flops = 1e12\ntensorboard = false\nplot = false\neval_batches = 0\n"
    )
    out = tmp_path / "out"
    assert main(["pretrain", "--config", str(config), "--output", str(out), "--max-steps", "2", "--no-progress"]) == 0
    assert json.loads((out / "pretrain_config.json").read_text())["train"]["max_steps"] == 2
    assert (out / "checkpoint-2").is_dir()
    # A second run into the same directory needs --resume; with it, it continues (here: nothing left to do).
    assert main(["pretrain", "--config", str(config), "--output", str(out), "--max-steps", "2"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert (
        main(
            ["pretrain", "--config", str(config), "--output", str(out), "--max-steps", "3", "--resume", "--no-progress"]
        )
        == 0
    )
    assert (out / "checkpoint-3").is_dir()


def test_loader_state_is_independent_of_the_process_count(data):
    from bertkit.data import PretrainingLoader

    one = PretrainingLoader(data, 4, seed=1)
    it = iter(one)
    seen = [next(it)["input_ids"] for _ in range(6)]
    state = one.state_dict()
    assert state["position"] == 6
    ranks = [PretrainingLoader(data, 4, seed=1, rank=r, world_size=2) for r in range(2)]
    for stream in ranks:
        stream.load_state_dict(state)
    nexts = [next(iter(s))["input_ids"] for s in ranks]
    continued = [next(it)["input_ids"] for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(nexts, continued))
    assert len(seen) == 6
    odd = PretrainingLoader(data, 4, seed=1, rank=0, world_size=4)
    with pytest.raises(Exception, match="split"):
        odd.load_state_dict({**state, "position": 6})


@pytest.mark.parametrize("predictions", [5, 32])
def test_flop_count_matches_what_the_model_executes(predictions):
    """The MFU numerator: FLOPs counted by torch's FlopCounterMode over one training step of the real model."""
    from torch.utils.flop_counter import FlopCounterMode

    from bertkit.config import BertConfig
    from bertkit.models.bert import BertForPreTraining
    from bertkit.training.run_log import pretraining_flops_per_token

    config = BertConfig.preset("tiny", vocab_size=500, max_position_embeddings=32)
    model = BertForPreTraining(config).train()
    batch, seq = 2, 32
    ids = torch.randint(5, 500, (batch, seq))
    positions = torch.stack([torch.randperm(seq)[:predictions] for _ in range(batch)])
    with FlopCounterMode(display=False) as counter:
        model(
            ids,
            masked_positions=positions,
            masked_labels=torch.gather(ids, 1, positions),
            next_sentence_label=torch.zeros(batch, dtype=torch.long),
        ).loss.backward()
    expected = pretraining_flops_per_token(config, seq, predictions) * batch * seq
    assert counter.get_total_flops() == pytest.approx(expected, rel=0.02)


def test_a_dataset_without_eval_instances_is_said(tmp_path, capsys):
    """pretrain says that it will not evaluate, and how to hold data out, instead of passing over it in silence."""
    empty_eval = make_pretraining_dataset(tmp_path / "d", n_train=16, n_eval=0, seq=24, vocab=60)
    args = ["pretrain", "--data", empty_eval, "--model-config", "tiny", "--micro-batch-size", "8", "--max-steps", "1"]
    args += ["--no-progress", "--report-to", "none", "--no-plot", "--peak-flops", "1e12"]
    assert main([str(a) for a in [*args, "--output", tmp_path / "out"]]) == 0
    err = capsys.readouterr().err
    assert "holds no eval instances" in err and "--eval-fraction" in err, err
    assert main([str(a) for a in [*args, "--output", tmp_path / "quiet", "--eval-batches", "0"]]) == 0
    assert "holds no eval instances" not in capsys.readouterr().err
