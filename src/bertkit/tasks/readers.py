"""Reading labelled tables, with errors that name the file and line and a report of what was read.

Formats: TSV (GLUE style), CSV, JSONL, a JSON array of objects, Parquet, an Arrow file or a Hugging Face
``datasets`` directory written by ``save_to_disk``, and ``hf:NAME[:CONFIG]:SPLIT`` (``datasets.load_dataset``).
The format comes from the suffix (a directory is a ``datasets`` directory) unless given.

GLUE's TSV files are not CSV: quotes inside them are literal text (MRPC sentences start with ``"``), so TSV
is split on tabs only, with no quoting. CSV follows RFC 4180 quoting. A UTF-8 byte-order mark (MRPC) is
dropped. Parquet, Arrow and ``hf:`` need the optional extras ``parquet`` (pyarrow) and ``datasets``.

A TSV/CSV file's first line is its header when ``header=True``, data when ``False``; by default it is
detected (:func:`detect_header`) and the decision is written in the :class:`ReadReport`, so that a row is
never dropped without a word.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, overload

from bertkit.errors import ConfigError, DataError

FORMATS = ("tsv", "csv", "jsonl", "json", "parquet", "arrow", "hf")
HF_PREFIX = "hf:"


@dataclass
class Row:
    """One data row: its fields by column name and where it came from (``file:line``, 1-based)."""

    fields: dict[str, str]
    where: str


@dataclass
class ReadReport:
    """What a reader did with its input: records read, used and skipped (by reason), and how it decided."""

    source: str
    format: str
    unit: str = "rows"
    used: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    """Decisions worth a word, e.g. how the header was chosen."""
    truncated: int | None = None
    """Examples cut at ``max_seq_length`` (set when they are featurized)."""

    @property
    def read(self) -> int:
        return self.used + sum(self.skipped.values())

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.skipped[reason] = self.skipped.get(reason, 0) + count

    def line(self) -> str:
        """One line for stderr: ``sst2.tsv (tsv): read 301 rows, used 300, skipped 1 (1 header line)``."""
        reasons = ", ".join(f"{n} {why}" for why, n in self.skipped.items())
        skipped = sum(self.skipped.values())
        text = f"{self.source} ({self.format}): read {self.read} {self.unit}, used {self.used}, skipped {skipped}"
        text += f" ({reasons})" if reasons else ""
        return text + "".join(f"; {note}" for note in self.notes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "format": self.format,
            "unit": self.unit,
            "read": self.read,
            "used": self.used,
            "skipped": dict(self.skipped),
            "notes": list(self.notes),
        }
        if self.truncated is not None:
            out["truncated"] = self.truncated
        return out


def detect_format(path: str | os.PathLike) -> str:
    """The format of a path: ``hf:`` names, a ``datasets`` directory, else the suffix."""
    if str(path).startswith(HF_PREFIX):
        return "hf"
    path = Path(path)
    if path.is_dir():
        return "arrow"
    if not path.exists():
        raise DataError(f"{path}: no such file or directory")
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".txt", ".tab"):
        return "tsv"
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".arrow":
        return "arrow"
    raise DataError(
        f"{path}: cannot tell the format from the suffix {suffix!r}; pass --format (format=) "
        f"{', '.join(f for f in FORMATS if f != 'hf')}"
    )


def read_text_file(path: Path) -> str:
    """A task file's text (a UTF-8 byte-order mark dropped), or a DataError naming the file."""
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a file")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def read_table(
    path: str | os.PathLike,
    format: str | None = None,
    *,
    header: bool | None = None,
    names: Iterable[str] = (),
    report: ReadReport | None = None,
) -> tuple[list[str], list[Row]]:
    """Column names and rows of a table in any of :data:`FORMATS`.

    TSV/CSV: ``header`` says whether the first line names the columns (``None``: detected, with ``names``,
    the column names the caller looks for, as the strongest hint); without one the columns are named
    ``"0"``, ``"1"``... Every row must have as many fields as the first; blank lines are skipped (counted).
    Other formats name their columns themselves. Values that are not strings are turned into strings
    (``1`` -> ``"1"``); ``null`` becomes ``""``. ``report`` (when given) is filled in.
    Raises ``DataError`` naming the file and line for an empty file or a malformed row.
    """
    format = format or detect_format(path)
    if format not in FORMATS:
        raise DataError(f"unknown table format {format!r}; use --format with one of {', '.join(FORMATS)}")
    report = report if report is not None else ReadReport(str(path), format)
    report.format = format
    if format in ("parquet", "arrow", "hf"):
        columns, rows = _read_columnar(str(path), format)
        report.used = len(rows)
        return columns, rows
    path = Path(path)
    text = read_text_file(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty")
    if format in ("jsonl", "json"):
        if format == "json" and text.lstrip().startswith("["):
            columns, rows = _read_json_array(path, text)
        else:
            columns, rows = _read_jsonl(path, text, report)
        report.used = len(rows)
        return columns, rows
    return _read_delimited(path, text, format, header, names, report)


def _read_delimited(
    path: Path, text: str, format: str, header: bool | None, names: Iterable[str], report: ReadReport
) -> tuple[list[str], list[Row]]:
    if format == "tsv":
        reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE, strict=True)
    else:
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    try:
        for record in reader:
            if not record or (len(record) == 1 and not record[0].strip()):
                report.skip("blank lines")
                continue
            records.append((reader.line_num, record))
    except csv.Error as e:
        raise DataError(f"{path}:{reader.line_num}: malformed {format.upper()}: {e}") from None
    if header is None:
        header, why = detect_header([r for _, r in records], names)
        report.notes.append(
            f"first line is a header ({why}; --no-header reads it as data)"
            if header
            else f"no header ({why}; --header skips the first line)"
        )
    if header:
        report.skip("header line")
        columns = [name.strip() for name in records[0][1]]
        records = records[1:]
        if not records:
            raise DataError(f"{path}: a header line but no data rows (--no-header if it is data)")
    else:
        columns = [str(i) for i in range(len(records[0][1]))]
    rows: list[Row] = []
    for line, record in records:
        if len(record) != len(columns):
            like = "the header" if header else "the first line"
            raise DataError(
                f"{path}:{line}: expected {len(columns)} {format.upper()} fields like {like}, got {len(record)}"
            )
        rows.append(Row(dict(zip(columns, record)), f"{path}:{line}"))
    report.used = len(rows)
    return columns, rows


