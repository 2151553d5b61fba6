"""How a command declares its options, and the options several commands share, declared once here.

Every option is a field of a dataclass with a docstring (its help), and the command line is generated from
the fields (:mod:`bertkit.cli.options`). A command's own options are a dataclass in its module, its fields
flagged with ``cli(...)`` where the flag is not ``--field-name``; the command's function takes the filled
dataclass (:func:`options_command`, or :func:`generated_command` for a command whose other options come from
a library config, each ``None`` unless given). An option that several commands take is a field of
:class:`SharedOptions`, named in each command's dataclass as ``shared("name")``.

Help texts are rich markup: a bracket that opens with a lowercase letter would be read as a style tag and
vanish, hence parentheses for the examples and the defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from bertkit.cli.console import warn
from bertkit.cli.options import (
    CLI_SHARED,
    ConfigOption,
    cli,
    command_function,
    config_options,
    dataclass_parameters,
    lazy_command,
)
from bertkit.option_groups import OptionGroup, at_least, from_flat

if TYPE_CHECKING:  # the library imports torch, which `bertkit --help` should not pay for
    from bertkit.data.corpus import CorpusOptions, CorpusStats

T = TypeVar("T")


def _column_number_or_name(value: str) -> Any:
    """``--tag-column``: a number stays a number (``7``), a name (``upos``) a name."""
    return int(value) if value.strip().isdigit() else value


@dataclasses.dataclass(kw_only=True)
class SharedOptions:
    """The options several commands take, each declared once: a command's options dataclass names one as
    ``field: type = shared("name")`` (same flag, help and default; another default where the command's
    differs)."""

    # --------------------------------------------------------------------- models and inputs (inference)
    model: str = dataclasses.field(metadata=cli("--model", "-m"))
    """Model directory (Hugging Face layout) or hub id (org/name@revision)."""
    finetuned_model: str = dataclasses.field(metadata=cli("--model", "-m"))
    """Fine-tuned model directory."""
    input: str | None = dataclasses.field(default=None, metadata=cli("--input", "-i"))
    """Text file with one input per line; - for stdin."""
    as_json: bool = dataclasses.field(default=False, metadata=cli("--json"))
    """Print one JSON object per input instead of text."""
    batch_size: int = dataclasses.field(default=32, metadata=at_least(1, **cli("--batch-size")))
    """Inputs per forward pass."""
    feature_batch_size: int = dataclasses.field(default=64, metadata=at_least(1, **cli("--batch-size")))
    """Features per forward pass."""
    device: str = "cpu"
    """cpu | cuda | cuda:N."""
    threads: int | None = dataclasses.field(default=None, metadata=at_least(1, **cli("--threads", show_default=False)))
    """CPU threads for torch and the graph engines (default: BERTKIT_THREADS, else OMP_NUM_THREADS, else the
    cores this process may use: its CPU affinity capped by its cgroup CPU quota). On cores shared with other
    jobs, fewer threads can be faster."""
    quantize: str | None = dataclasses.field(default=None, metadata=cli("--quantize"))
    """int8: the encoder's linear layers in int8 (CPU inference; compiled unless --no-compile)."""
    compile: bool | None = dataclasses.field(default=None, metadata=cli("--compile/--no-compile"))
    """Run the model through torch.compile (default: with --quantize only)."""
    backend: str | None = None
    """auto | torch | onnxruntime | openvino: the engine behind the model's forward; onnxruntime and openvino
    export the model to ONNX once and cache it (BERTKIT_CACHE) (default auto: torch, but --quantize int8
    through ONNX Runtime where onnxruntime is installed). Every engine runs float32;
    BERTKIT_OPENVINO_PRECISION=bf16 lets openvino run bf16 on a CPU with AVX512_BF16 or AMX."""

    # ------------------------------------------------------------ labelled data (finetune, evaluate, predict)
    task: str | None = dataclasses.field(default=None, metadata=cli("--task", "-t"))
    """classification | regression | ner | qa | embedding (default: the model's)."""
    text_column: str | None = dataclasses.field(default=None, metadata=cli("--text-column"))
    """Classification: column of the text (GLUE names: sentence, sentence1, #1 String...)."""
    text_pair_column: str | None = dataclasses.field(default=None, metadata=cli("--text-pair-column"))
    """Classification: column of the second text ('' = none) (GLUE names: sentence2, #2 String...)."""
    label_column: str | None = dataclasses.field(default=None, metadata=cli("--label-column"))
    """Classification: column of the label (GLUE names: label, score, Quality...)."""
    tag_column: str | None = dataclasses.field(
        default=None, metadata=cli(parser=_column_number_or_name, metavar="COLUMN")
    )
    """ner: 0-based column of the tag, or for a CoNLL-U file its name: upos, xpos, deprel... (default: the
    last; CoNLL-U: upos; evaluate: the one the model was trained on)."""
    long_text: str | None = None
    """Classification: truncate (drop tokens past --max-seq-length) or windows (score overlapping windows of a
    long text and average them) (default: truncate; evaluate, predict: as trained)."""
    max_query_length: int | None = dataclasses.field(default=None, metadata=at_least(1))
    """qa: longest question in tokens; longer ones are cut (default: 64; evaluate, predict: as trained)."""
    max_seq_length: int | None = dataclasses.field(default=None, metadata=at_least(1))
    """Longest feature in tokens (default: as in training)."""
    format: str | None = None
    """tsv | csv | jsonl | json | parquet | arrow (a datasets save_to_disk directory) | hf
    (hf:NAME[:CONFIG]:SPLIT) (default: from the path)."""
    header: bool | None = dataclasses.field(default=None, metadata=cli("--header/--no-header"))
    """Whether a TSV/CSV file's first line names its columns (default: detected)."""

    # ------------------------------------------------------------- embedding models (evaluate, mine-negatives)
    query_prefix: str = ""
    """Text put before every query or anchor, e.g. 'query: '."""
    passage_prefix: str = ""
    """Text put before every passage, e.g. 'passage: '."""

    # ----------------------------------------------------------------------------- config files (training)
    config: str | None = dataclasses.field(default=None, metadata=cli("--config", "-c"))
    """TOML/YAML file with any of these options (flags win)."""

    # ------------------------------------------------------- raw corpora (prepare-data, tokenizer train/extend)
    keep_gutenberg_boilerplate: bool = False
    """Do not strip Project Gutenberg headers/footers."""


