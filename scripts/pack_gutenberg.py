"""Copy Project Gutenberg books into the repository: licence header and footer cut off, gzip-compressed.

    python scripts/pack_gutenberg.py --output data/books ../shared/data/gutenberg/books/pg174.txt ...

Each ``NAME.txt`` becomes ``OUTPUT/NAME.txt.gz`` holding only the text between the ``*** START OF`` and
``*** END OF`` lines (the whole file where those lines are missing). The archive has no timestamp or file
name inside, so packing the same book twice gives the same bytes. The corpus reader reads ``.gz`` directly.
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path

START = re.compile(r"^\W{0,3}\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
END = re.compile(
    r"^\W{0,3}(\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|End of (the )?Project Gutenberg)", re.IGNORECASE
)


def book_text(path: Path) -> str:
    """The book between the Gutenberg markers (line endings normalised to ``\\n``)."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if START.match(line.strip())), 0)
    end = next((i for i in range(start, len(lines)) if END.match(lines[i].strip())), len(lines))
    return "\n".join(lines[start:end]).strip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("books", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    for book in args.books:
        target = args.output / f"{book.stem}.txt.gz"
        data = gzip.compress(book_text(book).encode("utf-8"), compresslevel=9, mtime=0)
        target.write_bytes(data)
        print(f"{target}: {book.stat().st_size:,} -> {len(data):,} bytes")


if __name__ == "__main__":
    main()
