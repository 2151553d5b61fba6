"""Chaos: SIGKILL fine-tuning for token classification (NER), question answering, sentence embeddings,
regression and the hyperparameter search at points drawn from a seeded RNG (during a training step, during evaluation, in each phase of writing a
checkpoint), resume, and compare with an uninterrupted run: identical final weights and metrics, and no file
of a finished run ever half written. Disk full during a checkpoint write stops fine-tuning with one line,
leaves the previous checkpoint loadable, and ``--resume`` then ends where an uninterrupted run ends.

Classification and pre-training are covered the same way, at more points, by ``test_reliability_faults``
(``test_every_training_command_has_a_kill_and_resume_test`` checks that no training command is left out);
this module reuses its fault hooks (patched into a forked child, which then kills itself) and adds one:
``eval``, a kill in the nth forward pass made in evaluation mode.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import random
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import test_reliability_faults as faults
from bertkit.training.checkpoint import latest_valid_checkpoint, list_checkpoints, validate_checkpoint
from inference_helpers import write_squad

NER_SENTENCES = [
    [("george", "B-PER"), ("washington", "I-PER"), ("lived", "O"), ("in", "O"), ("virginia", "B-LOC")],
    [("john", "B-PER"), ("smith", "I-PER"), ("went", "O"), ("to", "O"), ("paris", "B-LOC")],
    [("the", "O"), ("cat", "O"), ("sat", "O"), ("in", "O"), ("france", "B-LOC")],
]
QA_CONTEXTS = [
    (
        "john smith lived in paris . he was the king of france .",
        [("who lived in paris ?", "john smith"), ("where did john smith live ?", "paris")],
    ),
    (
        "george washington led the continental army . he lived in virginia .",
        [("who led the continental army ?", "george washington"), ("where did he live ?", "virginia")],
    ),
]
EMBEDDING_PAIRS = [
    ("who lived in paris ?", "john smith lived in paris ."),
    ("who led the army ?", "george washington led the army ."),
    ("where is the cat ?", "the cat sat in france ."),
    ("what is good ?", "a good movie ."),
    ("what is bad ?", "a bad film ."),
    ("who is the king ?", "he was the king of france ."),
    ("where did the cat sit ?", "the cat sat on the mat ."),
    ("what was the story ?", "once upon a time there was a queen ."),
    ("where did george live ?", "he lived in virginia ."),
    ("what did the army do ?", "the army crossed the river ."),
    ("who wrote the letter ?", "mary wrote the letter ."),
    ("what is red ?", "the apple is red ."),
]
GRID = {"lr": [1e-5, 3e-3]}


# ------------------------------------------------------------------------------------------ in the child
def _fault_eval(kind: str, hit: Callable[[], bool]) -> None:
    """Mid-evaluation: the nth encoder forward pass made with the model in eval mode."""
    from bertkit.models.bert import BertModel

    real_forward = BertModel.forward

    def forward(self, *args, **kwargs):
        if not self.training and hit():
            faults._die()
        return real_forward(self, *args, **kwargs)

    BertModel.forward = forward  # type: ignore[method-assign]  # the fault: patched in the child on purpose


def _fault_native_weights(kind: str, hit: Callable[[], bool]) -> None:
    """``weights_torn`` and ``weights_done`` in a checkpoint written in safetensors' own layout (the embedding
    task's ``SentenceEncoder``, which is no Hugging Face model), besides the Hugging Face layout's."""
    import bertkit.checkpoint_files.weight_files as ck

    real_save_model = ck.save_model

    def save_model(model, filename, *args, **kwargs):
        real_save_model(model, filename, *args, **kwargs)
        if faults._in_checkpoint(filename) and hit():
            faults._truncate_and_die(filename) if kind == "weights_torn" else faults._die()

    ck.save_model = save_model


def _both_layouts(hf_fault: Callable[[str, Callable[[], bool]], None]) -> Callable[[str, Callable[[], bool]], None]:
    def install(kind: str, hit: Callable[[], bool]) -> None:
        hf_fault(kind, hit)
        _fault_native_weights(kind, hit)

    return install


faults.FAULTS["eval"] = _fault_eval
for _kind in ("weights_torn", "weights_done"):
    faults.FAULTS[_kind] = _both_layouts(faults.FAULTS[_kind])


def _options(task: str, model: str, train: str, output: str, resume: bool, keep_last: int | None) -> dict:
    return dict(
        task=task,
        model=model,
        train_file=train,
        dev_file=train,
        output=output,
        epochs=24 if task == "embedding" else 6,  # 12 pairs: 3 updates an epoch, where NER and QA have 12
        lr=3e-3,
        micro_batch_size=2,
        global_batch_size=4,
        max_seq_length=96,
        save_every=1,
        seed=5,
        progress=False,
        resume=resume,
        train_options={"tensorboard": False, "plot": False, "keep_last": keep_last},
    )


def _task_child(task: str, model: str, train: str, output: str, resume: bool, keep_last: int | None, fault: str):
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    faults._install_fault(fault)
    from bertkit.training.finetune import FinetuneConfig, finetune

    finetune(FinetuneConfig.from_options(**_options(task, model, train, output, resume, keep_last)))


def _search_child(model: str, train: str, output: str, resume: bool, fault: str) -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    faults._install_fault(fault)
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.hyperparameter_search import SearchConfig, search

    options = _options("classification", model, train, output, resume, 2)
    options.update(epochs=3, lr=1e-4)
    search(FinetuneConfig.from_options(**options), SearchConfig(grid=GRID))


# ------------------------------------------------------------------------------------------ in the test
@pytest.fixture(scope="module")
def ctx():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        [
            "torch",
            "torch._dynamo",
            "bertkit.training.finetune",
            "bertkit.training.hyperparameter_search",
            "test_reliability_chaos",
        ]
    )
    return context


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("chaos-data")
    conll = "".join("".join(f"{w} NN O {t}\n" for w, t in s) + "\n" for s in NER_SENTENCES * 4)
    (root / "ner.txt").write_text(conll, encoding="utf-8")
    write_squad(root / "qa.json", QA_CONTEXTS * 3)
    rows = [("good movie", "pos"), ("bad film", "neg"), ("a good story", "pos"), ("very bad", "neg")] * 3
    (root / "cls.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows), encoding="utf-8")
    scores = [("good movie", 4.5), ("bad film", 0.5), ("a good story", 4.0), ("very bad", 1.0)] * 12
    (root / "reg.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in scores), encoding="utf-8")
    pairs = "".join(json.dumps({"question": q, "passage": p}) + "\n" for q, p in EMBEDDING_PAIRS)
    (root / "pairs.jsonl").write_text(pairs, encoding="utf-8")
    return {
        "ner": root / "ner.txt",
        "qa": root / "qa.json",
        "classification": root / "cls.tsv",
        "regression": root / "reg.tsv",
        "embedding": root / "pairs.jsonl",
    }


def chaos_plan(seed: int) -> list[str]:
    """A handful of kill points from a seeded RNG: in a training step, in evaluation, and four phases of
    writing a checkpoint; the best model's export first, the final rename last."""
    rng = random.Random(seed)
    plan = [f"{phase}:{rng.choice([1, 2])}" for phase in rng.sample(faults.CHECKPOINT_PHASES, 4)]
    # a step and an evaluation first: later, a resumed run may have too little left to reach them
    return ["export_torn:1", f"forward:{rng.randint(3, 12)}", f"eval:{rng.randint(1, 3)}", *plan, "stage_before:1"]


