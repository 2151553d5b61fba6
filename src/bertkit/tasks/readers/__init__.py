"""Reading labelled tables, with errors that name the file and line and a report of what was read.

Formats: TSV (GLUE style), CSV, JSONL, a JSON array of objects, Parquet, an Arrow file or a Hugging Face
``datasets`` directory written by ``save_to_disk``, and ``hf:NAME[:CONFIG]:SPLIT`` (``datasets.load_dataset``).
The format comes from the suffix (a directory is a ``datasets`` directory) unless given. Any file may be
compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``): the suffix under the compression names the format.

Files are opened through :mod:`bertkit.formats`, the layer the pre-training corpus reader shares, so both
take the same compressions and word each failure the same way. A UTF-8 byte-order mark (MRPC) is dropped.
Parquet, Arrow and ``hf:`` need the optional extras ``parquet`` (pyarrow) and ``datasets``.

A TSV/CSV file's first line is its header when ``header=True``, data when ``False``; by default it is
detected (:func:`detect_header`) and the decision is written in the :class:`ReadReport`, so that a row is
never dropped without a word.

The rooms: ``table`` (the format and the dispatch), ``delimited`` (TSV/CSV and header detection), ``rows``
(records to rows), ``hub`` (``hf:`` names), ``columns`` (which column plays a role), ``report``, and
``conllu`` (Universal Dependencies files for the tagging task; the table readers name one they are given).
"""

from bertkit.formats import read_text as read_text_file
from bertkit.tasks.readers.columns import pick_column
from bertkit.tasks.readers.delimited import detect_header
from bertkit.tasks.readers.hub import HF_PREFIX, parse_hub_name
from bertkit.tasks.readers.report import ReadReport
from bertkit.tasks.readers.rows import Row
from bertkit.tasks.readers.table import FORMATS, detect_format, read_table

__all__ = [
    "FORMATS",
    "HF_PREFIX",
    "ReadReport",
    "Row",
    "detect_format",
    "detect_header",
    "parse_hub_name",
    "pick_column",
    "read_table",
    "read_text_file",
]
