"""Corpus reading: formats, Gutenberg cleaning, bad files counted and skipped, blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.data.corpus import (
    CorpusOptions,
    CorpusStats,
    document_sentences,
    expand_inputs,
    iter_blocks,
    read_documents,
    split_sentences,
)
from bertkit.errors import DataError

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def docs(path, **kw):
    stats = CorpusStats()
    out = list(read_documents([path], CorpusOptions(**kw), stats))
    return out, stats


def test_bert_line_format_documents_and_sentences(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("First sentence.\nSecond one.\n\n\nOther doc.\r\n\nThird doc here.\n", encoding="utf-8")
    out, stats = docs(f, format="lines")
    assert [d.texts for d in out] == [["First sentence.", "Second one."], ["Other doc."], ["Third doc here."]]
    assert stats.line_files == 1 and stats.documents == 3


def test_auto_format_sniffing(tmp_path):
    bert = tmp_path / "bert.txt"
    bert.write_text("".join("One sentence here.\nAnother one follows.\nAnd a third.\n\n" for _ in range(5)))
    unwrapped = tmp_path / "unwrapped.txt"
    unwrapped.write_text("".join("A whole paragraph on one line. It has sentences.\n\n" for _ in range(5)))
    assert docs(bert)[1].line_files == 1
    assert docs(unwrapped)[1].prose_files == 1


def test_prose_rejoins_wrapped_lines_and_splits_sentences(tmp_path):
    f = tmp_path / "book.txt"
    f.write_text(
        "It was a dark\nand stormy night. The rain fell\nin torrents.\n\nMr. Smith said\nnothing.\n", encoding="utf-8"
    )
    out, stats = docs(f)
    assert stats.prose_files == 1 and len(out) == 1
    assert out[0].texts == ["It was a dark and stormy night. The rain fell in torrents.", "Mr. Smith said nothing."]
    assert document_sentences(out[0]) == [
        "It was a dark and stormy night.",
        "The rain fell in torrents.",
        "Mr. Smith said nothing.",
    ]


GUTENBERG = """\ufeffThe Project Gutenberg EBook of Test, by Nobody
This eBook is for the use of anyone anywhere at no cost and with almost
no restrictions whatsoever.

*** START OF THIS PROJECT GUTENBERG EBOOK TEST ***

The real text begins
here. It has two sentences.

End of the Project Gutenberg EBook of Test
*** END OF THIS PROJECT GUTENBERG EBOOK TEST ***
Section 1. General Terms of Use and Redistributing Project Gutenberg-tm
license text that must never be trained on.
"""


def test_gutenberg_header_and_footer_are_stripped_even_when_concatenated(tmp_path):
    f = tmp_path / "pg.txt"
    f.write_text(GUTENBERG + GUTENBERG, encoding="utf-8")
    out, stats = docs(f)
    assert stats.gutenberg_books == 2 and len(out) == 2
    for d in out:
        assert d.texts == ["The real text begins here. It has two sentences."]
    kept, _ = docs(f, strip_gutenberg=False)
    assert any("license" in t for d in kept for t in d.texts)


def test_file_without_markers_is_untouched(tmp_path):
    f = tmp_path / "plain.txt"
    f.write_text("End of the Project Gutenberg discussion.\nStill text.\n", encoding="utf-8")
    out, stats = docs(f, format="lines")
    assert out[0].texts == ["End of the Project Gutenberg discussion.", "Still text."]
    assert stats.gutenberg_books == 0


def test_bad_inputs_are_counted_and_skipped(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.txt").write_bytes(b"\n\n  \n")
    (tmp_path / "bin.dat").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    (tmp_path / "latin1.txt").write_bytes("Good line.\nCaf\xe9 line.\nAnother good.\n".encode("latin-1"))
    stats = CorpusStats()
    out = list(read_documents(expand_inputs([tmp_path]), CorpusOptions(format="lines"), stats))
    assert stats.empty_files == 2 and stats.binary_files == 1 and stats.invalid_utf8_lines == 1
    assert [d.texts for d in out] == [["Good line.", "Another good."]]
    assert len(stats.warnings()) == 3 and len(stats.skipped) == 3


def test_jsonl_documents_and_malformed_records(tmp_path):
    f = tmp_path / "c.jsonl"
    lines = [
        json.dumps({"text": "One. Two.\n\nThree."}),
        "{not json",
        json.dumps({"body": "x"}),
        json.dumps({"text": "Solo."}),
    ]
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, stats = docs(f)
    assert stats.jsonl_files == 1 and stats.bad_jsonl_records == 2
    assert [document_sentences(d) for d in out] == [["One.", "Two.", "Three."], ["Solo."]]


def test_expand_inputs_errors_and_globs(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("y\n")
    (tmp_path / ".hidden").write_text("z\n")
    assert [p.name for p in expand_inputs([tmp_path])] == ["a.txt", "b.txt"]
    assert [p.name for p in expand_inputs([str(tmp_path / "**" / "*.txt")])] == ["a.txt", "b.txt"]
    with pytest.raises(DataError, match="does not exist"):
        expand_inputs([tmp_path / "missing.txt"])
    with pytest.raises(DataError, match="matches no file"):
        expand_inputs([str(tmp_path / "*.md")])
    with pytest.raises(DataError):
        CorpusOptions(format="xml")


def test_blocks_depend_on_content_only(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("".join(f"Sentence {i}.\n\n" for i in range(100)), encoding="utf-8")
    out, _ = docs(f, format="lines")
    blocks = list(iter_blocks(iter(out), block_bytes=100))
    assert [b.index for b in blocks] == list(range(len(blocks)))
    assert sum(len(b.documents) for b in blocks) == 100
    assert all(b.nbytes >= 100 for b in blocks[:-1])


def test_oversized_documents_are_cut(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("".join(f"Line number {i} is here.\n" for i in range(1000)), encoding="utf-8")
    out, stats = docs(f, format="lines", max_document_bytes=1000)
    assert len(out) > 20 and stats.split_documents == len(out) - 1
    assert sum(len(d.texts) for d in out) == 1000


@pytest.mark.skipif(not (SHARED / "gutenberg" / "books").is_dir(), reason="shared data not present")
def test_shared_gutenberg_books_leave_no_license_text():
    books = [
        *sorted((SHARED / "gutenberg" / "books").glob("*.txt"))[:12],
        SHARED / "gutenberg" / "books" / "pg4657.txt",
    ]
    stats = CorpusStats()
    for d in read_documents(books, CorpusOptions(), stats):
        text = " ".join(d.texts)
        for marker in ("PROJECT GUTENBERG", "Project Gutenberg License", "SMALL PRINT", "www.gutenberg.org"):
            assert marker not in text, marker
    assert stats.gutenberg_books == len(books) and stats.prose_files == len(books)


def test_split_sentences_handles_empty_paragraphs():
    assert split_sentences(["", "Hello there. General Kenobi!"]) == ["Hello there.", "General Kenobi!"]
