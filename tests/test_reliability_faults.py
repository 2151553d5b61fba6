"""Fault injection: SIGKILL a tiny pre-training run and a fine-tuning run at many moments, then resume.

Each run is a chain of processes on one output directory: every process but the last kills itself with
SIGKILL at one injected fault (a number of forward passes into the run, or a named phase of writing a
checkpoint, a metrics line or the exported model), the next process resumes, and the last one finishes.
The kill points are drawn from a seeded RNG, so the test is deterministic and never waits on timing.
After every kill we check that no checkpoint directory would mislead ``--resume`` (each one is either
valid and bit-identical to the uninterrupted run's checkpoint of the same step, or invalid and skipped),
and at the end that the final weights equal those of an uninterrupted run bit for bit (CPU, fixed seed).

Children are forked from a forkserver that has torch and bertkit imported already, so a launch costs
milliseconds instead of seconds of imports.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertkit.training.checkpoint import TRAINER_STATE, latest_valid_checkpoint, list_checkpoints, validate_checkpoint

PRE_STEPS = 40
FT_ROWS = 4  # copies of the 12 labelled sentences

# Phases of writing that a fault can hit (see FAULTS). Every one appears in each chain.
CHECKPOINT_PHASES = [
    "weights_torn",  # model.safetensors half written (its temporary file), then SIGKILL
    "weights_done",  # weights of the checkpoint written, trainer state not yet
    "state_torn",  # trainer_state.pt half written
    "state_done",  # trainer state written, tokenizer copy / manifest not yet
    "manifest_before",  # every file written, manifest.json not yet
    "rename_before",  # checkpoint-N.tmp complete, not yet renamed
    "rename_after",  # renamed, older checkpoints not yet rotated away
    "rotate",  # an older checkpoint partly deleted by rotation
    "metrics_torn",  # half a metrics.jsonl line written
]


# ------------------------------------------------------------------------------------------ in the child
def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _truncate_and_die(path: str | os.PathLike) -> None:
    path = Path(path)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    _die()


def _in_checkpoint(path) -> bool:
    return any(part.startswith("checkpoint-") and part.endswith(".tmp") for part in Path(path).parts)


def _fault_forward(kind: str, hit: Callable[[], bool]) -> None:
    """Mid-step (training or evaluation), after nth encoder forward passes."""
    from bertkit.models.bert import BertModel

    real_forward = BertModel.forward

    def forward(self, *args, **kwargs):
        if hit():
            _die()
        return real_forward(self, *args, **kwargs)

    BertModel.forward = forward  # type: ignore[method-assign]  # the fault: patched in the child on purpose


def _fault_weights_torn(kind: str, hit: Callable[[], bool]) -> None:
    """A checkpoint's (``weights_torn``) or an exported model's (``export_torn``) weights half written."""
    from bertkit.checkpoint_files import hf_files

    real_save_file = hf_files.save_file

    def save_file(tensors, path, metadata=None):
        real_save_file(tensors, path, metadata=metadata)
        target = Path(path).parent
        wanted = (
            _in_checkpoint(path)
            if kind == "weights_torn"
            else target.name in ("final", "best") or (target.name.endswith(".tmp") and not _in_checkpoint(path))
        )
        if wanted and hit():
            _truncate_and_die(path)

    hf_files.save_file = save_file


def _fault_weights_done(kind: str, hit: Callable[[], bool]) -> None:
    import bertkit.training.checkpoint as ck

    real_save_pretrained = ck.save_pretrained

    def save_pretrained(model, directory, tokenizer=None, **kwargs):
        out = real_save_pretrained(model, directory, tokenizer, **kwargs)
        if _in_checkpoint(directory / "x") and hit():
            _die()
        return out

    ck.save_pretrained = save_pretrained


def _fault_state(kind: str, hit: Callable[[], bool]) -> None:
    import bertkit.training.checkpoint as ck

    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        if Path(f).name == TRAINER_STATE and hit():
            _truncate_and_die(f) if kind == "state_torn" else _die()

    ck.torch.save = save


def _fault_manifest_before(kind: str, hit: Callable[[], bool]) -> None:
    import bertkit.training.checkpoint as ck

    real_write = ck.atomic_write_text

    def write(path, text):
        if Path(path).name == ck.MANIFEST and hit():
            _die()
        return real_write(path, text)

    ck.atomic_write_text = write


def _fault_rename(kind: str, hit: Callable[[], bool]) -> None:
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        is_checkpoint = Path(src).name.startswith("checkpoint-") and Path(src).name.endswith(".tmp")
        if is_checkpoint and kind == "rename_before" and hit():
            _die()
        real_replace(src, dst, **kwargs)
        if is_checkpoint and kind == "rename_after" and hit():
            _die()

    os.replace = replace


class _RmtreeHook:
    """``shutil.rmtree`` that first runs ``before`` on the path. A class, so that it keeps rmtree's
    ``avoids_symlink_attacks`` flag, which callers of rmtree may read."""

    avoids_symlink_attacks = shutil.rmtree.avoids_symlink_attacks

    def __init__(self, before: Callable[[Path], None]) -> None:
        self.real = shutil.rmtree
        self.before = before

    def __call__(self, path, *args, **kwargs):
        path = Path(path)
        self.before(path)
        return self.real(path, *args, **kwargs)


def _fault_rotate(kind: str, hit: Callable[[], bool]) -> None:
    import bertkit.training.checkpoint as ck

    def tear(path: Path) -> None:
        if path.name.startswith("checkpoint-") and not path.name.endswith(".tmp") and hit():
            files = sorted(p for p in path.iterdir() if p.is_file())
            files[len(files) // 2].unlink()  # part of the directory is gone
            _die()

    ck.shutil.rmtree = _RmtreeHook(tear)


def _fault_metrics_torn(kind: str, hit: Callable[[], bool]) -> None:
    from bertkit.training import run_log

    real_log = run_log.MetricsLogger.log

    def log(self, record):
        if self.enabled and hit():
            line = json.dumps(record) + "\n"
            self._file.write(line[: len(line) // 2])
            self._file.flush()
            _die()
        return real_log(self, record)

    run_log.MetricsLogger.log = log  # type: ignore[method-assign]  # the fault: patched in the child on purpose


def _fault_stage_before(kind: str, hit: Callable[[], bool]) -> None:
    """Fine-tuning: the assembled output not yet renamed into place."""
    real_replace = os.replace

    def replace(src, dst, **kwargs):
        if Path(src).name.endswith(".tmp") and Path(src).is_dir() and not _in_checkpoint(Path(src) / "x") and hit():
            _die()
        real_replace(src, dst, **kwargs)

    os.replace = replace


def _keep_partial(kind: str, hit: Callable[[], bool]) -> None:
    """The reference run: keep fine-tuning's work directory for comparison (no fault)."""

    def keep(path: Path) -> None:
        if path.name.endswith(".partial"):
            shutil.copytree(path, path.with_name(path.name + ".kept"))

    shutil.rmtree = _RmtreeHook(keep)


