"""Pre-LN layers (``BertConfig.layer_norm_position="pre"``): the layout against a hand-written reference, every
head saved as transformers' RoBERTa-PreLayerNorm (same logits both ways) and loaded back with a notice, the one
refusal, pre-training with exact resume, and a fine-tuned pre-LN model exported to ONNX."""

from __future__ import annotations

import functools
import json
import logging
import math
import shutil

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.config import BertConfig
from bertkit.errors import CheckpointError, ConfigError
from bertkit.models.bert import HEAD_CLASSES, BertForMaskedLM, BertForSequenceClassification, BertModel
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.training.pretrain import build_config, pretrain
from bertkit.weights import load_model, save_pretrained
from training_helpers import make_pretraining_dataset

transformers = pytest.importorskip("transformers")

HF_CLASSES = {
    "BertModel": "RobertaPreLayerNormModel",
    "BertForMaskedLM": "RobertaPreLayerNormForMaskedLM",
    "BertForPreTraining": "RobertaPreLayerNormForMaskedLM",  # no next-sentence head there: the MLM part
    "BertForSequenceClassification": "RobertaPreLayerNormForSequenceClassification",
    "BertForTokenClassification": "RobertaPreLayerNormForTokenClassification",
    "BertForQuestionAnswering": "RobertaPreLayerNormForQuestionAnswering",
}
QUIET = dict(progress=False, tensorboard=False, plot=False, peak_flops=1e12)


def _config(**overrides) -> BertConfig:
    values = dict(vocab_size=90, max_position_embeddings=24, num_labels=3, layer_norm_position="pre")
    return BertConfig.preset("tiny", **{**values, **overrides})


