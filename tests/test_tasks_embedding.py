"""Sentence-embedding training (``finetune --task embedding``) on a tiny random model (no ../shared needed).

The losses against hand-computed values, the gradient cache against the uncached loss (dropout on), the
Matryoshka cut, batches without a text twice, the readers' one-line errors, the output loading in
sentence-transformers with bertkit's own vectors, and a killed run resuming to the same weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import bertkit
from bertkit.cli import main
from bertkit.errors import BertkitError, DataError
from bertkit.models.bert import BertModel
from bertkit.tasks import make_task
from bertkit.tasks.embedding import EmbeddingTask, NoDuplicatesOrder, SentenceEncoder
from bertkit.tasks.embedding.losses import cosent_loss, in_batch_negatives_loss, matryoshka_loss
from bertkit.tasks.embedding.scoring import ranked, retrieval_scores
from bertkit.training.finetune import FinetuneConfig, finetune
from inference_helpers import tiny_config

QUIET = {"tensorboard": False, "plot": False}
PAIRS = [
    ("who lived in paris ?", "john smith lived in paris ."),
    ("where did john live ?", "john smith lived in paris ."),
    ("who led the army ?", "george washington led the army ."),
    ("where is the cat ?", "the cat sat in france ."),
    ("what is good ?", "a good movie ."),
    ("what is bad ?", "a bad film ."),
    ("who is the king ?", "he was the king of france ."),
    ("what did george do ?", "george washington led the army ."),
    ("where did the cat sit ?", "the cat sat on the mat ."),
    ("what was the story ?", "once upon a time there was a queen ."),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("embedding")
    pairs = root / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"question": q, "passage": p}) + "\n" for q, p in PAIRS), encoding="utf-8")
    triplets = root / "triplets.tsv"
    rows = [(q, p, PAIRS[(i + 3) % len(PAIRS)][1]) for i, (q, p) in enumerate(PAIRS)]
    triplets.write_text("anchor\tpositive\tnegative_1\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    scored = root / "sts.tsv"
    sts = [
        ("good movie", "great film", "4.5"),
        ("bad movie", "great film", "0.5"),
        ("a good story", "good film", "4.0"),
    ]
    sts += [("very bad", "very good", "1.0"), ("the cat sat", "the cat sat", "5.0"), ("bad film", "good film", "0.8")]
    scored.write_text("sentence1\tsentence2\tscore\n" + "".join("\t".join(r) + "\n" for r in sts), encoding="utf-8")
    return {"pairs": pairs, "triplets": triplets, "scored": scored}


def run_cli(args: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------ losses
def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_in_batch_negatives_loss_matches_a_hand_computed_case():
    # two rows: anchor, positive, hard negative
    e = np.array([[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]], [[0.0, 2.0], [-1.0, 1.0], [3.0, 0.0]]])
    anchors, candidates = e[:, 0], [e[0, 1], e[1, 1], e[0, 2], e[1, 2]]  # positives first, then negatives
    expected = 0.0
    for i in range(2):
        logits = np.array([20 * _cos(anchors[i], c) for c in candidates])
        expected += -(logits[i] - math.log(np.exp(logits).sum())) / 2
    got = in_batch_negatives_loss(torch.tensor(e, dtype=torch.float32), scale=20.0)
    assert got.item() == pytest.approx(expected, rel=1e-5)
    # symmetric: also each positive against the anchors, the two directions averaged
    backward = 0.0
    for j in range(2):
        logits = np.array([20 * _cos(e[j, 1], a) for a in anchors])
        backward += -(logits[j] - math.log(np.exp(logits).sum())) / 2
    symmetric = in_batch_negatives_loss(torch.tensor(e, dtype=torch.float32), scale=20.0, symmetric=True)
    assert symmetric.item() == pytest.approx((expected + backward) / 2, rel=1e-5)


def test_cosent_loss_matches_a_hand_computed_case():
    e = np.array([[[1.0, 0.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]], [[1.0, 1.0], [1.0, 0.9]]])
    scores = [0.5, 0.1, 1.0]
    cos = [20 * _cos(row[0], row[1]) for row in e]
    terms = [cos[j] - cos[i] for i in range(3) for j in range(3) if scores[i] > scores[j]]
    expected = math.log(1 + sum(math.exp(t) for t in terms))
    got = cosent_loss(torch.tensor(e, dtype=torch.float32), torch.tensor(scores), scale=20.0)
    assert got.item() == pytest.approx(expected, rel=1e-5)
    # only the order of the scores counts
    rescaled = cosent_loss(torch.tensor(e, dtype=torch.float32), torch.tensor(scores) * 5, scale=20.0)
    assert rescaled.item() == pytest.approx(got.item(), rel=1e-6)


def test_matryoshka_applies_the_loss_to_each_renormalised_cut():
    torch.manual_seed(0)
    e = torch.randn(4, 3, 8)
    base = lambda x, s: in_batch_negatives_loss(x)  # noqa: E731
    loss = matryoshka_loss(base, [8, 4, 2])(e, None)
    expected = sum(in_batch_negatives_loss(F.normalize(e[..., :d], dim=-1)) for d in (8, 4, 2))
    assert loss.item() == pytest.approx(float(expected), rel=1e-6)
    # a cut of 2 sees the first two components only
    changed = e.clone()
    changed[..., 2:] = torch.randn(4, 3, 6)
    cut = matryoshka_loss(base, [2])
    assert cut(changed, None).item() == pytest.approx(cut(e, None).item(), rel=1e-6)
    with pytest.raises(ValueError, match="exceeds"):
        matryoshka_loss(base, [16])(e, None)


# ------------------------------------------------------------------------------------------ gradient cache
def _gradients(tokenizer, cache: bool, seed: int = 7) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    bert = BertModel(tiny_config(tokenizer, hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)).train()
    module = SentenceEncoder(bert, lambda e, s: in_batch_negatives_loss(e), mini_batch_size=3, cache=cache).train()
    task = make_task("embedding")
    texts = [t for pair in PAIRS for t in pair]
    distinct = list(dict.fromkeys(texts))
    ids = tokenizer.ids_batch(distinct)
    features = [
        {"texts": [[3, *ids[distinct.index(t)], 4] for t in pair], "text_ids": [distinct.index(t) for t in pair]}
        for pair in PAIRS[:6]
    ]
    batch = task.collate(features)
    torch.manual_seed(seed)
    output = module(**batch)
    (output.loss / 2).backward()  # as the loop scales by the accumulation
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def test_cached_gradients_equal_the_uncached_loss_with_dropout_on(tokenizer):
    plain = _gradients(tokenizer, cache=False)
    cached = _gradients(tokenizer, cache=True)
    assert plain.keys() == cached.keys() and len(plain) > 10
    for name in plain:
        torch.testing.assert_close(cached[name], plain[name], rtol=1e-4, atol=1e-6, msg=name)
    other_dropout = _gradients(tokenizer, cache=False, seed=8)  # dropout is really on: another seed differs
    assert any(not torch.allclose(other_dropout[n], plain[n]) for n in plain)


# ------------------------------------------------------------------------------------------ batches
def test_no_duplicates_order_never_puts_a_text_twice_in_a_batch():
    rows = [(i, 100 + i // 4) for i in range(40)]  # positives shared by four rows each, as SQuAD paragraphs are
    order = NoDuplicatesOrder(rows)
    batches = order.batches(len(rows), 8, np.random.default_rng([1, 0]))
    assert len(batches) == 5 and all(len(b) <= 8 for b in batches)
    for batch in batches:
        texts = [t for i in batch for t in rows[i]]
        assert len(texts) == len(set(texts))
    assert sum(len(b) for b in batches) + order.left_out == 40
    assert order.batches(len(rows), 8, np.random.default_rng([1, 0])) == batches  # deterministic from the seed
    assert order.batches(len(rows), 8, np.random.default_rng([1, 1])) != batches


def test_training_batches_from_the_task_hold_no_shared_positive(encoder_dir, data):
    base = encoder_dir
    config = FinetuneConfig.from_options(
        task="embedding", model=str(base), train_file=str(data["pairs"]), output="unused", max_seq_length=64
    )
    from bertkit.training.finetune import read_data, training_batches

    read = read_data(config, base)
    order = read.task.batch_order(read.train_features)
    batches = training_batches(read.train_features, 4, lambda chunk: chunk, seed=3, order=order)
    for batch in list(batches):
        texts = [t for f in batch for t in f["text_ids"]]
        assert len(texts) == len(set(texts))


# ------------------------------------------------------------------------------------------ reading
def test_readers_take_alternative_names_negatives_and_scores(data):
    task = EmbeddingTask()
    pairs = task.read(data["pairs"]).examples
    assert pairs[0].texts == PAIRS[0] and task.loss == "mnrl" and task.main_metric == "ndcg@10"
    triplets = make_task("embedding").read(data["triplets"]).examples
    assert len(triplets[0].texts) == 3
    scored_task = EmbeddingTask()
    scored = scored_task.read(data["scored"]).examples
    assert scored_task.loss == "cosent" and scored_task.main_metric == "spearman" and scored[0].score == 4.5


def test_a_missing_column_is_one_line_naming_the_columns_and_the_flag(tmp_path, encoder_dir, capsys):
    base = encoder_dir
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "who ?", "body": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"no positive column .*columns are 'question', 'body'.*--text-pair-column"):
        make_task("embedding").read(bad)
    args = ["finetune", "--task", "embedding", "--model", base, "--train", bad, "--output", tmp_path / "out"]
    code, _, err = run_cli(args, capsys)
    lines = [line for line in err.splitlines() if "error" in line]
    assert code == 2 and len(lines) == 1 and "--text-pair-column" in lines[0] and "'body'" in lines[0]
    code, _, err = run_cli([*args, "--text-pair-column", "nope"], capsys)
    assert code == 2 and "no positive column 'nope'" in err


def test_retrieval_scores_on_a_hand_made_ranking():
    top = np.array([[0, 1, 2], [2, 0, 1]])
    scores = retrieval_scores(top, [{0}, {0}], k=3)
    assert scores["accuracy@1"] == 0.5 and scores["mrr@3"] == pytest.approx(0.75)
    assert scores["ndcg@3"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert ranked(np.array([[1.0, 0.0]]), np.array([[0.0, 1.0], [2.0, 0.1]]), k=2).tolist() == [[1, 0]]


# ------------------------------------------------------------------------------------------ end to end
def test_cli_trains_a_sentence_transformers_model_with_bertkits_vectors(encoder_dir, data, tmp_path, capsys):
    base = encoder_dir
    output = tmp_path / "retriever"
    args = ["finetune", "--task", "embedding", "--model", base, "--train", data["triplets"], "--dev", data["pairs"]]
    args += ["--output", output, "--max-seq-length", "64", "--micro-batch-size", "4", "--epochs", "2"]
    args += ["--no-progress", "--lr", "1e-3", "--cache-mini-batch-size", "3", "--matryoshka-dims", "32,16"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "no-duplicates micro-batches" in err and set(json.loads(out)) == {"mrr@10", "ndcg@10", "accuracy@1"}
    for name in ("config.json", "model.safetensors", "modules.json", "1_Pooling/config.json"):
        assert (output / name).is_file(), name
    assert (output / "2_Normalize").is_dir() and (output / "sentence_bert_config.json").is_file()
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["task"] == "embedding" and metrics["main_metric"] == "ndcg@10"
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (dev extra) is not installed")
    texts = [t for pair in PAIRS for t in pair]
    ours = bertkit.embed(texts, str(output))
    theirs = st.SentenceTransformer(str(output), device="cpu").encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert np.linalg.norm(ours, axis=1) == pytest.approx(1.0, abs=1e-5)


def test_the_search_picks_the_best_embedding_run_on_dev_ndcg(encoder_dir, data, tmp_path, capsys):
    config = tmp_path / "search.toml"
    config.write_text("[search]\nlr = [1e-3, 1e-5]\nmicro_batch_size = [4]\nepochs = [1]\n")
    output = tmp_path / "searched"
    args = ["finetune", "--task", "embedding", "--model", encoder_dir, "--train", data["pairs"], "--dev", data["pairs"]]
    args += ["--output", output, "--max-seq-length", "32", "--search", "--config", config, "--no-progress"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    table = (output / "search.md").read_text().splitlines()
    assert "dev ndcg@10 per epoch" in table[0] and len(table) == 4  # header, rule, two runs
    assert sum("winner" in row for row in table) == 1
    assert (output / "modules.json").is_file() and json.loads((output / "metrics.json").read_text())[
        "task"
    ] == "embedding"


def test_scored_pairs_train_with_cosent_and_score_spearman(encoder_dir, data, tmp_path, capsys):
    base = encoder_dir
    output = tmp_path / "sts"
    args = ["finetune", "--task", "embedding", "--model", base, "--train", data["scored"], "--dev", data["scored"]]
    args += ["--output", output, "--max-seq-length", "32", "--micro-batch-size", "3", "--max-steps", "4"]
    args += ["--no-progress", "--pooling", "cls", "--no-normalize"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "dividing by 5" in err and "spearman" in json.loads(out)
    pooling = json.loads((output / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_cls_token"] and not (output / "2_Normalize").exists()


def test_interrupted_run_resumes_to_the_same_model(encoder_dir, data, tmp_path, monkeypatch):
    base = encoder_dir
    import bertkit.training.finetune_selection as selection  # where dev evaluation runs the model

    def config(output: Path, **more) -> FinetuneConfig:
        return FinetuneConfig.from_options(
            task="embedding",
            model=str(base),
            train_file=str(data["pairs"]),
            dev_file=str(data["pairs"]),
            output=str(output),
            max_seq_length=64,
            epochs=3,
            lr=1e-3,
            micro_batch_size=4,
            save_every=2,
            progress=False,
            train_options=QUIET,
            **more,
        )

    straight = finetune(config(tmp_path / "straight"))
    calls = {"n": 0}
    real_run_model = selection.run_model

    def crash_on_second_evaluation(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_run_model(*args, **kwargs)

    monkeypatch.setattr(selection, "run_model", crash_on_second_evaluation)
    output = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        finetune(config(output))  # killed mid-epoch: the last checkpoint is step 4 of epoch 2 (3 batches each)
    assert (tmp_path / "resumed.partial" / "checkpoint-4").is_dir()
    monkeypatch.setattr(selection, "run_model", real_run_model)
    with pytest.raises(BertkitError, match="--resume"):
        finetune(config(output))
    resumed = finetune(config(output, resume=True))
    assert resumed.metrics == straight.metrics and resumed.best_step == straight.best_step
    assert (output / "model.safetensors").read_bytes() == (tmp_path / "straight" / "model.safetensors").read_bytes()