def untimed(record: dict) -> dict:
    return {k: untimed(v) if isinstance(v, dict) else v for k, v in record.items() if k not in ("seconds",)}


def same_metrics(run: Path, reference: Path) -> None:
    got, expected = (json.loads((p / "metrics.json").read_text()) for p in (run, reference))
    assert got["dev"] == expected["dev"]
    assert (got["best_step"], got["best_epoch"]) == (expected["best_step"], expected["best_epoch"])
    assert [untimed(e) for e in got["evaluations"]] == [untimed(e) for e in expected["evaluations"]]


@pytest.mark.slow
@pytest.mark.parametrize("task", ["ner", "qa", "embedding", "regression"])
def test_finetuning_each_task_survives_sigkill(ctx, tmp_path, encoder_dir, data, task):
    train, base = str(data[task]), str(encoder_dir)
    reference = tmp_path / "reference"
    code = faults.run_child(ctx, _task_child, task, base, train, str(reference), False, 1000, "keep_partial:1")
    assert code == 0
    kept = tmp_path / "reference.partial.kept"  # every checkpoint of the uninterrupted run
    run, partial = tmp_path / "killed", tmp_path / "killed.partial"
    kills, finished = [], False
    for i, fault in enumerate(chaos_plan({"ner": 21, "qa": 22, "embedding": 24, "regression": 25}[task])):
        code = faults.run_child(ctx, _task_child, task, base, train, str(run), i > 0, 2, fault)
        if code == 0:
            finished = True
            break
        assert code == -signal.SIGKILL, f"{fault}: exit code {code}"
        kills.append(fault)
        assert not run.exists(), f"after {fault}: a half-made output directory"
        if partial.is_dir():
            faults.check_checkpoints(partial, kept, fault)
    assert len(kills) == 8, kills  # every fault hit: none came after the run had finished
    assert any(k.startswith("eval:") for k in kills) and any(k.startswith("forward:") for k in kills), kills
    if not finished:
        assert faults.run_child(ctx, _task_child, task, base, train, str(run), True, 2, "none:1") == 0
    assert (run / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    same_metrics(run, reference)
    assert sorted(p.name for p in tmp_path.glob("killed*")) == ["killed"]


@pytest.mark.slow
def test_the_search_survives_sigkill(ctx, tmp_path, encoder_dir, data):
    train, base = str(data["classification"]), str(encoder_dir)
    reference = tmp_path / "reference"
    assert faults.run_child(ctx, _search_child, base, train, str(reference), False, "none:1") == 0
    run, work = tmp_path / "killed", tmp_path / "killed.search"
    rng = random.Random(23)
    plan = [f"forward:{rng.randint(3, 40)}", f"eval:{rng.randint(2, 6)}", f"state_torn:{rng.randint(1, 4)}"]
    plan += [f"rename_after:{rng.randint(1, 4)}", f"weights_torn:{rng.randint(1, 4)}", "stage_before:1"]
    kills = []
    for i, fault in enumerate(plan):
        code = faults.run_child(ctx, _search_child, base, train, str(run), i > 0, fault)
        if code == 0:
            break
        assert code == -signal.SIGKILL, f"{fault}: exit code {code}"
        kills.append(fault)
        assert not run.exists(), f"after {fault}: a half-made output directory"
        for partial in work.glob("run-*.partial"):  # resume never picks a broken checkpoint
            latest = latest_valid_checkpoint(partial)
            assert latest is None or validate_checkpoint(latest) is None, f"after {fault}"
    assert len(kills) >= 4, kills
    if run.exists() is False:
        assert faults.run_child(ctx, _search_child, base, train, str(run), True, "none:1") == 0
    assert (run / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    got, expected = (json.loads((p / "search.json").read_text()) for p in (run, reference))
    assert got["winner"] == expected["winner"]
    assert [(r["name"], r["metric"], r["per_epoch"], r["updates"]) for r in got["runs"]] == [
        (r["name"], r["metric"], r["per_epoch"], r["updates"]) for r in expected["runs"]
    ]
    same_metrics(run, reference)
    assert sorted(p.name for p in tmp_path.glob("killed*")) == ["killed"]


def test_disk_full_during_a_checkpoint_stops_with_one_line_and_resume_ends_the_same(
    tmp_path, encoder_dir, data, monkeypatch, capsys
):
    from bertkit.checkpoint_files import hf_files
    from bertkit.cli import main

    args = ["finetune", "--task", "ner", "--model", str(encoder_dir), "--train", str(data["ner"])]
    args += ["--dev", str(data["ner"]), "--epochs", "2", "--micro-batch-size", "2", "--global-batch-size", "4"]
    args += ["--max-seq-length", "48", "--save-every", "1", "--seed", "5", "--lr", "3e-3"]
    args += ["--no-progress", "--no-plot", "--report-to", "none"]
    reference, run = tmp_path / "reference", tmp_path / "full"
    assert main([*args, "--output", str(reference)]) == 0

    real_save_file = hf_files.save_file
    saves = {"n": 0}

    def save_file(tensors, path, metadata=None):
        if faults._in_checkpoint(path):
            saves["n"] += 1
            if saves["n"] == 2:  # the second checkpoint: the first is on disk
                with open(path, "wb") as handle:
                    handle.write(b"\0" * 1000)  # part of the file made it before the disk filled up
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_save_file(tensors, path, metadata=metadata)

    monkeypatch.setattr(hf_files, "save_file", save_file)
    capsys.readouterr()
    assert main([*args, "--output", str(run)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bertkit: error")]
    assert len(err) == 1 and "No space left on device" in err[0] and "intact" in err[0], err
    partial = tmp_path / "full.partial"
    checkpoints = list_checkpoints(partial)
    assert len(checkpoints) == 1 and validate_checkpoint(checkpoints[0]) is None
    assert latest_valid_checkpoint(partial) == checkpoints[0] and not list(partial.glob("*.tmp"))
    assert not run.exists()

    monkeypatch.setattr(hf_files, "save_file", real_save_file)  # space freed
    assert main([*args, "--output", str(run), "--resume"]) == 0
    assert (run / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    same_metrics(run, reference)


def test_the_chaos_plan_is_seeded():
    assert chaos_plan(21) == chaos_plan(21) and chaos_plan(21) != chaos_plan(22)


# Where each way of training is killed and resumed. A new command or task must land here or in NOT_TRAINING.
KILL_AND_RESUME_TESTS = {
    "pretrain": "test_reliability_faults.py::test_pretraining_survives_sigkill_at_many_points",
    "finetune --task classification": "test_reliability_faults.py::test_finetuning_survives_sigkill_at_many_points",
    "finetune --task regression": "test_reliability_chaos.py::test_finetuning_each_task_survives_sigkill",
    "finetune --task ner": "test_reliability_chaos.py::test_finetuning_each_task_survives_sigkill",
    "finetune --task qa": "test_reliability_chaos.py::test_finetuning_each_task_survives_sigkill",
    "finetune --task embedding": "test_reliability_chaos.py::test_finetuning_each_task_survives_sigkill",
    "finetune --search": "test_reliability_chaos.py::test_the_search_survives_sigkill",
    "distill": "test_distill.py::test_a_killed_distillation_resumes_to_the_same_student",
}
NOT_TRAINING = {
    # no weights trained: they read a model, or write data, vocabularies or converted files atomically
    *("tokenize", "tokenizer-train", "tokenizer-extend", "embed", "fill-mask", "next-sentence", "classify"),
    *("tag", "answer", "attention", "serve", "convert", "export-onnx", "evaluate", "predict", "prepare-data"),
    *("retrieval-from-squad", "retrieval-mine-negatives"),
    # trains through pretrain's and finetune's own functions (covered above) on a wall-clock budget, with no
    # --resume: a killed demo starts again
    "demo",
}


def test_every_training_command_has_a_kill_and_resume_test():
    from typer.main import get_command

    import test_distill
    import test_reliability_faults
    from bertkit.cli import app
    from bertkit.tasks.registry import task_names

    def names(group, prefix=""):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from names(command, prefix + name + "-")
            else:
                yield prefix + name

    trained = {key.split()[0] for key in KILL_AND_RESUME_TESTS}
    assert set(names(get_command(app))) == trained | NOT_TRAINING
    assert {f"finetune --task {task}" for task in task_names()} <= set(KILL_AND_RESUME_TESTS)
    modules = {
        "test_reliability_faults.py": test_reliability_faults,
        "test_reliability_chaos.py": sys.modules[__name__],
        "test_distill.py": test_distill,
    }
    for where in KILL_AND_RESUME_TESTS.values():
        module, name = where.split("::")
        assert callable(getattr(modules[module], name)), where
