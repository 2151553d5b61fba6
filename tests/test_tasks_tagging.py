"""Token tagging beyond NER: Universal Dependencies CoNLL-U read by the tagging task (a column by name,
multiword tokens and empty nodes, comments), ``_`` never a tag, and token accuracy as the headline of tags
that are not chunked, through the Python API and ``bertkit finetune`` / ``evaluate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.errors import DataError
from bertkit.tasks.classification import ClassificationTask
from bertkit.tasks.ner import NerTask, metrics

# ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC; sentence 2 has a multiword token (1-2) and an empty node.
SENTENCES = [
    [("the", "DET", "DT"), ("cat", "NOUN", "NN"), ("sat", "VERB", "VBD"), (".", "PUNCT", ".")],
    [("john", "PROPN", "NNP"), ("lived", "VERB", "VBD"), ("in", "ADP", "IN"), ("paris", "PROPN", "NNP")],
    [("the", "DET", "DT"), ("king", "NOUN", "NN"), ("went", "VERB", "VBD"), ("home", "NOUN", "NN")],
]


def conllu(sentences=SENTENCES, *, xpos: bool = True) -> str:
    out = ["# newdoc id = synthetic"]
    for number, words in enumerate(sentences, start=1):
        out += [f"# sent_id = s{number}", f"# text = {' '.join(w for w, _, _ in words)}"]
        if number == 2:
            out.append("1-2\tjohnlived\t_\t_\t_\t_\t_\t_\t_\t_")
        for i, (word, upos, tag) in enumerate(words, start=1):
            out.append(f"{i}\t{word}\t{word}\t{upos}\t{tag if xpos else '_'}\t_\t{i - 1}\tdep\t_\t_")
            if number == 2 and i == 2:
                out.append("2.1\tdid\tdo\tAUX\tVBD\t_\t_\t_\t2:aux\t_")
        out.append("")
    return "\n".join(out) + "\n"


@pytest.fixture
def treebank(tmp_path: Path) -> Path:
    path = tmp_path / "en-ud-train.conllu"
    path.write_text(conllu(SENTENCES * 3), encoding="utf-8")
    return path


def test_conllu_words_and_a_column_by_name(treebank):
    read = NerTask().read(treebank)
    assert [e.words for e in read.examples[:2]] == [[w for w, _, _ in s] for s in SENTENCES[:2]]
    assert read.examples[1].tags == ["PROPN", "VERB", "ADP", "PROPN"]  # UPOS by default
    assert read.report.format == "conllu" and read.report.used == 36
    assert read.report.skipped == {"comment lines": 19, "multiword token lines": 1, "empty nodes": 1}
    assert NerTask(tag_column="xpos").read(treebank).examples[0].tags == ["DT", "NN", "VBD", "."]
    assert NerTask(tag_column=4).read(treebank).examples[0].tags == ["DT", "NN", "VBD", "."]
    first_word = read.examples[1].where()
    assert first_word.endswith(":12")  # the file line of "john", after the comments and the 1-2 range line


def test_conllu_recognised_by_its_lines_whatever_the_name(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(conllu(), encoding="utf-8")
    assert NerTask().read(path).examples[2].tags == ["DET", "NOUN", "VERB", "NOUN"]


def test_an_unfilled_column_is_no_tag(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(conllu(xpos=False), encoding="utf-8")
    with pytest.raises(DataError, match=r"x\.conllu:4: the XPOS of 'the' is '_' \(not annotated\).*--tag-column"):
        NerTask(tag_column="xpos").read(path)
    plain = tmp_path / "plain.txt"
    plain.write_text("the DT _\ncat NN _\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"plain\.txt:1: the tag of 'the' is '_' .*--tag-column"):
        NerTask().read(plain)
    with pytest.raises(DataError, match="column names are for CoNLL-U files"):
        NerTask(tag_column="upos").read(plain)


def test_conllu_given_to_the_wrong_reader_is_named(treebank, tmp_path):
    with pytest.raises(DataError, match=r"is a Universal Dependencies CoNLL-U file.*--task ner.*--format conllu"):
        NerTask().read(treebank, format="conll")
    with pytest.raises(DataError, match=r"is a Universal Dependencies CoNLL-U file.*--task ner and --tag-column upos"):
        ClassificationTask().read(treebank)
    as_tsv = tmp_path / "train.tsv"
    as_tsv.write_text(treebank.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(DataError, match=r"train\.tsv is a Universal Dependencies CoNLL-U file"):
        ClassificationTask().read(as_tsv)


def test_token_scores_count_every_word():
    gold = [["NOUN", "NOUN", "VERB"], ["NOUN", "DET"]]
    predicted = [["NOUN", "VERB", "VERB"], ["NOUN", "NOUN"]]
    scores = metrics.token_scores(predicted, gold)
    assert scores["accuracy"] == pytest.approx(3 / 5)
    assert scores["support_NOUN"] == 3  # neighbouring NOUNs are two words, not one chunk
    assert scores["precision_NOUN"] == pytest.approx(2 / 3) and scores["recall_NOUN"] == pytest.approx(2 / 3)
    assert scores["precision_VERB"] == pytest.approx(1 / 2) and scores["recall_VERB"] == 1.0
    assert scores["f1_DET"] == 0.0 and scores["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert "f1" not in scores
    assert metrics.is_chunked(["O", "B-PER", "I-PER", "E-LOC", "S-ORG"]) and not metrics.is_chunked(["NOUN", "O"])


def test_finetune_and_evaluate_a_part_of_speech_tagger(encoder_dir, treebank, tmp_path, capsys):
    output = tmp_path / "pos"
    config = tmp_path / "quiet.toml"
    config.write_text("[train]\ntensorboard = false\nplot = false\n")
    args = ["finetune", "--config", config, "--task", "ner", "--model", encoder_dir, "--tag-column", "upos"]
    args += ["--train", treebank, "--dev", treebank, "--output", output, "--epochs", "2", "--lr", "5e-3"]
    code = main([str(a) for a in [*args, "--micro-batch-size", "3", "--no-progress"]])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "dev accuracy" in err and "dev f1" not in err
    saved = json.loads((output / "metrics.json").read_text())
    assert saved["main_metric"] == "accuracy"
    labels = set(json.loads((output / "config.json").read_text())["id2label"].values())
    assert labels == {"DET", "NOUN", "VERB", "PUNCT", "PROPN", "ADP"}
    code = main(["evaluate", "--model", str(output), "--input", str(treebank)])
    out, err = capsys.readouterr()
    scores = json.loads(out)
    assert code == 0, err
    assert "f1" not in scores and 0.0 <= scores["accuracy"] <= 1.0
    gold = [upos for sentence in SENTENCES * 3 for _, upos, _ in sentence]
    assert scores["support_NOUN"] == gold.count("NOUN") == 9  # every word, as the gold file has them
    code = main(["tag", "--model", str(output), "--json", "the king went home"])
    out, err = capsys.readouterr()
    assert code == 0, err
    spans = json.loads(out)["entities"]  # one span per word, never neighbours with equal tags merged
    assert [(e["start"], e["end"]) for e in spans] == [(0, 3), (4, 8), (9, 13), (14, 18)]
    assert {e["type"] for e in spans} <= labels
