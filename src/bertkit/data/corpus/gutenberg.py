"""Project Gutenberg boilerplate: the license header before a book and the footer after it.

When a ``*** START OF THE PROJECT GUTENBERG ...`` line appears in a file's first lines, everything up to it
is the license header and is dropped, and everything from an end marker (``*** END OF THE PROJECT
GUTENBERG``, ``End of (the) Project Gutenberg ...`` or an old ``***START**THE SMALL PRINT`` block) up to the
next start marker is dropped, so concatenated books work too. Files without a start marker are untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from bertkit.data.corpus.options import CorpusStats

START = re.compile(rb"^\W{0,3}\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
END = re.compile(
    rb"^\W{0,3}(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg"
    rb"|\*+\s*START\*+\s*THE SMALL PRINT)",
    re.IGNORECASE,
)


def has_start(head: list[bytes]) -> bool:
    """Whether the file's first lines hold a start marker (only then is anything stripped)."""
    return any(START.match(line) for line in head)


def after_start(head: list[bytes]) -> list[bytes]:
    """The lines after the first start marker (what format sniffing should look at)."""
    for i, line in enumerate(head):
        if START.match(line):
            return head[i + 1 :]
    return head


def book_lines(lines: Iterable[bytes], stats: CorpusStats) -> Iterator[bytes | None]:
    """The lines inside books, with ``None`` where a book starts or ends (a document boundary)."""
    inside = False
    for line in lines:
        if START.match(line):
            inside = True
            stats.gutenberg_books += 1
            yield None
        elif inside and END.match(line):
            inside = False
            yield None
        elif inside:
            yield line
