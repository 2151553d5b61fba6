"""What commands read from files or stdin and how they print: input lines, JSON, warnings."""

from __future__ import annotations

import sys

from bertkit.cli.program import fail
from bertkit.formats import read_text, text_lines


def read_lines(path: str, *, keep_blank: bool = False) -> list[str]:
    """Non-empty lines of a UTF-8 text file, or of stdin when ``path`` is ``-``; with ``keep_blank``, every
    line (a blank one as ``""``), so that the n-th result belongs to the n-th line as ``wc -l`` counts them."""
    from pathlib import Path

    if path == "-":
        text = sys.stdin.read()
    else:
        file = Path(path)
        if not file.exists():
            fail(f"input file {path} does not exist")
        if not file.is_file():
            fail(f"input {path} is a directory, not a file; give a text file with one input per line")
        text = read_text(file)
    lines = text_lines(text, keep_blank=keep_blank)
    if not lines:
        fail(f"{'stdin' if path == '-' else path} is empty: give one input per line")
    return lines


def print_json(obj: object) -> None:
    """One JSON line on stdout, non-ASCII text as it is."""
    import json

    print(json.dumps(obj, ensure_ascii=False))


def warn(line: str) -> None:
    print(f"bertkit: warning: {line}", file=sys.stderr)


def show_library_warnings(prefix: str = "bertkit: ") -> None:
    """bertkit's logged warnings on stderr, one line each after ``prefix`` (its notices keep ``bertkit: ``)."""
    from bertkit.notices import show_on_stderr

    show_on_stderr(warning_prefix=prefix.removeprefix("bertkit: "))
