"""ModernBERT through the toolkit: the loader picks the architecture from config.json, embed and classify
equal transformers on the same files, and the CLI fine-tunes, classifies and embeds a tiny ModernBERT whose
output transformers loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.cli import main
from bertkit.config import ModernBertConfig
from bertkit.errors import ConfigError
from bertkit.inference import classify, embed, load
from bertkit.models import ModernBertForMaskedLM, ModernBertForSequenceClassification, ModernBertModel
from bertkit.tokenizer import Tokenizer
from bertkit.weights import load_model, save_pretrained
from test_tokenizer_json import MODERNBERT_NAMES, bpe_directory

transformers = pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT")
ROOT = Path(__file__).resolve().parents[1]
TEXTS = ["the film is a delight", "a dull , lifeless script", "hello world"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    directory = bpe_directory(tmp_path_factory.mktemp("tok"), ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"),
                              MODERNBERT_NAMES)  # fmt: skip
    return Tokenizer.from_pretrained(directory)


def tiny_config(tokenizer: Tokenizer, **overrides: object) -> ModernBertConfig:
    return ModernBertConfig.preset(
        "tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id, cls_token_id=tokenizer.cls_id,
        sep_token_id=tokenizer.sep_id, bos_token_id=tokenizer.cls_id, eos_token_id=tokenizer.sep_id,
        local_attention=8, **overrides,
    )  # fmt: skip


def test_the_loader_builds_modernbert_classes_from_config_json(tokenizer: Tokenizer, tmp_path: Path) -> None:
    torch.manual_seed(0)
    save_pretrained(ModernBertForMaskedLM(tiny_config(tokenizer)), tmp_path / "mlm", tokenizer)
    assert type(load_model(tmp_path / "mlm")) is ModernBertForMaskedLM
    assert type(load_model(tmp_path / "mlm", head="BertModel")) is ModernBertModel
    assert type(load_model(tmp_path / "mlm", head="BertForSequenceClassification", num_labels=3)) is (
        ModernBertForSequenceClassification
    )
    with pytest.raises(ConfigError, match="int8"):
        load_model(tmp_path / "mlm", quantize="int8")
    loaded = load(tmp_path / "mlm")
    assert loaded.pipelines == ["fill_mask", "embed"]


def test_embed_and_classify_equal_transformers(tokenizer: Tokenizer, tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = ModernBertForSequenceClassification(tiny_config(tokenizer, id2label={0: "neg", 1: "pos"})).eval()
    directory = save_pretrained(model, tmp_path / "cls", tokenizer)
    reference = transformers.AutoModelForSequenceClassification.from_pretrained(directory).eval()
    encoder = transformers.AutoModel.from_pretrained(directory).eval()
    ref_tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    inputs = ref_tokenizer(TEXTS, padding=True, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        probabilities = reference(**inputs).logits.softmax(-1)
        hidden = encoder(**inputs).last_hidden_state
    mask = inputs["attention_mask"].unsqueeze(-1).float()
    means = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(embed(TEXTS, directory, pooling="mean"), means, atol=1e-5, rtol=1e-5)
    predictions = classify(TEXTS, directory)
    got = [[p.probabilities["neg"], p.probabilities["pos"]] for p in predictions]
    np.testing.assert_allclose(got, probabilities.numpy(), atol=1e-5, rtol=1e-5)


def test_cli_finetunes_classifies_and_embeds_a_tiny_modernbert(
    tokenizer: Tokenizer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(2)
    save_pretrained(ModernBertForMaskedLM(tiny_config(tokenizer)), tmp_path / "mlm", tokenizer)
    rows = (ROOT / "data" / "polarity" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(rows[:49]) + "\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("\n".join([rows[0], *rows[60:80]]) + "\n", encoding="utf-8")
    out = tmp_path / "ft"
    code = main(["finetune", "--task", "classification", "--model", str(tmp_path / "mlm"), "--train",
                 str(tmp_path / "train.tsv"), "--dev", str(tmp_path / "dev.tsv"), "--output", str(out),
                 "--epochs", "1", "--max-seq-length", "32", "--report-to", "none"])  # fmt: skip
    assert code in (0, None)
    saved = json.loads((out / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == ["ModernBertForSequenceClassification"]
    assert transformers.AutoModelForSequenceClassification.from_pretrained(out).config.num_labels == 2
    capsys.readouterr()
    assert main(["classify", "-m", str(out), "a delight"]) in (0, None)
    assert capsys.readouterr().out.strip().endswith("a delight")
    assert main(["embed", "-m", str(out), "a delight"]) in (0, None)
    vector = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["embedding"]
    assert len(vector) == 128
