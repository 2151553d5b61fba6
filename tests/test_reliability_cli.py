"""The bad-input matrix over every CLI subcommand.

Each subcommand gets, in each of its file or directory arguments, a missing path, the wrong kind of path
(a directory for a file, a file for a directory), an empty file or directory, and binary garbage; and
some contradictory options. Every case must exit with code 2, print exactly one error line (``bertkit:
error: ...`` or click's ``Error: ...`` usage line), no traceback, and leave no output behind.
"""

from __future__ import annotations

import os

import pytest

from bertkit.cli import app, main

GARBAGE = bytes(range(256)) * 3 + b"\x00\xff\xfe" * 50
SPARSE_BYTES = 1 << 30
"""A file of NUL bytes this long is refused after a prefix: reading it whole would show in memory."""


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """Valid inputs, so that each case breaks exactly one thing."""
    from bertkit.models.bert import BertForPreTraining
    from inference_helpers import make_tokenizer, save_model
    from training_helpers import make_pretraining_dataset

    root = tmp_path_factory.mktemp("cli")
    tok = make_tokenizer(root / "tok")
    model = save_model(root / "model", BertForPreTraining, tok)
    (root / "lines.txt").write_text("the cat sat on the mat\nhello world\n", encoding="utf-8")
    (root / "pairs.txt").write_text("the cat sat\tthen i slept\n", encoding="utf-8")
    (root / "train.tsv").write_text("sentence\tlabel\n" + "good movie\tpos\nbad movie\tneg\n" * 4, encoding="utf-8")
    (root / "qa.jsonl").write_text('{"question": "who?", "context": "john smith lived in paris"}\n', encoding="utf-8")
    data = make_pretraining_dataset(root / "data", n_train=16, n_eval=4, seq=16, vocab=40)
    (root / "empty.txt").write_text("")
    (root / "garbage.bin").write_bytes(GARBAGE)
    with (root / "sparse.txt").open("wb") as sparse:  # NUL bytes that take no disk: what `truncate -s` makes
        sparse.truncate(SPARSE_BYTES)
    (root / "a_dir").mkdir()
    (root / "empty_dir").mkdir()
    junk = root / "junk_dir"  # a directory whose expected files are all garbage
    junk.mkdir()
    for name in (
        "config.json",
        "model.safetensors",
        "vocab.txt",
        "tokenizer.json",
        "dataset.json",
        "tokenizer_config.json",
        "block-000000.json",
    ):
        (junk / name).write_bytes(GARBAGE)
    return {
        "root": str(root),
        "model": str(model),
        "tok": str(root / "tok"),
        "lines": str(root / "lines.txt"),
        "pairs": str(root / "pairs.txt"),
        "train": str(root / "train.tsv"),
        "qa": str(root / "qa.jsonl"),
        "data": str(data),
    }


FILE_KINDS = {
    "missing": "does/not/exist.txt",
    "directory": "a_dir",
    "empty": "empty.txt",
    "garbage": "garbage.bin",
    "nul": "sparse.txt",
}
DIR_KINDS = {"missing": "does/not/exist", "file": "garbage.bin", "empty": "empty_dir", "junk": "junk_dir"}

