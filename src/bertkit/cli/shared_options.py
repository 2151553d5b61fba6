"""How a command declares its options, and the options several commands share, declared once here.

Where a config dataclass holds a command's options, they are generated from its fields
(:mod:`bertkit.cli.options`; a field given in other units or as a list becomes a ``ConfigOption`` written from
the field). Every other option is a keyword parameter, ``name: Annotated[type, typer.Option(...)] = default``:
of the command's function, or, for a command with generated options, of the function that runs it
(:func:`generated_command`). An option that several commands take is one of the aliases below. Typer passes
every parameter by name, so a command whose required options follow optional ones (the order of its --help)
makes them keyword-only with ``*``.

Help texts are rich markup: a bracket that opens with a lowercase letter would be read as a style tag and
vanish, hence parentheses for the examples and the defaults.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bertkit.cli.console import warn
from bertkit.cli.options import ConfigOption, command_function, config_options

if TYPE_CHECKING:  # the library imports torch, which `bertkit --help` should not pay for
    from bertkit.data.corpus import CorpusOptions, CorpusStats

# ------------------------------------------------------------------------- models and inputs (inference)
ModelOption = Annotated[
    str, typer.Option("--model", "-m", help="Model directory (Hugging Face layout) or hub id (org/name@revision).")
]
FinetunedModelOption = Annotated[str, typer.Option("--model", "-m", help="Fine-tuned model directory.")]
InputOption = Annotated[
    str | None, typer.Option("--input", "-i", help="Text file with one input per line; - for stdin.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object per input instead of text.")]
BatchOption = Annotated[int, typer.Option("--batch-size", help="Inputs per forward pass.")]
FeatureBatchOption = Annotated[int, typer.Option(help="Features per forward pass.")]
DeviceOption = Annotated[str, typer.Option(help="cpu | cuda | cuda:N.")]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        help="CPU threads for torch and the graph engines (default: BERTKIT_THREADS, else OMP_NUM_THREADS, else the "
        "cores this process may use: its CPU affinity capped by its cgroup CPU quota). On cores shared with other "
        "jobs, fewer threads can be faster.",
        show_default=False,
    ),
]
QuantizeOption = Annotated[
    str | None,
    typer.Option(
        "--quantize", help="int8: the encoder's linear layers in int8 (CPU inference; compiled unless --no-compile)."
    ),
]
CompileOption = Annotated[
    bool | None,
    typer.Option("--compile/--no-compile", help="Run the model through torch.compile (default: with --quantize only)."),
]
BackendOption = Annotated[
    str | None,
    typer.Option(
        help="auto | torch | onnxruntime | openvino: the engine behind the model's forward; onnxruntime and "
        "openvino export the model to ONNX once and cache it (BERTKIT_CACHE) (default auto: torch, but --quantize "
        "int8 through ONNX Runtime where onnxruntime is installed). Every engine runs float32; "
        "BERTKIT_OPENVINO_PRECISION=bf16 lets openvino run bf16 on a CPU with AVX512_BF16 or AMX."
    ),
]

# ------------------------------------------------------------------ labelled data (finetune, evaluate, predict)
TaskOption = Annotated[
    str | None,
    typer.Option("--task", "-t", help="classification | regression | ner | qa | embedding (default: the model's)."),
]
TextColumnOption = Annotated[
    str | None,
    typer.Option(
        "--text-column", help="Classification: column of the text (GLUE names: sentence, sentence1, #1 String...)."
    ),
]
PairColumnOption = Annotated[
    str | None,
    typer.Option(
        "--text-pair-column",
        help="Classification: column of the second text ('' = none) (GLUE names: sentence2, #2 String...).",
    ),
]
LabelColumnOption = Annotated[
    str | None,
    typer.Option("--label-column", help="Classification: column of the label (GLUE names: label, score, Quality...)."),
]


def _column_number_or_name(value: str) -> Any:
    """``--tag-column``: a number stays a number (``7``), a name (``upos``) a name."""
    return int(value) if value.strip().isdigit() else value


TagColumnOption = Annotated[
    str | None,
    typer.Option(
        help="ner: 0-based column of the tag, or for a CoNLL-U file its name: upos, xpos, deprel... (default: the "
        "last; CoNLL-U: upos; evaluate: the one the model was trained on).",
        parser=_column_number_or_name,
        metavar="COLUMN",
    ),
]
LongTextOption = Annotated[
    str | None,
    typer.Option(
        help="Classification: truncate (drop tokens past --max-seq-length) or windows (score overlapping windows "
        "of a long text and average them) (default: truncate; evaluate, predict: as trained)."
    ),
]
MaxQueryLengthOption = Annotated[
    int | None,
    typer.Option(
        help="qa: longest question in tokens; longer ones are cut (default: 64; evaluate, predict: as trained)."
    ),
]
MaxSeqLengthOption = Annotated[int | None, typer.Option(help="Longest feature in tokens (default: as in training).")]
FormatOption = Annotated[
    str | None,
    typer.Option(
        help="tsv | csv | jsonl | json | parquet | arrow (a datasets save_to_disk directory) | hf "
        "(hf:NAME[:CONFIG]:SPLIT) (default: from the path)."
    ),
]
HeaderOption = Annotated[
    bool | None,
    typer.Option(
        "--header/--no-header", help="Whether a TSV/CSV file's first line names its columns (default: detected)."
    ),
]

# ---------------------------------------------------------------- embedding models (evaluate, mine-negatives)
QueryPrefixOption = Annotated[str, typer.Option(help="Text put before every query or anchor, e.g. 'query: '.")]
PassagePrefixOption = Annotated[str, typer.Option(help="Text put before every passage, e.g. 'passage: '.")]

# ------------------------------------------------------------------------------ config files (training)
ConfigFileOption = Annotated[
    str | None, typer.Option("--config", "-c", help="TOML/YAML file with any of these options (flags win).")
]


def task_options(
    text_column: str | None, text_pair_column: str | None, label_column: str | None, **more: object
) -> dict[str, object]:
    """Task options given on the command line (a column is a name, or digits for a 0-based index)."""
    columns = dict(text_column=text_column, text_pair_column=text_pair_column, label_column=label_column)
    options: dict[str, object] = {k: v for k, v in columns.items() if v is not None}
    options.update({k: v for k, v in more.items() if v is not None})
    return options


# --------------------------------------------------------- raw corpora (prepare-data, tokenizer train/extend)
KeepBoilerplateOption = Annotated[bool, typer.Option(help="Do not strip Project Gutenberg headers/footers.")]


def corpus_config_options() -> list[ConfigOption]:
    """The options of ``CorpusOptions`` (format, text field, cleaning) that every command reading a raw corpus
    takes; ``strip_gutenberg`` is the switch ``--keep-gutenberg-boilerplate`` (KeepBoilerplateOption)."""
    from bertkit.data.corpus import CorpusOptions

    return config_options([CorpusOptions], exclude={"strip_gutenberg"})


def corpus_options(keep_gutenberg_boilerplate: bool, given: dict[str, Any]) -> CorpusOptions:
    """The ``CorpusOptions`` of a command's parsed options (its fields popped from ``given``)."""
    from bertkit.data.corpus import CorpusOptions

    corpus: dict[str, Any] = {"strip_gutenberg": not keep_gutenberg_boilerplate}
    for f in dataclasses.fields(CorpusOptions):
        value = given.pop(f.name, None)
        if value is not None:
            corpus[f.name] = value
    return CorpusOptions(**corpus)


