"""BertModel and heads on the tiny preset: shapes, masking, attention paths, sparse MLM, losses, init."""

from __future__ import annotations

from typing import cast

import pytest
import torch
import torch.nn.functional as F

from bertkit.config import BertConfig
from bertkit.errors import ConfigError
from bertkit.models.bert import (
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    EncoderLayer,
)

VOCAB = 97


def tiny(**overrides) -> BertConfig:
    values = dict(vocab_size=VOCAB, max_position_embeddings=32)
    values.update(overrides)
    return BertConfig.preset("tiny", **values)


def batch(seed: int = 0, lengths=(9, 6, 4)):
    """Random ids with [CLS]=1 first, segments A/B, right padding to the longest length."""
    g = torch.Generator().manual_seed(seed)
    seq_len = max(lengths)
    ids = torch.randint(5, VOCAB, (len(lengths), seq_len), generator=g)
    ids[:, 0] = 1
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
        types[row, n // 2 : n] = 1
        ids[row, n:] = 0
    return ids, types, mask


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_outputs_shapes_and_hidden_states():
    config = tiny()
    model = BertModel(config).eval()
    ids, types, mask = batch()
    out = model(ids, types, mask, output_hidden_states=True, output_attentions=True)
    B, L = ids.shape
    assert out.last_hidden_state.shape == (B, L, config.hidden_size)
    assert out.pooler_output.shape == (B, config.hidden_size)
    assert len(out.hidden_states) == config.num_hidden_layers + 1
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert len(out.attentions) == config.num_hidden_layers
    probs = out.attentions[0]
    assert probs.shape == (B, config.num_attention_heads, L, L)
    torch.testing.assert_close(probs.sum(-1), torch.ones(B, config.num_attention_heads, L))
    # padded keys get no attention at all
    assert probs[2, :, :, 4:].abs().max().item() == 0.0
    # pooler is tanh(Dense(h[:, 0]))
    assert model.pooler is not None
    expected = torch.tanh(model.pooler.dense(out.last_hidden_state[:, 0]))
    torch.testing.assert_close(out.pooler_output, expected)
    plain = model(ids, types, mask)
    assert plain.hidden_states is None and plain.attentions is None


def test_embeddings_sum_then_layernorm():
    model = BertModel(tiny()).eval()
    ids, types, _ = batch()
    emb = model.embeddings
    positions = torch.arange(ids.shape[1])
    raw = (
        emb.word_embeddings.weight[ids]
        + emb.position_embeddings.weight[positions]
        + emb.token_type_embeddings.weight[types]
    )
    expected = F.layer_norm(raw, (raw.shape[-1],), emb.layer_norm.weight, emb.layer_norm.bias, 1e-12)
    torch.testing.assert_close(emb(ids, types), expected)
    # no token_type_ids means segment 0 everywhere
    torch.testing.assert_close(emb(ids), emb(ids, torch.zeros_like(ids)))


def test_encoder_layer_matches_textbook_formula():
    """One post-LN layer written out with plain tensor ops (exact erf GELU)."""
    config = tiny()
    layer = cast(EncoderLayer, BertModel(config).encoder.layers[0].eval())
    x = torch.randn(2, 5, config.hidden_size)
    H, A = config.hidden_size, config.num_attention_heads
    d = H // A
    q, k, v = F.linear(x, layer.attention.qkv.weight, layer.attention.qkv.bias).split(H, dim=-1)
    split = lambda t: t.view(2, 5, A, d).transpose(1, 2)  # noqa: E731
    scores = split(q) @ split(k).transpose(-1, -2) / d**0.5
    context = (scores.softmax(-1) @ split(v)).transpose(1, 2).reshape(2, 5, H)
    h = F.layer_norm(
        x + layer.attention.out(context),
        (H,),
        layer.attention_norm.weight,
        layer.attention_norm.bias,
        config.layer_norm_eps,
    )
    inner = layer.ffn_in(h)
    gelu = 0.5 * inner * (1 + torch.erf(inner / 2**0.5))
    expected = F.layer_norm(
        h + layer.ffn_out(gelu), (H,), layer.ffn_norm.weight, layer.ffn_norm.bias, config.layer_norm_eps
    )
    out, _ = layer(x, None)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_sdpa_and_eager_paths_agree():
    config = tiny()
    sdpa = BertModel(config).eval()
    eager = BertModel(config, attn_implementation="eager").eval()
    eager.load_state_dict(sdpa.state_dict())
    ids, types, mask = batch()
    for m in (mask, torch.ones_like(mask)):  # padded and unpadded batches
        a = sdpa(ids, types, m)
        b = eager(ids, types, m)
        c = sdpa(ids, types, m, output_attentions=True)  # forces the eager path per call
        torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.last_hidden_state, c.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_attn_implementation_from_config_and_validation():
    layer = cast(EncoderLayer, BertModel(tiny(attn_implementation="eager")).encoder.layers[0])
    assert layer.attention.attn_implementation == "eager"
    with pytest.raises(ConfigError):
        tiny(attn_implementation="flash")
    with pytest.raises(ConfigError):
        BertModel(tiny(), attn_implementation="flash")


def test_padding_never_changes_real_tokens():
    model = BertModel(tiny()).eval()
    ids, types, mask = batch()
    together = model(ids, types, mask)
    for row in range(ids.shape[0]):
        n = int(mask[row].sum())
        alone = model(ids[row : row + 1, :n], types[row : row + 1, :n])
        torch.testing.assert_close(
            together.last_hidden_state[row, :n], alone.last_hidden_state[0], atol=1e-5, rtol=1e-5
        )
        torch.testing.assert_close(together.pooler_output[row], alone.pooler_output[0], atol=1e-5, rtol=1e-5)
    # what sits in the padded slots does not matter either
    other = ids.clone()
    other[mask == 0] = 7
    torch.testing.assert_close(
        model(other, types, mask).last_hidden_state[mask.bool()], together.last_hidden_state[mask.bool()]
    )


def test_too_long_sequence_is_refused():
    model = BertModel(tiny(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.ones(1, 9, dtype=torch.long))


def test_dropout_only_in_training():
    model = BertModel(tiny()).eval()
    ids, types, mask = batch()
    a = model(ids, types, mask).last_hidden_state
    torch.testing.assert_close(a, model(ids, types, mask).last_hidden_state, atol=0, rtol=0)
    model.train()
    assert not torch.allclose(model(ids, types, mask).last_hidden_state, a)


def test_init_follows_bert():
    config = tiny()
    model = BertForPreTraining(config)
    layer = cast(EncoderLayer, model.bert.encoder.layers[0])
    assert model.bert.pooler is not None
    assert abs(layer.ffn_in.weight.std().item() - 0.02) < 1e-3
    assert abs(layer.ffn_in.weight.mean().item()) < 1e-3
    assert abs(model.bert.embeddings.position_embeddings.weight.std().item() - 0.02) < 1e-3
    for bias in (
        layer.ffn_in.bias,
        layer.attention.qkv.bias,
        model.mlm.decoder.bias,
        model.nsp.bias,
        model.bert.pooler.dense.bias,
    ):
        assert torch.count_nonzero(bias) == 0
    assert torch.all(layer.ffn_norm.weight == 1) and torch.count_nonzero(layer.ffn_norm.bias) == 0
    assert torch.all(model.mlm.layer_norm.weight == 1)
    assert torch.count_nonzero(model.bert.embeddings.word_embeddings.weight[config.pad_token_id]) == 0


def test_parameter_counts_of_base_and_large():
    # bert-base-uncased and bert-large-uncased BertModel sizes as published (with pooler)
    for name, expected in (("base", 109_482_240), ("large", 335_141_888)):
        with torch.device("meta"):
            model = BertModel(BertConfig.preset(name))
        assert sum(p.numel() for p in model.parameters()) == expected
        assert BertConfig.preset(name).num_parameters() == expected


def test_decoder_is_tied_to_word_embeddings():
    for cls in (BertForPreTraining, BertForMaskedLM):
        model = cls(tiny())
        assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
        with torch.no_grad():
            model.bert.embeddings.word_embeddings.weight[3] += 1.0
        assert torch.equal(model.mlm.decoder.weight[3], model.bert.embeddings.word_embeddings.weight[3])
        model = model.to(torch.float64)  # moving the model keeps the tie
        assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
        # the shared matrix is one parameter: the vocab-sized tensors are the embedding and the output bias
        vocab_sized = [p for p in model.parameters() if p.shape[0] == VOCAB]
        assert len(vocab_sized) == 2


def test_sparse_mlm_equals_dense_logits_at_masked_positions():
    config = tiny()
    model = BertForPreTraining(config).eval()
    with torch.no_grad():
        model.mlm.decoder.bias.normal_()  # a non-zero output bias must show up in both paths
    ids, types, mask = batch()
    dense = model(ids, types, mask).mlm_logits
    assert dense.shape == (*ids.shape, VOCAB)

    positions = torch.tensor([[1, 3, 5], [2, 4, 0], [1, 0, 0]])
    labels = torch.tensor([[11, 12, 13], [14, 15, -100], [16, -100, -100]])
    sparse = model(ids, types, mask, masked_positions=positions, masked_labels=labels)
    assert sparse.mlm_logits.shape == (3, 3, VOCAB)
    gathered = torch.stack([dense[b, positions[b]] for b in range(3)])
    torch.testing.assert_close(sparse.mlm_logits, gathered, atol=1e-5, rtol=1e-5)

    real = labels != -100
    expected_loss = F.cross_entropy(gathered[real], labels[real])
    torch.testing.assert_close(sparse.mlm_loss, expected_loss, atol=1e-5, rtol=1e-5)
    assert sparse.mlm_count.item() == 6
    assert sparse.mlm_correct.item() == int((gathered[real].argmax(-1) == labels[real]).sum())

    # HF-style dense labels: same positions, same loss; logits only for the labelled positions
    dense_labels = torch.full_like(ids, -100)
    for b in range(3):
        for p, lab in zip(positions[b], labels[b]):
            if lab != -100:
                dense_labels[b, p] = lab
    hf_style = model(ids, types, mask, labels=dense_labels)
    assert hf_style.mlm_logits.shape == (6, VOCAB)
    torch.testing.assert_close(hf_style.mlm_logits, dense[dense_labels != -100], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hf_style.mlm_loss, expected_loss, atol=1e-5, rtol=1e-5)
    assert sparse.loss is sparse.mlm_loss  # no NSP label given


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_output_rows_equal_gathering_the_full_output(attn):
    model = BertModel(tiny(), attn_implementation=attn).eval()
    ids, types, mask = batch()
    full = model(ids, types, mask)
    rows = torch.tensor([[3, 1, 3], [0, 5, 2], [1, 0, 0]])  # any order, repeats and [CLS] itself allowed
    expected = torch.stack([full.last_hidden_state[b, rows[b]] for b in range(3)])
    for kwargs in ({}, {"output_hidden_states": True}):
        out = model(ids, types, mask, output_rows=rows, **kwargs)
        torch.testing.assert_close(out.last_hidden_state, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(out.pooler_output, full.pooler_output, atol=1e-5, rtol=1e-5)
    no_pooler = BertModel(tiny(), add_pooling_layer=False, attn_implementation=attn).eval()
    no_pooler.load_state_dict(model.state_dict(), strict=False)
    torch.testing.assert_close(
        no_pooler(ids, types, mask, output_rows=rows).last_hidden_state, expected, atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("checkpointing", [False, True])
def test_last_layer_on_masked_rows_gives_the_full_gradients(checkpointing):
    """Sparse positions compute the last layer at the masked rows only; dense labels run it everywhere."""
    config = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    sparse_model = BertForPreTraining(config).train()
    dense_model = BertForPreTraining(config).train()
    dense_model.load_state_dict(sparse_model.state_dict())
    sparse_model.bert.gradient_checkpointing_enable(checkpointing)
    ids, types, mask = batch()
    positions = torch.tensor([[1, 3, 5], [2, 4, 0], [1, 0, 0]])
    labels = torch.tensor([[11, 12, 13], [14, 15, -100], [16, -100, -100]])
    dense_labels = torch.full_like(ids, -100)
    for b in range(3):
        for p, lab in zip(positions[b].tolist(), labels[b].tolist()):
            if lab != -100:
                dense_labels[b, p] = lab
    nsp = torch.tensor([0, 1, 1])
    sparse = sparse_model(ids, types, mask, masked_positions=positions, masked_labels=labels, next_sentence_label=nsp)
    dense = dense_model(ids, types, mask, labels=dense_labels, next_sentence_label=nsp)
    torch.testing.assert_close(sparse.loss, dense.loss, atol=1e-6, rtol=1e-5)
    sparse.loss.backward()
    dense.loss.backward()
    for (name, sparse_param), dense_param in zip(sparse_model.named_parameters(), dense_model.parameters()):
        torch.testing.assert_close(sparse_param.grad, dense_param.grad, atol=1e-6, rtol=1e-4, msg=name)


def test_classification_reads_cls_only_and_matches_the_full_encoder():
    model = BertForSequenceClassification(tiny(num_labels=3)).eval()
    ids, types, mask = batch()
    full = model.bert(ids, types, mask)
    expected = model.classifier(full.pooler_output)
    torch.testing.assert_close(model(ids, types, mask).logits, expected, atol=1e-5, rtol=1e-5)


def test_mlm_accuracy_counts_hits():
    model = BertForMaskedLM(tiny()).eval()
    ids, types, mask = batch()
    positions = torch.tensor([[1, 2], [1, 2], [1, 2]])
    logits = model(ids, types, mask, masked_positions=positions).logits
    best = logits.argmax(-1)
    labels = best.clone()
    labels[0, 1] = (best[0, 1] + 1) % VOCAB  # one miss
    labels[2, 1] = -100  # one padding slot
    out = model(ids, types, mask, masked_positions=positions, masked_labels=labels)
    assert out.mlm_count.item() == 5 and out.mlm_correct.item() == 4


def test_mlm_without_predictions_is_zero_not_nan():
    model = BertForPreTraining(tiny())
    ids, types, mask = batch()
    out = model(
        ids, types, mask, masked_positions=torch.zeros(3, 2, dtype=torch.long), masked_labels=torch.full((3, 2), -100)
    )
    assert out.mlm_loss.item() == 0.0 and out.mlm_count.item() == 0


def test_pretraining_loss_is_mlm_plus_nsp_and_backprops():
    model = BertForPreTraining(tiny())
    ids, types, mask = batch()
    nsp = torch.tensor([0, 1, 0])
    out = model(
        ids,
        types,
        mask,
        masked_positions=torch.tensor([[1], [2], [3]]),
        masked_labels=torch.tensor([[5], [6], [7]]),
        next_sentence_label=nsp,
    )
    assert out.nsp_logits.shape == (3, 2)
    torch.testing.assert_close(out.nsp_loss, F.cross_entropy(out.nsp_logits, nsp))
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)
    out.loss.backward()
    emb = model.bert.embeddings.word_embeddings.weight
    assert emb.grad is not None and emb.grad.abs().sum() > 0
    assert model.nsp.weight.grad is not None and model.nsp.weight.grad.abs().sum() > 0


def test_gradient_checkpointing_gives_same_gradients():
    config = tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    a = BertForPreTraining(config).train()
    b = BertForPreTraining(config).train()
    b.load_state_dict(a.state_dict())
    b.bert.gradient_checkpointing_enable()
    ids, types, mask = batch()
    kwargs = dict(
        masked_positions=torch.tensor([[1], [2], [3]]),
        masked_labels=torch.tensor([[5], [6], [7]]),
        next_sentence_label=torch.tensor([0, 1, 0]),
    )
    a(ids, types, mask, **kwargs).loss.backward()
    b(ids, types, mask, **kwargs).loss.backward()
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, atol=1e-6, rtol=1e-5, msg=name)


def test_sequence_classification_losses():
    ids, types, mask = batch()
    model = BertForSequenceClassification(tiny(num_labels=3)).eval()
    labels = torch.tensor([0, 2, 1])
    out = model(ids, types, mask, labels=labels)
    assert out.logits.shape == (3, 3)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits, labels))
    multi = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    out = model(ids, types, mask, labels=multi)
    torch.testing.assert_close(out.loss, F.binary_cross_entropy_with_logits(out.logits, multi))

    regression = BertForSequenceClassification(tiny(num_labels=1)).eval()
    scores = torch.tensor([0.5, 3.0, 4.5])
    out = regression(ids, types, mask, labels=scores)
    assert out.logits.shape == (3, 1)
    torch.testing.assert_close(out.loss, ((out.logits[:, 0] - scores) ** 2).mean())
    assert regression(ids, types, mask).loss is None


