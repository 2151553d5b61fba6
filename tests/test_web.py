"""The web page in a real browser: Playwright drives Debian's Chromium against `bertkit serve` on loopback.

Skips when Playwright or Chromium is absent (``apt-get install chromium``; never ``playwright install``).
Screenshots go to ``build/test-artifacts/``.
"""

from __future__ import annotations

import shutil
import socket
import threading
from pathlib import Path
from typing import cast

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the serve extra (uvicorn) is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (Python) is not installed")

from bertkit import inference  # noqa: E402
from bertkit.models.bert import (  # noqa: E402
    BertForMaskedLM,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
)
from bertkit.serve import ServeLimits, create_app  # noqa: E402
from inference_helpers import save_model  # noqa: E402
from liveness import LIVENESS_S, wait_until  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"


def test_embedding_model_ranks_passages_for_a_query(tmp_path, tokenizer, browser):
    loaded = inference.load(save_model(tmp_path / "encoder", BertModel, tokenizer))
    passages = ["the cat sat on the mat", "a dog went home", "the king and the queen", "hello world"]
    query = "the cat"
    with Server(create_app(loaded, ServeLimits())) as server:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + "/")
        page.wait_for_selector("#search-card", state="visible")
        page.fill("#passages", "\n".join(passages))
        page.fill("#query", query)
        page.click("#search")
        page.wait_for_selector("#ranking li")
        shown = page.eval_on_selector_all(
            "#ranking li", "rows => rows.map(r => [+r.dataset.index, +r.dataset.score, r.innerText])"
        )
        vectors = inference.embed([query, *passages], loaded)  # the model's defaults, as /v1/embeddings
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        cosines = vectors[1:] @ vectors[0]
        assert [i for i, _, _ in shown] == list(np.argsort(-cosines))
        for i, score, text in shown:
            assert score == pytest.approx(float(cosines[i]), abs=1e-3) and passages[i] in text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web-search.png"), full_page=True)
        assert not errors, errors


class Server:
    """``create_app`` under uvicorn in a thread, on a free port of 127.0.0.1."""

    def __init__(self, app):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        wait_until(lambda: self.server.started, "the server to start", alive=self.thread.is_alive)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=LIVENESS_S)
        self.sock.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--headless", "--no-sandbox"]
        )
        yield browser
        browser.close()


def test_fill_mask_predictions_and_attention_heatmap(tmp_path, tokenizer, browser):
    loaded = inference.load(save_model(tmp_path / "mlm", BertForMaskedLM, tokenizer))
    model = cast(BertForMaskedLM, loaded.model)
    with torch.no_grad():
        model.mlm.decoder.bias[tokenizer.vocab["capital"]] = 20.0  # a known best guess
    with Server(create_app(loaded, ServeLimits())) as server:
        page = browser.new_page(viewport={"width": 390, "height": 844})  # phone-sized
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + "/")
        page.wait_for_selector("#model:has-text('BertForMaskedLM')")
        page.fill("#text", "Paris is the [MASK] of France.")
        page.click("#submit")
        page.wait_for_selector(".prediction")
        first = page.locator(".prediction").first
        assert first.locator(".name").inner_text() == "capital"
        assert first.locator(".sequence").inner_text() == "Paris is the capital of France."
        assert page.locator(".prediction").count() == 5
        page.wait_for_selector("#attention-card[data-ready='true']")
        size = page.eval_on_selector("#heatmap", "c => [c.width, c.height]")
        assert size[0] > 100 and size[1] > 100
        # The heatmap really has colour in it (not a blank canvas).
        coloured = page.eval_on_selector(
            "#heatmap",
            """c => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] < 200 && d[i + 2] > 150) n++;
            return n; }""",
        )
        assert coloured > 100
        assert page.locator("#layer option").count() == 2 and page.locator("#head option").count() == 3
        # Another layer and head, then the line view.
        page.select_option("#layer", "0")
        page.select_option("#head", "1")
        page.check("input[value='lines']")
        assert page.locator("#lines line").count() > 0 and page.locator("#heatmap-wrap").is_hidden()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1, f"the page scrolls sideways on a phone ({width}px)"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.check("input[value='heatmap']")
        page.screenshot(path=str(ARTIFACTS / "web-fill-mask.png"), full_page=True)
        assert not errors, errors


