"""The ModernBERT journey through the command line at smoke scale: a byte-level BPE tokenizer (as ModernBERT's) on a
shipped book, ``prepare-data --recipe modern``, ``pretrain --architecture modernbert``, ``finetune`` for
classification, ``embed``, and the HTTP service's ``/embed`` and ``/v1/embeddings``; the pre-trained and
fine-tuned directories load in ``transformers`` with the same outputs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.cli import main
from bertkit.inference import embed
from bertkit.models import ModernBertForMaskedLM

transformers = pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT")
pytest.importorskip("httpx", reason="the serving check calls the app through FastAPI's TestClient")
tokenizers = pytest.importorskip("tokenizers")
ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "data" / "books" / "43-0.txt.gz"  # the smallest shipped book
TEXTS = ["It was a dark night.", "a delight from start to finish"]
SPECIALS = {"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "mask_token": "[MASK]",
            "unk_token": "[UNK]", "tokenizer_class": "PreTrainedTokenizerFast"}  # fmt: skip


def book_tokenizer(directory: Path) -> Path:
    """A byte-level BPE ``tokenizer.json`` of 600 tokens learnt from the book, ``[CLS] A [SEP]`` around texts."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers

    backend = tokenizers.Tokenizer(models.BPE(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials = ["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    backend.train_from_iterator(gzip.decompress(BOOK.read_bytes()).decode("utf-8").splitlines(), trainer)
    cls, sep = (backend.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )  # fmt: skip
    directory.mkdir()
    backend.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(SPECIALS), encoding="utf-8")
    return directory


def run(*args: str) -> None:
    assert main(list(args)) in (0, None), args


def reference_inputs(directory: Path) -> dict[str, torch.Tensor]:
    """The texts as ``transformers``' tokenizer pads them for the directory (ids and mask: no token types)."""
    inputs = transformers.AutoTokenizer.from_pretrained(directory)(TEXTS, padding=True, return_tensors="pt")
    assert "token_type_ids" not in inputs
    return dict(inputs)


def test_pretrain_finetune_embed_and_serve_a_modernbert(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fastapi.testclient import TestClient

    from bertkit.serve import create_app

    tokenizer, data, runs = book_tokenizer(tmp_path / "tok"), tmp_path / "data", tmp_path / "run"
    run("prepare-data", "--input", str(BOOK), "--tokenizer", str(tokenizer), "--output", str(data), "--recipe",
        "modern", "--max-seq-length", "64", "--dupe-factor", "1", "--workers", "1", "--eval-fraction", "0.2",
        "--eval-unit-sentences", "32")  # fmt: skip
    run("pretrain", "--data", str(data), "--architecture", "modernbert", "--model-config", "tiny", "--output",
        str(runs), "--micro-batch-size", "16", "--max-steps", "4", "--lr", "1e-3", "--warmup-steps", "1",
        "--eval-every", "4", "--eval-batches", "1", "--save-every", "4", "--recipe", "modern", "--report-to", "none",
        "--no-progress")  # fmt: skip
    final = runs / "final"
    evals = [json.loads(line) for line in (runs / "metrics.jsonl").read_text().splitlines()]
    assert any(r["split"] == "eval" and "nsp_loss" not in r for r in evals)
    assert json.loads((runs / "pretrain_config.json").read_text())["train"]["schedule"] == "wsd"  # the recipe's
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(final).eval()
    assert type(theirs).__name__ == "ModernBertForMaskedLM"
    inputs = reference_inputs(final)
    with torch.no_grad():
        want, got = theirs(**inputs).logits, ModernBertForMaskedLM.from_pretrained(final)(**inputs).logits
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)

    rows = (ROOT / "data" / "polarity" / "train.tsv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(rows[:41]) + "\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("\n".join([rows[0], *rows[60:76]]) + "\n", encoding="utf-8")
    tuned = tmp_path / "classifier"
    run("finetune", "--task", "classification", "--model", str(final), "--train", str(tmp_path / "train.tsv"),
        "--dev", str(tmp_path / "dev.tsv"), "--output", str(tuned), "--epochs", "1", "--max-seq-length", "64",
        "--report-to", "none")  # fmt: skip
    classifier = transformers.AutoModelForSequenceClassification.from_pretrained(tuned).eval()
    with torch.no_grad():
        probabilities = classifier(**reference_inputs(tuned)).logits.softmax(-1)
    capsys.readouterr()
    run("classify", "-m", str(tuned), "--json", TEXTS[1])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    labels = classifier.config.id2label
    assert printed["probabilities"] == pytest.approx({labels[i]: float(p) for i, p in enumerate(probabilities[1])},
                                                     abs=1e-5)  # fmt: skip

    run("embed", "-m", str(tuned), TEXTS[0])
    vector = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["embedding"]
    vectors = embed(TEXTS, tuned)
    np.testing.assert_allclose(vector, vectors[0], atol=1e-5)
    with TestClient(create_app(tuned)) as client:
        ours = client.post("/embed", json={"texts": TEXTS})
        openai = client.post("/v1/embeddings", json={"input": TEXTS, "model": "m"})
    assert ours.status_code == 200 and openai.status_code == 200, (ours.text, openai.text)
    np.testing.assert_allclose(ours.json()["embeddings"], vectors, atol=1e-5)
    np.testing.assert_allclose([d["embedding"] for d in openai.json()["data"]], vectors, atol=1e-5)
