"""Every benchmark script runs in its smoke mode (``--smoke``: tiny inputs, a few steps, the result in a
temporary folder), so that none can rot unnoticed: each test runs one script's ``main(argv)`` in this process
and checks the result it wrote."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
SUPPORT = {"harness", "machine_info", "smoke_inputs"}  # modules the scripts share, not scripts

Check = Callable[[Path, str], None]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_unpad(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["ms_per_step"]) == {"random, padded", "random, unpadded", "same tokens, no padding"}
    assert "random, unpadded:" in stdout


def check_train_step(out: Path, stdout: str) -> None:
    (row,) = read(out)["results"]
    assert row["size"] == "tiny" and row["speedup"] > 0 and 0 < row["bertkit"]["mfu"]
    assert "HF sdpa tok/s" in stdout


CHECKS: dict[str, tuple[str, Check]] = {
    # script: (result file name, what its result must hold)
    "bench_unpad": ("unpad.json", check_unpad),
    "bench_train_step": ("train_step.json", check_train_step),
}


def scripts() -> list[str]:
    return sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in SUPPORT)


@pytest.fixture
def benchmarks_importable() -> Iterator[None]:
    """The scripts import their shared modules by name, as they do when run as ``python benchmarks/x.py``; the
    torch thread count a script sets is put back."""
    sys.path.insert(0, str(BENCHMARKS))
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        sys.path.remove(str(BENCHMARKS))
        torch.set_num_threads(threads)


def load(script: str) -> ModuleType:
    return importlib.import_module(script)


def test_every_script_has_a_smoke_test():
    assert sorted(CHECKS) == scripts()


@pytest.mark.parametrize("script", scripts())
def test_smoke(script: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmarks_importable: None) -> None:
    if script not in CHECKS:
        pytest.fail(f"benchmarks/{script}.py has no smoke check in CHECKS")
    name, check = CHECKS[script]
    out = tmp_path / name
    assert load(script).main(["--smoke", "--output", str(out)]) in (0, None)
    check(out, capsys.readouterr().out)


def test_a_smoke_run_never_writes_into_the_results_folder(benchmarks_importable: None) -> None:
    harness = load("harness")
    args = harness.argparse.Namespace(smoke=True, output=str(harness.RESULTS / "x.json"))
    with pytest.raises(SystemExit, match="does not write into"):
        harness.output_path(args, harness.RESULTS / "x.json")
    args.output = None
    assert not harness.output_path(args, harness.RESULTS / "x.json").resolve().is_relative_to(harness.RESULTS)
