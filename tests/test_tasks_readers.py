"""Labelled data in every format: the same examples as the TSV, header handling, reports, CoNLL, errors."""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bertkit.errors import ConfigError, DataError
from bertkit.tasks import ClassificationTask, NerTask, read_squad
from bertkit.tasks.readers import detect_header, parse_hub_name, read_table

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

ROWS = [("a fine, quiet film", "1"), ('he said "meh"', "0"), ("commas, and 'quotes'", "1"), ("the end", "0")]


def pairs(examples) -> list[tuple[str, str | None]]:
    return [(e.text, e.label) for e in examples]


def labelled(rows: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """``rows`` of examples that all carry a label, typed as such."""
    out = []
    for text, label in rows:
        assert label is not None
        out.append((text, label))
    return out


def write_formats(root: Path, rows: list[tuple[str, str]]) -> dict[str, Path]:
    """The same table as TSV, CSV, JSONL and a JSON array (labels as numbers where they are)."""
    root.mkdir(parents=True, exist_ok=True)
    records = [{"sentence": t, "label": int(label) if label.isdigit() else label} for t, label in rows]
    paths = {name: root / f"d.{name}" for name in ("tsv", "csv", "jsonl", "json")}
    paths["tsv"].write_text("sentence\tlabel\n" + "".join(f"{t}\t{label}\n" for t, label in rows), encoding="utf-8")
    with paths["csv"].open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "label"])
        writer.writerows(rows)
    paths["jsonl"].write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    paths["json"].write_text(json.dumps(records, indent=1), encoding="utf-8")
    return paths


