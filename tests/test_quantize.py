"""int8 inference (bertkit.quantize): what is quantized, the safetensors round trip, agreement with float32 on
a trained tiny model, the ONNX quantizer, and the refusal to train an int8 model."""

from __future__ import annotations

import json
from typing import cast

import pytest
import torch
from safetensors import safe_open

pytest.importorskip("torchao", reason="int8 quantization needs torchao (the int8 extra)")

from torchao.quantization import Int8Tensor

from bertkit.cli import main
from bertkit.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.inference import load
from bertkit.models.bert import BertForSequenceClassification, EncoderLayer
from bertkit.quantize import CONFIG_KEY, SCALE_SUFFIX, is_quantized, quantize_model
from bertkit.training import BatchSource, TrainConfig
from bertkit.training.loop import Trainer
from bertkit.weights import load_model, save_pretrained


def _config(**overrides) -> BertConfig:
    return BertConfig.preset(
        "tiny",
        vocab_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **overrides,
    )


def _inputs(batch: int = 4, length: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 64, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length - 3 :] = 0
    return ids, mask


def test_only_the_encoder_linears_become_int8():
    torch.manual_seed(0)
    model = BertForSequenceClassification(_config(num_labels=3))
    quantize_model(model)  # in place
    kind = type(cast(EncoderLayer, model.bert.encoder.layers[0]).ffn_in.weight)
    quantized = {name for name, p in model.named_parameters() if type(p) is kind}
    assert quantized and all(name.startswith("bert.encoder.layers.") and name.endswith(".weight") for name in quantized)
    for name in ("bert.embeddings.word_embeddings.weight", "bert.pooler.dense.weight", "classifier.weight"):
        assert name not in quantized
    assert len(quantized) == 2 * 3  # tiny: 2 layers of out, ffn_in, ffn_out (Q/K/V stay float32)
    assert "bert.encoder.layers.0.attention.qkv.weight" not in quantized
    assert model.config.extra[CONFIG_KEY]["scheme"] == "int8"


