"""``bertkit serve`` on a port it cannot have: one line naming the fix and exit code 2, through the command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")


def serve(model: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bertkit", "serve", "--model", str(model), *flags],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def one_line(got: subprocess.CompletedProcess) -> str:
    assert got.returncode == 2, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    return lines[0]


def test_a_port_in_use_is_one_line_and_exit_2(encoder_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line(serve(encoder_dir, "--port", str(port)))
    assert (
        line == f"bertkit: error: port {port} on 127.0.0.1 is in use by another process; stop it or give another --port"
    )


def test_an_address_this_machine_lacks_is_one_line_and_exit_2(encoder_dir):
    line = one_line(serve(encoder_dir, "--host", "8.8.8.8", "--port", "8000"))
    assert line == (
        "bertkit: error: --host 8.8.8.8 is not an address of this machine; give one of its addresses, "
        "or 0.0.0.0 for all"
    )


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_a_port_out_of_range_is_refused(encoder_dir, port):
    line = one_line(serve(encoder_dir, "--port", port))
    assert line == f"bertkit: error: --port {port} is not a TCP port; give one from 1 to 65535 (e.g. --port 8000)"


def test_an_unresolvable_host_is_one_line(encoder_dir):
    line = one_line(serve(encoder_dir, "--host", "no-such-host.invalid", "--port", "8000"))
    assert line.startswith("bertkit: error: --host no-such-host.invalid is not an address or a name this machine")
