"""The thread count of heavy commands: affinity, cgroup v1/v2 quotas (on fake cgroup folders), the environment
variables, ``--threads`` through the CLI, and OpenMP's passive wait."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertkit import threads
from bertkit.errors import ConfigError
from bertkit.models.bert import BertForMaskedLM
from bertkit.tokenizer import Tokenizer
from inference_helpers import save_model

NO_STAT = Path("/nonexistent/proc/stat")
"""A /proc/stat that cannot be read: the idle CPUs are unknown, so the cores alone decide."""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def cgroup(tmp_path: Path) -> tuple[Path, Path]:
    """An empty cgroup root and a /proc/self/cgroup that places the process at /job/step (v2) and /job (v1)."""
    root = tmp_path / "cgroup"
    root.mkdir()
    proc = tmp_path / "proc_self_cgroup"
    proc.write_text("4:memory:/job\n3:cpu,cpuacct:/job\n0::/job/step\n")
    return root, proc


def test_no_quota_means_the_affinity_mask(cgroup: tuple[Path, Path]) -> None:
    root, proc = cgroup
    write(root / "cpu.max", "max 100000\n")
    assert threads.cgroup_cpus(root, proc) is None
    assert threads.default_threads(root, proc, NO_STAT) == threads.affinity_cores()


def test_v2_quota_rounds_down_and_a_parent_caps_its_child(
    cgroup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, proc = cgroup
    monkeypatch.setattr(threads, "affinity_cores", lambda: 64)
    write(root / "job" / "step" / "cpu.max", "350000 100000\n")
    assert threads.cgroup_cpus(root, proc) == 3.5
    assert threads.default_threads(root, proc, NO_STAT) == 3
    write(root / "job" / "cpu.max", "150000 100000\n")  # the parent's 1.5 CPUs bind the child too
    assert threads.default_threads(root, proc, NO_STAT) == 1


def test_a_quota_under_one_cpu_still_gives_one_thread(
    cgroup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, proc = cgroup
    monkeypatch.setattr(threads, "affinity_cores", lambda: 8)
    write(root / "cpu.max", "50000 100000\n")
    assert threads.default_threads(root, proc, NO_STAT) == 1


def test_v1_cfs_quota(cgroup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root, proc = cgroup
    monkeypatch.setattr(threads, "affinity_cores", lambda: 16)
    folder = root / "cpu,cpuacct" / "job"
    write(folder / "cpu.cfs_quota_us", "200000\n")
    write(folder / "cpu.cfs_period_us", "100000\n")
    assert threads.default_threads(root, proc, NO_STAT) == 2
    write(folder / "cpu.cfs_quota_us", "-1\n")  # no quota
    assert threads.default_threads(root, proc, NO_STAT) == 16


def test_affinity_caps_a_larger_quota(cgroup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root, proc = cgroup
    monkeypatch.setattr(threads, "affinity_cores", lambda: 2)
    write(root / "cpu.max", "800000 100000\n")
    assert threads.default_threads(root, proc, NO_STAT) == 2


def test_unreadable_or_garbled_files_mean_no_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu.max", "garbage\n")
    assert threads.cgroup_cpus(root, tmp_path / "missing") is None


STAT_BEFORE = "cpu  300 0 300 1000 0 0 0 0 0 0\ncpu0 100 0 100 500 0 0 0 0 0 0\ncpu1 200 0 200 500 0 0 0 0 0 0\n"


def stat_after(cpu0_busy: int, cpu1_busy: int) -> str:
    """/proc/stat 100 ticks later, with each CPU busy for the ticks given (the rest idle or in iowait)."""
    return (
        f"cpu  0 0 0 0 0 0 0 0 0 0\n"
        f"cpu0 {100 + cpu0_busy} 0 100 {500 + 100 - cpu0_busy - 10} 10 0 0 0 0 0\n"
        f"cpu1 {200 + cpu1_busy} 0 200 {500 + 100 - cpu1_busy} 0 0 0 0 0 0\n"
    )


def test_idle_cpus_between_two_readings() -> None:
    assert threads.idle_between(STAT_BEFORE, stat_after(0, 0)) == pytest.approx(2.0)  # iowait counts as idle
    assert threads.idle_between(STAT_BEFORE, stat_after(100, 0)) == pytest.approx(1.0)
    assert threads.idle_between(STAT_BEFORE, stat_after(100, 50)) == pytest.approx(0.5)
    assert threads.idle_between(STAT_BEFORE, stat_after(100, 0), cpus={0}) == pytest.approx(0.0)  # affinity
    assert threads.idle_between(STAT_BEFORE, STAT_BEFORE) is None  # no time passed
    assert threads.idle_between("", "") is None


@pytest.mark.parametrize(("busy", "expected"), [((0, 0), 2), ((30, 0), 2), ((100, 0), 1), ((100, 100), 1)])
def test_cores_other_processes_keep_busy_are_left_to_them(
    cgroup: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, busy: tuple[int, int], expected: int
) -> None:
    """Of two usable cores, a core another process keeps busy is not given a thread (at least one is)."""
    root, proc = cgroup
    monkeypatch.setattr(threads, "affinity_cores", lambda: 2)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    stat = tmp_path / "stat"
    readings = iter([STAT_BEFORE, stat_after(*busy)])
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: next(readings) if self == stat else "")
    assert threads.default_threads(root, proc, stat, window=0) == expected


def test_affinity_is_what_the_process_may_use() -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no sched_getaffinity here")
    assert threads.affinity_cores() == len(os.sched_getaffinity(0))


def test_the_flag_wins_then_bertkit_threads_then_omp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv(threads.ENV, "2")
    assert threads.chosen_threads(5) == 5
    assert threads.chosen_threads() == 2
    monkeypatch.delenv(threads.ENV)
    assert threads.chosen_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "default_threads", lambda: 7)
    assert threads.chosen_threads() == 7


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_count_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(threads.ENV, value)
    with pytest.raises(ConfigError, match=f"{threads.ENV}={value!r}: give a whole number"):
        threads.chosen_threads()


def test_use_threads_sets_torchs_count() -> None:
    before = torch.get_num_threads()
    try:
        assert threads.use_threads(1) == 1 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_mlm_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    return save_model(tmp_path_factory.mktemp("mlm") / "model", BertForMaskedLM, tokenizer)


def run_bertkit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bertkit", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_cli_threads_reach_torch_and_the_wait_policy_is_passive(tiny_mlm_dir: Path) -> None:
    """``--threads`` sets torch's count, and ``bertkit`` leaves OpenMP's idle threads asleep (seen from the
    environment the process runs with, through a ``sitecustomize`` that reports both at exit)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", threads.ENV)}
    code = (
        "import atexit, os, sys\n"
        "def report():\n"
        "    import torch\n"
        "    print('THREADS', torch.get_num_threads(), os.environ.get('OMP_WAIT_POLICY'), file=sys.stderr)\n"
        "atexit.register(report)\n"
    )
    probe = subprocess.run(
        [sys.executable, "-c", code + "from bertkit.cli import main; sys.exit(main(sys.argv[1:]))",
         "fill-mask", "--model", str(tiny_mlm_dir), "--threads", "1", "a [MASK] b"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert "THREADS 1 PASSIVE" in probe.stderr


def test_cli_refuses_zero_threads_in_one_line(tiny_mlm_dir: Path) -> None:
    got = run_bertkit("fill-mask", "--model", str(tiny_mlm_dir), "--threads", "0", "a [MASK] b")
    assert got.returncode == 2
    assert got.stderr.strip() == "bertkit: error: --threads must be >= 1, got 0"
