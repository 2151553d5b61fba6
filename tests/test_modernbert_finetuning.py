"""Fine-tuning a ModernBERT for every task: token classification (NER), question answering, regression and sentence
embeddings. Each output is the layout ``transformers`` (``ModernBertFor*``) or sentence-transformers reads, and
gives there the outputs bertkit gives."""

from __future__ import annotations

import json
import logging
import multiprocessing
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from bertkit.inference import embed
from bertkit.models import ModernBertForMaskedLM, ModernBertForQuestionAnswering, ModernBertForTokenClassification
from bertkit.tokenizer import Tokenizer
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.weights import load_model, save_pretrained
from inference_helpers import write_squad
from test_modernbert_toolkit import tiny_config
from test_reliability_chaos import EMBEDDING_PAIRS, NER_SENTENCES, QA_CONTEXTS
from test_reliability_faults import run_child
from test_tokenizer_json import MODERNBERT_NAMES, bpe_directory
from training_helpers import die_in_nth_forward

transformers = pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT")
TEXTS = ["john smith lived in paris .", "who led the army ?", "a good story"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ModernBERT masked LM with a byte-level BPE tokenizer, as a pre-training run exports it."""
    root = tmp_path_factory.mktemp("modernbert")
    specials = ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
    tokenizer = Tokenizer.from_pretrained(bpe_directory(root, specials, {**MODERNBERT_NAMES, "model_max_length": 128}))
    torch.manual_seed(0)
    return save_pretrained(ModernBertForMaskedLM(tiny_config(tokenizer)), root / "mlm", tokenizer)


def fine_tune(task: str, base: Path, train: Path, output: Path) -> Path:
    finetune(FinetuneConfig.from_options(task=task, model=str(base), train_file=str(train), dev_file=str(train),
                                         output=str(output), epochs=2, lr=3e-3, micro_batch_size=4,
                                         max_seq_length=96, progress=False, seed=3,
                                         train_options={"tensorboard": False, "plot": False}))  # fmt: skip
    saved = json.loads((output / "config.json").read_text())
    assert saved["model_type"] == "modernbert"
    return output


def padded(directory: Path) -> dict[str, torch.Tensor]:
    inputs = transformers.AutoTokenizer.from_pretrained(directory)(TEXTS, padding=True, return_tensors="pt")
    inputs.pop("token_type_ids", None)
    return dict(inputs)


def test_ner_fine_tunes_into_transformers_token_classification(
    base: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conll = "".join("".join(f"{w} NN O {t}\n" for w, t in s) + "\n" for s in NER_SENTENCES * 4)
    (tmp_path / "ner.txt").write_text(conll, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bertkit"):
        out = fine_tune("ner", base, tmp_path / "ner.txt", tmp_path / "out")
    assert "fine-tuning ner (ModernBertForTokenClassification) on" in caplog.text  # the class that trains
    theirs = transformers.ModernBertForTokenClassification.from_pretrained(out).eval()
    ours = load_model(out)
    assert isinstance(ours, ModernBertForTokenClassification)
    labels = ours.config.id2label or {}
    assert theirs.config.id2label == labels and set(labels.values()) >= {"B-PER", "O"}
    inputs = padded(out)
    with torch.no_grad():
        want, got = theirs(**inputs).logits, ours(**inputs).logits
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)


def test_qa_fine_tunes_into_transformers_question_answering(base: Path, tmp_path: Path) -> None:
    out = fine_tune("qa", base, write_squad(tmp_path / "qa.json", QA_CONTEXTS * 3), tmp_path / "out")
    theirs = transformers.ModernBertForQuestionAnswering.from_pretrained(out).eval()
    ours = load_model(out)
    assert isinstance(ours, ModernBertForQuestionAnswering)
    inputs = padded(out)
    with torch.no_grad():
        want, got = theirs(**inputs), ours(**inputs)
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(got.start_logits[real], want.start_logits[real], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.end_logits[real], want.end_logits[real], atol=1e-5, rtol=1e-5)


def test_regression_fine_tunes_into_one_output(base: Path, tmp_path: Path) -> None:
    scores = [("good movie", 4.5), ("bad film", 0.5), ("a good story", 4.0), ("very bad", 1.0)] * 3
    rows = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in scores)
    (tmp_path / "reg.tsv").write_text(rows, encoding="utf-8")
    out = fine_tune("regression", base, tmp_path / "reg.tsv", tmp_path / "out")
    theirs = transformers.ModernBertForSequenceClassification.from_pretrained(out).eval()
    assert theirs.config.num_labels == 1
    inputs = padded(out)
    with torch.no_grad():
        want, got = theirs(**inputs).logits, load_model(out)(**inputs).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_embedding_fine_tunes_into_a_sentence_transformers_folder(base: Path, tmp_path: Path) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    pairs = "".join(json.dumps({"question": q, "passage": p}) + "\n" for q, p in EMBEDDING_PAIRS)
    (tmp_path / "pairs.jsonl").write_text(pairs, encoding="utf-8")
    out = fine_tune("embedding", base, tmp_path / "pairs.jsonl", tmp_path / "out")
    assert (out / "modules.json").is_file()
    before = embed(TEXTS, base, pooling="mean", normalize=True)
    ours = embed(TEXTS, out)
    assert not np.allclose(ours, before, atol=1e-4)  # it trained
    theirs = sentence_transformers.SentenceTransformer(str(out), device="cpu").encode(TEXTS)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)


def _ner_child(base: str, train: str, output: str, nth: int, resume: bool) -> None:
    """Fine-tune for NER in a forked process that SIGKILLs itself in its ``nth`` encoder forward pass (0: never)."""
    from bertkit.models.modernbert import ModernBertModel

    die_in_nth_forward(ModernBertModel, nth)
    finetune(FinetuneConfig.from_options(task="ner", model=base, train_file=train, dev_file=train, output=output,
                                         epochs=3, lr=3e-3, micro_batch_size=2, global_batch_size=4,
                                         max_seq_length=96, save_every=1, seed=5, progress=False, resume=resume,
                                         train_options={"tensorboard": False, "plot": False}))  # fmt: skip


@pytest.mark.slow
def test_a_killed_modernbert_fine_tuning_resumes_exactly(base: Path, tmp_path: Path) -> None:
    conll = "".join("".join(f"{w} NN O {t}\n" for w, t in s) + "\n" for s in NER_SENTENCES * 2)
    train = tmp_path / "ner.txt"
    train.write_text(conll, encoding="utf-8")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "bertkit.training.finetune", "bertkit.models.modernbert"])
    reference, run = tmp_path / "reference", tmp_path / "killed"
    assert run_child(ctx, _ner_child, str(base), str(train), str(reference), 0, False) == 0
    # mid-training after two checkpoints and a dev evaluation, then again in the resumed run
    assert run_child(ctx, _ner_child, str(base), str(train), str(run), 8, False) == -signal.SIGKILL
    assert run_child(ctx, _ner_child, str(base), str(train), str(run), 4, True) == -signal.SIGKILL
    assert not run.exists()  # the output appears whole at the end, or not at all
    assert run_child(ctx, _ner_child, str(base), str(train), str(run), 0, True) == 0
    assert (run / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    got, want = (json.loads((d / "metrics.json").read_text()) for d in (run, reference))
    assert got["dev"] == want["dev"]
