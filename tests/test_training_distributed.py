"""Data parallelism: 2 CPU processes (gloo, torchrun) follow the single-process trajectory at the same global
batch, write checkpoints once, and a checkpoint resumes on another number of processes; the same with FSDP,
whose checkpoints resume unsharded and the other way round."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertkit.config import BertConfig
from training_helpers import make_pretraining_dataset

TORCHRUN = Path(sys.executable).with_name("torchrun")
CHILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # a crash shows its stacks

SCRIPT = """
import sys, torch
torch.set_num_threads(1)
from bertkit.training.pretrain import build_config, pretrain
data, output, model_config, steps, resume, fsdp = sys.argv[1:7]
cfg = build_config(dict(data=data, output=output, model_config=model_config, micro_batch_size=4,
                        global_batch_size=8, max_steps=int(steps), lr=1e-3, warmup_steps=2, log_every=1,
                        save_every=4, eval_batches=1, eval_every=4, progress=False,
                        tensorboard=False, plot=False, peak_flops=1e12, resume=resume or None, device="cpu",
                        fsdp=fsdp == "1"))
pretrain(cfg)
"""


def run(
    tmp_path: Path, procs: int, output: str, steps: int = 8, resume: str = "", fsdp: bool = False
) -> list[tuple[int, float]]:
    """Train ``steps`` updates, evaluating every 4 on the main process (on a gathered copy under ``fsdp``)."""
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    args = [
        str(tmp_path / "data"),
        str(tmp_path / output),
        str(tmp_path / "config.json"),
        str(steps),
        resume,
        str(int(fsdp)),
    ]
    if procs == 1:
        cmd = [sys.executable, str(script), *args]
    else:
        cmd = [str(TORCHRUN), "--standalone", f"--nproc_per_node={procs}", str(script), *args]
    done = subprocess.run(cmd, env=CHILD_ENV, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / output / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if r["split"] == "train"]


needs_torchrun = pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun is not installed next to this python")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[tuple[int, float]]]:
    """The data, the model config and the single-process run that both trajectory tests compare against.

    The run asks for FSDP: on one process it is a no-op, so it is also the plain single-process reference."""
    root = tmp_path_factory.mktemp("distributed")
    make_pretraining_dataset(root / "data", n_train=128, n_eval=8, seq=24, vocab=60)
    # No dropout: the processes' dropout streams differ by design; everything else must match.
    BertConfig.preset("tiny", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).save(root)
    return root, run(root, 1, "single", fsdp=True)


@pytest.mark.slow
@needs_torchrun
def test_two_processes_follow_the_single_process_trajectory(reference):
    tmp_path, single = reference
    double = run(tmp_path, 2, "double")
    assert [s for s, _ in single] == [s for s, _ in double] == list(range(1, 9))
    for (_, a), (_, b) in zip(single, double):
        assert b == pytest.approx(a, rel=1e-5)
    assert len({loss for _, loss in single}) == len(single)  # the weights move: no constant trajectory
    checkpoints = sorted(p.name for p in (tmp_path / "double").iterdir() if p.name.startswith("checkpoint"))
    assert checkpoints == ["checkpoint-4", "checkpoint-8"]

    # Resume the 2-process checkpoint-4 in one process: same data position, same trajectory.
    shutil.rmtree(tmp_path / "double" / "checkpoint-8")
    resumed = run(tmp_path, 1, "double", resume="auto")
    for (_, a), (_, b) in zip(single, resumed):
        assert b == pytest.approx(a, rel=1e-5)
    assert [s for s, _ in resumed] == list(range(1, 9))


@pytest.mark.slow
@needs_torchrun
def test_fsdp_follows_the_single_process_trajectory_and_its_checkpoints_resume_either_way(reference):
    from safetensors.torch import load_file

    tmp_path, single = reference
    sharded = run(tmp_path, 2, "sharded", fsdp=True)
    assert [s for s, _ in sharded] == list(range(1, 9))
    for (_, a), (_, b) in zip(single, sharded):
        assert b == pytest.approx(a, rel=1e-5)

    def evals(output):
        records = [json.loads(line) for line in (tmp_path / output / "metrics.jsonl").read_text().splitlines()]
        return [(r["step"], r["loss"]) for r in records if r["split"] == "eval"]

    assert [s for s, _ in evals("sharded")] == [4, 8]  # evaluated on the gathered model
    for (_, a), (_, b) in zip(evals("single"), evals("sharded")):
        assert b == pytest.approx(a, rel=1e-5)
    reference = load_file(tmp_path / "single" / "final" / "model.safetensors")
    gathered = load_file(tmp_path / "sharded" / "final" / "model.safetensors")
    assert sorted(gathered) == sorted(reference)  # full Hugging Face weights, not shards
    for name, tensor in reference.items():
        torch.testing.assert_close(gathered[name], tensor, atol=1e-5, rtol=1e-5)

    # A sharded checkpoint resumes in one process, and an unsharded one resumes sharded.
    for source, procs, output in (("sharded", 1, "to_single"), ("single", 2, "to_sharded")):
        (tmp_path / output).mkdir()
        shutil.copytree(tmp_path / source / "checkpoint-4", tmp_path / output / "checkpoint-4")
        resumed = run(tmp_path, procs, output, resume="auto", fsdp=procs == 2)
        assert [s for s, _ in resumed] == [5, 6, 7, 8]
        for (_, a), (_, b) in zip(single[4:], resumed):
            assert b == pytest.approx(a, rel=1e-5)


COLLECTIVES = """
import json, sys
from bertkit.training import distributed
env = distributed.setup("cpu")
# Objects of different sizes on each rank, then every helper once, the barrier last (as at the end of a run).
gathered = distributed.all_gather_object(env, {"rank": env.rank, "text": "x" * (1000 * env.rank)})
chosen = distributed.broadcast_object(env, f"from {env.rank}", src=1)
summed = distributed.all_reduce_sum(env, [1.0, float(env.rank)])
largest = distributed.all_reduce_max(env, [float(env.rank), -float(env.rank)])
distributed.barrier(env)
with open(f"{sys.argv[1]}/rank{env.rank}.json", "w") as f:
    json.dump(dict(gathered=gathered, chosen=chosen, summed=summed, largest=largest), f)
"""


@needs_torchrun
def test_collectives_agree_across_two_processes(tmp_path):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    done = subprocess.run(
        [str(TORCHRUN), "--standalone", "--nproc_per_node=2", str(script), str(tmp_path)],
        env=CHILD_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        result = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert result["gathered"] == [{"rank": 0, "text": ""}, {"rank": 1, "text": "x" * 1000}]
        assert result["chosen"] == "from 1"
        assert result["summed"] == [2.0, 1.0]
        assert result["largest"] == [1.0, 0.0]
