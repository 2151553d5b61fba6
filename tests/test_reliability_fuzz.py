"""Property-based tests over every reader of untrusted input: each input ends in a result or a documented
``BertkitError`` subclass; nothing hangs and nothing else escapes.

The ``check_*`` functions are the properties; the tests run them with a bounded number of examples, and
``benchmarks/fuzz_inputs.py`` runs the same functions at scale and records the counts.
"""

from __future__ import annotations

import gc
import json
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import NoReturn, TypeVar

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from bertkit.checkpoint_files import read_state_dict
from bertkit.config import BertConfig
from bertkit.data.corpus import CorpusOptions, CorpusStats, document_sentences, read_documents
from bertkit.errors import BertkitError, CheckpointError, TokenizerError
from bertkit.models.bert import BertModel, PreTrainedMixin
from bertkit.tasks import get_task
from bertkit.tokenizer import Tokenizer
from bertkit.weights import load_model, save_pretrained

EXAMPLES = 60
FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,  # CI: the same inputs each run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Text with every kind of code point: lone surrogates, controls, combining marks, CJK, private use.
any_text = st.text(st.characters(codec=None, categories=None), max_size=300)
hostile_bytes = st.one_of(
    st.binary(max_size=600),
    any_text.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.lists(
        st.sampled_from(
            [
                b"\t",
                b",",
                b"\n",
                b"\r\n",
                b'"',
                b"{",
                b"}",
                b"[",
                b"]",
                b":",
                b"\xef\xbb\xbf",
                b"label",
                b"sentence",
                b"O",
                b"B-PER",
                b"-DOCSTART-",
                b" ",
                b"\x00",
                b"\xff",
                b"null",
                b"1",
                b'{"text": ',
                b'"context"',
                b'"qas"',
                b'"data"',
            ]
        ),
        max_size=80,
    ).map(b"".join),
)


# ------------------------------------------------------------------------------------------ tokenizer
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "cat", "##s", "北", "京", ".", ",", "!", "é"]


def make_tokenizer(directory: Path) -> Tokenizer:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return Tokenizer.from_vocab(directory / "vocab.txt", lowercase=True)


def check_tokenizer(tokenizer: Tokenizer, text: str, pair: str | None, max_length: int | None) -> None:
    try:
        enc = tokenizer.encode(text, pair, max_length=max_length, truncation=max_length is not None)
    except BertkitError:
        return
    n = len(enc.ids)
    assert len(enc.tokens) == len(enc.type_ids) == len(enc.attention_mask) == len(enc.offsets) == n
    assert all(0 <= i < tokenizer.vocab_size for i in enc.ids)
    if max_length is not None and max_length >= 3 + (pair is not None):
        assert n <= max_length
    for (start, end), seq in zip(enc.offsets, enc.sequence_ids):
        source = text if seq == 0 else pair if seq == 1 else ""
        assert 0 <= start <= end <= len(source or "")
    tokenizer.decode(enc.ids)


@FAST
@given(text=any_text, pair=st.none() | any_text, max_length=st.none() | st.integers(1, 40))
def test_tokenizer_takes_any_unicode(tokenizer, text, pair, max_length):
    check_tokenizer(tokenizer, text, pair, max_length)


T = TypeVar("T")