FAULTS: dict[str, Callable[[str, Callable[[], bool]], None]] = {
    "forward": _fault_forward,
    "weights_torn": _fault_weights_torn,
    "export_torn": _fault_weights_torn,
    "weights_done": _fault_weights_done,
    "state_torn": _fault_state,
    "state_done": _fault_state,
    "manifest_before": _fault_manifest_before,
    "rename_before": _fault_rename,
    "rename_after": _fault_rename,
    "rotate": _fault_rotate,
    "metrics_torn": _fault_metrics_torn,
    "stage_before": _fault_stage_before,
    "keep_partial": _keep_partial,
    "none": lambda kind, hit: None,
}


def _install_fault(fault: str) -> None:
    """Patch the library in this (child) process so that it SIGKILLs itself at ``fault``: ``kind:nth``,
    the nth occurrence of ``kind`` in this process."""
    # A killed process's writes stay in the page cache: fsync guards against power loss, not SIGKILL, and
    # waiting on the disk a few hundred times per run is most of a child's time.
    os.fsync = lambda fd: None
    kind, nth = fault.split(":")
    if kind not in FAULTS:
        raise ValueError(f"unknown fault {fault}")
    seen = {"n": 0}

    def hit() -> bool:
        seen["n"] += 1
        return seen["n"] == int(nth)

    FAULTS[kind](kind, hit)


