"""The command's jobs as Python functions (``bertkit.prepare_data``, ``pretrain``, ``finetune``, ``distill``,
``evaluate``, ``predict``, ``tokenize``): the same options under the same names, listed in their signatures,
results a program can read, and bertkit's lines through ``logging``."""

from __future__ import annotations

import inspect
import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import pytest

import bertkit
from bertkit.errors import ConfigError
from bertkit.notices import LOGGER, StderrHandler
from inference_helpers import WORDS, polarity_setup

QUIET = dict(tensorboard=False, plot=False)


@pytest.fixture(scope="module")
def polarity(tmp_path_factory) -> dict[str, Path]:
    return polarity_setup(tmp_path_factory.mktemp("polarity"), copies=4)


@pytest.fixture
def quiet_bertkit():
    """The ``bertkit`` logger at ERROR, as a program that wants no chatter sets it (restored after)."""
    logger = logging.getLogger(LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def test_prepare_then_pretrain_as_the_commands_do(tokenizer, tmp_path):
    rng = random.Random(0)
    text = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(200))
    (tmp_path / "corpus.txt").write_text(text + "\n", encoding="utf-8")
    tokenizer.save_pretrained(tmp_path / "tok")
    prepared = bertkit.prepare_data(
        tmp_path / "corpus.txt", tmp_path / "tok", tmp_path / "data", max_seq_length=32, dupe_factor=1,
        eval_fraction=0.2, eval_unit_sentences=8, workers=1, block_mb=0.002, seed=None,
    )  # fmt: skip
    meta = json.loads((tmp_path / "data" / "dataset.json").read_text(encoding="utf-8"))
    assert prepared.complete and prepared.train_instances == meta["splits"]["train"]["num_instances"] > 0
    assert prepared.eval_instances > 0 and f"to {tmp_path / 'data'} (complete)" in prepared.summary()

    result = bertkit.pretrain(
        prepared.output, tmp_path / "run", model_config="tiny", micro_batch_size=4, max_steps=2, lr=1e-3,
        eval_batches=1, **QUIET,
    )  # fmt: skip
    assert result.step == 2 and result.stop_reason == "max_steps"
    assert (tmp_path / "run" / "final" / "config.json").is_file()
    with pytest.raises(ConfigError, match="not both"):
        bertkit.pretrain(prepared.output, tmp_path / "run", resume=True, resume_from=tmp_path / "run")


def test_finetune_then_evaluate_take_the_command_options(polarity, tmp_path, caplog):
    result = bertkit.finetune(
        task="classification", model=polarity["model"], train=polarity["train"], dev=polarity["train"],
        output=tmp_path / "out", epochs=1, micro_batch_size=8, lr=1e-3, text_column="sentence",
        label_column="label", seed=3, threads=1, **QUIET,
    )  # fmt: skip
    assert result.output == tmp_path / "out" and set(result.metrics) >= {"accuracy"}
    assert result.num_train_examples == 16 and "2 updates; lr 0.001" in caplog.text  # epochs, lr reached the run

    scores = bertkit.evaluate(
        tmp_path / "out", polarity["train"], text_column="sentence", label_column="label",
        output=tmp_path / "metrics.json",
    )  # fmt: skip
    assert scores["accuracy"] == pytest.approx(result.metrics["accuracy"])
    assert json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8")) == scores
    with pytest.raises(ConfigError, match="--split goes with --task retrieval"):
        bertkit.evaluate(tmp_path / "out", polarity["train"], split="test")