def test_token_classification_ignores_minus_100():
    ids, types, mask = batch()
    model = BertForTokenClassification(tiny(num_labels=5)).eval()
    assert model.bert.pooler is None  # as Hugging Face's token classifier
    labels = torch.randint(0, 5, ids.shape)
    labels[mask == 0] = -100
    labels[:, 0] = -100
    out = model(ids, types, mask, labels=labels)
    assert out.logits.shape == (*ids.shape, 5)
    keep = labels != -100
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[keep], labels[keep]))
    # A fixed normalizer: the summed token losses over it (equal to the mean when it is this batch's count).
    summed = F.cross_entropy(out.logits[keep], labels[keep], reduction="sum")
    torch.testing.assert_close(
        model(ids, types, mask, labels=labels, label_normalizer=torch.tensor(40.0)).loss, summed / 40
    )
    torch.testing.assert_close(model(ids, types, mask, labels=labels, label_normalizer=keep.sum()).loss, out.loss)


def test_question_answering_loss_and_out_of_range_positions():
    ids, types, mask = batch()
    model = BertForQuestionAnswering(tiny()).eval()
    start, end = torch.tensor([1, 2, 3]), torch.tensor([2, 4, 3])
    out = model(ids, types, mask, start_positions=start, end_positions=end)
    assert out.start_logits.shape == ids.shape and out.end_logits.shape == ids.shape
    expected = (F.cross_entropy(out.start_logits, start) + F.cross_entropy(out.end_logits, end)) / 2
    torch.testing.assert_close(out.loss, expected)
    # a position beyond the sequence is ignored, as in Hugging Face
    far = model(ids, types, mask, start_positions=torch.tensor([1, 2, 99]), end_positions=torch.tensor([2, 4, 99]))
    expected = (F.cross_entropy(out.start_logits[:2], start[:2]) + F.cross_entropy(out.end_logits[:2], end[:2])) / 2
    torch.testing.assert_close(far.loss, expected)