def corpus_warnings(stats: CorpusStats) -> None:
    for line in stats.warnings():
        warn(line)


# ------------------------------------------------------------------------------------ generated commands
def generated_command(
    name: str, doc: str | None, generated: list[ConfigOption], run: Callable[..., None]
) -> Callable[..., None]:
    """The function typer turns into command ``name``: the ``generated`` options (each ``None`` unless given),
    then the options ``run`` declares as keyword-only parameters. ``run`` is called with all of them by
    name; it takes the generated ones as ``**fields``."""
    own = {
        p.name: (p.annotation, ... if p.default is p.empty else p.default)  # `...`: required (typer's marker)
        for p in inspect.signature(run, eval_str=True).parameters.values()
        if p.kind is p.KEYWORD_ONLY
    }
    return command_function(name, doc, generated, own, lambda given: run(**given))


def only_fields(cls: type, *names: str) -> set[str]:
    """The fields of dataclass ``cls`` other than ``names``: ``config_options``'s ``exclude`` for a command
    that takes a few of a dataclass's fields as options."""
    missing = set(names) - {f.name for f in dataclasses.fields(cls)}
    assert not missing, f"{cls.__name__} has no field {', '.join(sorted(missing))}"
    return {f.name for f in dataclasses.fields(cls)} - set(names)


def head_class(head: str) -> str | None:
    """The model class ``--head`` names: ``auto`` -> None (the checkpoint decides), ``encoder`` -> BertModel."""
    return {"auto": None, "encoder": "BertModel"}.get(head, head)