def _pretrain_child(data: str, output: str, keep_last: int | None, fault: str) -> None:
    torch.set_num_threads(1)  # reproducible CPU reductions
    warnings.simplefilter("ignore")
    _install_fault(fault)
    from bertkit.training.pretrain import build_config, pretrain

    pretrain(
        build_config(
            dict(
                data=data,
                output=output,
                model_config="tiny",
                micro_batch_size=4,
                global_batch_size=8,
                max_steps=PRE_STEPS,
                lr=1e-3,
                warmup_steps=4,
                log_every=1,
                save_every=2,
                keep_last=keep_last,
                eval_every=6,
                eval_batches=1,
                progress=False,
                tensorboard=False,
                plot=False,
                peak_flops=1e12,
                resume="auto",
            )
        )
    )


def _finetune_child(model: str, train: str, output: str, resume: bool, keep_last: int | None, fault: str) -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    _install_fault(fault)
    from bertkit.training.finetune import FinetuneConfig, finetune

    finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=model,
            train_file=train,
            dev_file=train,
            output=output,
            epochs=8,
            lr=3e-3,
            micro_batch_size=8,
            global_batch_size=16,
            save_every=1,
            progress=False,
            resume=resume,
            train_options={"tensorboard": False, "plot": False, "keep_last": keep_last},
        )
    )


# ------------------------------------------------------------------------------------------ in the test
@pytest.fixture(scope="module")
def ctx():
    context = multiprocessing.get_context("forkserver")
    # torch._dynamo: the optimizer imports it on first use, seconds that every child would pay again.
    context.set_forkserver_preload(
        ["torch", "torch._dynamo", "bertkit.training.pretrain", "bertkit.training.finetune", "test_reliability_faults"]
    )
    return context


def run_child(ctx, target, *args, timeout: float = 300) -> int:
    process = ctx.Process(target=target, args=args)
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        pytest.fail(f"{target.__name__}{args} hung for {timeout}s")
    return process.exitcode


def fault_plan(seed: int, forward_range: tuple[int, int], first: list[str], last: list[str]) -> list[str]:
    """Every checkpoint-writing phase once (first or second occurrence), three kills after a random number
    of forward passes, in a seeded random order; then the ``last`` faults (those of the end of a run),
    after the ``first`` ones."""
    rng = random.Random(seed)
    plan = [f"{phase}:{rng.choice([1, 2])}" for phase in CHECKPOINT_PHASES]
    plan += [f"forward:{rng.randint(*forward_range)}" for _ in range(3)]
    rng.shuffle(plan)
    return first + plan + last


def tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(path / "model.safetensors")


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], where: str) -> None:
    assert a.keys() == b.keys(), where
    for name in a:
        assert a[name].equal(b[name]), f"{where}: {name} differs"


def check_checkpoints(run: Path, reference: Path, fault: str) -> tuple[int, int]:
    """Every checkpoint directory is valid and equal to the reference's of that step, or invalid (and then
    skipped by resume). Returns (valid, invalid) counts."""
    valid = invalid = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        latest = latest_valid_checkpoint(run)
    for path in list_checkpoints(run):
        problem = validate_checkpoint(path)
        if problem is not None:
            invalid += 1
            assert latest != path, f"after {fault}: resume would pick invalid {path}"
            continue
        valid += 1
        ref = reference / path.name
        assert ref.is_dir(), f"after {fault}: {path.name} has no counterpart in the uninterrupted run"
        assert_same_weights(tensors(path), tensors(ref), f"after {fault}: {path.name}")
        mine = torch.load(path / TRAINER_STATE, weights_only=True)
        theirs = torch.load(ref / TRAINER_STATE, weights_only=True)
        assert (mine["step"], mine["loader"]) == (theirs["step"], theirs["loader"]), f"after {fault}: {path.name}"
    # Resume must always find something it can use when any checkpoint was ever finished.
    assert valid == 0 or latest is not None
    return valid, invalid


def trajectory(run: Path) -> list[tuple]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["split"], r["loss"]) for r in records]


