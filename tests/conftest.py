"""What every test module shares: each worker's share of the cores, and the tiny tokenizer and model.

The fixtures here are built once per test process (session scope) and are read-only: a test that changes
a model directory or the tokenizer builds its own from ``inference_helpers``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from bertkit.models.bert import BertModel
from bertkit.notices import show_on_stderr
from bertkit.tokenizer import Tokenizer
from device_mode import test_device
from inference_helpers import make_tokenizer, save_model


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default=None,
        help="cpu | cuda | cuda:N: where the model, training, inference and service tests run their models "
        "(default: $BERTKIT_TEST_DEVICE, else cpu)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # The device test mode: the choice goes into the environment, where test helpers and child processes read it.
    chosen = config.getoption("--device") or os.environ.get("BERTKIT_TEST_DEVICE") or "cpu"
    if chosen.startswith("cuda") and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {chosen}: torch {torch.__version__} sees no CUDA device here")
    os.environ["BERTKIT_TEST_DEVICE"] = chosen
    # Under `pytest -n N` each worker takes its share of the cores: N processes that each start one thread
    # per core spend their time waiting on one another. Child processes (the CLI, torchrun) inherit it.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, len(os.sched_getaffinity(0)) // int(workers))
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Under `make test` (xdist, one file at a time per worker, in collection order) the files that hold a
    # test marked slow go first, so that no worker starts a minute-long file while the other has nothing left.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        slow_files = {item.path for item in items if item.get_closest_marker("slow")}
        items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the tests that take this fixture run their models: the CPU, or the GPU of ``pytest --device cuda``."""
    return test_device()


@pytest.fixture(autouse=True)
def bertkit_lines_on_stderr() -> None:
    """bertkit's notices and progress on stderr as the ``bertkit`` command shows them, where tests read them
    (a test that quiets the ``bertkit`` logger gets it back at INFO for the next one)."""
    show_on_stderr(warning_prefix="")


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    """The hand-written uncased WordPiece vocabulary of ``inference_helpers`` (ids fixed by its order)."""
    return make_tokenizer(tmp_path_factory.mktemp("vocab"))


@pytest.fixture(scope="session")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer: Tokenizer) -> Path:
    """A tiny random-init encoder (seed 0, no task head) saved with ``tokenizer``: the model tests start from."""
    return save_model(tmp_path_factory.mktemp("encoder") / "model", BertModel, tokenizer)
