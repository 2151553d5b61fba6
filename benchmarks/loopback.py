"""A ``bertkit serve`` process on 127.0.0.1 for the serving benchmarks: a free port, a server started from a
short Python program, waiting until it listens, its resident memory, and stopping it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

HOST = "127.0.0.1"  # loopback only


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return 0
    return 0


def wait_until_listening(server: subprocess.Popen, port: int, seconds: float, log: Path | None = None) -> None:
    """Return once ``port`` accepts connections; exit with the server's log if it dies or ``seconds`` pass."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log else ""
            raise SystemExit(f"the server exited with {server.returncode} {tail}")
        try:
            with socket.create_connection((HOST, port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the server did not listen on {HOST}:{port} within {seconds:.0f} s")


@contextmanager
def server(
    program: str, argv: list[str], port: int, startup_s: float, log: IO[str] | None = None, threads: str = ""
) -> Iterator[subprocess.Popen]:
    """``python -c program ARGV`` (a program that serves on ``port``), listening when the block starts and
    terminated when it ends. ``threads``: its OMP_NUM_THREADS (default: this process's)."""
    env = {**os.environ, **({"OMP_NUM_THREADS": threads} if threads else {})}
    process = subprocess.Popen([sys.executable, "-c", program, *argv], stdout=log, stderr=log, env=env)
    try:
        wait_until_listening(process, port, startup_s, Path(log.name) if log else None)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
