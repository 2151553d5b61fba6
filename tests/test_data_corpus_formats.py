"""One corpus reader for prepare-data, tokenizer train and tokenizer extend: formats, compression, errors."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.data.corpus import CorpusOptions, CorpusStats, corpus_texts, document_sentences, read_documents
from bertkit.errors import DataError, TokenizerError
from bertkit.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
WORDS = (
    "the cat dog sat ran on a mat house tree big small red blue green fast slow man woman child "
    "walked talked saw heard over under near far river hill road town"
).split()


def make_texts(n: int = 60, seed: int = 0) -> list[str]:
    """Documents of a few sentences, no braces or quotes (so JSON syntax in a vocabulary would show)."""
    rng = random.Random(seed)
    return [
        " ".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10))).capitalize() + "."
            for _ in range(rng.randint(2, 5))
        )
        for _ in range(n)
    ]


def write_plain(path: Path, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, texts: list[str], field: str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.dumps({"id": i, field: t, "meta": {"source": "test"}}) for i, t in enumerate(texts)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, texts: list[str], field: str = "text") -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(range(len(texts))), field: texts}), path, row_group_size=7)
    return path


def compress(source: Path, suffix: str, directory: Path) -> Path:
    data = source.read_bytes()
    if suffix == ".zst":
        zstandard = pytest.importorskip("zstandard")
        packed = zstandard.ZstdCompressor().compress(data)
    else:
        compressors: dict[str, Callable[[bytes], bytes]] = {
            ".gz": gzip.compress,
            ".bz2": bz2.compress,
            ".xz": lzma.compress,
        }
        packed = compressors[suffix](data)
    directory.mkdir(parents=True, exist_ok=True)
    out = directory / (source.name + suffix)
    out.write_bytes(packed)
    return out


def train_cli(inputs: list[Path], output: Path, *args: str) -> list[str]:
    flags = [a for p in inputs for a in ("--input", str(p))]
    assert (
        main(["tokenizer", "train", *flags, "--vocab-size", "80", "--min-frequency", "1", "-o", str(output), *args])
        == 0
    )
    return (output / "vocab.txt").read_text(encoding="utf-8").splitlines()


def alphabet(vocab: list[str]) -> set[str]:
    """The single characters learned. (The merges themselves are not compared: the Rust trainer breaks
    ties between equally frequent pairs in hash order, so two runs on one text can differ.)"""
    return {t for t in vocab if len(t.removeprefix("##")) == 1}


def assert_same_training(a: list[str], b: list[str], texts: list[str]) -> None:
    assert alphabet(a) == alphabet(b)
    seen = set(" ".join(texts).lower())
    for token in a[5:]:  # after the special tokens: nothing the texts do not contain
        assert set(token.removeprefix("##")) <= seen, token


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertkit: error:"), err
    return err[0]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *WORDS, "##s", "##ed"]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    Tokenizer.from_vocab(root / "vocab.txt").save_pretrained(root / "saved")
    return root / "saved"


def prepare_cli(inputs: Path, tokenizer_dir: Path, output: Path, *args: str) -> dict[str, bytes]:
    base = ["prepare-data", "-i", str(inputs), "-t", str(tokenizer_dir), "-o", str(output)]
    options = ["--max-seq-length", "32", "--dupe-factor", "2", "--seed", "3", "--workers", "1", "--quiet"]
    assert main([*base, *options, *args]) == 0
    shards = {p.name: p.read_bytes() for p in sorted(output.glob("*.npy"))}
    assert shards
    return shards


# --------------------------------------------------------------------------------------------- formats
def test_jsonl_vocabulary_has_no_json_syntax_and_equals_plain_text(tmp_path):
    texts = make_texts()
    plain_file = write_plain(tmp_path / "plain" / "c.txt", texts)
    jsonl_file = write_jsonl(tmp_path / "json" / "c.jsonl", texts)
    # the trainer is given the very same texts
    assert list(corpus_texts([jsonl_file])) == list(corpus_texts([plain_file])) == texts
    plain = train_cli([plain_file], tmp_path / "tok_plain")
    jsonl = train_cli([jsonl_file], tmp_path / "tok_json")
    assert_same_training(jsonl, plain, texts)
    for syntax in ("{", "}", '"', ":", "text", "id", "meta", "source"):
        assert syntax not in jsonl
    # The Python API refuses to read a JSONL file as raw text and names the reader to use.
    with pytest.raises(TokenizerError, match="corpus_texts"):
        Tokenizer.train([tmp_path / "json" / "c.jsonl"], vocab_size=80)


def test_jsonl_with_another_text_field(tmp_path, capsys):
    texts = make_texts(20)
    path = write_jsonl(tmp_path / "c.jsonl", texts, field="body")
    assert list(corpus_texts([path], CorpusOptions(text_field="body"))) == texts
    body = train_cli([path], tmp_path / "body", "--text-field", "body")
    assert_same_training(body, train_cli([write_plain(tmp_path / "c.txt", texts)], tmp_path / "plain"), texts)
    capsys.readouterr()
    assert main(["tokenizer", "train", "-i", str(path), "-o", str(tmp_path / "no"), "--vocab-size", "80"]) == 2
    line = one_error_line(capsys)
    assert "line 1" in line and "'text'" in line and "--text-field" in line and "'body'" in line
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_corpus_gives_byte_identical_shards(suffix, tmp_path, tokenizer_dir):
    texts = make_texts(80, seed=1)
    plain = write_plain(tmp_path / "plain" / "book.txt", texts)
    lines = tmp_path / "plain" / "lines.txt"
    lines.write_text("".join(t.replace(". ", ".\n") + "\n\n" for t in texts[:30]), encoding="utf-8")
    packed = tmp_path / "packed"
    compress(plain, suffix, packed)
    compress(lines, suffix, packed)
    expected = prepare_cli(tmp_path / "plain", tokenizer_dir, tmp_path / "out_plain")
    assert prepare_cli(packed, tokenizer_dir, tmp_path / "out_packed") == expected
    meta = [json.loads((tmp_path / d / "dataset.json").read_text()) for d in ("out_plain", "out_packed")]
    stats = [{k: v for k, v in m["corpus_stats"].items() if k != "skipped"} for m in meta]
    assert stats[0] == stats[1]  # decompressed bytes counted, formats sniffed the same
    # the format under the compression suffix decides: a compressed JSONL is JSONL
    jsonl = compress(write_jsonl(tmp_path / "j" / "c.jsonl", texts), suffix, tmp_path / "jz")
    assert list(corpus_texts([jsonl])) == list(corpus_texts([tmp_path / "j" / "c.jsonl"]))


def test_parquet_equals_jsonl_and_plain_text(tmp_path, tokenizer_dir):
    texts = make_texts(50, seed=2)
    parquet = write_parquet(tmp_path / "pq" / "c.parquet", texts, field="body")
    jsonl = write_jsonl(tmp_path / "js" / "c.jsonl", texts, field="body")
    options = CorpusOptions(text_field="body")
    from_parquet = list(read_documents([parquet], options, CorpusStats()))
    assert [d.texts for d in from_parquet] == [d.texts for d in read_documents([jsonl], options, CorpusStats())]
    # BERT's own format (a sentence per line, a blank line per document) gives the same sentences
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(t.replace(". ", ".\n") + "\n\n" for t in texts), encoding="utf-8")
    from_lines = list(read_documents([lines], CorpusOptions(format="lines"), CorpusStats()))
    assert [document_sentences(d) for d in from_parquet] == [d.texts for d in from_lines]
    assert list(corpus_texts([parquet], options)) == list(corpus_texts([write_plain(tmp_path / "c.txt", texts)]))
    from_parquet_vocab = train_cli([parquet], tmp_path / "t1", "--text-field", "body")
    assert_same_training(from_parquet_vocab, train_cli([tmp_path / "c.txt"], tmp_path / "t2"), texts)
    assert prepare_cli(tmp_path / "pq", tokenizer_dir, tmp_path / "o1", "--text-field", "body") == prepare_cli(
        tmp_path / "js", tokenizer_dir, tmp_path / "o2", "--text-field", "body"
    )


def test_arrow_files_and_saved_datasets_equal_parquet(tmp_path):
    """The corpus reader takes the Arrow inputs the labelled-data readers take: a file, compressed or not,
    and a ``datasets.save_to_disk`` directory (its metadata files are not read as text)."""
    pa = pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    texts = make_texts(20, seed=4)
    expected = list(corpus_texts([write_parquet(tmp_path / "c.parquet", texts)]))
    table = pa.table({"id": list(range(len(texts))), "text": texts})
    with pa.OSFile(str(tmp_path / "c.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    stats = CorpusStats()
    assert list(corpus_texts([tmp_path / "c.arrow"], None, stats)) == expected
    assert stats.arrow_files == 1 and stats.files == 1
    assert list(corpus_texts([compress(tmp_path / "c.arrow", ".xz", tmp_path / "xz")])) == expected
    datasets.Dataset(table).save_to_disk(str(tmp_path / "saved" / "train"), num_shards=3)
    assert list(corpus_texts([tmp_path / "saved" / "train"])) == expected
    assert list(corpus_texts([tmp_path / "saved"])) == expected  # found inside a directory too
    datasets.DatasetDict({"train": datasets.Dataset(table)}).save_to_disk(str(tmp_path / "dict"))
    assert list(corpus_texts([tmp_path / "dict"])) == expected  # its metadata files are not text
    with pytest.raises(DataError, match=r"c\.arrow: no column 'body' \(its columns: id, text\)"):
        list(corpus_texts([tmp_path / "c.arrow"], CorpusOptions(text_field="body")))


def test_parquet_missing_or_non_text_column_names_the_flag(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = write_parquet(tmp_path / "c.parquet", make_texts(3), field="body")
    with pytest.raises(DataError, match=r"no column 'text' \(its columns: id, body\).*--text-field"):
        list(corpus_texts([path]))
    with pytest.raises(DataError, match=r"holds int64, not text.*--text-field"):
        list(corpus_texts([path], CorpusOptions(text_field="id")))
    # null texts are counted and reported, not silently dropped
    pq.write_table(pa.table({"text": ["A cat sat.", None, "A dog ran."]}), tmp_path / "n.parquet")
    stats = CorpusStats()
    assert list(corpus_texts([tmp_path / "n.parquet"], None, stats)) == ["A cat sat.", "A dog ran."]
    assert stats.missing_texts == 1 and stats.parquet_files == 1 and "null" in stats.warnings()[0]


def test_directories_and_globs_mix_formats(tmp_path):
    texts = make_texts(12, seed=3)
    write_plain(tmp_path / "c" / "a.txt", texts[:4])
    compress(write_jsonl(tmp_path / "raw" / "b.jsonl", texts[4:8]), ".gz", tmp_path / "c" / "sub")
    write_jsonl(tmp_path / "c" / "sub" / "d.jsonl", texts[8:])
    whole = list(corpus_texts([tmp_path / "c"]))
    assert whole == texts  # a.txt, sub/b.jsonl.gz, sub/d.jsonl in sorted order
    assert list(corpus_texts([str(tmp_path / "c" / "**" / "*.jsonl*")])) == texts[4:]


# --------------------------------------------------------------------------------------------- cleaning
def test_tokenizer_train_strips_gutenberg_boilerplate_as_prepare_data_does(tmp_path):
    book = ROOT / "data" / "corpus" / "35-0.txt"
    assert "Project Gutenberg" in book.read_text(encoding="utf-8")
    args = ["tokenizer", "train", "-i", str(book), "--vocab-size", "3000", "--min-frequency", "1"]
    assert main([*args, "-o", str(tmp_path / "clean")]) == 0
    assert main([*args, "-o", str(tmp_path / "kept"), "--keep-gutenberg-boilerplate"]) == 0
    clean = set((tmp_path / "clean" / "vocab.txt").read_text(encoding="utf-8").split())
    kept = set((tmp_path / "kept" / "vocab.txt").read_text(encoding="utf-8").split())
    assert "gutenberg" in kept and "gutenberg" not in clean
    texts = list(corpus_texts([book]))
    assert not any("Gutenberg" in t for t in texts)
    # the same text prepare-data reads
    documents = read_documents([book], CorpusOptions(), CorpusStats())
    assert [t for d in documents for t in d.texts] == texts


def test_tokenizer_extend_reads_the_corpus_through_the_same_reader(tmp_path, capsys):
    from bertkit.models.bert import BertForPreTraining
    from inference_helpers import make_tokenizer, save_model

    tok = make_tokenizer(tmp_path / "tok")
    model = save_model(tmp_path / "model", BertForPreTraining, tok)
    body = ["The kings lived by the rivers.\n\nThe cats slept."] * 30
    path = compress(write_jsonl(tmp_path / "raw" / "c.jsonl", body, field="body"), ".gz", tmp_path / "corpus")
    args = ["tokenizer", "extend", "-m", str(model), "--corpus", str(path), "--min-frequency", "5"]
    assert main([*args, "-o", str(tmp_path / "out"), "--text-field", "body"]) == 0
    added = json.loads((tmp_path / "out" / "vocab_extension.json").read_text())["added"]
    assert {a["token"] for a in added} == {"kings", "rivers", "cats"}
    capsys.readouterr()
    assert main([*args, "-o", str(tmp_path / "out2")]) == 2
    assert "--text-field" in one_error_line(capsys)


def corpus_params(*path: str) -> dict[str, tuple[tuple[str, ...], str | None]]:
    from typer.core import TyperGroup, TyperOption
    from typer.main import get_command

    from bertkit.cli import app

    command = get_command(app)
    for name in path:
        assert isinstance(command, TyperGroup)
        command = command.commands[name]
    with command.make_context("bertkit", [], resilient_parsing=True) as ctx:
        params = command.get_params(ctx)
    names = {"format", "text_field", "max_document_bytes", "keep_gutenberg_boilerplate"}
    found = {}
    for p in params:
        if p.name in names:
            assert isinstance(p, TyperOption), p
            found[p.name] = (tuple(p.opts + p.secondary_opts), p.help)
    return found


def test_the_three_commands_declare_the_same_corpus_options():
    prepare = corpus_params("prepare-data")
    assert set(prepare) == {"format", "text_field", "max_document_bytes", "keep_gutenberg_boilerplate"}
    assert prepare["format"][1] is not None
    assert "parquet" in prepare["format"][1]
    assert corpus_params("tokenizer", "train") == prepare
    assert corpus_params("tokenizer", "extend") == prepare


# --------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("name", ["books.zip", "paper.pdf", "c.tar.gz"])
def test_unknown_container_extension_is_one_line(name, tmp_path, capsys):
    (tmp_path / name).write_bytes(b"PK\x03\x04 not a corpus")
    assert (
        main(["tokenizer", "train", "-i", str(tmp_path / name), "-o", str(tmp_path / "o"), "--vocab-size", "60"]) == 2
    )
    line = one_error_line(capsys)
    assert name in line and "not a corpus format" in line


def test_corrupt_and_unreadable_files_are_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "c.txt.gz").write_bytes(b"this is not gzip data at all\n" * 10)
    assert main(["tokenizer", "train", "-i", str(tmp_path / "c.txt.gz"), "-o", str(tmp_path / "o")]) == 2
    assert "c.txt.gz" in one_error_line(capsys)
    locked = write_plain(tmp_path / "locked.txt", make_texts(3))
    real_open = Path.open

    def deny(self, *args, **kwargs):
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", deny)
    assert main(["tokenizer", "train", "-i", str(locked), "-o", str(tmp_path / "o")]) == 2
    line = one_error_line(capsys)
    assert "cannot read input" in line and "locked.txt" in line and "Permission denied" in line


@pytest.mark.parametrize(
    ("module", "suffix", "extra"), [("pyarrow", ".parquet", "parquet"), ("zstandard", ".zst", "zstd")]
)
def test_missing_optional_package_names_the_extra(module, suffix, extra, tmp_path, capsys, monkeypatch):
    texts = make_texts(5)
    plain = write_plain(tmp_path / "c.txt", texts)
    path = (
        write_parquet(tmp_path / "c.parquet", texts)
        if suffix == ".parquet"
        else compress(plain, suffix, tmp_path / "z")
    )
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(DataError, match=rf"needs {module}: pip install 'bertkit\[{extra}\]'"):
        list(corpus_texts([path]))
    assert main(["prepare-data", "-i", str(path), "-t", str(tmp_path), "-o", str(tmp_path / "o"), "--quiet"]) == 2
    capsys.readouterr()
    assert main(["tokenizer", "train", "-i", str(path), "-o", str(tmp_path / "o")]) == 2
    assert f"bertkit[{extra}]" in one_error_line(capsys)


SHARED = ROOT.parent / "shared" / "data" / "gutenberg" / "books"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared data not present")
def test_shared_books_compressed_read_as_the_originals(tmp_path):
    books = sorted(p for p in SHARED.glob("*.txt"))[:2]
    packed = [compress(book, suffix, tmp_path) for book, suffix in zip(books, (".gz", ".xz"))]
    original, unpacked = CorpusStats(), CorpusStats()
    expected = list(corpus_texts(books, None, original))
    assert list(corpus_texts(packed, None, unpacked)) == expected
    assert original.gutenberg_books == unpacked.gutenberg_books == 2
    assert original.bytes == unpacked.bytes == sum(p.stat().st_size for p in books)
    assert not any("*** START OF" in t or "END OF THE PROJECT GUTENBERG" in t for t in expected)