# (command, argument template); {BAD} is the broken path, {OUT} a fresh output path, {x} valid inputs.
FILE_ARGS = [
    ("retrieval-from-squad-input", ["retrieval", "from-squad", "--input", "{BAD}", "--output", "{OUT}"]),
    (
        "retrieval-mine-negatives-input",
        ["retrieval", "mine-negatives", "--model", "{model}", "--input", "{BAD}", "--output", "{OUT}"],
    ),
    ("tokenizer-train-input", ["tokenizer", "train", "--input", "{BAD}", "--output", "{OUT}", "--vocab-size", "60"]),
    (
        "tokenizer-extend-tokens",
        ["tokenizer", "extend", "--model", "{model}", "--tokens", "{BAD}", "--output", "{OUT}"],
    ),
    (
        "tokenizer-extend-corpus",
        ["tokenizer", "extend", "--model", "{model}", "--corpus", "{BAD}", "--output", "{OUT}", "--min-frequency", "1"],
    ),
    ("embed-input", ["embed", "--model", "{model}", "--input", "{BAD}", "--output", "{OUT}.npy"]),
    ("fill-mask-input", ["fill-mask", "--model", "{model}", "--input", "{BAD}"]),
    ("next-sentence-input", ["next-sentence", "--model", "{model}", "--input", "{BAD}"]),
    ("classify-input", ["classify", "--model", "{model}", "--input", "{BAD}"]),
    ("tag-input", ["tag", "--model", "{model}", "--input", "{BAD}"]),
    ("answer-context", ["answer", "--model", "{model}", "-q", "who?", "--context-file", "{BAD}"]),
    ("answer-input", ["answer", "--model", "{model}", "--input", "{BAD}"]),
    ("pretrain-config", ["pretrain", "--config", "{BAD}", "--data", "{data}", "--output", "{OUT}"]),
    (
        "finetune-train",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{model}",
            "--train",
            "{BAD}",
            "--output",
            "{OUT}",
            "--no-progress",
        ],
    ),
    (
        "finetune-dev",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{model}",
            "--train",
            "{train}",
            "--dev",
            "{BAD}",
            "--output",
            "{OUT}",
            "--no-progress",
        ],
    ),
    ("finetune-config", ["finetune", "--config", "{BAD}", "--model", "{model}", "--output", "{OUT}"]),
    ("evaluate-data", ["evaluate", "--model", "{model}", "--input", "{BAD}", "--task", "classification"]),
    (
        "predict-input",
        ["predict", "--model", "{model}", "--input", "{BAD}", "--output", "{OUT}.jsonl", "--task", "classification"],
    ),
    (
        "prepare-data-input",
        ["prepare-data", "--input", "{BAD}", "--tokenizer", "{tok}", "--output", "{OUT}", "--workers", "1", "--quiet"],
    ),
]
DIR_ARGS = [
    ("evaluate-retrieval-data", ["evaluate", "--task", "retrieval", "--model", "{model}", "--data", "{BAD}"]),
    ("tokenize-model", ["tokenize", "--model", "{BAD}", "hello"]),
    ("tokenizer-extend-model", ["tokenizer", "extend", "--model", "{BAD}", "--tokens", "{lines}", "--output", "{OUT}"]),
    ("embed-model", ["embed", "--model", "{BAD}", "--input", "{lines}", "--output", "{OUT}.npy"]),
    ("fill-mask-model", ["fill-mask", "--model", "{BAD}", "hello [MASK]"]),
    ("next-sentence-model", ["next-sentence", "--model", "{BAD}", "a", "b"]),
    ("classify-model", ["classify", "--model", "{BAD}", "hello"]),
    ("tag-model", ["tag", "--model", "{BAD}", "hello"]),
    ("answer-model", ["answer", "--model", "{BAD}", "-q", "who?", "-c", "john lived"]),
    ("attention-model", ["attention", "--model", "{BAD}", "hello"]),
    ("serve-model", ["serve", "--model", "{BAD}", "--port", "1"]),
    ("export-onnx-model", ["export", "onnx", "--model", "{BAD}", "--output", "{OUT}.onnx"]),
    ("convert-model", ["convert", "--model", "{BAD}", "--output", "{OUT}"]),
    ("pretrain-data", ["pretrain", "--data", "{BAD}", "--output", "{OUT}", "--model-config", "tiny"]),
    ("pretrain-init", ["pretrain", "--data", "{data}", "--init-from", "{BAD}", "--output", "{OUT}"]),
    (
        "finetune-model",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{BAD}",
            "--train",
            "{train}",
            "--output",
            "{OUT}",
            "--no-progress",
        ],
    ),
    ("evaluate-model", ["evaluate", "--model", "{BAD}", "--input", "{train}"]),
    (
        "distill-teacher",
        ["distill", "--teacher", "{BAD}", "--train", "{train}", "--student", "1", "--output", "{OUT}", "--no-progress"],
    ),
    ("predict-model", ["predict", "--model", "{BAD}", "--input", "{train}", "--output", "{OUT}.jsonl"]),
    (
        "prepare-data-tokenizer",
        [
            "prepare-data",
            "--input",
            "{lines}",
            "--tokenizer",
            "{BAD}",
            "--output",
            "{OUT}",
            "--workers",
            "1",
            "--quiet",
        ],
    ),
]
CONTRADICTIONS = [
    (
        "embed-pooling",
        ["embed", "--model", "{model}", "--input", "{lines}", "--output", "{OUT}.npy", "--pooling", "sum"],
    ),
    ("embed-output", ["embed", "--model", "{model}", "--input", "{lines}", "--output", "{OUT}.txt"]),
    (
        "embed-long-text",
        ["embed", "--model", "{model}", "--input", "{lines}", "--output", "{OUT}.npy", "--long-text", "slide"],
    ),
    ("embed-layers", ["embed", "--model", "{model}", "--input", "{lines}", "--output", "{OUT}.npy", "--layers", "7,x"]),
    ("fill-mask-both", ["fill-mask", "--model", "{model}", "--input", "{lines}", "hello [MASK]"]),
    ("fill-mask-top-k", ["fill-mask", "--model", "{model}", "--top-k", "0", "hello [MASK]"]),
    ("next-sentence-one", ["next-sentence", "--model", "{model}", "only one"]),
    ("answer-nothing", ["answer", "--model", "{model}"]),
    ("attention-layer", ["attention", "--model", "{model}", "--layer", "99", "hello"]),
    ("export-onnx-head", ["export", "onnx", "--model", "{model}", "--output", "{OUT}.onnx", "--head", "NoSuchHead"]),
    ("convert-in-place", ["convert", "--model", "{model}", "--output", "{model}"]),
    ("convert-head", ["convert", "--model", "{model}", "--output", "{OUT}", "--head", "NoSuchHead"]),
    ("tokenizer-extend-nothing", ["tokenizer", "extend", "--model", "{model}", "--output", "{OUT}"]),
    (
        "tokenizer-extend-in-place",
        ["tokenizer", "extend", "--model", "{model}", "--tokens", "{lines}", "--output", "{model}"],
    ),
    (
        "tokenizer-extend-max",
        [
            "tokenizer",
            "extend",
            "--model",
            "{model}",
            "--corpus",
            "{lines}",
            "--output",
            "{OUT}",
            "--max-new-tokens",
            "-1",
        ],
    ),
    ("tokenizer-train-vocab", ["tokenizer", "train", "--input", "{lines}", "--output", "{OUT}", "--vocab-size", "0"]),
    (
        "pretrain-resume-both",
        ["pretrain", "--data", "{data}", "--output", "{OUT}", "--resume", "--resume-from", "{OUT}"],
    ),
    (
        "pretrain-batch",
        ["pretrain", "--data", "{data}", "--output", "{OUT}", "--micro-batch-size", "4", "--global-batch-size", "6"],
    ),
    ("pretrain-precision", ["pretrain", "--data", "{data}", "--output", "{OUT}", "--precision", "fp7"]),
    ("pretrain-max-time", ["pretrain", "--data", "{data}", "--output", "{OUT}", "--max-time", "soon"]),
    (
        "finetune-resume-overwrite",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{model}",
            "--train",
            "{train}",
            "--output",
            "{OUT}",
            "--resume",
            "--overwrite",
        ],
    ),
    (
        "finetune-task",
        ["finetune", "--task", "poetry", "--model", "{model}", "--train", "{train}", "--output", "{OUT}"],
    ),
    (
        "finetune-schedule",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{model}",
            "--train",
            "{train}",
            "--output",
            "{OUT}",
            "--schedule",
            "sideways",
        ],
    ),
    (
        "finetune-epochs",
        [
            "finetune",
            "--task",
            "classification",
            "--model",
            "{model}",
            "--train",
            "{train}",
            "--output",
            "{OUT}",
            "--epochs",
            "-1",
        ],
    ),
    ("evaluate-task", ["evaluate", "--model", "{model}", "--input", "{train}", "--task", "poetry"]),
    (
        "prepare-data-shards",
        [
            "prepare-data",
            "--input",
            "{lines}",
            "--tokenizer",
            "{tok}",
            "--output",
            "{OUT}",
            "--shard-index",
            "3",
            "--num-shards",
            "2",
            "--quiet",
        ],
    ),
    (
        "prepare-data-prob",
        [
            "prepare-data",
            "--input",
            "{lines}",
            "--tokenizer",
            "{tok}",
            "--output",
            "{OUT}",
            "--masked-lm-prob",
            "2",
            "--quiet",
        ],
    ),
    (
        "prepare-data-masking",
        [
            "prepare-data",
            "--input",
            "{lines}",
            "--tokenizer",
            "{tok}",
            "--output",
            "{OUT}",
            "--masking",
            "sometimes",
            "--quiet",
        ],
    ),
    ("demo-missing-corpus", ["demo", "--output", "{OUT}", "--corpus", "{root}/does/not/exist"]),
    ("serve-limits", ["serve", "--model", "{model}", "--max-items", "0", "--port", "1"]),
    ("unknown-option", ["embed", "--model", "{model}", "--no-such-option"]),
]