def detect_header(records: Sequence[Sequence[str]], names: Iterable[str] = ()) -> tuple[bool, str]:
    """Whether the first record names the columns, and why it looks so.

    A header when it holds a column name the caller looks for, or holds a word where every later value of
    its column is a number. Data when one of its values recurs in its column below (a label, which a column
    name would not) or it has a number where the column has numbers. Otherwise a header, the common case.
    """
    first, rest = list(records[0]), [r for r in records[1:] if len(r) == len(records[0])]
    known = [name for name in names if name in first]
    if known:
        return True, f"it names column {known[0]!r}"
    if not rest:
        return False, "the file has one line"
    for j, value in enumerate(first):
        below = [r[j] for r in rest]
        numbers = all(_is_number(v) for v in below)
        if numbers and not _is_number(value):
            return True, f"{value!r} is not a number like the rest of column {j}"
        if numbers and _is_number(value):
            return False, f"its column {j} value {value!r} is a number like those below"
        if value.strip() and value in below:
            return False, f"its column {j} value {value!r} recurs below"
    return True, "nothing in it looks like data"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _stringify(obj: dict[Any, Any]) -> dict[str, str]:
    return {str(k): "" if v is None else v if isinstance(v, str) else json.dumps(v) for k, v in obj.items()}


def _read_jsonl(path: Path, text: str, report: ReadReport) -> tuple[list[str], list[Row]]:
    columns: dict[str, None] = {}
    rows: list[Row] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            report.skip("blank lines")
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{number}: not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{number}: expected a JSON object per line, got {type(obj).__name__}")
        fields = _stringify(obj)
        columns.update(dict.fromkeys(fields))
        rows.append(Row(fields, f"{path}:{number}"))
    if not rows:
        raise DataError(f"{path}: the file is empty")
    return list(columns), rows


def _read_json_array(path: Path, text: str) -> tuple[list[str], list[Row]]:
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    return _object_rows(path, items, "item")


def _object_rows(source: str | Path, items: Sequence[Any], unit: str) -> tuple[list[str], list[Row]]:
    columns: dict[str, None] = {}
    rows: list[Row] = []
    for number, obj in enumerate(items, start=1):
        if not isinstance(obj, dict):
            raise DataError(f"{source}: {unit} {number}: expected a JSON object, got {type(obj).__name__}")
        fields = _stringify(obj)
        columns.update(dict.fromkeys(fields))
        rows.append(Row(fields, f"{source}: {unit} {number}"))
    if not rows:
        raise DataError(f"{source}: no rows")
    return list(columns), rows


# ------------------------------------------------------------------------------ Parquet, Arrow, the hub


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ConfigError("Parquet and Arrow data need pyarrow: pip install 'bertkit[parquet]'") from None
    return pyarrow


