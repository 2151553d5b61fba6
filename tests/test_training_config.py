"""Every option declared once: config files, CLI options and help from the dataclasses; epochs vs max_steps;
precision resolved at the entry point; MFU against the datasheet peak of the precision that runs."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from typer.core import TyperGroup, TyperOption
from typer.main import get_command

from bertkit.cli import app, main
from bertkit.cli.options import field_docs, help_text
from bertkit.data import CorpusOptions, PrepareConfig
from bertkit.errors import ConfigError
from bertkit.option_groups import option_leaves
from bertkit.training import pretrain as pretrain_module
from bertkit.training import run_log
from bertkit.training.finetune import FinetuneConfig
from bertkit.training.finetune_defaults import DEFAULTS
from bertkit.training.pretrain import PretrainConfig, build_config, pretrain
from bertkit.training.run_log import DATASHEET_PEAKS, datasheet_peak, measure_matmul_peak, mfu_peak
from bertkit.training.train_config import TrainConfig, option_names, read_config_file
from training_helpers import make_pretraining_dataset

# Every flag of `bertkit pretrain` / `bertkit finetune` in use before the options were generated (tests, docs,
# configs, README, demo, benchmarks): each must keep working.
PRETRAIN_FLAGS = [
    "--config",
    "-c",
    "--data",
    "--model-config",
    "--output",
    "-o",
    "--init-from",
    "--micro-batch-size",
    "--global-batch-size",
    "--grad-accum-steps",
    "--lr",
    "--warmup-steps",
    "--warmup-ratio",
    "--max-steps",
    "--max-time",
    "--optimizer",
    "--schedule",
    "--weight-decay",
    "--clip-grad-norm",
    "--precision",
    "--seed",
    "--eval-every",
    "--eval-batches",
    "--save-every",
    "--keep-last",
    "--log-every",
    "--resume",
    "--resume-from",
    "--device",
    "--num-workers",
    "--attn-implementation",
    "--fsdp",
    "--no-fsdp",
    "--progress",
    "--no-progress",
]
FINETUNE_FLAGS = [
    "--config",
    "-c",
    "--task",
    "-t",
    "--model",
    "-m",
    "--train",
    "--dev",
    "--output",
    "-o",
    "--epochs",
    "--max-steps",
    "--lr",
    "--micro-batch-size",
    "--global-batch-size",
    "--max-seq-length",
    "--warmup-ratio",
    "--schedule",
    "--weight-decay",
    "--seed",
    "--precision",
    "--text-column",
    "--text-pair-column",
    "--label-column",
    "--main-metric",
    "--doc-stride",
    "--early-stopping-patience",
    "--eval-batch-size",
    "--max-train-examples",
    "--group-by-length",
    "--random-batches",
    "--save-every",
    "--device",
    "--resume",
    "--overwrite",
    "--progress",
    "--no-progress",
]
PREPARE_DATA_FLAGS = [
    "--input",
    "-i",
    "--tokenizer",
    "-t",
    "--output",
    "-o",
    "--max-seq-length",
    "--dupe-factor",
    "--short-seq-prob",
    "--masked-lm-prob",
    "--max-predictions-per-seq",
    "--masking",
    "--whole-word-mask",
    "--seed",
    "--workers",
    "--eval-fraction",
    "--eval-unit-sentences",
    "--format",
    "--text-field",
    "--keep-gutenberg-boilerplate",
    "--block-mb",
    "--shard-index",
    "--num-shards",
    "--quiet",
    "-q",
]


# ------------------------------------------------------------------------------------------ config files
def read_pretrain_file(path):
    return read_config_file(path, PretrainConfig)


def read_finetune_file(path):
    return read_config_file(path, FinetuneConfig)


@pytest.mark.parametrize("read", [read_pretrain_file, read_finetune_file], ids=["pretrain", "finetune"])
def test_both_readers_take_flat_and_nested_training_keys(read, tmp_path):
    (tmp_path / "flat.toml").write_text("micro-batch-size = 8\nlr = 0.001\n")
    (tmp_path / "nested.toml").write_text("[train]\nmicro_batch_size = 8\nlr = 0.001\n")
    assert read(tmp_path / "flat.toml") == read(tmp_path / "nested.toml") == {"micro_batch_size": 8, "lr": 0.001}


@pytest.mark.parametrize("read", [read_pretrain_file, read_finetune_file], ids=["pretrain", "finetune"])
@pytest.mark.parametrize("text", ["micro_bach_size = 8\n", "[train]\nmicro_bach_size = 8\n"])
def test_an_unknown_key_names_the_closest_known_one(read, text, tmp_path):
    (tmp_path / "typo.toml").write_text(text)
    with pytest.raises(
        ConfigError,
        match=r"typo.toml: unknown option 'micro_bach_size' \(did you mean "
        r"'micro_batch_size'\?\)",
    ):
        read(tmp_path / "typo.toml")


def test_each_reader_knows_its_own_command_fields(tmp_path):
    (tmp_path / "pre.toml").write_text('model_config = "tiny"\n')
    (tmp_path / "ft.toml").write_text('task = "ner"\ntrain = "t.txt"\ndev = "d.txt"\n[task_options]\ndoc_stride = 8\n')
    assert read_pretrain_file(tmp_path / "pre.toml") == {"model_config": "tiny"}
    assert read_finetune_file(tmp_path / "ft.toml") == {
        "task": "ner",
        "train_file": "t.txt",
        "dev_file": "d.txt",
        "task_options": {"doc_stride": 8},
    }
    with pytest.raises(ConfigError, match="'model_config'"):
        read_finetune_file(tmp_path / "pre.toml")
    with pytest.raises(ConfigError, match="'task'"):
        read_pretrain_file(tmp_path / "ft.toml")


def test_derived_fields_are_no_options():
    assert {"output_dir", "extra", "max_steps_from"}.isdisjoint(option_names(TrainConfig))
    with pytest.raises(ConfigError, match="'output_dir'"):
        build_config({"data": "d", "output": "o", "max_steps": 1, "output_dir": "elsewhere"})


# ------------------------------------------------------------------------------------------ CLI <-> fields
def _params(name: str) -> dict[str, TyperOption]:
    group = get_command(app)
    assert isinstance(group, TyperGroup)
    command = group.commands[name]
    options = {}
    with group.make_context("bertkit", [name], resilient_parsing=True) as ctx:
        for p in command.get_params(ctx):
            assert isinstance(p, TyperOption) and p.name is not None, p  # the commands take options only
            if p.name != "help":
                options[p.name] = p
    return options


@pytest.mark.parametrize(
    "name,flags", [("pretrain", PRETRAIN_FLAGS), ("finetune", FINETUNE_FLAGS), ("prepare-data", PREPARE_DATA_FLAGS)]
)
def test_every_flag_in_use_still_exists(name, flags):
    declared = {opt for p in _params(name).values() for opt in (*p.opts, *p.secondary_opts)}
    assert sorted(set(flags) - declared) == []


@pytest.mark.parametrize(
    "name,classes,skip",
    [
        ("pretrain", (PretrainConfig, TrainConfig), {"resume"}),
        ("finetune", (FinetuneConfig, TrainConfig), {"best_metric", "best_mode", "task_options"}),
        ("prepare-data", (PrepareConfig, CorpusOptions), {"inputs", "corpus", "block_bytes", "strip_gutenberg"}),
    ],
)
def test_each_field_is_an_option_with_its_docstring_and_default(name, classes, skip):
    params = _params(name)
    seen: set[str] = set()
    for cls in classes:
        for leaf in option_leaves(cls):  # option groups walked: a leaf by its flat name
            option, field = leaf.name, leaf.field
            if option in seen or option in skip or option == "train":
                continue
            seen.add(option)
            param = params[option]
            assert param.help is not None, option
            assert param.help.startswith(help_text(field_docs(leaf.owner)[field.name])), option
            assert param.default is None, f"{option}: the dataclass fills defaults, not the CLI"
            expected = DEFAULTS["all"][option] if name == "finetune" and option in DEFAULTS["all"] else field.default
            if expected not in (None, dataclasses.MISSING):
                if isinstance(expected, bool):
                    shown = "on" if expected else "off"
                else:
                    shown = f"{expected:g}" if isinstance(expected, float) else str(expected)
                assert f"(default: {shown}" in param.help, (option, param.help)
    if name == "finetune":
        assert params["micro_batch_size"].help is not None
        assert (
            "(default: 32; qa 12; embedding 64; at most 16 below 10,000 training examples; never resized for --task embedding)"
            in params["micro_batch_size"].help
        )


@pytest.mark.parametrize("name", ["pretrain", "finetune", "prepare-data"])
def test_help_lists_every_option_with_its_help(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    assert main([name, "--help"]) == 0
    out = capsys.readouterr().out
    for param in _params(name).values():
        assert param.opts[0] in out and param.help and help_text(param.help)[:30] in " ".join(out.split())


# ------------------------------------------------------------------------------------------ epochs vs max_steps
def test_epochs_and_max_steps_resolve_to_the_limit_that_comes_first():
    first = TrainConfig.from_options(epochs=1, max_steps=25).for_epoch(10)
    assert (first.duration.max_steps, first.duration.max_steps_from) == (10, "epochs")
    steps = TrainConfig.from_options(epochs=3, max_steps=25).for_epoch(10)
    assert (steps.duration.max_steps, steps.duration.max_steps_from) == (25, "max_steps")
    # epochs count micro-batches per process; an update takes `accumulation` of them
    accumulated = TrainConfig.from_options(epochs=1.5, micro_batch_size=4, global_batch_size=16).for_epoch(
        10, world_size=2
    )
    assert (accumulated.duration.max_steps, accumulated.duration.max_steps_from) == (8, "epochs")
    alone = TrainConfig.from_options(max_steps=7)
    assert alone.for_epoch(3) is alone


# ------------------------------------------------------------------------------------------ precision and MFU
def test_datasheet_peaks_by_device_name_and_precision():
    assert datasheet_peak("NVIDIA H100 80GB HBM3", "bf16") == 989e12 == datasheet_peak("NVIDIA H200", "fp16")
    assert datasheet_peak("NVIDIA H100 PCIe", "fp32") == 494.5e12
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", "bf16") == 312e12 and datasheet_peak("A100", "fp32") == 156e12
    assert datasheet_peak("Tesla T4", "bf16") is None
    assert set(DATASHEET_PEAKS) == {"A100", "H100", "H200"}


def test_mfu_is_against_the_datasheet_peak_of_the_precision_that_runs():
    measured: list[torch.dtype] = []

    def fake_measure(device: torch.device, dtype: torch.dtype) -> float:
        measured.append(dtype)
        return 123e12

    table = {"FakeGPU": {"bf16": 400e12, "fp16": 400e12, "fp32": 100e12}}
    cuda = torch.device("cuda")
    for precision, peak in (("bf16", 400e12), ("fp16", 400e12), ("fp32", 100e12)):
        found = mfu_peak(cuda, precision, device_name="FakeGPU 80GB", table=table, measure=fake_measure)
        assert (found.flops, found.measured) == (peak, 123e12) and "datasheet FakeGPU" in found.source
    assert measured == [torch.bfloat16, torch.float16, torch.float32]  # the second figure at the same precision
    unknown = mfu_peak(cuda, "bf16", device_name="OtherGPU", table=table, measure=fake_measure)
    assert unknown.flops == 123e12 and unknown.source.startswith("measured")
    cpu = mfu_peak(torch.device("cpu"), "fp32", table=table, measure=fake_measure)
    assert cpu.flops == 123e12 and cpu.source == "measured fp32 matmul"


def test_the_matmul_peak_stays_small_where_the_dtype_is_slow(monkeypatch):
    """A dtype the CPU emulates (bf16 without bf16 instructions) is measured at a size one product of which
    takes a fraction of the time asked for, not at the full 2048."""
    sizes: list[int] = []
    clock = [0.0]

    def slow_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        sizes.append(a.shape[0])
        clock[0] += 0.05 * (a.shape[0] / 256) ** 3  # 256: 0.05 s, 512: 0.4 s
        return a

    monkeypatch.setattr(run_log.torch, "mm", slow_mm)
    monkeypatch.setattr(run_log.time, "perf_counter", lambda: clock[0])
    flops = measure_matmul_peak("cpu", torch.float32, seconds=1.0)
    assert max(sizes) == 512 and flops == pytest.approx(2 * 512**3 / 0.4)
    sizes.clear()
    measure_matmul_peak("cpu", torch.float32, size=1024, seconds=1.0)  # a size given is kept
    assert set(sizes) == {1024}


def test_the_matmul_peak_is_the_fastest_product_not_the_mean_under_load(monkeypatch):
    """Other jobs on the cores slow some products down; their time is not the hardware's, so the peak is the
    rate of the fastest product (else the peak reads low and the MFU high)."""
    clock = [0.0]
    durations = iter([0.5, 0.5] + [0.1, 0.4, 0.4, 0.4] * 10)  # two warm-ups, then one product in four unhindered

    def loaded_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        clock[0] += next(durations)
        return a

    monkeypatch.setattr(run_log.torch, "mm", loaded_mm)
    monkeypatch.setattr(run_log.time, "perf_counter", lambda: clock[0])
    assert measure_matmul_peak("cpu", torch.float32, size=1024, seconds=1.0) == pytest.approx(2 * 1024**3 / 0.1)


def test_pretrain_resolves_auto_once_and_measures_the_peak_at_it(tmp_path, monkeypatch):
    data = make_pretraining_dataset(tmp_path / "d", n_train=16, n_eval=0, seq=16, vocab=40)
    asked: list[tuple[str, str]] = []

    def fake_peak(device: torch.device, precision: str):
        asked.append((device.type, precision))
        return mfu_peak(device, precision, measure=lambda d, t: 1e12)

    monkeypatch.setattr(pretrain_module, "mfu_peak", fake_peak)
    config = build_config(
        {
            "data": str(data),
            "output": str(tmp_path / "o"),
            "model_config": "tiny",
            "micro_batch_size": 4,
            "max_steps": 1,
            "progress": False,
            "tensorboard": False,
            "plot": False,
            "precision": "auto",
        }
    )
    result = pretrain(config)
    assert asked == [("cpu", "fp32")]
    saved = json.loads((tmp_path / "o" / "pretrain_config.json").read_text())["train"]
    assert saved["precision"] == "fp32" and saved["peak_flops"] == 1e12
    assert "mfu" in next(r for r in result.history if r["split"] == "train")


def test_pretrain_ends_at_the_first_of_epochs_and_max_steps(tmp_path):
    data = make_pretraining_dataset(tmp_path / "d", n_train=16, n_eval=0, seq=16, vocab=40)  # 4 micro-batches of 4

    def run(name: str, **limits: object):
        return pretrain(
            build_config(
                {
                    "data": str(data),
                    "output": str(tmp_path / name),
                    "model_config": "tiny",
                    "micro_batch_size": 4,
                    "progress": False,
                    "tensorboard": False,
                    "plot": False,
                    "peak_flops": 1e12,
                    **limits,
                }
            )
        )

    by_epochs = run("epochs", epochs=1, max_steps=25)
    assert (by_epochs.step, by_epochs.stop_reason) == (4, "epochs")
    by_steps = run("steps", epochs=2, max_steps=3)
    assert (by_steps.step, by_steps.stop_reason) == (3, "max_steps")