def python_calls(work: Callable[[], T]) -> tuple[int, T]:
    """How many Python and builtin calls ``work()`` makes (the share of the work done in Python), and its result."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    gc.disable()  # a collection in the middle would count the finalizers it runs
    sys.setprofile(count)
    try:
        result = work()
    finally:
        sys.setprofile(None)
        gc.enable()
    return calls, result


def test_tokenizer_huge_string_is_linear(tokenizer):
    unit = "the cats. 北京! "
    text = (unit * 70_000)[:1_000_000]  # 1 M characters
    small = text[: len(unit) * 1000]
    tokenizer.encode(small)  # first call: anything built lazily is built here
    small_calls, small_enc = python_calls(lambda: tokenizer.encode(small))
    calls, enc = python_calls(lambda: tokenizer.encode(text))
    # Python makes the same few calls whatever the length (the per-character work is in Rust), and the
    # tokens grow with the text: 70 times the characters, 70 times the tokens.
    assert calls == small_calls
    assert len(enc.ids) > 300_000
    assert len(enc.ids) - 2 == (len(small_enc.ids) - 2) * len(text) // len(small)
    enc = tokenizer.encode(text, max_length=16, truncation=True)
    assert len(enc.ids) == 16
    with pytest.raises(TokenizerError):  # the Rust tokenizer takes no lone surrogates: a TokenizerError
        tokenizer.encode("the cat \ud800")


# ------------------------------------------------------------------------------------------ files
def check_file(kind: str, path: Path, data: bytes) -> None:
    """Read ``data`` as a ``kind`` file: a result or a BertkitError."""
    path.write_bytes(data)
    try:
        if kind == "corpus":
            for doc in read_documents([path], CorpusOptions(), CorpusStats()):
                document_sentences(doc)
        elif kind in ("tsv", "csv", "jsonl"):
            get_task("classification").read(path)
        elif kind == "conll":
            get_task("ner").read(path)
        elif kind == "squad":
            get_task("qa").read(path, training=True)
        elif kind == "config":
            BertConfig.load(path)
        elif kind == "weights":
            read_state_dict(path)
        else:
            raise ValueError(kind)
    except BertkitError:
        pass


FILE_KINDS = {
    "corpus": "corpus.txt",
    "tsv": "train.tsv",
    "csv": "train.csv",
    "jsonl": "train.jsonl",
    "conll": "train.conll",
    "squad": "train.json",
    "config": "config.json",
    "weights": "model.safetensors",
}


@FAST
@pytest.mark.parametrize("kind", sorted(FILE_KINDS))
@given(data=hostile_bytes)
def test_readers_take_any_bytes(tmp_path, kind, data):
    check_file(kind, tmp_path / FILE_KINDS[kind], data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
squad_like = st.fixed_dictionaries(
    {
        "version": json_values,
        "data": st.lists(
            st.fixed_dictionaries(
                {
                    "title": json_values,
                    "paragraphs": st.lists(
                        st.fixed_dictionaries(
                            {
                                "context": st.text(max_size=40) | json_values,
                                "qas": st.lists(
                                    st.fixed_dictionaries(
                                        {
                                            "id": json_values,
                                            "question": st.text(max_size=20) | json_values,
                                            "is_impossible": json_values,
                                            "answers": st.lists(
                                                st.fixed_dictionaries(
                                                    {
                                                        "text": st.text(max_size=10) | json_values,
                                                        "answer_start": st.integers(-5, 60) | json_values,
                                                    }
                                                ),
                                                max_size=2,
                                            )
                                            | json_values,
                                        }
                                    ),
                                    max_size=3,
                                )
                                | json_values,
                            }
                        ),
                        max_size=3,
                    )
                    | json_values,
                }
            ),
            max_size=2,
        )
        | json_values,
    }
)
config_like = st.dictionaries(
    st.sampled_from(
        [
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "hidden_act",
            "hidden_dropout_prob",
            "max_position_embeddings",
            "type_vocab_size",
            "layer_norm_eps",
            "pad_token_id",
            "num_labels",
            "id2label",
            "model_type",
            "architectures",
            "classifier_dropout",
            "attention_probs_dropout_prob",
            "initializer_range",
            "problem_type",
        ]
    ),
    json_values | st.integers(-3, 5000),
    max_size=8,
)


@FAST
@given(document=squad_like)
def test_squad_reader_takes_any_json_shape(tmp_path, document):
    check_file("squad", tmp_path / "train.json", json.dumps(document).encode())


@FAST
@given(values=config_like)
def test_config_takes_any_json_object(tmp_path, values):
    check_file("config", tmp_path / "config.json", json.dumps(values).encode())


# ------------------------------------------------------------------------------------------ checkpoints
def tiny_model_dir(directory: Path) -> Path:
    torch.manual_seed(0)
    save_pretrained(
        BertModel(BertConfig.preset("tiny", vocab_size=32, max_position_embeddings=16, intermediate_size=64)), directory
    )
    return directory


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model_dir(tmp_path_factory.mktemp("model"))


def check_weights_mutation(
    model_dir: Path, work: Path, cut: int | None, flips: list[tuple[int, int]], config_edit: dict
) -> None:
    """A model directory whose safetensors file is truncated/bit-flipped and whose config may lie: it loads
    (and then matches the config) or raises CheckpointError/ConfigError."""
    work.mkdir(parents=True, exist_ok=True)
    raw = bytearray((model_dir / "model.safetensors").read_bytes())
    if cut is not None:
        raw = raw[: cut % (len(raw) + 1)]
    for position, value in flips:
        if raw:
            raw[position % len(raw)] = value
    (work / "model.safetensors").write_bytes(bytes(raw))
    config = json.loads((model_dir / "config.json").read_text())
    config.update(config_edit)
    (work / "config.json").write_text(json.dumps(config))
    try:
        model = load_model(work)
    except BertkitError:
        return
    assert isinstance(model, PreTrainedMixin)
    if hasattr(model, "bert"):  # a head: its config is its encoder's
        assert isinstance(model.bert, BertModel)
        assert model.config.hidden_size == model.bert.config.hidden_size


@FAST
@given(
    cut=st.none() | st.integers(0, 10**6),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
    config_edit=st.dictionaries(
        st.sampled_from(
            [
                "vocab_size",
                "hidden_size",
                "num_hidden_layers",
                "intermediate_size",
                "max_position_embeddings",
                "num_attention_heads",
            ]
        ),
        st.sampled_from([1, 2, 4, 31, 33, 64, 10**6, 10**9, 10**12]),
        max_size=2,
    ),
)
def test_damaged_weights_and_lying_configs(model_dir, tmp_path, cut, flips, config_edit):
    check_weights_mutation(model_dir, tmp_path / "m", cut, flips, config_edit)


def test_config_that_lies_about_sizes_is_refused_before_allocating(model_dir, tmp_path, monkeypatch):
    work = tmp_path / "liar"
    work.mkdir()
    (work / "model.safetensors").write_bytes((model_dir / "model.safetensors").read_bytes())
    config = json.loads((model_dir / "config.json").read_text())
    config.update(vocab_size=10**9, num_hidden_layers=10**5)  # terabytes if built
    (work / "config.json").write_text(json.dumps(config))

    def build_nothing(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a layer was built before the config was checked against the weights")

    for layer in (torch.nn.Embedding, torch.nn.Linear):  # the layers that would take the terabytes
        monkeypatch.setattr(layer, "__init__", build_nothing)
    with pytest.raises(CheckpointError, match="config"):
        load_model(work)


def test_safetensors_header_claiming_huge_size_is_refused(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", 2**62) + b"{}")
    with pytest.raises(CheckpointError):
        read_state_dict(path)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2**31, 2**31], "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    with pytest.raises(CheckpointError):
        read_state_dict(path)


def test_wrong_shapes_are_refused(model_dir, tmp_path):
    state = read_state_dict(model_dir)
    name = next(n for n in state if n.endswith("attention.output.dense.weight"))
    state[name] = torch.zeros(3, 3)
    work = tmp_path / "shapes"
    work.mkdir()
    save_file(state, work / "model.safetensors", metadata={"format": "pt"})
    (work / "config.json").write_text((model_dir / "config.json").read_text())
    with pytest.raises(CheckpointError, match="shape"):
        load_model(work)
