"""The file-format layer under every reader of user data: the pre-training corpus (``bertkit.data``) and
labelled data (``bertkit.tasks``) open files here, so both take the same formats and compressions and say
each failure in the same words.

- ``compression``: opening a path through ``.gz``/``.bz2``/``.xz``/``.zst``, and one error for a damaged stream
- ``text``: UTF-8 text, or one message naming the file, line and byte
- ``jsonl``: JSON lines, one object per line
- ``tables``: Parquet and Arrow tables (``pyarrow``), ``datasets`` directories
- ``extras``: optional dependencies and the one ``pip install 'bertkit[...]'`` message
"""

from bertkit.formats.compression import COMPRESSIONS, open_decompressed, read_bytes, reading, split_suffix
from bertkit.formats.extras import EXTRAS, import_extra
from bertkit.formats.jsonl import JSONL_SUFFIXES, json_lines, json_object
from bertkit.formats.tables import (
    ARROW_SUFFIXES,
    PARQUET_SUFFIXES,
    is_saved_dataset,
    open_parquet,
    pyarrow,
    read_arrow,
    read_parquet,
    saved_dataset_files,
)
from bertkit.formats.text import decode_utf8, existing_file, iter_text_lines, read_text, text_lines

__all__ = [
    "ARROW_SUFFIXES",
    "COMPRESSIONS",
    "EXTRAS",
    "JSONL_SUFFIXES",
    "PARQUET_SUFFIXES",
    "decode_utf8",
    "existing_file",
    "import_extra",
    "is_saved_dataset",
    "iter_text_lines",
    "json_lines",
    "json_object",
    "open_decompressed",
    "open_parquet",
    "pyarrow",
    "read_arrow",
    "read_bytes",
    "read_parquet",
    "read_text",
    "reading",
    "saved_dataset_files",
    "split_suffix",
    "text_lines",
]
