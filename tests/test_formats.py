"""The file-format layer under both readers: compressions, UTF-8, JSON lines, tables, optional packages."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import sys
from collections.abc import Callable

import pytest

from bertkit.errors import ConfigError, DataError, MissingExtraError, TokenizerError
from bertkit.formats import (
    COMPRESSIONS,
    import_extra,
    json_lines,
    json_object,
    open_parquet,
    read_arrow,
    read_bytes,
    read_parquet,
    read_text,
    saved_dataset_files,
    split_suffix,
)

TEXT = "first line\nsecond: naïve café 中文\n\nlast\n"


def compress(data: bytes, suffix: str) -> bytes:
    if suffix == ".zst":
        zstandard = pytest.importorskip("zstandard")
        return zstandard.ZstdCompressor().compress(data)
    compressors: dict[str, Callable[[bytes], bytes]] = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
        ".lzma": lzma.compress,
    }
    return compressors[suffix](data)


def hide_module(monkeypatch, module: str) -> None:
    """Make ``import module`` fail as if it were not installed."""
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


# ------------------------------------------------------------------------------------------ compression
def test_split_suffix():
    assert split_suffix("Books.JSONL.gz") == (".gz", ".jsonl")
    assert split_suffix("notes.txt") == ("", ".txt")
    assert split_suffix("table.parquet.zst") == (".zst", ".parquet")
    assert split_suffix("plain.gz") == (".gz", "")


@pytest.mark.parametrize("suffix", COMPRESSIONS)
def test_every_compression_round_trips(suffix, tmp_path):
    data = TEXT.encode("utf-8") * 50
    path = tmp_path / f"notes.txt{suffix}"
    path.write_bytes(compress(data, suffix))
    assert read_bytes(path) == data
    assert read_text(path) == TEXT * 50


@pytest.mark.parametrize("suffix", COMPRESSIONS)
def test_a_corrupt_stream_is_one_message(suffix, tmp_path):
    if suffix == ".zst":
        pytest.importorskip("zstandard")
    path = tmp_path / f"notes.txt{suffix}"
    path.write_bytes(b"this is not compressed data at all\n" * 10)
    with pytest.raises(DataError, match=rf"^cannot read input {path}: "):
        read_bytes(path)
    truncated = tmp_path / f"cut.txt{suffix}"
    truncated.write_bytes(compress(TEXT.encode() * 200, suffix)[:40])
    with pytest.raises(DataError, match=rf"^cannot read input {truncated}: "):
        read_bytes(truncated)


# ------------------------------------------------------------------------------------------ UTF-8 text
def test_read_text_drops_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.tsv"
    path.write_bytes(b"\xef\xbb\xbfsentence\tlabel\n")
    assert read_text(path) == "sentence\tlabel\n"


def test_bad_utf8_names_file_line_and_byte_and_what_to_do(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("good line\nCaf\xe9 au lait\n".encode("latin-1"))
    expected = (
        f"{path}: not UTF-8 text (line 2, byte 4: invalid continuation byte); convert it to UTF-8 "
        "(e.g. iconv -f latin1 -t utf-8) and try again"
    )
    with pytest.raises(DataError) as error:
        read_text(path)
    assert str(error.value) == expected
    # the caller picks the exception its users expect; the words stay the same
    for kind in (ConfigError, TokenizerError):
        with pytest.raises(kind) as kind_error:
            read_text(path, kind)
        assert str(kind_error.value) == expected
    # a compressed file: positions in the decompressed text
    packed = tmp_path / "latin1.txt.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(DataError, match=r"latin1\.txt\.gz: not UTF-8 text \(line 2, byte 4: "):
        read_text(packed)


def test_one_detector_tells_binary_from_utf16_from_text():
    """A file of NUL bytes is binary, not UTF-16 (whose other bytes are text); what a binary file is, is said."""
    from bertkit.formats.text import BINARY, UTF16, not_text_kind, text_kind

    assert text_kind(bytes(8192)) == BINARY
    assert text_kind("Hello world, a test.\n".encode("utf-16-le") * 50) == UTF16  # no byte-order mark
    assert text_kind("Hello world, a test.\n".encode("utf-16-be") * 50) == UTF16
    assert text_kind("Hello\n".encode("utf-16")) == UTF16  # with one
    assert text_kind(TEXT.encode()) is None
    assert text_kind("caf\xe9\n".encode("latin-1")) is None  # 8-bit text: decoding names the line and byte
    assert text_kind(b"\x1b[31mred\x1b[0m\n") is None  # UTF-8 with escapes stays text
    assert text_kind(bytes(range(1, 32)) * 8 + b"\xff") == BINARY
    assert "NUL bytes from byte 0 (an empty preallocated or sparse file?)" in (not_text_kind(bytes(100)) or "")
    assert (not_text_kind(b"%PDF-1.7\n\x00\x01") or "").startswith("a PDF document, not text")
    assert (not_text_kind(b"PK\x03\x04\x00\x00") or "").startswith("a zip archive")
    assert not_text_kind(b"abc\x00def") == "a binary file (a NUL byte at byte 3), not text: give a UTF-8 text file"


class CountedReads:
    """Wraps a binary file and adds up the bytes read from it."""

    def __init__(self, handle, counter: list[int]):
        self.handle, self.counter = handle, counter

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.counter[0] += len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.mark.parametrize("nul_at", [0, 3 << 20])
def test_read_text_refuses_nul_bytes_after_reading_a_prefix(tmp_path, monkeypatch, nul_at):
    """A 200 MB sparse file (NUL bytes, after some text or not) costs the chunk that shows the first NUL byte,
    not its size: the refusal names where the NUL bytes start."""
    from bertkit.formats import text

    path = tmp_path / "sparse.txt"
    with path.open("wb") as handle:
        handle.write(b"a line of text\n" * (nul_at // 15))
        handle.truncate(200 << 20)
    start = (nul_at // 15) * 15
    counter = [0]
    real = text.open_decompressed
    monkeypatch.setattr(text, "open_decompressed", lambda *a: CountedReads(real(*a), counter))
    with pytest.raises(DataError) as refused:
        read_text(path)
    assert counter[0] <= start + text.SNIFF_BYTES + text.CHUNK_BYTES
    if nul_at == 0:
        assert str(refused.value).startswith(f"{path}: NUL bytes from byte 0")
    else:
        assert f"a NUL byte at byte {start}" in str(refused.value)


def test_missing_and_wrong_kind_of_path(tmp_path):
    with pytest.raises(DataError, match=r"absent\.txt: no such file or directory$"):
        read_text(tmp_path / "absent.txt")
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        read_text(tmp_path, ConfigError)


# ------------------------------------------------------------------------------------------ JSON lines
def test_json_lines_and_their_messages():
    lines = ['{"a": 1}', "", '  {"b": [2]}  ']
    assert list(json_lines(lines, "d.jsonl")) == [(1, {"a": 1}), (3, {"b": [2]})]
    with pytest.raises(DataError, match=r"^d\.jsonl:2: not valid JSON \(Expecting value\)$"):
        list(json_lines(['{"a": 1}', "not json"], "d.jsonl"))
    with pytest.raises(DataError, match=r"^d\.jsonl:1: expected a JSON object per line, got list$"):
        json_object("[1, 2]", "d.jsonl:1")
    with pytest.raises(DataError, match="nested too deeply"):
        json_object("[" * 100_000, "d.jsonl:1")


# ------------------------------------------------------------------------------------------ tables
def write_table(root, suffix: str = ""):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"text": ["a cat", "a dog", None], "label": [1, 0, 1]})
    pq.write_table(table, root / "t.parquet")
    with pa.OSFile(str(root / "t.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return table


@pytest.mark.parametrize("suffix", ["", *COMPRESSIONS])
def test_parquet_and_arrow_compressed_or_not(suffix, tmp_path):
    table = write_table(tmp_path)
    paths = {}
    for name in ("t.parquet", "t.arrow"):
        paths[name] = tmp_path / (name + suffix)
        if suffix:
            paths[name].write_bytes(compress((tmp_path / name).read_bytes(), suffix))
    parquet, nbytes = open_parquet(paths["t.parquet"])
    assert parquet.read().equals(table) and nbytes == (tmp_path / "t.parquet").stat().st_size
    assert read_parquet(paths["t.parquet"]).equals(table)
    assert read_arrow(paths["t.arrow"]).equals(table)


def test_unreadable_tables_are_one_message(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "bad.parquet").write_text("not parquet")
    (tmp_path / "bad.arrow").write_text("not arrow")
    with pytest.raises(DataError, match=r"bad\.parquet: not a readable Parquet file \("):
        read_parquet(tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=r"bad\.arrow: not a readable Arrow file \("):
        read_arrow(tmp_path / "bad.arrow")
    with pytest.raises(DataError, match="no such file or directory"):
        read_arrow(tmp_path / "absent.arrow")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"a directory without \.arrow files"):
        saved_dataset_files(tmp_path / "empty")


def test_saved_dataset_shards_in_their_listed_order(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"text": [str(i) for i in range(10)]}).save_to_disk(str(tmp_path / "d"), num_shards=3)
    files = saved_dataset_files(tmp_path / "d")
    assert len(files) == 3 and all(f.suffix == ".arrow" for f in files)
    assert read_arrow(tmp_path / "d").column("text").to_pylist() == [str(i) for i in range(10)]


# ------------------------------------------------------------------------------------------ optional packages
@pytest.mark.parametrize(("module", "extra"), [("pyarrow", "parquet"), ("zstandard", "zstd"), ("datasets", "datasets")])
def test_a_missing_optional_package_is_one_line_naming_the_extra(module, extra, monkeypatch):
    hide_module(monkeypatch, module)
    with pytest.raises(MissingExtraError) as error:
        import_extra(module, "corpus.x")
    assert str(error.value) == f"reading corpus.x needs {module}: pip install 'bertkit[{extra}]'"
    # both kinds of caller catch it: it is a data problem and a set-up problem
    assert isinstance(error.value, DataError) and isinstance(error.value, ConfigError)


def test_readers_of_optional_formats_name_the_extra(tmp_path, monkeypatch):
    (tmp_path / "c.parquet").write_bytes(b"PAR1")
    (tmp_path / "c.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    hide_module(monkeypatch, "pyarrow")
    hide_module(monkeypatch, "zstandard")
    with pytest.raises(MissingExtraError, match=r"c\.parquet needs pyarrow: pip install 'bertkit\[parquet\]'$"):
        open_parquet(tmp_path / "c.parquet")
    with pytest.raises(MissingExtraError, match=r"c\.arrow needs pyarrow: pip install 'bertkit\[parquet\]'$"):
        (tmp_path / "c.arrow").write_bytes(b"x")
        read_arrow(tmp_path / "c.arrow")
    with pytest.raises(MissingExtraError, match=r"c\.txt\.zst needs zstandard: pip install 'bertkit\[zstd\]'$"):
        read_text(tmp_path / "c.txt.zst")


def test_json_in_a_saved_dataset_state_is_read_as_utf8(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "b.arrow").write_bytes(b"")
    (d / "a.arrow").write_bytes(b"")
    (d / "state.json").write_text(json.dumps({"_data_files": [{"filename": "b.arrow"}, {"filename": "a.arrow"}]}))
    assert [f.name for f in saved_dataset_files(d)] == ["b.arrow", "a.arrow"]


def test_a_parquet_directory_is_one_table(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    (tmp_path / "parts").mkdir()
    for i in range(2):
        pq.write_table(pa.table({"text": [f"row {i}"]}), tmp_path / "parts" / f"part-{i}.parquet")
    assert sorted(read_parquet(tmp_path / "parts").column("text").to_pylist()) == ["row 0", "row 1"]


@pytest.mark.parametrize("keep_blank", [False, True])
def test_iter_text_lines_splits_as_text_lines(tmp_path, keep_blank):
    """The lines of ``text_lines``, CRLF, blank lines and multi-byte characters across chunks included."""
    from bertkit.formats import iter_text_lines, read_text, text_lines

    path = tmp_path / "lines.txt"
    body = "".join(f"line {i} caf\u00e9 \u00e9t\u00e9\r\n" if i % 7 else "\n" for i in range(300_000))
    path.write_text(body, encoding="utf-8", newline="")
    assert list(iter_text_lines(path, keep_blank=keep_blank)) == text_lines(read_text(path), keep_blank=keep_blank)


def test_iter_text_lines_holds_a_chunk_not_the_file(tmp_path):
    """Python's peak allocation while every line of a 1,500,000-line file goes by stays at a few chunks, far
    below the file's size (reading it whole costs more than its size)."""
    import tracemalloc

    from bertkit.formats import iter_text_lines
    from bertkit.formats.text import CHUNK_BYTES

    path = tmp_path / "lines.txt"
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, 1_500_000, 100_000):
            out.write("".join(f"short line number {i}\n" for i in range(start, start + 100_000)))
    size = path.stat().st_size
    tracemalloc.start()
    count = sum(1 for _ in iter_text_lines(path))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 1_500_000 and size > 30 * CHUNK_BYTES and peak < 12 * CHUNK_BYTES


def test_iter_text_lines_refuses_what_read_text_refuses(tmp_path):
    from bertkit.formats import iter_text_lines

    late_nul = tmp_path / "late.txt"
    late_nul.write_bytes(b"text\n" * 400_000 + b"\x00" * 10)
    with pytest.raises(DataError, match="NUL byte"):
        list(iter_text_lines(late_nul))
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"ok\nstill ok\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"not UTF-8 text \(line 3"):
        list(iter_text_lines(latin))