def _perturbed(cls, config: BertConfig, seed: int = 0):
    """A model whose LayerNorms and biases are not at their initial 1/0, so each one counts."""
    torch.manual_seed(seed)
    model = cls(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def _inputs():
    torch.manual_seed(1)
    ids = torch.randint(5, 90, (3, 11))
    ids[1, 7:] = 0
    ids[2, 4:] = 0
    types = torch.zeros_like(ids)
    types[:, 3:] = 1
    return ids, types, (ids != 0).long()


def _reference(model: BertModel, ids, types, mask):
    """The pre-LN layout written out from the parameters: embeddings + LN; per layer x + Attn(LN(x)) and
    h + FFN(LN(h)); a final LN."""
    params = dict(model.named_parameters())
    c = model.config

    def ln(x, name):
        return F.layer_norm(x, (c.hidden_size,), params[name + ".weight"], params[name + ".bias"], c.layer_norm_eps)

    def dense(x, name):
        return F.linear(x, params[name + ".weight"], params[name + ".bias"])

    positions = torch.arange(ids.shape[1])
    x = params["embeddings.word_embeddings.weight"][ids] + params["embeddings.position_embeddings.weight"][positions]
    x = ln(x + params["embeddings.token_type_embeddings.weight"][types], "embeddings.layer_norm")
    heads, size = c.num_attention_heads, c.head_dim
    for i in range(c.num_hidden_layers):
        layer = f"encoder.layers.{i}"
        q, k, v = dense(ln(x, f"{layer}.attention_norm"), f"{layer}.attention.qkv").chunk(3, dim=-1)
        q, k, v = (t.view(*ids.shape, heads, size).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(size) + (1 - mask[:, None, None, :]) * -1e9
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.shape)
        h = x + dense(context, f"{layer}.attention.out")
        x = h + dense(F.gelu(dense(ln(h, f"{layer}.ffn_norm"), f"{layer}.ffn_in")), f"{layer}.ffn_out")
    return ln(x, "encoder.final_norm")


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_the_pre_ln_forward_is_the_layout_and_differs_from_post_ln(attn):
    model = _perturbed(BertModel, _config(attn_implementation=attn))
    ids, types, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        out = model(ids, types, mask).last_hidden_state
        assert (out - _reference(model, ids, types, mask))[real].abs().max() < 1e-5
        post = BertModel(_config(layer_norm_position="post")).eval()
        post.load_state_dict({k: v for k, v in model.state_dict().items() if "final_norm" not in k})
        assert (post(ids, types, mask).last_hidden_state - out)[real].abs().max() > 1e-2
    assert model.config.num_parameters() == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("attn", ["sdpa", "varlen"])
def test_training_on_real_tokens_only_matches_the_padded_layout(attn):
    config = _config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _perturbed(functools.partial(BertForMaskedLM, attn_implementation=attn), config).train()
    ids, types, mask = _inputs()
    unpadded = model(ids, types, mask).logits
    model.bert.unpad = False
    model.bert.attn_implementation = "sdpa"
    padded = model(ids, types, mask).logits
    assert (unpadded - padded)[mask.bool()].abs().max() < 1e-5


def _first(output):
    for name in ("logits", "mlm_logits", "start_logits", "last_hidden_state"):
        if hasattr(output, name):
            return getattr(output, name)
    raise AssertionError(output)


@pytest.mark.parametrize("name", list(HF_CLASSES))
def test_each_head_saves_as_roberta_prelayernorm_with_the_same_logits(name, tmp_path, caplog):
    model = _perturbed(HEAD_CLASSES[name], _config())
    save_pretrained(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "roberta-prelayernorm" and config["max_position_embeddings"] == 24 + 1
    assert config["architectures"] == ([name] if name == "BertForPreTraining" else [HF_CLASSES[name]])
    theirs = getattr(transformers, HF_CLASSES[name]).from_pretrained(tmp_path).eval()
    with caplog.at_level(logging.INFO, logger="bertkit"):
        back = load_model(tmp_path)
    loaded = back.config
    assert type(back) is type(model) and isinstance(loaded, BertConfig) and loaded.layer_norm_position == "pre"
    assert loaded.max_position_embeddings == 24
    assert any("pre-LN" in r.getMessage() for r in caplog.records)
    ids, types, mask = _inputs()
    real = mask.bool()
    with torch.no_grad():
        ours, again = _first(model(ids, types, mask)), _first(back(ids, types, mask))
        reference = _first(theirs(input_ids=ids, token_type_ids=types, attention_mask=mask))
        assert torch.equal(ours, again)
        if ours.dim() >= 2 and ours.shape[1] == ids.shape[1]:
            ours, reference = ours[real], reference[real]
        assert (ours - reference).abs().max() < 1e-5
        if name == "BertModel":
            hf_pooled = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask).pooler_output
            assert (model(ids, types, mask).pooler_output - hf_pooled).abs().max() < 1e-5


def test_a_transformers_roberta_prelayernorm_loads_with_the_same_logits(tmp_path):
    hf_config = transformers.RobertaPreLayerNormConfig(
        vocab_size=90, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, type_vocab_size=2, pad_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = transformers.RobertaPreLayerNormForMaskedLM(hf_config).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    theirs.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert isinstance(ours, BertForMaskedLM) and ours.config.max_position_embeddings == 40 - 2
    ids = torch.randint(5, 90, (2, 9))
    with torch.no_grad():
        assert (ours(ids).logits - theirs(input_ids=ids).logits).abs().max() < 1e-5


def test_a_pre_ln_masked_lm_without_gelu_is_not_written():
    with pytest.raises(CheckpointError, match="RoBERTa-PreLayerNorm's masked-LM head always uses 'gelu'"):
        BertForMaskedLM(_config(hidden_act="relu")).save_pretrained("unused")
    with pytest.raises(ConfigError, match="layer_norm_position"):
        _config(layer_norm_position="middle")


def test_post_ln_configs_are_written_as_before(tmp_path):
    BertConfig.preset("tiny").save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "bert" and "layer_norm_position" not in config
    assert BertConfig.from_dict({**config, "layer_norm_position": "pre"}).pre_layer_norm  # a hand-written key


# ------------------------------------------------------------------------------------------ pre-training
@pytest.fixture(scope="module")
def full_sentences(tmp_path_factory):
    return make_pretraining_dataset(
        tmp_path_factory.mktemp("full") / "d", n_train=48, n_eval=8, seq=24, vocab=60, masking="dynamic", nsp=False
    )


def _run(data, output, resume=None):
    cfg = build_config(dict(data=str(data), output=str(output), model_config="tiny", micro_batch_size=4,
                            global_batch_size=8, max_steps=8, lr=1e-3, log_every=1, save_every=4, keep_last=5,
                            eval_batches=1, seed=3, resume=resume, recipe="modern", layer_norm_position="pre",
                            **QUIET))  # fmt: skip
    return pretrain(cfg)


def test_pre_ln_pretraining_resumes_exactly_and_exports_a_roberta_prelayernorm(full_sentences, tmp_path):
    straight = _run(full_sentences, tmp_path / "straight")
    assert straight.model is not None and straight.model.config.pre_layer_norm
    shutil.copytree(tmp_path / "straight" / "checkpoint-4", tmp_path / "half" / "checkpoint-4")
    resumed = _run(full_sentences, tmp_path / "half", resume="auto")
    a = load_file(tmp_path / "straight" / "checkpoint-8" / "model.safetensors")
    b = load_file(tmp_path / "half" / "checkpoint-8" / "model.safetensors")
    assert a.keys() == b.keys() and "roberta_prelayernorm.LayerNorm.weight" in a
    assert all(a[key].equal(b[key]) for key in a)
    assert [r["loss"] for r in resumed.history if r["split"] == "train" and r["step"] > 4] == [
        r["loss"] for r in straight.history if r["split"] == "train" and r["step"] > 4
    ]
    final = tmp_path / "straight" / "final"
    theirs = transformers.RobertaPreLayerNormForMaskedLM.from_pretrained(final).eval()
    ids = torch.randint(5, 60, (2, 12))
    with torch.no_grad():
        assert (load_model(final)(ids).logits - theirs(input_ids=ids).logits).abs().max() < 1e-5


def test_pre_ln_with_next_sentence_pairs_is_refused(tmp_path, capsys):
    data = make_pretraining_dataset(tmp_path / "nsp", n_train=16, n_eval=4, seq=24, vocab=60)
    code = main(["pretrain", "--data", str(data), "--output", str(tmp_path / "run"), "--model-config", "tiny",
                 "--layer-norm-position", "pre", "--max-steps", "2", "--no-progress"])  # fmt: skip
    assert code == 2
    assert "pre-LN model pre-trains with masked LM only" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ fine-tune, export
def test_a_fine_tuned_pre_ln_model_exports_to_onnx_with_the_same_logits(tmp_path, tokenizer, capsys):
    pytest.importorskip("onnxruntime")
    from bertkit.export import export_onnx, onnx_session

    torch.manual_seed(0)
    config = BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=128,
                               layer_norm_position="pre")  # fmt: skip
    save_pretrained(BertModel(config), tmp_path / "base", tokenizer=tokenizer)
    rows = [("the cat sat on the mat .", "pos"), ("hello", "neg"), ("george lived in virginia .", "pos")] * 4
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    finetune(FinetuneConfig.from_options(
        task="classification", model=str(tmp_path / "base"), train_file=str(tmp_path / "train.tsv"),
        output=str(tmp_path / "cls"), epochs=1, lr=5e-3, micro_batch_size=4, progress=False,
        train_options={"tensorboard": False, "plot": False},
    ))  # fmt: skip
    model = load_model(tmp_path / "cls")
    assert isinstance(model, BertForSequenceClassification) and model.config.pre_layer_norm
    session = onnx_session(export_onnx(model, tmp_path / "cls.onnx"))
    encodings = tokenizer.encode_batch([s for s, _ in rows[:3]], padding="longest")
    ids, types, mask = (torch.tensor([getattr(e, a) for e in encodings]) for a in ("ids", "type_ids", "attention_mask"))
    (got,) = session.run(None, {"input_ids": ids.numpy(), "token_type_ids": types.numpy(),
                                "attention_mask": mask.numpy()})  # fmt: skip
    with torch.no_grad():
        assert (torch.from_numpy(got) - model(ids, types, mask).logits).abs().max() < 1e-4
    assert main(["export", "onnx", "--model", str(tmp_path / "cls"), "--output", str(tmp_path / "cli.onnx")]) == 0
    assert "pre-LN" in capsys.readouterr().err


def test_sentence_transformers_reads_a_pre_ln_embedding_model(tmp_path, tokenizer):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    from bertkit.sentence_config import SentenceConfig

    torch.manual_seed(0)
    model = BertModel(BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=64,
                                        layer_norm_position="pre")).eval()  # fmt: skip
    save_pretrained(model, tmp_path, tokenizer=tokenizer, sentence=SentenceConfig("mean", normalize=False))
    theirs = sentence_transformers.SentenceTransformer(str(tmp_path), device="cpu")
    texts = ["the cat sat on the mat .", "hello"]
    encodings = tokenizer.encode_batch(texts, padding="longest")
    ids, types, mask = (torch.tensor([getattr(e, a) for e in encodings]) for a in ("ids", "type_ids", "attention_mask"))
    with torch.no_grad():
        hidden = model(ids, types, mask).last_hidden_state
    ours = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    assert (theirs.encode(texts, convert_to_tensor=True) - ours).abs().max() < 1e-5


def test_the_inference_loader_finds_the_heads_of_a_pre_ln_model(tmp_path, tokenizer):
    from bertkit.inference import load

    config = BertConfig.preset("tiny", vocab_size=tokenizer.vocab_size, max_position_embeddings=64,
                               layer_norm_position="pre", id2label={0: "neg", 1: "pos"})  # fmt: skip
    for cls, pipeline in ((BertForMaskedLM, "fill_mask"), (BertForSequenceClassification, "classify")):
        save_pretrained(cls(config), tmp_path / pipeline, tokenizer=tokenizer)
        assert pipeline in load(tmp_path / pipeline).pipelines
