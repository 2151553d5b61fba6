"""A task family added from outside the package: one ``Family`` record registered, and every command takes it.

The toy family ``stars`` reads review tables with a 1-5 ``stars`` column and learns ``liked`` (3 stars and up)
against ``disliked``; it fine-tunes a sequence-classification head and brings its own pipeline, ``rate``. Nothing
else in bertkit is told about it: ``finetune``, ``evaluate``, ``predict`` and ``serve`` (``/classify`` for its
head, ``/rate`` for its pipeline) find it through the registry.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bertkit.cli import main
from bertkit.errors import BertkitError
from bertkit.inference import load
from bertkit.serve import ServeLimits, create_app
from bertkit.tasks import registry
from bertkit.tasks.base import Read
from bertkit.tasks.classification import ClassificationExample, ClassificationTask
from bertkit.tasks.classification.pipeline import classify
from bertkit.tasks.family import Family
from bertkit.tasks.pipeline import LoadedModel

LIKED = ["good movie", "great film", "a good story", "very good", "great great movie", "good film"]
DISLIKED = ["bad movie", "bad film", "a bad story", "very bad", "bad bad movie", "the lazy film was bad"]


@dataclass
class StarsTask(ClassificationTask):
    """Reviews with a 1-5 ``stars`` column, learned as ``liked`` (3 and up) or ``disliked``."""

    label_column: str | int | None = "stars"
    name: str = field(default="stars", init=False)

    def read(
        self,
        path: str | os.PathLike,
        *,
        labeled: bool = True,
        training: bool = False,
        format: str | None = None,
        header: bool | None = None,
    ) -> Read[ClassificationExample]:
        read = super().read(path, labeled=labeled, training=training, format=format, header=header)
        read.examples = [
            e if e.label is None else dataclasses.replace(e, label="liked" if float(e.label) >= 3 else "disliked")
            for e in read.examples
        ]
        return read


def rate(texts: list[str], loaded: LoadedModel, batch_size: int) -> list[dict]:
    """The family's own pipeline: each review's verdict and the probability the model gives it."""
    return [{"verdict": p.label, "sure": p.score} for p in classify(texts, loaded, batch_size=batch_size)]


STARS = Family(
    name="stars",
    task=StarsTask,
    head="BertForSequenceClassification",
    pipeline="rate",
    run=rate,
    restores_from_head=False,  # a plain classifier stays classification's
    defaults={"lr": 5e-3, "epochs": 4.0, "micro_batch_size": 8},
    fixed_recipe=True,
)


@pytest.fixture
def stars_family(monkeypatch):
    """The toy family registered for one test (the table is restored afterwards)."""
    monkeypatch.setattr(registry, "FAMILIES", dict(registry.FAMILIES))
    registry.register(STARS)
    return STARS


@pytest.fixture(scope="module")
def reviews(tmp_path_factory) -> Path:
    rows = [(t, s) for t, s in zip(LIKED, "534545")] + [(t, s) for t, s in zip(DISLIKED, "121212")]
    path = tmp_path_factory.mktemp("stars") / "reviews.tsv"
    path.write_text("sentence\tstars\n" + "".join(f"{t}\t{s}\n" for t, s in rows * 2), encoding="utf-8")
    return path


def run(args: list, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_registered_family_is_named_once_and_refused_twice(stars_family):
    assert registry.family("stars") is stars_family and "stars" in registry.task_names()
    assert isinstance(registry.make_task("stars"), StarsTask)
    own = registry.head_family("BertForSequenceClassification")
    assert own is not None and own.name == "classification"  # a plain classifier stays classification's
    with pytest.raises(Exception, match="already registered"):
        registry.register(stars_family)


def test_the_records_answer_what_code_outside_the_families_asks(stars_family):
    """A task's command-line name, the bare encoder's family and a head that labels tokens come from the records,
    so that no module outside ``tasks/`` tests a family's name."""
    assert registry.name_of(registry.make_task("regression")) == "regression"
    assert registry.name_of(registry.make_task("classification")) == "classification"
    assert registry.name_of(registry.make_task("stars")) == "stars"
    assert registry.encoder_family() is registry.family("embedding")
    assert registry.family("ner").tags_tokens and not stars_family.tags_tokens and not stars_family.trains_encoder


def test_a_model_of_another_family_cannot_run_the_familys_pipeline(stars_family, encoder_dir):
    loaded = load(encoder_dir)
    assert not loaded.supports("rate") and "rate" not in loaded.pipelines
    with pytest.raises(BertkitError, match=r"cannot rate: it is a \w+, and its task family has no pipeline"):
        loaded.require("rate")


def test_finetune_evaluate_predict_and_serve_run_the_registered_family(
    stars_family, encoder_dir, reviews, tmp_path, capsys
):
    output = tmp_path / "stars-model"
    quiet = tmp_path / "quiet.toml"
    quiet.write_text("[train]\ntensorboard = false\nplot = false\n")
    code, out, err = run(
        ["finetune", "--config", quiet, "--task", "stars", "--model", encoder_dir, "--train", reviews,
         "--dev", reviews, "--output", output, "--no-progress"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    dev = json.loads(out)
    # the family's defaults ran as they are (fixed recipe): 4 epochs, each with a dev evaluation
    saved = json.loads((output / "finetune_config.json").read_text())
    assert saved["task"] == "stars" and saved["train"]["lr"] == pytest.approx(5e-3)
    assert len(json.loads((output / "metrics.json").read_text())["evaluations"]) == 4
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "disliked", "1": "liked"}  # the toy's reader made the labels
    assert config["bertkit_finetune"]["task"] == "stars"

    code, out, err = run(["evaluate", "--model", output, "--input", reviews], capsys)
    assert code == 0, err
    scores = json.loads(out)
    assert scores["accuracy"] == pytest.approx(dev["accuracy"])

    predictions = tmp_path / "predictions.jsonl"
    code, _, err = run(["predict", "--model", output, "--input", reviews, "--output", predictions], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 2 * (len(LIKED) + len(DISLIKED))
    assert {row["label"] for row in rows} <= {"liked", "disliked"}
    truth = ["liked"] * len(LIKED) + ["disliked"] * len(DISLIKED)
    right = sum(row["label"] == gold for row, gold in zip(rows, truth * 2))
    assert right / len(rows) == pytest.approx(scores["accuracy"])

    from fastapi.testclient import TestClient

    with TestClient(create_app(output, ServeLimits())) as client:
        response = client.post("/classify", json={"texts": ["good movie", "bad film"]})
        rated = client.post("/rate", json={"texts": ["good movie", "bad film"]})
        info = client.get("/info").json()
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [set(r["probabilities"]) for r in results] == [{"liked", "disliked"}] * 2
    assert [r["label"] for r in results] == [rows[0]["label"], rows[len(LIKED) + 1]["label"]]
    # the family's own pipeline answers at its own path, through the family's function
    assert rated.status_code == 200, rated.text
    verdicts = rated.json()["results"]
    assert [v["verdict"] for v in verdicts] == [r["label"] for r in results]
    assert [v["sure"] for v in verdicts] == pytest.approx([r["probabilities"][r["label"]] for r in results])
    assert "rate" in info["pipelines"]