def test_saved_int8_reloads_bit_for_bit(tmp_path):
    torch.manual_seed(0)
    model = quantize_model(BertForSequenceClassification(_config(num_labels=3)))
    ids, mask = _inputs()
    with torch.inference_mode():
        before = model(ids, attention_mask=mask).logits
    save_pretrained(model, tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        name = "bert.encoder.layer.0.intermediate.dense.weight"
        assert handle.get_tensor(name).dtype == torch.int8
        assert handle.get_tensor(name + SCALE_SUFFIX).shape == (4 * 128,)
        assert handle.get_tensor("bert.embeddings.word_embeddings.weight").dtype == torch.float32
        assert handle.get_tensor("bert.encoder.layer.0.output.LayerNorm.weight").dtype == torch.float32
    assert json.loads((tmp_path / "config.json").read_text())[CONFIG_KEY]["scheme"] == "int8"
    reloaded = load_model(tmp_path)
    assert is_quantized(reloaded)
    ours, theirs = dict(model.named_parameters()), dict(reloaded.named_parameters())
    for name, param in ours.items():
        other = theirs[name]
        if isinstance(param, Int8Tensor):
            assert isinstance(other, Int8Tensor), name
            assert torch.equal(param.qdata, other.qdata), name
            assert torch.equal(param.scale, other.scale), name
        else:
            assert torch.equal(param, other), name
    with torch.inference_mode():
        assert torch.equal(reloaded(ids, attention_mask=mask).logits, before)


def test_load_quantizes_a_float32_checkpoint_and_stays_close(encoder_dir):
    fp32 = load(encoder_dir)
    int8 = load(encoder_dir, quantize="int8", compile=False, backend="torch")
    assert not is_quantized(fp32.model) and is_quantized(int8.model)
    ids, mask = _inputs(length=10)
    with torch.inference_mode():
        a = fp32.model(ids, attention_mask=mask).last_hidden_state
        b = int8.model(ids, attention_mask=mask).last_hidden_state
    cosine = torch.nn.functional.cosine_similarity(a[mask.bool()], b[mask.bool()], dim=-1)
    assert cosine.min() > 0.99


def test_unknown_scheme_is_refused(encoder_dir):
    with pytest.raises(ConfigError, match="--quantize int8"):
        load(encoder_dir, quantize="int4")


def _train_tiny_classifier(steps: int = 120) -> tuple[BertForSequenceClassification, torch.Tensor, torch.Tensor]:
    """A tiny classifier trained on a rule (does token 7 occur before token 9?) that needs attention across
    positions, and held-out examples of it."""
    torch.manual_seed(0)
    model = BertForSequenceClassification(_config(num_labels=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def examples(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(10, 64, (n, 16), generator=generator)
        first, second = torch.randint(1, 15, (2, n), generator=generator)
        ids[torch.arange(n), first] = 7
        second = torch.where(second == first, (first % 14) + 1, second)
        ids[torch.arange(n), second] = 9
        return ids, (first < second).long()

    model.train()
    for step in range(steps):
        ids, labels = examples(64, seed=step + 1)
        loss = model(ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ids, labels = examples(400, seed=10_000)
    return model.eval(), ids, labels


def test_int8_predictions_agree_with_float32_on_a_trained_model():
    model, ids, labels = _train_tiny_classifier()
    with torch.inference_mode():
        fp32 = model(ids).logits.argmax(-1)
    assert (fp32 == labels).float().mean() > 0.9  # it learned the rule, so agreement is not about a constant
    quantize_model(model)
    with torch.inference_mode():
        int8 = model(ids).logits.argmax(-1)
    assert (int8 == fp32).float().mean() >= 0.95


def test_training_an_int8_model_is_refused(tmp_path):
    model = quantize_model(BertForSequenceClassification(_config(num_labels=2)))
    batches = cast(BatchSource, [])  # never read: the trainer refuses the model first
    config = TrainConfig.from_options(
        output_dir=tmp_path / "run", max_steps=1, progress=False, tensorboard=False, plot=False
    )
    with pytest.raises(ConfigError, match="int8-quantized, which is for inference only"):
        Trainer(model, batches, config)


@pytest.mark.parametrize("command", ["finetune", "pretrain"])
def test_cli_refuses_quantize_on_training_commands(command, capsys):
    assert main([command, "--quantize", "int8"]) == 2
    assert "--quantize" in capsys.readouterr().err


def test_cli_embed_and_evaluate_with_quantize(encoder_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the cat sat on the mat\nparis is the capital of france\n")
    out = tmp_path / "v.npy"
    assert (
        main(
            [
                "embed",
                "-m",
                str(encoder_dir),
                "-i",
                str(tmp_path / "in.txt"),
                "-o",
                str(out),
                "--quantize",
                "int8",
                "--no-compile",
                "--backend",
                "torch",
            ]
        )
        == 0
    )
    assert out.is_file()
    assert (
        main(["embed", "-m", str(encoder_dir), "-i", str(tmp_path / "in.txt"), "-o", str(out), "--quantize", "int4"])
        == 2
    )
    assert "unknown quantization 'int4'" in capsys.readouterr().err


def test_onnx_export_with_int8_matmuls(encoder_dir, tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    plain, int8 = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    assert main(["export", "onnx", "-m", str(encoder_dir), "-o", str(plain)]) == 0
    assert main(["export", "onnx", "-m", str(encoder_dir), "-o", str(int8), "--quantize", "int8"]) == 0
    ops = {node.op_type for node in onnx.load(str(int8)).graph.node}
    assert "DynamicQuantizeLinear" in ops or "DynamicQuantizeMatMul" in ops or "MatMulInteger" in ops
    assert int8.stat().st_size < 0.6 * plain.stat().st_size


def test_cli_refuses_to_finetune_an_int8_checkpoint(encoder_dir, tokenizer, tmp_path, capsys):
    save_pretrained(load_model(encoder_dir, quantize="int8"), tmp_path / "int8", tokenizer=tokenizer)
    train = tmp_path / "train.tsv"
    train.write_text(
        "sentence\tlabel\n" + "".join(f"the movie was {w}\t{i % 2}\n" for i, w in enumerate(["good", "bad"] * 8))
    )
    code = main(
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            str(tmp_path / "int8"),
            "--train",
            str(train),
            "--output",
            str(tmp_path / "out"),
            "--max-steps",
            "1",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "int8-quantized, which is for inference only" in err


def test_cli_int8_embed_says_no_library_noise(encoder_dir, tmp_path):
    """A fresh process (torchao not yet imported) prints neither torchao's kernels that fail to load nor
    torch's deprecation warning about torchao; the embeddings are written."""
    import subprocess
    import sys

    (tmp_path / "in.txt").write_text("the cat sat on the mat\n")
    out = tmp_path / "v.npy"
    args = ["embed", "-m", encoder_dir, "-i", tmp_path / "in.txt", "-o", out, "--quantize", "int8", "--no-compile"]
    args += ["--backend", "torch"]  # torchao's int8 on any CPU
    done = subprocess.run(
        [sys.executable, "-m", "bertkit", *map(str, args)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and out.is_file(), done.stderr
    for noise in ("Failed to load", "deprecated", "register_constant", "_C_"):
        assert noise not in done.stderr, done.stderr
    assert all(line.startswith(("bertkit:", "embed:", "wrote")) for line in done.stderr.splitlines()), done.stderr


@pytest.mark.skipif(torch.version.cuda is not None, reason="a CUDA build of torch loads torchao's kernels")
def test_installed_torchao_carries_no_kernels_a_cpu_torch_cannot_load():
    """`make install` removes torchao's CUDA-only kernels where torch is a CPU build, so importing
    transformers' BERT (which imports torchao) logs no `Failed to load` line in the project's environment."""
    import subprocess
    import sys

    code = "from transformers import BertModel"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Failed to load" not in done.stderr, done.stderr


def test_cli_int8_embed_says_it_compiles_before_the_wait(encoder_dir, tmp_path, capsys, monkeypatch):
    """The first int8 batch waits for the compiler: that is said before it (compiling itself is stubbed out
    here; it takes a minute)."""
    from bertkit.compiling import compiling_line

    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **options: None)
    (tmp_path / "in.txt").write_text("the cat sat on the mat\n")
    out = tmp_path / "v.npy"
    args = ["embed", "-m", str(encoder_dir), "-i", str(tmp_path / "in.txt"), "-o", str(out), "--quantize", "int8"]
    code = main([*args, "--backend", "torch"])  # torchao's int8, which compiles, on any CPU
    err = capsys.readouterr().err
    assert code == 0 and f"bertkit: {compiling_line(True)}\n" in err, err
    assert "compiling the model for inference on its first batch (once per process" in err
    assert err.index("compiling the model") < err.index("wrote")