def test_entities_are_highlighted_and_errors_are_shown(tmp_path, tokenizer, browser):
    tags = {0: "O", 1: "B-PER", 2: "I-PER"}
    loaded = inference.load(save_model(tmp_path / "ner", BertForTokenClassification, tokenizer, id2label=tags))
    model = cast(BertForTokenClassification, loaded.model)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 0.0, 9.0]))  # I-PER everywhere: one entity
    with Server(create_app(loaded, ServeLimits(max_chars=200))) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#model:has-text('tag')")
        page.fill("#text", "George Washington")
        page.click("#submit")
        page.wait_for_selector("#entities mark")
        assert page.locator("#entities mark").count() == 1
        assert page.locator("#entities mark").inner_text().startswith("George Washington")
        assert page.locator("#predictions-card").is_hidden()
        page.fill("#text", "x" * 300)  # over the server's character limit: the page says why
        page.click("#submit")
        page.wait_for_selector("#status.error")
        assert "300 characters; this server takes at most 200" in page.locator("#status").inner_text()
        assert page.locator("#attention-card").is_hidden()  # its request failed: no stale map
        page.wait_for_selector("#entities mark")  # tagging takes long texts (windowed)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web-entities.png"), full_page=True)


def test_classification_shows_the_label_names(tmp_path, tokenizer, browser):
    names = {0: "negative", 1: "positive"}
    loaded = inference.load(
        save_model(tmp_path / "cls", BertForSequenceClassification, tokenizer, num_labels=2, id2label=names)
    )
    model = cast(BertForSequenceClassification, loaded.model)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 3.0]))  # "positive", whatever the text
    with Server(create_app(loaded, ServeLimits())) as server:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + "/")
        page.wait_for_selector("#model:has-text('labels: negative, positive')")
        assert "[MASK]" not in page.input_value("#text") and page.get_attribute("#text", "placeholder")
        assert "negative" in page.locator("#text-hint").inner_text()
        assert page.locator("#similarity-card").is_hidden()  # the model has a task head
        page.fill("#text", "a good movie")
        page.click("#submit")
        page.wait_for_selector("#class-best .label")
        assert page.locator("#class-best .label").inner_text() == "positive"
        assert page.locator("#classes .bar-row .name").all_inner_texts() == ["positive", "negative"]
        assert not errors, errors


def test_nothing_task_specific_shows_before_the_model_info_arrives(tmp_path, tokenizer, browser):
    """A classifier's page, its /info held back: no fill-mask example or hint, and nothing to submit yet."""
    loaded = inference.load(save_model(tmp_path / "cls", BertForSequenceClassification, tokenizer, num_labels=2))
    with Server(create_app(loaded, ServeLimits())) as server:
        page = browser.new_page()
        page.route("**/info", lambda route: route.abort())
        page.goto(server.url + "/")
        page.wait_for_selector("#status:has-text('Cannot reach the service')")
        assert "[MASK]" not in page.input_value("#text") + page.locator("#text-hint").inner_text()
        assert page.locator("#text-hint").inner_text() == "" and page.is_disabled("#submit")
        assert page.locator("#predictions-card").is_hidden()
        page.unroute("**/info")
        page.reload()
        page.wait_for_selector("#model:has-text('can do')")
        assert page.is_enabled("#submit") and "[MASK]" not in page.input_value("#text")


def test_embedding_model_offers_sentence_similarity(tmp_path, tokenizer, browser):
    loaded = inference.load(save_model(tmp_path / "encoder", BertModel, tokenizer))
    sentences = ["the cat sat on the mat", "a dog went home", "the king and the queen"]
    with Server(create_app(loaded, ServeLimits())) as server:
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(server.url + "/")
        page.wait_for_selector("#model:has-text('BertModel')")
        page.wait_for_selector("#similarity-card", state="visible")
        assert "[MASK]" not in page.input_value("#text")
        page.fill("#sentences", "only one")
        page.click("#compare")
        page.wait_for_selector("#status.error")  # one sentence: nothing to compare
        page.fill("#sentences", "\n".join(sentences))
        page.click("#compare")
        page.wait_for_selector("#similarity td")
        assert page.locator("#similarity td").count() == 9
        shown = page.eval_on_selector_all(
            "#similarity td", "cells => cells.map(c => [+c.dataset.i, +c.dataset.j, +c.dataset.value, c.innerText])"
        )
        vectors = inference.embed(sentences, loaded, pooling="mean", normalize=True)
        for i, j, value, text in shown:
            assert value == pytest.approx(float(vectors[i] @ vectors[j]), abs=1e-3)
            assert float(text) == pytest.approx(value, abs=5e-4)
        assert [v for i, j, v, _ in shown if i == j] == pytest.approx([1.0] * 3, abs=1e-4)
        # The attention map works beside it.
        page.fill("#text", "the cat sat on the mat")
        page.click("#submit")
        page.wait_for_selector("#attention-card[data-ready='true']")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "web-similarity.png"), full_page=True)
        assert not errors, errors
