"""Options a run cannot use are refused before anything runs: one line naming the flag, exit code 2.

Numbers out of their declared range (non-finite, negative, zero, above 1 for a rate), options that do not apply
to the architecture or the device, and paths of the wrong kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bertkit.cli import main
from training_helpers import make_pretraining_dataset


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("refusals")
    data = make_pretraining_dataset(root / "data", n_train=16, n_eval=4, seq=16, vocab=40, nsp=False)
    (root / "train.tsv").write_text("sentence\tlabel\ngood\tpos\nbad\tneg\n", encoding="utf-8")
    (root / "texts.txt").write_text("a text\n", encoding="utf-8")
    return {"data": str(data), "train": str(root / "train.tsv"), "texts": str(root / "texts.txt"), "root": str(root)}


def refusal(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The one line of a refused command (exit code 2)."""
    code = main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


PRETRAIN = ["pretrain", "--data", "{data}", "--output", "{root}/run", "--max-steps", "2", "--model-config", "tiny"]
FINETUNE = ["finetune", "--task", "classification", "--model", "{root}/model", "--train", "{train}", "--output"]
DISTILL = ["distill", "--teacher", "{root}/teacher", "--train", "{train}", "--output", "{root}/distilled"]

NUMBERS = [
    ([*PRETRAIN, "--lr", "nan"], "--lr must be a finite number > 0, got nan"),
    ([*PRETRAIN, "--lr", "-1"], "--lr must be > 0, got -1.0"),
    ([*PRETRAIN, "--micro-batch-size", "0"], "--micro-batch-size must be >= 1, got 0"),
    ([*PRETRAIN, "--warmup-ratio", "1.5"], "--warmup-ratio must be in [0, 1), got 1.5"),
    ([*PRETRAIN, "--masking-rate", "inf"], "--masking-rate must be a finite number in (0, 1), got inf"),
    ([*PRETRAIN, "--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
    ([*PRETRAIN, "--adam-beta2", "1"], "--adam-beta2 must be in [0, 1), got 1.0"),
    ([*DISTILL, "--temperature", "nan"], "--temperature must be a finite number > 0, got nan"),
    ([*DISTILL, "--temperature", "0"], "--temperature must be > 0, got 0.0"),
    ([*DISTILL, "--alpha", "1.5"], "--alpha must be in [0, 1], got 1.5"),
    ([*FINETUNE, "{root}/ft", "--epochs", "0"], "--epochs must be > 0, got 0.0"),
    ([*FINETUNE, "{root}/ft", "--eval-batch-size", "-3"], "--eval-batch-size must be >= 1, got -3"),
    ([*FINETUNE, "{root}/ft", "--scale", "nan"], "--scale must be a finite number > 0, got nan"),
    (["embed", "--model", "{root}/m", "--input", "{texts}", "--batch-size", "0"], "--batch-size must be >= 1, got 0"),
    (["fill-mask", "--model", "{root}/m", "a [MASK]", "--top-k", "0"], "--top-k must be >= 1, got 0"),
    (
        [
            "prepare-data",
            "--input",
            "{texts}",
            "--tokenizer",
            "{root}/tok",
            "--output",
            "{root}/p",
            "--dupe-factor",
            "0",
        ],
        "--dupe-factor must be >= 1, got 0",
    ),
]


@pytest.mark.parametrize(("args", "message"), NUMBERS, ids=[" ".join(a[0:1] + a[-2:]) for a, _ in NUMBERS])
def test_a_number_out_of_range_is_one_line_naming_the_flag(inputs, capsys, args, message):
    line = refusal(capsys, [a.format(**inputs) for a in args])
    assert line.endswith(message), line
    assert not Path(inputs["root"], "run").exists()


NOT_APPLICABLE = [
    (
        ["--architecture", "modernbert", "--layer-norm-position", "post"],
        "--layer-norm-position does not apply to ModernBERT",
    ),
    (["--attn-implementation", "flex"], "--attn-implementation flex is not one of BERT's: sdpa, eager"),
    (["--architecture", "modernbert", "--attn-implementation", "eager"], "not one of ModernBERT's: sdpa, flex"),
    (
        ["--architecture", "modernbert", "--attn-implementation", "varlen", "--device", "cpu"],
        "--attn-implementation varlen runs on CUDA only (FlashAttention), not on cpu",
    ),
    (
        ["--architecture", "modernbert", "--attn-implementation", "flex", "--device", "cpu"],
        "--attn-implementation flex trains on CUDA only (PyTorch's FlexAttention has no backward on cpu); use sdpa",
    ),
]


@pytest.mark.parametrize(("extra", "message"), NOT_APPLICABLE, ids=[" ".join(e) for e, _ in NOT_APPLICABLE])
def test_an_option_the_architecture_or_device_does_not_read_is_refused(inputs, capsys, extra, message):
    line = refusal(capsys, [a.format(**inputs) for a in [*PRETRAIN, *extra]])
    assert message in line, line
    assert not Path(inputs["root"], "run").exists()
