"""What the commands take as a new user gives it: blank lines, texts as arguments, unquoted globs, and the
one-line hints bad inputs get (each names the real problem and its fix, exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bertkit.cli import main
from bertkit.inference import embed


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


# ------------------------------------------------------------------------------------------------ embed
def test_embed_keeps_a_row_for_every_line_blank_ones_as_the_empty_text(encoder_dir, capsys, tmp_path):
    lines = tmp_path / "in.txt"
    lines.write_text("hello world\n\n\nthe end\n", encoding="utf-8")
    code, _, err = _cli(capsys, "embed", "--model", str(encoder_dir), "-i", str(lines), "-o", str(tmp_path / "v.npy"))
    assert code == 0, err
    vectors = np.load(tmp_path / "v.npy")
    assert vectors.shape[0] == 4
    expected = embed(["hello world", "", "", "the end"], str(encoder_dir))
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    np.testing.assert_allclose(vectors[1], embed([""], str(encoder_dir))[0], atol=1e-5)


def test_embed_takes_texts_as_arguments_and_prints_json_lines_without_output(encoder_dir, capsys, tmp_path):
    code, out, err = _cli(capsys, "embed", "--model", str(encoder_dir), "a first text", "", "a second")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [row["text"] for row in rows] == ["a first text", "", "a second"]
    expected = embed(["a first text", "", "a second"], str(encoder_dir))
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-5)
    code, _, err = _cli(capsys, "embed", "--model", str(encoder_dir), "-i", str(tmp_path / "x.txt"), "some text")
    assert code == 2 and "not both" in err


def test_embed_of_an_empty_file_says_so(encoder_dir, capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    code, _, err = _cli(capsys, "embed", "--model", str(encoder_dir), "-i", str(empty))
    assert code == 2 and "empty" in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------ bad-input hints
SQUAD = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "john lived in paris.", "qas": []}]}]}


def _inputs(tmp_path):
    """Each bad input of a new user, written to a file: (name, path)."""
    files = {
        "utf16.txt": ("Hello world. This is a test.\n" * 20).encode("utf-16"),
        "binary.dat": bytes(range(256)) * 8,
        "semicolon.csv": b'sentence;label\n"a good film";pos\n"a bad film";neg\n',
        "lists.jsonl": b'{"sentence": "good film", "label": ["pos"]}\n{"sentence": "bad", "label": ["neg"]}\n',
        "squad.json": json.dumps(SQUAD).encode(),
        "hf.toml": b"learning_rate = 3e-5\n",
        "words.txt": b"the cat sat on the mat. the dog sat on the log.\n" * 20,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["embed", "-m", "{model}", "-i", "{dir}/utf16.txt"],
            r"UTF-16 text, not UTF-8: convert it first \(iconv -f utf-16",
        ),
        (["embed", "-m", "{model}", "-i", "{dir}/binary.dat"], r"a binary file \(a NUL byte at byte 0\), not text"),
        (["tokenizer", "train", "-i", "{dir}/utf16.txt", "-o", "{dir}/tok"], "skipped .*utf16.txt: UTF-16 text"),
        (["tokenizer", "train", "-i", "{dir}/words.txt", "-o", "{dir}/tok", "--vocab-size", "10"], "no room for words"),
        (["finetune", "--task", "embedding", "--train", "{dir}/squad.json"], "is a SQuAD file.*--task qa.*from-squad"),
        (["finetune", "--config", "{dir}/hf.toml", "--train", "{dir}/semicolon.csv"], "did you mean 'lr'"),
        (["finetune", "--task", "classification", "--train", "{dir}/semicolon.csv"], "separated by ';', not ','"),
        (["finetune", "--task", "classification", "--train", "{dir}/lists.jsonl"], r"holds lists \(\[\"pos\"\]\)"),
        (["answer", "-m", "{model}", "-q", "who lived there?", "--context", ""], "--context is empty"),
    ],
    ids=["utf16", "binary", "utf16-corpus", "vocab-size", "squad-embedding", "toml-key", "semicolon", "lists", "ctx"],
)
def test_bad_inputs_get_one_line_naming_the_fix(encoder_dir, tmp_path, capsys, args, message):
    where = _inputs(tmp_path)
    argv = [a.replace("{model}", str(encoder_dir)).replace("{dir}", str(where)) for a in args]
    if argv[0] == "finetune":
        argv += ["--model", str(encoder_dir), "--output", str(tmp_path / "out"), "--no-progress"]
    code, _, err = _cli(capsys, *argv)
    lines = [line for line in err.splitlines() if line.startswith("bertkit: error:")]
    assert code == 2 and len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]
    assert "latin1" not in err and "--text-column" not in err


# ------------------------------------------------------------------------------------ globs and folders
def test_an_unquoted_glob_gives_several_paths_to_one_flag(tmp_path, capsys):
    from bertkit.cli.program import spread_paths
    from bertkit.tokenizer import Tokenizer

    (tmp_path / "a.txt").write_text("alpha beta gamma. alpha beta gamma.\n" * 30, encoding="utf-8")
    (tmp_path / "b.txt").write_text("zebra yonder xylophone. zebra yonder.\n" * 30, encoding="utf-8")
    args = ["tokenizer", "train", "-i", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "-o", str(tmp_path / "t")]
    code, _, err = _cli(capsys, *args, "--vocab-size", "120", "--min-frequency", "1")
    assert code == 0, err
    vocab = Tokenizer.from_pretrained(tmp_path / "t").vocab
    assert "alpha" in vocab and "zebra" in vocab  # both files were read
    assert spread_paths(["prepare-data", "-i", "a", "b", "--output", "o", "-i", "c", "d"]) == [
        "prepare-data", "-i", "a", "-i", "b", "--output", "o", "-i", "c", "-i", "d",
    ]  # fmt: skip
    assert spread_paths(["tokenizer", "extend", "--corpus", "a", "b"])[-2:] == ["--corpus", "b"]
    assert spread_paths(["embed", "-i", "a", "b"]) == ["embed", "-i", "a", "b"]  # texts as arguments stay


def test_a_corpus_folders_manifest_is_not_a_book(tmp_path):
    from bertkit.data.corpus.inputs import expand_inputs

    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "11-0.txt").write_text("A book.\n", encoding="utf-8")
    (tmp_path / "MANIFEST.tsv").write_text("file\ttitle\n11-0.txt\tAlice\n", encoding="utf-8")
    assert expand_inputs([tmp_path]) == [tmp_path / "books" / "11-0.txt"]
    assert expand_inputs([tmp_path / "MANIFEST.tsv"]) == [tmp_path / "MANIFEST.tsv"]  # named, it is read


# ------------------------------------------------------------------------------------------ small things
ROOT = Path(__file__).resolve().parents[1]


def test_docs_and_help_name_paths_a_user_has(capsys):
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert "../shared/data" not in page.read_text(encoding="utf-8"), page.name
    for command in (["tokenizer", "train"], ["prepare-data"], ["embed"]):
        assert main([*command, "--help"]) == 0
        assert "../shared" not in capsys.readouterr().out


def test_the_serving_peers_install_inside_the_repository_and_git_ignores_them():
    import subprocess

    default = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("INFINITY_VENV"))
    folder = default.split("?=")[1].strip()
    assert not Path(folder).is_absolute() and ".." not in Path(folder).parts
    ignored = subprocess.run(["git", "check-ignore", "-q", f"{folder}/bin/python"], cwd=ROOT, check=False)
    assert ignored.returncode == 0
