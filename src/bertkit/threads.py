"""How many CPU threads a heavy command runs torch (and the graph engines) with, and how they wait.

The count, first given first: ``--threads`` (:func:`use_threads`'s argument), the ``BERTKIT_THREADS``
environment variable, ``OMP_NUM_THREADS``, else :func:`default_threads`: the cores this process may use, that
is the CPUs of its affinity mask (``os.sched_getaffinity``: ``taskset``, ``docker --cpuset-cpus``) capped by
its cgroup's CPU quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``: ``docker --cpus``,
a Kubernetes CPU limit), rounded down, and further capped by how many of those CPUs were idle over a fifth
of a second (``/proc/stat``), at least 1. torch alone counts the host's cores and ignores quotas and load.

How idle threads wait matters as much as how many there are. torch's OpenMP workers spin after each parallel
region (GNU OpenMP's active wait), so on cores other processes also use, each thread burns the time slice
another thread needs and every parallel region waits for a thread the kernel has set aside: two threads on
two shared cores made a training step 2 to 6 times slower than one thread (``docs/inference.md``, Threads).
:func:`passive_wait` asks OpenMP to sleep instead (``OMP_WAIT_POLICY=PASSIVE``) unless the user chose a
policy; it works only before the OpenMP runtime loads (before ``import torch``), which is why ``bertkit``'s
``main`` calls it first.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from bertkit.errors import ConfigError

ENV = "BERTKIT_THREADS"
"""The environment variable that sets the thread count of every command (``--threads`` wins)."""
CGROUP = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_STAT = Path("/proc/stat")
IDLE_WINDOW_S = 0.2
"""How long :func:`idle_cpus` watches the CPUs."""


def affinity_cores() -> int:
    """The CPUs this process may run on (its affinity mask), or every CPU where there is no such call."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _quota_v2(folder: Path) -> float | None:
    """``cpu.max`` of one cgroup v2 folder: ``"max 100000"`` -> None, ``"150000 100000"`` -> 1.5."""
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _quota_v1(folder: Path) -> float | None:
    """``cpu.cfs_quota_us / cpu.cfs_period_us`` of one cgroup v1 ``cpu`` folder; None where -1 (no quota)."""
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _own_paths(proc_cgroup: Path) -> tuple[str | None, str | None]:
    """This process's cgroup path in the v2 hierarchy and in v1's ``cpu`` controller (``/proc/self/cgroup``)."""
    v2 = v1 = None
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None, None
    for line in lines:
        _, controllers, path = (*line.split(":", 2), "", "")[:3]
        if controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    return v2, v1


def _folders(base: Path, path: str | None) -> list[Path]:
    """``base``/``path`` and each folder above it up to ``base`` (a parent's quota caps its children too)."""
    folders = [base]
    parts = [part for part in (path or "").split("/") if part]
    for depth in range(1, len(parts) + 1):
        folders.append(base.joinpath(*parts[:depth]))
    return folders


def cgroup_cpus(root: Path = CGROUP, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (``1.5``), the smallest along its path in v2 and in v1's
    ``cpu`` controller; None where there is none."""
    v2_path, v1_path = _own_paths(proc_cgroup)
    quotas = [_quota_v2(folder) for folder in _folders(root, v2_path)]
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / name).is_dir():
            quotas += [_quota_v1(folder) for folder in _folders(root / name, v1_path)]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """``/proc/stat``'s per-CPU lines: CPU number -> (idle ticks, idle + iowait; all ticks)."""
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and len(fields) >= 4:
            ticks = [int(f) for f in fields[:8]]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
            times[int(name[3:])] = (idle, sum(ticks))
    return times


def idle_between(before: str, after: str, cpus: set[int] | None = None) -> float | None:
    """How many of ``cpus`` (default: all) sat idle between two readings of ``/proc/stat``, in CPUs (1.5: one
    and a half); None where the readings say nothing (no per-CPU lines, no time passed)."""
    first, second = cpu_times(before), cpu_times(after)
    idle = 0.0
    seen = False
    for cpu in sorted(set(first) & set(second) & (cpus if cpus is not None else set(second))):
        total = second[cpu][1] - first[cpu][1]
        if total > 0:
            idle += (second[cpu][0] - first[cpu][0]) / total
            seen = True
    return idle if seen else None


def idle_cpus(stat: Path = PROC_STAT, window: float = IDLE_WINDOW_S) -> float | None:
    """The CPUs of this process's affinity mask left idle over ``window`` seconds (None where unknown)."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        before = stat.read_text()
        time.sleep(window)
        after = stat.read_text()
    except OSError:
        return None
    return idle_between(before, after, cpus)


def default_threads(
    root: Path = CGROUP, proc_cgroup: Path = PROC_CGROUP, stat: Path = PROC_STAT, window: float = IDLE_WINDOW_S
) -> int:
    """The cores this process may use (its affinity mask capped by its cgroup CPU quota, rounded down) that other
    processes leave idle (``idle_cpus``, rounded to the nearest), at least 1. One thread per core that others
    keep busy would make every parallel region wait for a thread the kernel has set aside."""
    cores = affinity_cores()
    quota = cgroup_cpus(root, proc_cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    idle = idle_cpus(stat, window) if cores > 1 else None
    if idle is not None:
        cores = min(cores, max(1, math.floor(idle + 0.5)))
    return cores


def _positive(value: str, name: str) -> int:
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ConfigError(f"{name}={value!r}: give a whole number of threads, 1 or more")
    return count


def chosen_threads(threads: int | None = None) -> int:
    """The thread count: ``threads`` if given, else ``BERTKIT_THREADS``, else ``OMP_NUM_THREADS``, else
    :func:`default_threads`."""
    if threads is not None:
        return _positive(str(threads), "--threads")
    for name in (ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value:
            return _positive(value, name)
    return default_threads()


def passive_wait() -> None:
    """OpenMP threads sleep when idle instead of spinning (``OMP_WAIT_POLICY=PASSIVE``), unless the environment
    already names a policy. Call before torch is imported; later it changes nothing."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def use_threads(threads: int | None = None) -> int:
    """Set torch's intra-op thread count to :func:`chosen_threads` (``threads`` if given); returns the count.
    The graph engines (ONNX Runtime, OpenVINO) take torch's count when they are put behind a model."""
    import torch

    count = chosen_threads(threads)
    if torch.get_num_threads() != count:
        torch.set_num_threads(count)
    return count
