"""What every benchmark records about where it ran: CPU model and features, cores, torch threads, GPU, load,
commit."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo (``platform.processor()`` is often empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit() -> str:
    """The checked-out commit of this repository, or ``unknown`` outside a git checkout."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine() -> dict:
    """The machine as benchmarks report it; the load average says how much else was running."""
    import torch  # here, so that cpu_model/git_commit cost nothing to benchmarks that avoid torch

    from bertkit.cpu_features import describe

    return {
        "cpu": cpu_model(),
        "cpu_features": describe(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def record() -> dict:
    """The machine and the commit, as a result file records them."""
    return {**machine(), "commit": git_commit()}