# ------------------------------------------------------------------------------------------ tests
@pytest.mark.slow
def test_pretraining_survives_sigkill_at_many_points(ctx, tmp_path):
    from training_helpers import make_pretraining_dataset

    data = make_pretraining_dataset(tmp_path / "data", n_train=64, n_eval=8, seq=24, vocab=60)
    reference = tmp_path / "reference"
    assert run_child(ctx, _pretrain_child, str(data), str(reference), 1000, "none:1") == 0

    run = tmp_path / "killed"
    plan = fault_plan(7, (3, 24), [], ["export_torn:1"])  # final/ is exported at the end
    kills, invalid_seen, finished = [], 0, False
    for fault in plan:
        code = run_child(ctx, _pretrain_child, str(data), str(run), 2, fault)
        if code == 0:
            finished = True
            break  # the run finished before this fault was reached
        assert code == -signal.SIGKILL, f"{fault}: exit code {code}"
        kills.append(fault)
        print("pre-training killed at", fault, "; checkpoints", [p.name for p in list_checkpoints(run)])
        invalid_seen += check_checkpoints(run, reference, fault)[1]
        if (run / "final" / "model.safetensors").is_file():  # an export is never half there
            assert (run / "final" / "model.safetensors").read_bytes() == (
                reference / "final" / "model.safetensors"
            ).read_bytes(), f"after {fault}: final/"
    assert len(kills) >= 10 and "export_torn:1" in kills, f"only {len(kills)} faults hit: {kills}"
    assert invalid_seen > 0  # some kills really left a broken checkpoint behind, and resume skipped it
    if not finished:
        assert run_child(ctx, _pretrain_child, str(data), str(run), 2, "none:1") == 0

    final = run / f"checkpoint-{PRE_STEPS}"
    assert validate_checkpoint(final) is None
    assert_same_weights(tensors(final), tensors(reference / f"checkpoint-{PRE_STEPS}"), "final checkpoint")
    assert (run / "final" / "model.safetensors").read_bytes() == (
        reference / "final" / "model.safetensors"
    ).read_bytes()
    assert trajectory(run) == trajectory(reference)
    assert len(list_checkpoints(run)) <= 2 and not list(run.glob("checkpoint-*.tmp"))


@pytest.mark.slow
def test_finetuning_survives_sigkill_at_many_points(ctx, tmp_path, encoder_dir):
    base = encoder_dir
    positive = ["good movie", "great film", "a good story", "very good", "great great movie", "good film"]
    negative = ["bad movie", "bad film", "a bad story", "very bad", "bad bad movie", "the lazy film was bad"]
    rows = [(t, "pos") for t in positive] + [(t, "neg") for t in negative]
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows * FT_ROWS), encoding="utf-8")

    reference = tmp_path / "reference"
    assert run_child(ctx, _finetune_child, str(base), str(train), str(reference), False, 1000, "keep_partial:1") == 0
    kept = tmp_path / "reference.partial.kept"  # every checkpoint of the uninterrupted run
    run = tmp_path / "killed"
    partial = tmp_path / "killed.partial"
    plan = fault_plan(11, (3, 20), ["export_torn:1"], ["stage_before:1"])  # best/ early, output at the end
    kills, invalid_seen, finished = [], 0, False
    for i, fault in enumerate(plan):
        code = run_child(ctx, _finetune_child, str(base), str(train), str(run), i > 0, 2, fault)
        if code == 0:
            finished = True
            break
        assert code == -signal.SIGKILL, f"{fault}: exit code {code}"
        kills.append(fault)
        print("fine-tuning killed at", fault, "; checkpoints", [p.name for p in list_checkpoints(partial)])
        assert not run.exists(), f"after {fault}: a half-made output directory"
        if partial.is_dir():
            invalid_seen += check_checkpoints(partial, kept, fault)[1]
    assert len(kills) >= 10, f"only {len(kills)} faults hit before the run finished: {kills}"
    assert invalid_seen > 0 and {"export_torn:1", "stage_before:1"} <= set(kills)
    if not finished:
        assert run_child(ctx, _finetune_child, str(base), str(train), str(run), True, 2, "none:1") == 0
    assert (run / "model.safetensors").read_bytes() == (reference / "model.safetensors").read_bytes()
    ref_metrics = json.loads((reference / "metrics.json").read_text())
    got = json.loads((run / "metrics.json").read_text())
    assert got["dev"] == ref_metrics["dev"]
    assert (got["best_step"], got["best_epoch"]) == (ref_metrics["best_step"], ref_metrics["best_epoch"])
    untimed = lambda evaluations: [{k: v for k, v in e.items() if k != "seconds"} for e in evaluations]  # noqa: E731
    assert untimed(got["evaluations"]) == untimed(ref_metrics["evaluations"])
    assert sorted(p.name for p in tmp_path.glob("killed*")) == ["killed"]
