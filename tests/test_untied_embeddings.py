"""Untied output embeddings (``BertConfig.tie_word_embeddings=False``): the masked-LM decoder is a matrix of its
own, saved and read under transformers' names with the same logits both ways (post-LN and pre-LN), a tied model's
files unchanged, and ``pretrain --no-tie-word-embeddings`` resuming exactly and fine-tuning as any checkpoint."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file

from bertkit.cli import main
from bertkit.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.bert import BertForMaskedLM, BertForPreTraining
from bertkit.weights import load_model, save_pretrained
from training_helpers import make_pretraining_dataset

transformers = pytest.importorskip("transformers")


def _config(**overrides) -> BertConfig:
    values = dict(vocab_size=90, max_position_embeddings=24, tie_word_embeddings=False)
    return BertConfig.preset("tiny", **{**values, **overrides})


def _perturbed(cls, config: BertConfig):
    torch.manual_seed(0)
    model = cls(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model.eval()


def _ids() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randint(5, 90, (2, 11))


def test_an_untied_decoder_is_its_own_matrix_and_a_tied_one_is_the_embeddings():
    untied, tied = BertForMaskedLM(_config()), BertForMaskedLM(_config(tie_word_embeddings=True))
    assert tied.mlm.decoder.weight is tied.bert.embeddings.word_embeddings.weight
    assert untied.mlm.decoder.weight is not untied.bert.embeddings.word_embeddings.weight
    assert not torch.equal(untied.mlm.decoder.weight, untied.bert.embeddings.word_embeddings.weight)
    extra = sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters())
    assert extra == 90 * untied.config.hidden_size  # one more vocabulary x hidden matrix
    out = untied(_ids(), labels=_ids())
    out.loss.backward()
    assert untied.mlm.decoder.weight.grad is not None and untied.mlm.decoder.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("cls", "theirs", "layout", "key"),
    [
        (BertForMaskedLM, "BertForMaskedLM", "post", "cls.predictions.decoder.weight"),
        (BertForPreTraining, "BertForPreTraining", "post", "cls.predictions.decoder.weight"),
        (BertForMaskedLM, "RobertaPreLayerNormForMaskedLM", "pre", "lm_head.decoder.weight"),
    ],
)
def test_an_untied_model_saves_under_transformers_names_with_the_same_logits(cls, theirs, layout, key, tmp_path):
    model = _perturbed(cls, _config(layer_norm_position=layout))
    save_pretrained(model, tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is False
    state = load_file(tmp_path / "model.safetensors")
    assert torch.equal(state[key], model.mlm.decoder.weight.detach())
    reference = getattr(transformers, theirs).from_pretrained(tmp_path).eval()
    back = load_model(tmp_path)
    assert isinstance(back.config, BertConfig) and back.config.tie_word_embeddings is False
    ids = _ids()
    with torch.no_grad():
        ours = model(ids).mlm_logits if cls is BertForPreTraining else model(ids).logits
        hf = reference(input_ids=ids)
        hf_logits = hf.prediction_logits if cls is BertForPreTraining else hf.logits
        again = back(ids).mlm_logits if cls is BertForPreTraining else back(ids).logits
    assert (ours - hf_logits).abs().max() < 1e-5
    assert torch.equal(ours, again)


def test_a_transformers_untied_masked_lm_loads_its_own_decoder(tmp_path):
    hf_config = transformers.BertConfig(
        vocab_size=90, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=40, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(0)
    theirs = transformers.BertForMaskedLM(hf_config).eval()
    with torch.no_grad():
        theirs.cls.predictions.decoder.weight.add_(torch.randn_like(theirs.cls.predictions.decoder.weight))
    theirs.save_pretrained(tmp_path)
    ours = load_model(tmp_path)
    assert isinstance(ours, BertForMaskedLM) and not ours.config.tie_word_embeddings
    ids = torch.randint(5, 90, (2, 9))
    with torch.no_grad():
        assert (ours(ids).logits - theirs(input_ids=ids).logits).abs().max() < 1e-5


def test_a_tied_model_writes_its_config_as_before_and_the_key_is_checked(tmp_path):
    BertConfig.preset("tiny").save(tmp_path)
    assert "tie_word_embeddings" not in json.loads((tmp_path / "config.json").read_text())
    with pytest.raises(ConfigError, match="tie_word_embeddings must be true or false"):
        _config(tie_word_embeddings="no")


# ------------------------------------------------------------------------------------------ pre-training
def _pretrain(data, output, *extra: str) -> int:
    return main(["pretrain", "--data", str(data), "--output", str(output), "--model-config", "tiny",
                 "--no-tie-word-embeddings", "--micro-batch-size", "4", "--global-batch-size", "8",
                 "--max-steps", "8", "--save-every", "4", "--keep-last", "5", "--eval-batches", "1", "--seed", "3",
                 "--no-progress", "--report-to", "none", "--no-plot", *extra])  # fmt: skip


def test_untied_pretraining_resumes_exactly_and_fine_tunes(tmp_path, capsys):
    data = make_pretraining_dataset(tmp_path / "d", n_train=48, n_eval=8, seq=24, vocab=60)
    assert _pretrain(data, tmp_path / "straight") == 0
    shutil.copytree(tmp_path / "straight" / "checkpoint-4", tmp_path / "half" / "checkpoint-4")
    assert _pretrain(data, tmp_path / "half", "--resume") == 0
    a = load_file(tmp_path / "straight" / "checkpoint-8" / "model.safetensors")
    b = load_file(tmp_path / "half" / "checkpoint-8" / "model.safetensors")
    assert a.keys() == b.keys() and "cls.predictions.decoder.weight" in a
    assert all(a[key].equal(b[key]) for key in a)
    assert not a["cls.predictions.decoder.weight"].equal(a["bert.embeddings.word_embeddings.weight"])
    final = tmp_path / "straight" / "final"
    theirs = transformers.BertForPreTraining.from_pretrained(final).eval()
    ids = torch.randint(5, 60, (2, 12))
    with torch.no_grad():
        assert (load_model(final)(ids).mlm_logits - theirs(input_ids=ids).prediction_logits).abs().max() < 1e-5
    classifier = transformers.BertForSequenceClassification.from_pretrained(final, num_labels=2)
    assert classifier.config.tie_word_embeddings is False


def test_the_choice_builds_new_models_of_either_architecture_and_init_from_keeps_its_own(tmp_path, caplog):
    from bertkit.data.shards import open_dataset
    from bertkit.training.pretrain import build_config, build_model

    data = make_pretraining_dataset(tmp_path / "d", n_train=8, n_eval=0, seq=24, vocab=60, nsp=False)

    def built(**options):
        values = dict(data=str(data), output=str(tmp_path / "run"), model_config="tiny", max_steps=1)
        config = build_config({**values, **options})
        return build_model(config, open_dataset(data))

    bert, modern = built(tie_word_embeddings=False), built(tie_word_embeddings=False, architecture="modernbert")
    assert not bert.config.tie_word_embeddings and not modern.config.tie_word_embeddings
    assert modern.decoder.weight is not modern.model.embeddings.tok_embeddings.weight
    assert built().config.tie_word_embeddings  # the preset's: tied
    save_pretrained(bert, tmp_path / "untied")
    with caplog.at_level(logging.INFO, logger="bertkit"):
        again = built(tie_word_embeddings=True, init_from=str(tmp_path / "untied"))
    assert not again.config.tie_word_embeddings
    assert any("untied output embeddings; they are kept" in r.getMessage() for r in caplog.records)
