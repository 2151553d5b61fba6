"""ModernBERT pre-training: ``pretrain --architecture modernbert`` (or a ``model_type: modernbert`` config) trains a
``ModernBertForMaskedLM`` with masked LM only, whose ``final/`` transformers loads with the same logits; a run
killed mid-step resumes to the weights and losses of an uninterrupted one."""

from __future__ import annotations

import json
import multiprocessing
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertkit.config import ModernBertConfig
from bertkit.data import open_dataset
from bertkit.errors import ConfigError, DataError
from bertkit.models import ModernBertForMaskedLM
from bertkit.training.pretrain import build_config, build_model, pretrain
from test_reliability_faults import run_child
from training_helpers import die_in_nth_forward, make_pretraining_dataset

transformers = pytest.importorskip("transformers", reason="transformers is the reference for ModernBERT")
STEPS = 6


def options(data: Path, output: Path, **more: object) -> dict[str, object]:
    defaults = dict(data=str(data), output=str(output), micro_batch_size=4, global_batch_size=8, max_steps=STEPS,
                    lr=1e-3, warmup_steps=2, log_every=1, save_every=2, eval_every=3, eval_batches=1, progress=False,
                    tensorboard=False, plot=False, peak_flops=1e12, recipe="modern")  # fmt: skip
    return {**defaults, **more}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("mlm") / "data"
    return make_pretraining_dataset(directory, n_train=32, n_eval=8, seq=24, vocab=60, masking="dynamic", nsp=False)


def test_pretraining_a_modernbert_exports_what_transformers_loads(data: Path, tmp_path: Path) -> None:
    config_file = tmp_path / "config.json"  # a window of 8 tokens, shorter than the sequences of 24
    ModernBertConfig.preset("tiny", local_attention=8, global_attn_every_n_layers=2).save(tmp_path)
    result = pretrain(build_config(options(data, tmp_path / "run", model_config=str(config_file))))
    assert result.step == STEPS
    final = tmp_path / "run" / "final"
    saved = json.loads((final / "config.json").read_text())
    assert saved["model_type"] == "modernbert" and saved["architectures"] == ["ModernBertForMaskedLM"]
    assert saved["vocab_size"] == 60 and saved["pad_token_id"] == 0 and saved["local_attention"] == 8
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["split"] == "eval"]
    assert evals and all("nsp_loss" not in r and r["loss"] == r["mlm_loss"] for r in evals)
    first, last = records[0]["loss"], [r for r in records if r["split"] == "train"][-1]["loss"]
    assert last < first  # it learns

    ours = ModernBertForMaskedLM.from_pretrained(final)
    theirs = transformers.ModernBertForMaskedLM.from_pretrained(final, attn_implementation="sdpa").eval()
    ids = torch.randint(5, 60, (3, 24), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 17:] = 0
    with torch.no_grad():
        got, want = ours(ids, attention_mask=mask).logits, theirs(input_ids=ids, attention_mask=mask).logits
    real = mask.bool()
    torch.testing.assert_close(got[real], want[real], atol=1e-5, rtol=1e-5)


def test_the_architecture_comes_from_the_flag_or_the_config(data: Path, tmp_path: Path) -> None:
    config = build_config(options(data, tmp_path / "a", architecture="modernbert", model_config="tiny"))
    assert config.architecture == "modernbert"
    assert build_config(options(data, tmp_path / "b", model_config="tiny")).architecture == "bert"
    ModernBertConfig.preset("tiny").save(tmp_path)
    implied = build_config(options(data, tmp_path / "c", model_config=str(tmp_path / "config.json")))
    assert implied.architecture == "modernbert"
    with pytest.raises(ConfigError, match="drop one of the two"):
        build_config(options(data, tmp_path / "d", architecture="bert", model_config=str(tmp_path / "config.json")))
    with pytest.raises(ConfigError, match="choose bert or modernbert"):
        build_config(options(data, tmp_path / "e", architecture="roberta"))


def test_modernbert_refuses_next_sentence_data(tmp_path: Path) -> None:
    nsp = make_pretraining_dataset(tmp_path / "nsp", n_train=8, n_eval=0, seq=24, vocab=60)
    with pytest.raises(ConfigError, match=r"masked LM only.*--recipe modern"):
        pretrain(build_config(options(nsp, tmp_path / "run", architecture="modernbert", model_config="tiny")))


def test_whole_word_masking_needs_a_wordpiece_tokenizer(tmp_path: Path) -> None:
    from bertkit.data.prepare import PrepareConfig, prepare_dataset
    from test_tokenizer_json import MODERNBERT_NAMES, bpe_directory

    bpe = bpe_directory(tmp_path, ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"), MODERNBERT_NAMES)
    (tmp_path / "corpus.txt").write_text("One sentence here. Another one there.\n", encoding="utf-8")
    config = PrepareConfig(inputs=[str(tmp_path / "corpus.txt")], output=str(tmp_path / "data"), tokenizer=str(bpe),
                           recipe="modern", whole_word_mask=True, workers=1)  # fmt: skip
    with pytest.raises(DataError, match="not a WordPiece tokenizer; prepare without --whole-word-mask"):
        prepare_dataset(config)


def test_continued_pretraining_starts_from_the_weights(data: Path, tmp_path: Path) -> None:
    pretrain(build_config(options(data, tmp_path / "one", architecture="modernbert", model_config="tiny")))
    final = tmp_path / "one" / "final"
    config = build_config(options(data, tmp_path / "two", init_from=str(final), dropout=0.1))
    assert config.architecture == "modernbert"
    model = build_model(config, open_dataset(str(data)))
    assert isinstance(model, ModernBertForMaskedLM) and model.config.mlp_dropout == 0.1
    start = load_file(final / "model.safetensors")
    state = model.state_dict()
    assert all(state[name].equal(tensor) for name, tensor in start.items())


# ------------------------------------------------------------------------------------------ kill and resume
def _child(data: str, output: str, nth: int) -> None:
    """Pre-train in a forked process that SIGKILLs itself in its ``nth`` encoder forward pass (0: never)."""
    from bertkit.models.modernbert import ModernBertModel

    die_in_nth_forward(ModernBertModel, nth)
    pretrain(build_config(options(Path(data), Path(output), architecture="modernbert", model_config="tiny",
                                  resume="auto")))  # fmt: skip


@pytest.mark.slow
def test_a_killed_modernbert_run_resumes_exactly(data: Path, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "bertkit.training.pretrain", "bertkit.models.modernbert"])
    reference, run = tmp_path / "reference", tmp_path / "killed"
    assert run_child(ctx, _child, str(data), str(reference), 0) == 0
    for nth in (7, 3):  # mid-step after the checkpoint of step 2 (and an evaluation), then in the resumed run
        assert run_child(ctx, _child, str(data), str(run), nth) == -signal.SIGKILL
    assert run_child(ctx, _child, str(data), str(run), 0) == 0
    mine, theirs = (load_file(d / "final" / "model.safetensors") for d in (run, reference))
    assert mine.keys() == theirs.keys() and all(mine[k].equal(theirs[k]) for k in mine)

    def trajectory(directory: Path) -> list[tuple]:
        records = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines()]
        return [(r["step"], r["split"], r["loss"]) for r in records]

    assert trajectory(run) == trajectory(reference)