CASES = (
    [(f"{name}[{kind}]", args, where) for name, args in FILE_ARGS for kind, where in FILE_KINDS.items()]
    + [(f"{name}[{kind}]", args, where) for name, args in DIR_ARGS for kind, where in DIR_KINDS.items()]
    + [(name, args, None) for name, args in CONTRADICTIONS]
)


def test_every_subcommand_is_in_the_matrix():
    from typer.main import get_command

    def names(group, prefix=""):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from names(command, prefix + name + "-")
            else:
                yield prefix + name

    covered = {name.split("[")[0] for name, _, _ in CASES}
    for command in names(get_command(app)):
        assert any(c.startswith(command) for c in covered), f"{command} has no bad-input case"


@pytest.mark.parametrize("name,template,bad", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line_and_no_output(env, tmp_path, capsys, monkeypatch, name, template, bad):
    def never_serve(*args, **kwargs):
        raise AssertionError("the server started on bad input")

    try:
        import uvicorn
    except ImportError:  # without the serve extra, `serve` fails before it could start anything
        pass
    else:
        monkeypatch.setattr(uvicorn, "run", never_serve)
    out = tmp_path / "out" / "result"
    values = {**env, "OUT": str(out), "BAD": os.path.join(env["root"], bad) if bad else ""}
    args = [part.format(**values) for part in template]
    code = main(args)
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("bertkit: error:", "Error:"))]
    assert code == 2, f"exit {code}; stderr: {captured.err[-800:]}; stdout: {captured.out[-300:]}"
    assert len(errors) == 1 and "Traceback" not in captured.err, captured.err[-800:]
    assert len(errors[0]) < 400, errors[0]
    leftovers = sorted(p.name for p in out.parent.glob("*")) if out.parent.exists() else []
    assert leftovers == [], f"partial output left behind: {leftovers}"


