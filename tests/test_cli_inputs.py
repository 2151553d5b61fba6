"""What the commands take as a new user gives it: blank lines, texts as arguments, unquoted globs, and the
one-line hints bad inputs get (each names the real problem and its fix, exit 2)."""

from __future__ import annotations

import json

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