def write_columnar(root: Path, rows: list[tuple[str, str]]) -> dict[str, Path]:
    """Parquet, a single Arrow file and a ``datasets.save_to_disk`` directory of the same table."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"sentence": [t for t, _ in rows], "label": [int(label) for _, label in rows]})
    out = {"parquet": root / "d.parquet", "arrow": root / "d.arrow"}
    pq.write_table(table, out["parquet"])
    with pa.OSFile(str(out["arrow"]), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    datasets = pytest.importorskip("datasets")
    datasets.Dataset(table).save_to_disk(str(root / "saved"), num_shards=2)
    out["saved"] = root / "saved"
    return out


# ------------------------------------------------------------------------------------------ formats


def test_every_text_format_gives_the_same_examples_as_the_tsv(tmp_path):
    paths = write_formats(tmp_path, ROWS)
    expected = pairs(ClassificationTask().read(paths["tsv"]).examples)
    assert expected == ROWS
    for name, path in paths.items():
        read = ClassificationTask().read(path)
        assert pairs(read.examples) == ROWS, name
        assert read.report is not None and read.report.used == len(ROWS)


def test_columnar_formats_give_the_same_examples_as_the_tsv(tmp_path):
    for name, path in write_columnar(tmp_path, ROWS).items():
        read = ClassificationTask().read(path)
        assert pairs(read.examples) == ROWS, name
        assert read.report.line().startswith(f"{path} (")
        assert "read 4 rows, used 4, skipped 0" in read.report.line()


def test_real_sst2_in_every_format_equals_the_tsv(tmp_path):
    source = DATA / "sst2" / "dev.tsv"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    tsv = ClassificationTask().read(source).examples
    rows = labelled(pairs(tsv))
    assert len(rows) == 872
    paths = {**write_formats(tmp_path, rows), **write_columnar(tmp_path, rows)}
    for name, path in paths.items():
        assert pairs(ClassificationTask().read(path).examples) == rows, name


def test_format_overrides_the_suffix(tmp_path):
    csv_as_txt = tmp_path / "quoted.txt"  # .txt would be read as TSV
    csv_as_txt.write_text('sentence,label\n"one, two",1\n"three",0\n', encoding="utf-8")
    assert pairs(ClassificationTask().read(csv_as_txt, format="csv").examples) == [("one, two", "1"), ("three", "0")]
    assert pairs(ClassificationTask(format="csv").read(csv_as_txt).examples) == [("one, two", "1"), ("three", "0")]
    jsonl = tmp_path / "rows.data"
    jsonl.write_text('{"sentence": "x", "label": 1}\n', encoding="utf-8")
    assert pairs(ClassificationTask().read(jsonl, format="jsonl").examples) == [("x", "1")]
    with pytest.raises(DataError, match=r"rows\.data: cannot tell the format .* --format"):
        ClassificationTask().read(jsonl)
    with pytest.raises(DataError, match="unknown table format 'xls'"):
        ClassificationTask().read(jsonl, format="xls")


# ------------------------------------------------------------------------------------------ headers


def headerless(tmp_path: Path, n: int = 300) -> Path:
    path = tmp_path / "headerless.tsv"
    path.write_text("".join(f"review number {i} is {'good' if i % 2 else 'bad'}\t{i % 2}\n" for i in range(n)))
    return path


def test_headerless_tsv_keeps_every_row(tmp_path):
    path = headerless(tmp_path)
    task = ClassificationTask(text_column=0, label_column=1)
    read = task.read(path)
    examples, report = read.examples, read.report
    assert len(examples) == 300 and examples[0].text == "review number 0 is bad"
    assert report.used == 300 and report.skipped == {}
    assert "no header" in report.line() and "--header" in report.line()
    forced = ClassificationTask(text_column=0, label_column=1).read(path, header=True)
    assert len(forced.examples) == 299
    assert forced.report.skipped == {"header line": 1}


def test_header_detection_and_the_explicit_flag(tmp_path):
    named = tmp_path / "named.tsv"
    named.write_text("review\tstars\nnice\t5\nawful\t1\n")
    task = ClassificationTask(text_column="review", label_column="stars")
    read = task.read(named)
    assert pairs(read.examples) == [("nice", "5"), ("awful", "1")]
    assert read.report.skipped == {"header line": 1} and "first line is a header" in read.report.line()
    as_data = ClassificationTask(text_column=0, label_column=1, header=False)
    assert pairs(as_data.read(named).examples) == [("review", "stars"), ("nice", "5"), ("awful", "1")]
    assert detect_header([["text", "label"], ["a", "0"], ["b", "1"]])[0] is True  # a word over numbers
    assert detect_header([["a", "pos"], ["b", "neg"], ["c", "pos"]])[0] is False  # a label that recurs
    assert detect_header([["sentence"], ["a"]], ["sentence"]) == (True, "it names column 'sentence'")


def test_blank_lines_are_counted_not_silent(tmp_path):
    path = tmp_path / "gaps.tsv"
    path.write_text("sentence\tlabel\na\t1\n\nb\t0\n\n")
    task = ClassificationTask()
    read = task.read(path)
    assert len(read.examples) == 2
    assert read.report.skipped == {"header line": 1, "blank lines": 2}
    assert read.report.read == 5
    assert "read 5 rows, used 2, skipped 3 (2 blank lines, 1 header line); first line is a header" in read.report.line()


# ------------------------------------------------------------------------------------------ errors


def test_missing_optional_packages_name_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError, match=r"pip install 'bertkit\[parquet\]'"):
        read_table(path)
    monkeypatch.undo()
    pytest.importorskip("pyarrow")
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ConfigError, match=r"pip install 'bertkit\[datasets\]'"):
        read_table("hf:glue:sst2:train")


def test_bad_columnar_inputs(tmp_path):
    pytest.importorskip("pyarrow")
    with pytest.raises(DataError, match="no such file or directory"):
        read_table(tmp_path / "absent.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DataError, match=r"bad\.parquet: not a readable Parquet file"):
        read_table(bad)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(DataError, match=r"a directory without \.arrow files"):
        read_table(empty)
    for spec in ("hf:glue", "hf:a:b:c:d", "hf::train"):
        with pytest.raises(DataError, match="hf:NAME:SPLIT"):
            parse_hub_name(spec)
    assert parse_hub_name("hf:glue:sst2:validation") == ("glue", "sst2", "validation")
    assert parse_hub_name("hf:org/name:train") == ("org/name", None, "train")


def test_dataset_dict_directory_asks_for_a_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("pyarrow")
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"sentence": ["a"], "label": [1]})})
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(DataError, match=r"dd: a dataset with splits train; give one split's directory"):
        ClassificationTask().read(tmp_path / "dd")
    assert pairs(ClassificationTask().read(tmp_path / "dd" / "train").examples) == [("a", "1")]


@pytest.fixture
def offline_datasets(tmp_path, monkeypatch):
    """``datasets`` with its cache in ``tmp_path`` and the hub offline."""
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("pyarrow")
    import huggingface_hub.constants

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return datasets


def test_hub_names_load_a_local_dataset_offline(tmp_path, offline_datasets):
    local = tmp_path / "local_ds"
    local.mkdir()
    paths = write_formats(tmp_path / "src", ROWS)
    (local / "train.csv").write_bytes(paths["csv"].read_bytes())
    read = ClassificationTask().read(f"hf:{local}:train")
    assert pairs(read.examples) == ROWS
    assert read.report.format == "hf" and read.report.used == len(ROWS)


def test_hub_name_offline_and_not_cached_is_one_line(offline_datasets):
    with pytest.raises(DataError) as error:
        ClassificationTask().read("hf:nobody-here/no-such-dataset:train")
    message = str(error.value)
    assert "\n" not in message and "offline and not in the cache" in message
    assert message.startswith("hf:nobody-here/no-such-dataset:train: cannot load")


# ------------------------------------------------------------------------------------------ CoNLL


def test_conll_any_columns_tag_column_tabs_and_docstart(tmp_path):
    spaced = tmp_path / "five.txt"
    spaced.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP x B-ORG\nrejects VBZ B-VP x O\n\nPeter NNP B-NP x B-PER\n")
    read = NerTask().read(spaced)
    examples, report = read.examples, read.report
    assert [e.tags for e in examples] == [["B-ORG", "O"], ["B-PER"]]
    assert report.skipped == {"-DOCSTART- lines": 1} and report.used == 3
    assert "2 sentences" in report.line()
    chunks = NerTask(tag_column=2).read(spaced).examples
    assert [e.tags for e in chunks] == [["B-NP", "B-VP"], ["B-NP"]]
    tabbed = tmp_path / "tabs.tsv"
    tabbed.write_text("EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n")
    assert [(e.words, e.tags) for e in NerTask().read(tabbed).examples] == [
        (["EU", "rejects"], ["B-ORG", "O"]),
        (["Peter"], ["B-PER"]),
    ]
    with pytest.raises(DataError, match=r"five\.txt:3: --tag-column 9 is not among columns 1\.\.4"):
        NerTask(tag_column=9).read(spaced)
    with pytest.raises(ConfigError, match="--format csv: the ner task reads conll files only"):
        NerTask().read(spaced, format="csv")


def test_a_classification_table_given_to_ner_names_the_line(tmp_path):
    table = tmp_path / "cls.tsv"
    table.write_text("sentence\tlabel\nhide new secretions from the parental units\t0\n")
    with pytest.raises(DataError, match=r"cls\.tsv:2: a field with spaces .* --task classification"):
        NerTask().read(table)


def test_real_conll_report(tmp_path):
    path = DATA / "conll2003" / "valid.txt"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    read = NerTask().read(path)
    examples, report = read.examples, read.report
    docstarts = sum(line.startswith("-DOCSTART-") for line in path.read_text().splitlines())
    assert report.skipped == {"-DOCSTART- lines": docstarts}
    assert report.used == sum(len(e.words) for e in examples)
    assert f"{len(examples)} sentences" in report.line()
    assert [e.tags for e in NerTask(tag_column=3).read(path).examples] == [e.tags for e in examples]


# ------------------------------------------------------------------------------------------ truncation


def test_truncation_is_counted(tmp_path):
    from inference_helpers import make_tokenizer

    tokenizer = make_tokenizer(tmp_path / "tok")
    task = ClassificationTask()
    examples = task.read(write_formats(tmp_path, [("good " * 40, "1"), ("bad", "0")])["tsv"]).examples
    assert task.featurize(examples, tokenizer, 16).truncated == 1
    assert task.featurize(examples, tokenizer, 128).truncated == 0
    windows = ClassificationTask(long_text="windows")
    assert windows.featurize(examples, tokenizer, 16).truncated == 0  # split into windows, not cut


def test_real_sst2_without_its_header_keeps_every_row(tmp_path):
    source = DATA / "sst2" / "dev.tsv"
    if not source.is_file():
        pytest.skip(f"{source} is absent")
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    path = tmp_path / "noheader.tsv"
    path.write_text("".join(lines[1:]), encoding="utf-8")
    read = ClassificationTask(text_column=0, label_column=1).read(path)
    assert pairs(read.examples) == pairs(ClassificationTask().read(source).examples)
    assert read.report.used == 872 and "no header" in read.report.line()


# ------------------------------------------------------------------------------------------ compression


def compress(data: bytes, suffix: str) -> bytes:
    if suffix == ".zst":
        return pytest.importorskip("zstandard").ZstdCompressor().compress(data)
    compressors: dict[str, Callable[[bytes], bytes]] = {
        ".gz": gzip.compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
    }
    return compressors[suffix](data)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_compressed_files_give_the_same_examples(suffix, tmp_path):
    """The labelled readers open files through the same layer as the corpus reader: any format, any compression."""
    paths = write_formats(tmp_path / "plain", ROWS)
    if suffix == ".gz":  # the binary formats too, once
        paths.update((k, v) for k, v in write_columnar(tmp_path / "plain", ROWS).items() if k != "saved")
    for name, path in paths.items():
        packed = tmp_path / (path.name + suffix)
        packed.write_bytes(compress(path.read_bytes(), suffix))
        read = ClassificationTask().read(packed)
        assert pairs(read.examples) == ROWS, name
        assert read.report.used == len(ROWS)
    conll = tmp_path / "tags.conll"
    conll.write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n", encoding="utf-8")
    packed = tmp_path / ("tags.conll" + suffix)
    packed.write_bytes(compress(conll.read_bytes(), suffix))
    assert [e.tags for e in NerTask().read(packed).examples] == [["B-ORG", "O"], ["B-PER"]]
    from inference_helpers import write_squad

    squad = write_squad(tmp_path / "squad.json", [("john smith lived in paris", [("who?", "john smith")])])
    packed = tmp_path / ("squad.json" + suffix)
    packed.write_bytes(compress(squad.read_bytes(), suffix))
    examples, _, _ = read_squad(packed)
    assert [(e.question, e.answers[0]["text"]) for e in examples] == [("who?", "john smith")]


def test_bad_bytes_in_a_labelled_file_name_the_line(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("sentence\tlabel\nfine\t1\ncaf\xe9\t0\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.tsv: not UTF-8 text \(line 3, byte 4: .*convert it to UTF-8"):
        ClassificationTask().read(path)