def shared(name: str, **changes: Any) -> Any:
    """The field of a command's options dataclass that is :class:`SharedOptions`'s ``name``: its flag, help
    and default (``changes`` may give another ``default``)."""
    base = {f.name: f for f in dataclasses.fields(SharedOptions)}[name]
    metadata = {**base.metadata, CLI_SHARED: (SharedOptions, name)}
    default = changes.get("default", base.default)
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def task_options(
    text_column: str | None, text_pair_column: str | None, label_column: str | None, **more: object
) -> dict[str, object]:
    """Task options given on the command line (a column is a name, or digits for a 0-based index)."""
    columns = dict(text_column=text_column, text_pair_column=text_pair_column, label_column=label_column)
    options: dict[str, object] = {k: v for k, v in columns.items() if v is not None}
    options.update({k: v for k, v in more.items() if v is not None})
    return options


# --------------------------------------------------------- raw corpora (prepare-data, tokenizer train/extend)
def corpus_config_options() -> list[ConfigOption]:
    """The options of ``CorpusOptions`` (format, text field, cleaning) that every command reading a raw corpus
    takes; ``strip_gutenberg`` is the switch ``--keep-gutenberg-boilerplate`` (``SharedOptions``)."""
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
    name: str,
    doc: str | None,
    generated: list[ConfigOption],
    own: type[T],
    run: Callable[[T, dict[str, Any]], None],
    *,
    exclude: Iterable[str] = (),
) -> Callable[..., None]:
    """The function typer turns into command ``name``: the ``generated`` options (each ``None`` unless given),
    then the options of dataclass ``own`` (less ``exclude``). ``run`` is called with ``own`` filled and the
    generated options by name."""
    parameters = dataclass_parameters(own, exclude)

    def call(given: dict[str, Any]) -> None:
        run(from_flat(own, {key: given.pop(key) for key in parameters}), given)

    return command_function(name, doc, generated, parameters, call)