# ------------------------------------------------------------------------------- evaluate --input / --data
@pytest.fixture(scope="module")
def classifier(env, tmp_path_factory) -> str:
    from bertkit.models.bert import BertForSequenceClassification
    from bertkit.tokenizer import Tokenizer
    from inference_helpers import save_model

    root = tmp_path_factory.mktemp("classifier")
    tok = Tokenizer.from_pretrained(env["tok"])
    return str(save_model(root / "model", BertForSequenceClassification, tok, id2label={0: "neg", 1: "pos"}))


@pytest.mark.parametrize("flag", ["--input", "-i"])
def test_evaluate_reads_input(env, classifier, capsys, flag):
    import json

    code = main(["evaluate", "--model", classifier, flag, env["train"], "--task", "classification"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "accuracy" in json.loads(captured.out)


def test_evaluate_help_shows_input_not_data(capsys):
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["evaluate", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "--input" in result.output and "--data" not in result.output


@pytest.mark.parametrize(
    "args,expected",
    [([], "--input FILE")],
    ids=["neither"],
)
def test_evaluate_input_mistakes_name_the_flag(env, classifier, capsys, args, expected):
    code = main(["evaluate", "--model", classifier, *[a.format(**env) for a in args]])
    err = capsys.readouterr().err
    assert code == 2 and err.count("bertkit: error:") == 1 and expected in err, err


# ------------------------------------------------------------------------- option mistakes name their flag
FINETUNE = ["finetune", "--task", "classification", "--model", "{model}", "--train", "{train}", "--output", "{OUT}"]
OPTION_MISTAKES = [
    ([*FINETUNE, "--warmup-ratio", "2"], "--warmup-ratio"),
    ([*FINETUNE, "--max-seq-length", "2"], "--max-seq-length"),
    ([*FINETUNE, "--global-batch-size", "8", "--grad-accum-steps", "2"], "--global-batch-size"),
    (
        ["pretrain", "--data", "{data}", "--model-config", "tiny", "--weight-decay", "-1", "--output", "{OUT}"],
        "--weight-decay",
    ),
    (["fill-mask", "--model", "{model}", "--top-k", "0", "the [MASK] sat"], "--top-k"),
    (
        [
            "embed",
            "--model",
            "{model}",
            "--input",
            "{lines}",
            "--output",
            "{OUT}.npy",
            "--window-stride",
            "0",
            "--long-text",
            "windows",
        ],
        "--window-stride",
    ),
]


@pytest.mark.parametrize("template,flag", OPTION_MISTAKES, ids=[flag for _, flag in OPTION_MISTAKES])
def test_option_mistakes_name_the_flag_to_change(env, tmp_path, capsys, template, flag):
    values = {**env, "OUT": str(tmp_path / "out")}
    args = [part.format(**values) for part in template]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err[-500:]
    assert flag in err.strip().splitlines()[-1], err[-500:]


# ------------------------------------------------------------------- a large binary file, in bounded memory
NUL_CASES = [(name, args) for name, args in FILE_ARGS if not name.startswith(("evaluate", "predict"))]
FINETUNED_NUL_CASES = [
    ("evaluate", ["evaluate", "--model", "{classifier}", "--input", "{BAD}", "--task", "classification"]),
    ("predict", ["predict", "--model", "{classifier}", "--input", "{BAD}", "--output", "{OUT}.jsonl"]),
]


@pytest.mark.parametrize(
    "name,template", NUL_CASES + FINETUNED_NUL_CASES, ids=[c[0] for c in NUL_CASES + FINETUNED_NUL_CASES]
)
def test_a_file_of_nul_bytes_is_named_for_what_it_is(env, classifier, tmp_path, capsys, name, template):
    """Every reader of user files says the same thing of a file of NUL bytes, in one line, exit 2: what it is
    (never "UTF-16 text", never an empty result)."""
    values = {
        **env,
        "classifier": classifier,
        "OUT": str(tmp_path / "out"),
        "BAD": os.path.join(env["root"], "sparse.txt"),
    }
    code = main([part.format(**values) for part in template])
    err = capsys.readouterr().err
    assert code == 2, err[-800:]
    assert err.count("bertkit: error:") == 1 and "NUL bytes from byte 0" in err and "UTF-16" not in err, err


MEMORY_HEADROOM = 400 << 20
"""Address space a command may add once its libraries are imported: less than the sparse file it is given."""
LIMITED = """
import resource, sys
import bertkit.cli, bertkit.inference, bertkit.data.prepare, bertkit.training.finetune, bertkit.training.distill
size = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (size + int(sys.argv[1]), resource.RLIM_INFINITY))
sys.exit(bertkit.cli.main(sys.argv[2:]))
"""
MEMORY_CASES = [
    ("embed", ["embed", "--model", "{model}", "--input", "{BAD}"]),
    ("classify", ["classify", "--model", "{classifier}", "--input", "{BAD}"]),
    ("predict", ["predict", "--model", "{classifier}", "--input", "{BAD}", "--output", "{OUT}.jsonl"]),
    ("finetune", [*FINETUNE[:6], "{BAD}", "--output", "{OUT}", "--no-progress"]),
    ("prepare-data", ["prepare-data", "--input", "{BAD}", "--tokenizer", "{tok}", "--output", "{OUT}", "--quiet"]),
    ("tokenizer-train", ["tokenizer", "train", "--input", "{BAD}", "--output", "{OUT}", "--vocab-size", "60"]),
]


@pytest.mark.parametrize("name,template", MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_a_large_binary_input_is_refused_in_bounded_memory(env, classifier, tmp_path, name, template):
    """The command runs with less address space to spare than the file's size: reading the file whole (or
    tokenizing it) would fail with MemoryError; it reads a prefix, refuses in one line and exits 2."""
    import subprocess
    import sys

    assert SPARSE_BYTES > 2 * MEMORY_HEADROOM
    values = {
        **env,
        "classifier": classifier,
        "OUT": str(tmp_path / "out"),
        "BAD": os.path.join(env["root"], "sparse.txt"),
    }
    args = [part.format(**values) for part in template]
    done = subprocess.run(
        [sys.executable, "-c", LIMITED, str(MEMORY_HEADROOM), *args],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-800:]
    assert done.stderr.count("bertkit: error:") == 1 and "NUL bytes from byte 0" in done.stderr, done.stderr[-800:]


# ------------------------------------------------------------------------------- plain text and long inputs
def test_predict_reads_a_txt_file_as_one_text_per_line_as_classify_does(env, classifier, tmp_path, capsys):
    """``predict --input texts.txt`` takes the first line as a text, not as a table header: the same rows,
    and the same labels, as ``classify --input texts.txt --json``."""
    import json

    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\n\nthe cat sat on the mat\nhello world\n", encoding="utf-8")
    out = tmp_path / "p.jsonl"
    assert main(["predict", "--model", classifier, "--input", str(texts), "--output", str(out)]) == 0
    predicted = [json.loads(line) for line in out.read_text().splitlines()]
    assert "plain text, one text per line" in capsys.readouterr().err
    assert main(["classify", "--model", classifier, "--input", str(texts), "--json"]) == 0
    classified = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (
        [p["text"] for p in predicted]
        == [c["text"] for c in classified]
        == ["a good film", "the cat sat on the mat", "hello world"]
    )
    assert [p["label"] for p in predicted] == [c["label"] for c in classified]


def test_classify_says_how_many_inputs_it_cut_and_the_flag(env, classifier, caplog):
    """The notice (a ``bertkit`` log line, which the command shows on stderr) counts the cut inputs."""
    long = " ".join(["hello"] * 300)
    with caplog.at_level("INFO", logger="bertkit"):
        assert main(["classify", "--model", classifier, long, "hello world", long]) == 0
        assert "2 of 3 examples were cut at max_seq_length" in caplog.text and "--max-seq-length" in caplog.text
        caplog.clear()
        assert (
            main(["classify", "--model", classifier, "--max-seq-length", "8", "one two three four five six seven"]) == 0
        )
        assert "1 of 1 examples were cut at max_seq_length 8" in caplog.text
        caplog.clear()
        assert main(["classify", "--model", classifier, "--long-text", "windows", long]) == 0  # scored whole
        assert "were cut" not in caplog.text


@pytest.fixture(scope="module")
def tagger_and_reader(env, tmp_path_factory) -> tuple[str, str]:
    from bertkit.models.bert import BertForQuestionAnswering, BertForTokenClassification
    from bertkit.tokenizer import Tokenizer
    from inference_helpers import save_model

    root = tmp_path_factory.mktemp("tagger")
    tok = Tokenizer.from_pretrained(env["tok"])
    tagger = save_model(root / "ner", BertForTokenClassification, tok, id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    return str(tagger), str(save_model(root / "qa", BertForQuestionAnswering, tok))


@pytest.mark.parametrize("command", ["embed", "classify", "tag", "answer"])
def test_every_inference_command_takes_the_length_its_cut_line_names(command, capsys):
    """The cut lines say "raise --max-seq-length": every command that prints one takes that flag."""
    assert main([command, "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "--max-seq-length" in help_text and "--window-stride" in help_text
    assert ("--long-text" in help_text) == (command in ("embed", "classify"))  # tag and answer always window


def test_tag_and_answer_cut_at_the_length_they_are_given(env, tagger_and_reader, caplog):
    tagger, reader = tagger_and_reader
    word = "play" + "ing" * 10  # one word of 11 word pieces: it cannot fit a window of 8 tokens
    with caplog.at_level("INFO", logger="bertkit"):
        assert main(["tag", "--model", tagger, "--json", f"hello {word}"]) == 0
        assert "were cut" not in caplog.text  # it fits the model's own length
        assert main(["tag", "--model", tagger, "--max-seq-length", "8", "--window-stride", "2", f"hello {word}"]) == 0
        assert "1 of 1 examples were cut at max_seq_length 8 (raise --max-seq-length)" in caplog.text
        caplog.clear()
        question = ["-q", "who lived in the big old house by the sea ?", "-c", "john lived there."]
        assert main(["answer", "--model", reader, *question]) == 0
        assert "were cut" not in caplog.text
        assert main(["answer", "--model", reader, "--max-query-length", "4", "--max-seq-length", "32", *question]) == 0
        assert "1 of 1 questions were cut at max_query_length 4 (raise --max-query-length)" in caplog.text


def test_a_model_fine_tuned_short_says_which_length_it_reads(env, classifier, tmp_path, caplog):
    """Fine-tuned at 16 tokens, a model of 128 positions says once that it reads 16, and which flag changes it."""
    import json
    import shutil

    model = tmp_path / "short"
    shutil.copytree(classifier, model)
    config = json.loads((model / "config.json").read_text())
    config["bertkit_finetune"] = {"task": "classification", "max_seq_length": 16}
    (model / "config.json").write_text(json.dumps(config))
    stated = "the model was fine-tuned at 16 tokens and takes up to 128: inputs are read at 16 tokens"
    with caplog.at_level("INFO", logger="bertkit"):
        assert main(["classify", "--model", str(model), "hello world", "the cat sat"]) == 0
        assert caplog.text.count(stated) == 1 and "--max-seq-length (max_length=) changes that" in caplog.text
        caplog.clear()
        assert main(["classify", "--model", str(model), "--max-seq-length", "64", "hello world"]) == 0
        assert main(["classify", "--model", classifier, "hello world"]) == 0  # read at its full length
        assert "fine-tuned at" not in caplog.text


def test_classify_streams_a_file_chunk_by_chunk_in_order(env, classifier, tmp_path, capsys, monkeypatch):
    """A file is read, classified and printed a chunk of lines at a time, with the model loaded once: the same
    lines, in order, as classifying the texts given whole."""
    import bertkit.inference
    from bertkit.cli import inference as commands

    texts = ["a good film", "the cat sat", "hello world", "bad movie", "the mat"]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    assert main(["classify", "--model", classifier, *texts]) == 0
    whole = capsys.readouterr().out
    loads, load = [], bertkit.inference.load
    calls, classify = [], bertkit.inference.classify

    def counted_load(*args, **kwargs):
        loads.append(args)
        return load(*args, **kwargs)

    def counted_classify(items, *args, **kwargs):
        calls.append(items)
        return classify(items, *args, **kwargs)

    monkeypatch.setattr(commands, "STREAM_LINES", 2)
    monkeypatch.setattr(bertkit.inference, "load", counted_load)
    monkeypatch.setattr(bertkit.inference, "classify", counted_classify)
    assert main(["classify", "--model", classifier, "--input", str(tmp_path / "in.txt")]) == 0
    assert capsys.readouterr().out == whole and len(loads) == 1 and [len(c) for c in calls] == [2, 2, 1]