@pytest.mark.parametrize(
    ("job", "names"),
    [
        ("finetune", {"task", "train", "dev", "threads", "lr", "epochs", "micro_batch_size", "text_column", "resume"}),
        ("pretrain", {"data", "resume", "threads", "lr", "max_steps", "recipe", "masking_rate", "architecture"}),
        ("distill", {"teacher", "train", "threads", "student", "temperature", "alpha", "lr", "epochs", "pooling"}),
        ("prepare_data", {"inputs", "tokenizer", "block_mb", "dupe_factor", "max_seq_length", "text_field"}),
        ("predict", {"model", "input", "output", "task", "batch_size", "backend"}),
        ("tokenize", {"text", "model", "pair"}),
    ],
)
def test_each_job_lists_its_options_in_its_signature_and_help(job, names):
    function = getattr(bertkit, job)
    parameters = inspect.signature(function).parameters
    assert names <= set(parameters), names - set(parameters)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    if job in ("finetune", "pretrain", "distill"):
        assert "    lr: Peak learning rate (after warmup)." in (function.__doc__ or "")
        assert parameters["lr"].default is None and parameters["lr"].kind is inspect.Parameter.KEYWORD_ONLY


def test_tokenize_is_the_commands_rows(encoder_dir):
    encoding = bertkit.tokenize("the cat", encoder_dir, pair="sat")
    assert encoding.tokens[0] == "[CLS]" and encoding.type_ids[-1] == 1 and len(encoding.ids) == len(encoding.offsets)


def test_an_option_of_no_kind_is_refused_by_the_task(polarity, tmp_path):
    with pytest.raises(ConfigError, match="colour"):
        bertkit.finetune("classification", polarity["model"], polarity["train"], tmp_path / "out", colour="red")


def test_a_config_file_gives_what_the_keywords_do_not(polarity, tmp_path):
    from bertkit.jobs import finetune_config

    (tmp_path / "run.toml").write_text(f'task = "classification"\nlr = 2e-5\nmodel = "{polarity["model"]}"\n')
    config = finetune_config(train=polarity["train"], output=tmp_path / "out", config=tmp_path / "run.toml", lr=None)
    assert (config.task, config.train.optimizer.lr, config.train_file) == (
        "classification",
        2e-5,
        str(polarity["train"]),
    )


def test_a_quiet_bertkit_logger_keeps_load_embed_and_finetune_off_stderr(polarity, tmp_path, capfd, quiet_bertkit):
    loaded = bertkit.load(polarity["model"])
    bertkit.embed(["good movie", "bad film"], loaded)
    bertkit.finetune(
        "classification", polarity["model"], polarity["train"], tmp_path / "out", dev=polarity["train"], epochs=1,
        micro_batch_size=8, text_column="sentence", label_column="label", **QUIET,
    )  # fmt: skip
    assert capfd.readouterr().err == ""


def test_the_command_shows_notices_and_progress_as_bertkit_lines(polarity, tmp_path, capfd, caplog):
    bertkit.finetune(
        "classification", polarity["model"], polarity["train"], tmp_path / "out", epochs=1, micro_batch_size=8,
        text_column="sentence", label_column="label", **QUIET,
    )  # fmt: skip
    err = capfd.readouterr().err
    assert f"bertkit: wrote the fine-tuned model to {tmp_path / 'out'}" in err
    wrote = [r for r in caplog.records if r.getMessage().startswith("wrote the fine-tuned model")]
    assert [r.name for r in wrote] == ["bertkit.training.finetune"]  # each module logs on its own logger
    assert "train: 2/2 step (100%)" in err  # the progress display's last line


def test_without_logging_configured_warnings_show_and_info_does_not():
    program = (
        "import logging; from bertkit.notices import notice; from bertkit.progress import Progress\n"
        "notice('read 12 rows'); notice('the eval split holds no instances', logging.WARNING)\n"
        "with Progress(3, desc='train', interval=0) as p: p.update(3)"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stderr == "the eval split holds no instances\n"  # Python's last-resort handler: warnings only


def test_warnings_carry_the_prefix_the_command_asks_for():
    handler = StderrHandler("warning: ")
    record = logging.LogRecord("bertkit.x", logging.WARNING, __file__, 1, "cut %d inputs", (3,), None)
    assert handler.format(record) == "bertkit: warning: cut 3 inputs"
    record.levelno = logging.INFO
    assert handler.format(record) == "bertkit: cut 3 inputs"