def _read_columnar(source: str, format: str) -> tuple[list[str], list[Row]]:
    """Rows of a Parquet file, an Arrow file or ``datasets`` directory, or an ``hf:`` dataset split."""
    if format == "hf":
        table = _load_hub_split(source)
    else:
        path = Path(source)
        if not path.exists():
            raise DataError(f"{path}: no such file or directory")
        pa = _pyarrow()
        if format == "parquet":
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as e:
                raise DataError(f"{path}: not a readable Parquet file ({e})") from None
        else:
            table = _read_arrow(path)
    return _object_rows(source, table.to_pylist(), "row")


def _read_arrow(path: Path) -> Any:
    """An Arrow file, or the Arrow files of a ``datasets.save_to_disk`` directory concatenated in order."""
    pa = _pyarrow()
    if path.is_dir():
        if (path / "dataset_dict.json").is_file():
            splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8")).get("splits", [])
            raise DataError(
                f"{path}: a dataset with splits {', '.join(splits)}; give one split's directory, e.g. {path / splits[0]}"
                if splits
                else f"{path}: a dataset dictionary without splits"
            )
        files = sorted(path.glob("*.arrow"))
        state = path / "state.json"
        if state.is_file():  # its list keeps the shards' order
            listed = json.loads(state.read_text(encoding="utf-8")).get("_data_files", [])
            files = [path / f["filename"] for f in listed] or files
        if not files:
            raise DataError(f"{path}: a directory without .arrow files; give a datasets save_to_disk directory")
    else:
        files = [path]
    tables = []
    for file in files:
        try:
            with pa.memory_map(str(file)) as source:
                try:
                    tables.append(pa.ipc.open_stream(source).read_all())
                except pa.ArrowInvalid:
                    source.seek(0)
                    tables.append(pa.ipc.open_file(source).read_all())
        except (OSError, pa.ArrowException) as e:
            raise DataError(f"{file}: not a readable Arrow file ({e})") from None
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def parse_hub_name(source: str) -> tuple[str, str | None, str]:
    """``hf:NAME[:CONFIG]:SPLIT`` -> (name, config, split)."""
    parts = source[len(HF_PREFIX) :].split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise DataError(f"{source}: write a hub dataset as hf:NAME:SPLIT or hf:NAME:CONFIG:SPLIT (hf:glue:sst2:train)")
    return parts[0], parts[1] if len(parts) == 3 else None, parts[-1]


def _load_hub_split(source: str) -> Any:
    name, config, split = parse_hub_name(source)
    _pyarrow()
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{source}: hub datasets need the datasets package: pip install 'bertkit[datasets]'"
        ) from None
    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # datasets raises many kinds (ConnectionError, FileNotFoundError, ValueError...)
        offline = os.environ.get("HF_DATASETS_OFFLINE", "") in ("1", "ON", "YES", "TRUE") or os.environ.get(
            "HF_HUB_OFFLINE", ""
        ) in ("1", "ON", "YES", "TRUE")
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        hint = "; offline and not in the cache: load it once online" if offline else ""
        raise DataError(f"{source}: cannot load {name!r} split {split!r}{hint} ({reason})") from None
    if isinstance(dataset, datasets.DatasetDict):
        raise DataError(f"{source}: give a split (splits: {', '.join(dataset)})")
    return dataset.with_format("arrow")[:]


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: Literal[True] = ...,
) -> str: ...


@overload
def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool,
) -> str | None: ...


def pick_column(
    path: str | os.PathLike,
    columns: Sequence[str],
    requested: str | int | None,
    candidates: Sequence[str],
    role: str,
    *,
    required: bool = True,
) -> str | None:
    """The column to use for ``role``: the requested one (a name, or a 0-based index), else the first known
    default present. Raises ``DataError`` listing the available columns when it is missing.
    """
    if requested is not None:
        if isinstance(requested, int) or (
            isinstance(requested, str) and requested.isdigit() and requested not in columns
        ):
            index = int(requested)
            if not 0 <= index < len(columns):
                raise DataError(f"{path}: {role} column index {index} is out of range (0..{len(columns) - 1})")
            return columns[index]
        if requested not in columns:
            raise DataError(f"{path}: no {role} column {requested!r}; columns are {', '.join(map(repr, columns))}")
        return requested
    for name in candidates:
        if name in columns:
            return name
    if required:
        option = f"--{role.replace(' ', '-')}-column"
        raise DataError(
            f"{path}: no {role} column found (looked for {', '.join(map(repr, candidates))}); "
            f"columns are {', '.join(map(repr, columns))}; name it with {option}"
        )
    return None