@dataclasses.dataclass(kw_only=True)
class EngineOptions(OptionGroup):
    """How a command runs a model on this machine (``embed``, ``evaluate``, ``predict``, ``serve``): int8,
    torch.compile, the engine behind the forward, the CPU threads."""

    quantize: str | None = shared("quantize")
    compile: bool | None = shared("compile")
    backend: str | None = shared("backend")
    threads: int | None = shared("threads")

    def loading(self) -> dict[str, Any]:
        """The keywords of ``bertkit.inference.load`` these options give."""
        return {"quantize": self.quantize, "compile": self.compile, "backend": self.backend}


@dataclasses.dataclass(kw_only=True)
class LengthOptions(OptionGroup):
    """How an inference command treats inputs longer than the model's length (``embed``, ``classify``, ``tag``,
    ``answer``): where it cuts them, and whether it reads a long text in overlapping windows instead. Every
    command that cuts inputs says so in one line on stderr, naming ``--max-seq-length``."""

    max_seq_length: int | None = dataclasses.field(
        default=None, metadata=at_least(1, **cli("--max-seq-length", "--max-length"))
    )
    """Cut inputs at this many tokens (default: the length the model was fine-tuned with, else its
    sentence-transformers length, else its maximum); a line on stderr says how many were cut."""
    long_text: str | None = None
    """truncate | windows: read a single text longer than the length in overlapping windows (default: as the
    model was fine-tuned, else truncate)."""
    window_stride: int | None = dataclasses.field(default=None, metadata=at_least(1))
    """Tokens between the starts of overlapping windows (default: as fine-tuned, else 128)."""


@dataclasses.dataclass
class NoOptions:
    """The own options of a command whose every option is generated from a library config (``demo``)."""


def options_command(
    app: typer.Typer, name: str, options: type[T], *, short_help: str, exclude: Iterable[str] = ()
) -> Callable[[Callable[[T], None]], Callable[[T], None]]:
    """Register command ``name`` on ``app``: its options generated from dataclass ``options`` (less
    ``exclude``), its help the decorated function's docstring; the function is called with ``options``
    filled. The options are built on first use (reading the docstrings costs ``bertkit --help`` time)."""

    def register(run: Callable[[T], None]) -> Callable[[T], None]:
        def build() -> Callable[..., None]:
            parameters = dataclass_parameters(options, exclude)
            return command_function(name, run.__doc__, [], parameters, lambda given: run(from_flat(options, given)))

        def summary() -> None:  # what `bertkit --help` lists: the name and the short help
            pass

        summary.__doc__ = run.__doc__
        app.command(name, short_help=short_help, cls=lazy_command(build))(summary)
        return run

    return register


def only_fields(cls: type, *names: str) -> set[str]:
    """The fields of dataclass ``cls`` other than ``names``: ``config_options``'s ``exclude`` for a command
    that takes a few of a dataclass's fields as options."""
    missing = set(names) - {f.name for f in dataclasses.fields(cls)}
    assert not missing, f"{cls.__name__} has no field {', '.join(sorted(missing))}"
    return {f.name for f in dataclasses.fields(cls)} - set(names)


def head_class(head: str) -> str | None:
    """The model class ``--head`` names: ``auto`` -> None (the checkpoint decides), ``encoder`` -> BertModel."""
    return {"auto": None, "encoder": "BertModel"}.get(head, head)


def threads_for(model: str, threads: int | None) -> bool:
    """Set the thread count of a command that runs ``model``, and say whether it is an export folder: ONNX
    Runtime takes the count when it opens the graph (``BERTKIT_THREADS``, read by ``bertkit.threads``), and
    torch is not imported; for a checkpoint, torch's count is set now (``bertkit.threads.use_threads``)."""
    import os

    from bertkit.inference.exported import is_export_folder
    from bertkit.threads import ENV, chosen_threads, use_threads

    if not is_export_folder(model):
        use_threads(threads)
        return False
    os.environ[ENV] = str(chosen_threads(threads))
    return True
