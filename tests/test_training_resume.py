"""Exact resume: a pre-training run killed with SIGKILL and resumed ends bit-identical to an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from bertkit.training import list_checkpoints, validate_checkpoint
from training_helpers import make_pretraining_dataset

HERE = Path(__file__).resolve().parent
STEPS = 24

SCRIPT = f"""
import sys, torch
torch.set_num_threads(1)  # reproducible CPU reductions
from bertkit.training.pretrain import build_config, pretrain
cfg = build_config(dict(data=sys.argv[1], output=sys.argv[2], model_config="tiny", micro_batch_size=4,
                        global_batch_size=8, max_steps={STEPS}, lr=1e-3, warmup_steps=4, log_every=1,
                        save_every=3, keep_last=2, eval_every=6, eval_batches=1, progress=False,
                        tensorboard=False, plot=False, peak_flops=1e12, resume=sys.argv[3] or None))
pretrain(cfg)
"""


def launch(data: Path, output: Path, resume: str = "") -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(data), str(output), resume],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def trajectory(run: Path) -> list[tuple[int, str, float]]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["split"], r["loss"]) for r in records]


@pytest.mark.slow
def test_sigkill_and_resume_is_bit_identical(tmp_path):
    data = make_pretraining_dataset(tmp_path / "data", n_train=64, n_eval=8, seq=24, vocab=60)
    reference = launch(data, tmp_path / "reference")
    killed = launch(data, tmp_path / "killed")
    # Kill as soon as a mid-run checkpoint exists: the process is then somewhere in a later step.
    deadline = time.time() + 240
    while time.time() < deadline:
        done = [p for p in list_checkpoints(tmp_path / "killed") if validate_checkpoint(p, checksums=False) is None]
        if any(int(p.name.split("-")[1]) >= 9 for p in done) or killed.poll() is not None:
            break
        time.sleep(0.02)
    assert killed.poll() is None, "the run ended before it could be killed; make it longer"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    last = list_checkpoints(tmp_path / "killed")[-1]
    assert int(last.name.split("-")[1]) < STEPS

    resumed = launch(data, tmp_path / "killed", resume="auto")
    assert resumed.stderr is not None and reference.stderr is not None  # launch pipes stderr
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    assert reference.wait(timeout=300) == 0, reference.stderr.read()

    final_a = load_file(tmp_path / "reference" / f"checkpoint-{STEPS}" / "model.safetensors")
    final_b = load_file(tmp_path / "killed" / f"checkpoint-{STEPS}" / "model.safetensors")
    assert final_a.keys() == final_b.keys()
    for name in final_a:
        assert final_a[name].equal(final_b[name]), name
    assert trajectory(tmp_path / "reference") == trajectory(tmp_path / "killed")
    assert len([t for t in trajectory(tmp_path / "reference") if t[1] == "train"]) == STEPS