def test_unsupported_position_embedding_type():
    config = BertConfig.from_dict({**tiny().to_dict(), "position_embedding_type": "relative_key"})
    with pytest.raises(ConfigError, match="position_embedding_type"):
        BertModel(config)


def _train_step(model, head_kwargs, unpad: bool, checkpointing: bool = False):
    """One forward/backward in training mode; the outputs at real tokens and every gradient."""
    model.zero_grad()
    model.bert.unpad = unpad
    model.bert.gradient_checkpointing_enable(checkpointing)
    ids, types, mask = batch(lengths=(12, 3, 7, 1))
    out = model(ids, types, mask, **head_kwargs(ids, mask))
    out.loss.backward()
    logits = out.logits if hasattr(out, "logits") else out.mlm_logits
    real = logits[mask.bool()] if logits.dim() == 3 and logits.shape[:2] == ids.shape else logits
    return real.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize(
    "head, head_kwargs",
    [
        (BertForSequenceClassification, lambda ids, mask: {"labels": torch.tensor([0, 2, 1, 1])}),
        (
            BertForTokenClassification,
            lambda ids, mask: {
                "labels": torch.randint(0, 3, ids.shape, generator=torch.Generator().manual_seed(1)).masked_fill(
                    mask == 0, -100
                )
            },
        ),
        (
            BertForPreTraining,
            lambda ids, mask: {
                "masked_positions": torch.tensor([[1, 5], [2, 0], [3, 4], [0, 0]]),
                "masked_labels": torch.tensor([[7, 8], [9, -100], [10, 11], [-100, -100]]),
                "next_sentence_label": torch.tensor([0, 1, 1, 0]),
            },
        ),
    ],
)
@pytest.mark.parametrize("checkpointing", [False, True])
def test_unpadded_training_equals_padded(head, head_kwargs, checkpointing):
    """Running the layers on the real tokens only changes nothing a head reads, nor any gradient."""
    model = head(tiny(num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).train()
    padded, padded_grads = _train_step(model, head_kwargs, unpad=False)
    unpadded, unpadded_grads = _train_step(model, head_kwargs, unpad=True, checkpointing=checkpointing)
    torch.testing.assert_close(unpadded, padded, atol=1e-5, rtol=1e-5)
    assert unpadded_grads.keys() == padded_grads.keys()
    for name, grad in padded_grads.items():
        torch.testing.assert_close(unpadded_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_unpadding_only_in_training_and_only_for_padded_batches(monkeypatch):
    import bertkit.models.bert as model_module

    calls = []
    original = model_module.Packed.of

    def counted(cls, mask):
        calls.append(1)
        return original(mask)

    monkeypatch.setattr(model_module.Packed, "of", classmethod(counted))
    model = BertModel(tiny())
    ids, types, mask = batch(lengths=(10, 2, 5))  # 43% padding
    model.eval()(ids, types, mask)
    assert calls == []  # evaluation keeps the padded layout (pad positions as Hugging Face computes them)
    model.train()(ids, types, mask, output_hidden_states=True)
    assert calls == []  # per-layer outputs are full [B, L, H] tensors
    out = model(ids, types, mask)
    assert len(calls) == 1
    assert torch.equal(out.last_hidden_state[~mask.bool()], torch.zeros_like(out.last_hidden_state[~mask.bool()]))
    ids, types, mask = batch(lengths=(10, 10, 9))  # 3% padding: not worth moving the tokens
    model(ids, types, mask)
    assert len(calls) == 1
    # QA's loss normalises over every position, padding included, as the reference's does
    qa = BertForQuestionAnswering(tiny()).train()
    ids, types, mask = batch(lengths=(10, 2, 5))
    qa(ids, types, mask, start_positions=torch.tensor([1, 1, 1]), end_positions=torch.tensor([2, 1, 3]))
    assert len(calls) == 1
