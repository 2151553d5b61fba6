"""Time to quality: held-out masked-LM accuracy against wall-clock seconds, for bertkit's recipes and for the
``transformers`` peers, on the same corpus, vocabulary, model size, seed, threads and time budget.

    flock /tmp/bertkit-cpu1.lock taskset -c 1 env OMP_NUM_THREADS=1 \
        python benchmarks/bench_time_to_quality.py --budget 300 --calibrate 10 --threads 1
    flock /tmp/bertkit-cpu1.lock taskset -c 1 env OMP_NUM_THREADS=1 \
        python benchmarks/bench_time_to_quality.py --ablation --budget 100 --calibrate 10 --threads 1

The corpus is ``data/books`` (the demo's second half) less one book, ``--heldout-book``, whose sentences,
packed into blocks of ``--seq`` tokens and masked once at 15 % with a fixed seed, are the one held-out set
every side is scored on (the same masked positions for all). The vocabulary is a WordPiece learned from the
training books. The sides:

- ``bertkit-bert``, ``bertkit-modern``: ``prepare-data`` and ``pretrain`` with ``--recipe bert|modern``;
- ``hf-pretraining``: ``transformers.BertForPreTraining`` with ``TextDatasetForNextSentencePrediction`` and
  ``DataCollatorForLanguageModeling`` through ``Trainer`` (the paper's recipe, as transformers ships it, with
  each pair cut to ``--seq`` tokens as the paper's ``truncate_seq_pair`` does: the dataset class leaves that out);
- ``hf-mlm``: ``BertForMaskedLM`` with ``DataCollatorForLanguageModeling`` through ``Trainer`` on the text
  concatenated and cut into blocks (what ``run_mlm.py`` does).

Every side gets the same optimizer settings (AdamW, ``--lr``, weight decay 0.01, eps 1e-6, clipping 1.0,
warmup over 10 %, then the recipe's decay: linear, warmup-stable-decay for ``modern``), micro-batch ``--batch`` and the budget. A schedule needs the run's length in
updates, so each side first runs ``--calibrate`` seconds to measure its pace, then runs ``pace x budget``
updates (the peers are also stopped at the budget). The clock (``--clock``) counts by default the CPU seconds
of the training process, not elapsed time: with one thread pinned to one core, it is the elapsed time of a core
nothing else uses, and jobs that the scheduler puts on the same core for a while do not count against a
side. The clock starts when training is called (data preparation and
tokenisation are outside it, for every side); the weights are copied at every tenth of the budget and scored
after the run, outside the clock. ``--ablation`` runs the paper's recipe, each option alone, ``--recipe modern``
and modern with one option changed (bertkit only) over ``--seeds``. Runs of other seeds, one per core or machine
at the same time, become one result with ``--merge seed1.json seed2.json ... --output RESULT``: the goals are
then judged seed by seed.

``--downstream`` then scores every side the way the demo scores its pre-training: each side's final weights (of
the first seed) are kept as a model directory with the benchmark's tokenizer (bertkit's ``save_pretrained``;
transformers' ``save_pretrained`` and its tokenizer files, a Hugging Face layout bertkit loads), beside the
same network at random initialisation, and each is fine-tuned on the demo's two tasks by the demo's own code
(``bertkit.demo.finetuning``: sentence polarity on ``data/polarity``, punctuation restoration built from
``data/punctuation``, the demo's epochs, learning rates, batch and length) with each of ``--downstream-seeds``,
scored on dev after the last epoch. Fine-tuning is outside every clock; its scores are not times, so it may run
apart from the timed pre-training: ``--keep-models DIR`` keeps the weights, and a later ``--downstream-only
--keep-models DIR --output RESULT`` fine-tunes them and adds the scores to ``RESULT``:

    flock /tmp/bertkit-cpu1.lock taskset -c 1 env OMP_NUM_THREADS=1 python benchmarks/bench_time_to_quality.py \
        --budget 300 --calibrate 10 --threads 1 --keep-models runs/ttq-models \
        --output benchmarks/results/time_to_quality_downstream.json
    taskset -c 0 nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/bench_time_to_quality.py --downstream-only \
        --keep-models runs/ttq-models --threads 1 --output benchmarks/results/time_to_quality_downstream.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bertkit.config import BertConfig
from bertkit.data import CorpusOptions, CorpusStats, PrepareConfig, expand_inputs, prepare_dataset, read_documents
from bertkit.data.corpus.documents import document_sentences
from bertkit.data.instances import full_sentence_blocks
from bertkit.data.masking import MaskingSpec, mask_tokens
from bertkit.demo.demo_config import DemoConfig, DemoScale
from bertkit.demo.finetuning import Recipe, finetune_once, polarity_recipe, punctuation_task
from bertkit.models.bert import BertForPreTraining
from bertkit.tokenizer import Tokenizer
from bertkit.training.pretrain import build_config, pretrain
from bertkit.weights import save_pretrained
from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, set_threads, write_json
from machine_info import machine

EVAL_EVERY = 5
"""bertkit's updates between looks at the clock."""
SIDES = ("bertkit-bert", "bertkit-modern", "hf-pretraining", "hf-mlm")
ABLATION: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "bert (paper)": ({}, {}),
    "masking 30%": ({"masking": "dynamic"}, {"masking_rate": 0.3}),
    "masking 30%->15%": ({"masking": "dynamic"}, {"masking_rate": 0.3, "masking_rate_end": 0.15}),
    "no NSP, full sentences": ({"nsp": False}, {}),
    "dropout off": ({}, {"dropout": 0.0}),
    "warmup-stable-decay": ({}, {"schedule": "wsd"}),
    "one-cycle": ({}, {"schedule": "onecycle", "warmup_ratio": 0.3}),
    "batch warmup 8->32": ({}, {"micro_batch_size": 8, "global_batch_size": 32, "batch_warmup_ratio": 0.2}),
    "untied output embeddings": ({}, {"tie_word_embeddings": False}),
    "modern": ({"recipe": "modern"}, {"recipe": "modern"}),
    "modern, linear schedule": ({"recipe": "modern"}, {"recipe": "modern", "schedule": "linear"}),
    "modern + untied output embeddings": ({"recipe": "modern"}, {"recipe": "modern", "tie_word_embeddings": False}),
    "modern, post-LN": ({"recipe": "modern"}, {"recipe": "modern", "layer_norm_position": "post"}),
    "modern, pre-LN": ({"recipe": "modern"}, {"recipe": "modern", "layer_norm_position": "pre"}),
    "modern, pre-LN, lr x2": ({"recipe": "modern"}, {"recipe": "modern", "layer_norm_position": "pre", "lr_scale": 2}),
    "modern, post-LN, lr x2": (
        {"recipe": "modern"},
        {"recipe": "modern", "layer_norm_position": "post", "lr_scale": 2},
    ),
}
"""Each option alone on top of the paper's recipe, then ``--recipe modern`` and modern with one option changed:
(prepare-data options, pretrain options). ``lr_scale`` multiplies ``--lr``. The post-LN and pre-LN sides run the
modern recipe with each layout, at ``--lr`` and at twice it (``--sides 'modern, post-LN' 'modern, pre-LN'``...)."""


@dataclasses.dataclass
class Setup:
    """What every side shares."""

    work: Path
    books: list[Path]
    heldout: torch.Tensor  # masked input ids [N, L]
    positions: torch.Tensor  # [N, P]
    labels: torch.Tensor  # [N, P], -100 in unused slots
    tokenizer_dir: Path
    model_config: Path
    sentences_file: Path  # one sentence a line, a blank line between documents (transformers' NSP format)
    args: argparse.Namespace
    data: dict[str, Path] = dataclasses.field(default_factory=dict)
    models: Path | None = None  # where each side's final weights are kept (--keep-models, --downstream)


# ------------------------------------------------------------------------------------------ the shared setup
def documents_of(paths: list[Path], limit: int | None) -> list[list[str]]:
    """The sentences of each document of ``paths``, as bertkit's corpus reader cleans and splits them."""
    docs = [document_sentences(doc) for doc in read_documents(paths, CorpusOptions(), CorpusStats())]
    if limit:  # smoke: a slice of each
        docs = [doc[:limit] for doc in docs]
    return [doc for doc in docs if doc]


def make_setup(args: argparse.Namespace) -> Setup:
    work = scratch_folder("bertkit-ttq-")
    books = sorted(expand_inputs([str(ROOT / "data" / "books")]))
    held = [b for b in books if b.name.startswith(args.heldout_book)]
    train = [b for b in books if b not in held]
    limit = 200 if args.smoke else None
    if args.smoke:  # a slice of two books: a few hundred sentences
        train = train[:2]
        train = [_slice(path, work / path.name.replace(".gz", ""), 60_000) for path in train]
    train_docs = documents_of(train, limit)
    tokenizer = Tokenizer.train((s for doc in train_docs for s in doc), vocab_size=args.vocab_size)
    tokenizer.save_pretrained(work / "tokenizer")
    sentences_file = work / "sentences.txt"
    sentences_file.write_text("\n\n".join("\n".join(doc) for doc in train_docs) + "\n", encoding="utf-8")
    model_config = BertConfig.preset(args.model, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id)
    config_path = model_config.save(work / "model-config")
    heldout, positions, labels = heldout_set(held, tokenizer, args)
    setup = Setup(work, train, heldout, positions, labels, work / "tokenizer", config_path, sentences_file, args)
    if args.keep_models or args.downstream:
        setup.models = Path(args.keep_models) if args.keep_models else work / "models"
        keep_random_init(setup)
    return setup


def _slice(path: Path, out: Path, chars: int) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        out.write_text(handle.read()[: chars * 4][chars:], encoding="utf-8")  # past the licence header
    return out


def heldout_set(books: list[Path], tokenizer: Tokenizer, args: argparse.Namespace) -> tuple[torch.Tensor, ...]:
    """Blocks of ``seq`` tokens of the held-out book, masked once at 15 % (seeded): ids, positions, labels."""
    sentences = [s for doc in documents_of(books, 100 if args.smoke else None) for s in doc]
    ids = [s for s in tokenizer.ids_batch(sentences) if s]
    blocks = list(full_sentence_blocks([ids], args.seq - 2, tokenizer.sep_id))[: args.heldout_blocks]
    width = round(args.seq * 0.15)
    spec = MaskingSpec(
        mask_id=tokenizer.mask_id,
        vocab_size=tokenizer.vocab_size,
        special_ids=frozenset({tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id}),
        masked_lm_prob=0.15,
        max_predictions_per_seq=width,
    )
    rng = random.Random(2024)
    inputs = torch.full((len(blocks), args.seq), tokenizer.pad_id, dtype=torch.long)
    positions = torch.zeros((len(blocks), width), dtype=torch.long)
    labels = torch.full((len(blocks), width), -100, dtype=torch.long)
    for row, block in enumerate(blocks):
        masked = mask_tokens([tokenizer.cls_id, *block, tokenizer.sep_id], spec, rng)
        inputs[row, : len(masked.tokens)] = torch.tensor(masked.tokens)
        positions[row, : len(masked.positions)] = torch.tensor(masked.positions)
        labels[row, : len(masked.labels)] = torch.tensor(masked.labels)
    return inputs, positions, labels


@torch.no_grad()
def score(model: torch.nn.Module, setup: Setup) -> float:
    """Held-out MLM accuracy: the argmax at each masked position against the original token."""
    model.eval()
    correct = total = 0
    for start in range(0, len(setup.heldout), 64):
        ids = setup.heldout[start : start + 64]
        out = model(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=torch.zeros_like(ids))
        logits = next(
            getattr(out, name) for name in ("prediction_logits", "mlm_logits", "logits") if hasattr(out, name)
        )
        positions, labels = setup.positions[start : start + 64], setup.labels[start : start + 64]
        picked = logits.gather(1, positions.unsqueeze(-1).expand(-1, -1, logits.shape[-1])).argmax(-1)
        real = labels != -100
        correct += int(((picked == labels) & real).sum())
        total += int(real.sum())
    model.train()
    return correct / max(total, 1)


# ------------------------------------------------------------------------------------------ the clock
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK_HELP = (
    "cpu: seconds the training process ran on the CPU (all its threads), which other jobs sharing the core do not "
    "inflate; wall: elapsed seconds (the same on a core nothing else uses)"
)


class Snapshots:
    """Copies of the weights at every tenth of the budget, timed by a clock that starts with training."""

    def __init__(self, budget: float, clock: str, points: int = 10):
        self.budget, self.every = budget, budget / points
        self.clock = CLOCKS[clock]
        self.start = self.clock()
        self.paused = 0.0
        self.taken: list[tuple[float, int, dict[str, torch.Tensor]]] = []
        self.seen: list[tuple[float, int]] = []  # the first and the latest (seconds, step) observed

    def pace(self) -> float:
        """Updates per second between the first and the last observation (start-up left out)."""
        (t0, s0), (t1, s1) = self.seen[0], self.seen[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def seconds(self) -> float:
        return self.clock() - self.start - self.paused

    def maybe(self, model: torch.nn.Module, step: int, force: bool = False) -> None:
        """Copy the weights when the clock passed the next point (or ``force``); the copy is off the clock."""
        now = self.seconds()
        self.seen[1:] = [(now, step)] if self.seen else []
        if not self.seen:
            self.seen.append((now, step))
        if force or now >= len(self.taken) * self.every:
            began = self.clock()
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            self.taken.append((now, step, state))
            self.paused += self.clock() - began

    def curve(self, model: torch.nn.Module, setup: Setup) -> list[dict[str, float]]:
        points = []
        for seconds, step, state in self.taken:
            model.load_state_dict(state)
            points.append({"seconds": round(seconds, 2), "step": step, "mlm_acc": round(score(model, setup), 5)})
        return points


# ------------------------------------------------------------------------------------------ bertkit
def bertkit_data(setup: Setup, prepare: dict[str, Any]) -> Path:
    """The dataset of these prepare-data options (made once)."""
    key = json.dumps(prepare, sort_keys=True)
    if key not in setup.data:
        output = setup.work / f"data-{len(setup.data)}"
        config = PrepareConfig(
            inputs=[str(p) for p in setup.books],
            output=str(output),
            tokenizer=str(setup.tokenizer_dir),
            max_seq_length=setup.args.seq,
            dupe_factor=setup.args.dupe_factor,
            eval_fraction=0.0,
            seed=setup.args.seed,
            workers=1,
            **prepare,
        )
        prepare_dataset(config, progress=False)
        setup.data[key] = output
    return setup.data[key]


def run_bertkit(
    setup: Setup, prepare: dict[str, Any], options: dict[str, Any], budget: float, steps: int | None, seed: int
) -> tuple[Snapshots, int, torch.nn.Module]:
    data = bertkit_data(setup, prepare)
    options = dict(options)
    lr = setup.args.lr * options.pop("lr_scale", 1)
    ratio = options.pop("batch_warmup_ratio", None)
    if ratio and steps:
        options["batch_warmup_steps"] = max(1, int(ratio * steps))
    options.setdefault("micro_batch_size", setup.args.batch)
    if "warmup_ratio" not in options:
        options["warmup_ratio"] = 0.1
    output = setup.work / f"run-{time.monotonic_ns()}"
    snaps = Snapshots(budget, setup.args.clock)
    calls = [0]

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        calls[0] += 1
        snaps.maybe(model, EVAL_EVERY * calls[0])
        return {}

    config = build_config(
        dict(model_config=str(setup.model_config), data=str(data), output=str(output), lr=lr,
             max_time=budget if not steps or setup.args.clock == "wall" else 5 * budget, max_steps=steps or 10**7, seed=seed, eval_every=EVAL_EVERY, log_every=10**6, save_every=0,
             progress=False, tensorboard=False, plot=False, precision="fp32", peak_flops=1e12, **options)
    )  # fmt: skip
    snaps.start = snaps.clock()
    result = pretrain(config, evaluate=evaluate)
    assert result.model is not None
    snaps.maybe(result.model, result.step, force=True)
    return snaps, result.step, result.model


# ------------------------------------------------------------------------------------------ transformers
def hf_side(setup: Setup, kind: str, budget: float, steps: int | None, seed: int) -> tuple[Snapshots, int, Any]:
    import transformers
    from transformers import BertTokenizerFast, DataCollatorForLanguageModeling, Trainer, TrainingArguments

    transformers.logging.set_verbosity_error()
    tokenizer = BertTokenizerFast(str(setup.tokenizer_dir / "vocab.txt"), do_lower_case=True)
    config = transformers.BertConfig.from_pretrained(setup.model_config)
    torch.manual_seed(seed)
    if kind == "hf-pretraining":
        model: Any = transformers.BertForPreTraining(config)
        dataset: Any = hf_nsp_dataset(tokenizer, setup)
    else:
        model = transformers.BertForMaskedLM(config)
        dataset = hf_blocks(tokenizer, setup)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    snaps = Snapshots(budget, setup.args.clock)

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            snaps.maybe(model, state.global_step)
            if snaps.seconds() >= budget:
                control.should_training_stop = True
            return control

    arguments = TrainingArguments(
        output_dir=str(setup.work / f"hf-{time.monotonic_ns()}"), per_device_train_batch_size=setup.args.batch,
        learning_rate=setup.args.lr, weight_decay=0.01, adam_epsilon=1e-6, warmup_ratio=0.1,
        lr_scheduler_type="linear", max_steps=steps or 10**7, logging_strategy="no", save_strategy="no",
        report_to=[], seed=seed, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, max_grad_norm=1.0,
    )  # fmt: skip
    trainer = Trainer(model=model, args=arguments, train_dataset=dataset, data_collator=collator, callbacks=[Clock()])
    snaps.start = snaps.clock()
    trainer.train()
    snaps.maybe(model, trainer.state.global_step, force=True)
    return snaps, trainer.state.global_step, model


_HF_DATA: dict[str, Any] = {}


def hf_nsp_dataset(tokenizer: Any, setup: Setup) -> Any:
    """transformers' NSP pairs from the sentence file (one sentence a line, documents between blank lines)."""
    if "nsp" not in _HF_DATA:
        import warnings

        from transformers import TextDatasetForNextSentencePrediction

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataset = TextDatasetForNextSentencePrediction(
                tokenizer, str(setup.sentences_file), block_size=setup.args.seq, overwrite_cache=True
            )
        rng = random.Random(setup.args.seed)
        dataset.examples = [truncate_pair(example, setup.args.seq, rng) for example in dataset.examples]
        _HF_DATA["nsp"] = dataset
    return _HF_DATA["nsp"]


def truncate_pair(example: dict[str, torch.Tensor], limit: int, rng: random.Random) -> dict[str, torch.Tensor]:
    """The pair cut to ``limit`` tokens with its specials, as the paper's ``truncate_seq_pair`` does: the longer
    segment loses a token from the front or the back at random. ``TextDatasetForNextSentencePrediction`` leaves
    that step out and makes pairs up to twice its ``block_size``."""
    ids, types = example["input_ids"].tolist(), example["token_type_ids"].tolist()
    if len(ids) <= limit:
        return example
    first = types.count(0)  # [CLS] a [SEP]
    a, b = ids[1 : first - 1], ids[first:-1]
    while len(a) + len(b) > limit - 3:
        longer = a if len(a) > len(b) else b
        del longer[0 if rng.random() < 0.5 else -1]
    return {
        "input_ids": torch.tensor([ids[0], *a, ids[first - 1], *b, ids[-1]]),
        "token_type_ids": torch.tensor([0] * (len(a) + 2) + [1] * (len(b) + 1)),
        "next_sentence_label": example["next_sentence_label"],
    }


def hf_blocks(tokenizer: Any, setup: Setup) -> list[dict[str, list[int]]]:
    """run_mlm.py's ``group_texts``: every line tokenised with its specials, concatenated, cut into blocks."""
    if "mlm" not in _HF_DATA:
        lines = [line for line in setup.sentences_file.read_text(encoding="utf-8").splitlines() if line.strip()]
        ids = [t for row in tokenizer(lines)["input_ids"] for t in row]
        size = setup.args.seq
        _HF_DATA["mlm"] = [{"input_ids": ids[i : i + size]} for i in range(0, len(ids) - size + 1, size)]
    return _HF_DATA["mlm"]


# ------------------------------------------------------------------------------------------ running sides
Runner = Callable[[float, int | None, int], tuple[Snapshots, int, Any]]


def runner(setup: Setup, side: str) -> Runner:
    if side.startswith("hf-"):
        return lambda budget, steps, seed: hf_side(setup, side, budget, steps, seed)
    if side.startswith("bertkit-"):
        recipe = side.split("-", 1)[1]
        return lambda budget, steps, seed: run_bertkit(
            setup, {"recipe": recipe}, {"recipe": recipe}, budget, steps, seed
        )
    prepare, options = ABLATION[side]
    return lambda budget, steps, seed: run_bertkit(setup, prepare, options, budget, steps, seed)


def measure(setup: Setup, side: str, seed: int, pace: dict[str, float]) -> dict[str, Any]:
    """One side: its pace (measured once), then the budgeted run and its held-out curve."""
    run = runner(setup, side)
    args = setup.args
    if side not in pace:
        calibration, _, _ = run(args.calibrate, None, seed)
        pace[side] = calibration.pace()
    steps = max(10, int(pace[side] * args.budget))
    snaps, done, model = run(args.budget, steps, seed)
    curve = snaps.curve(model, setup)  # the last point loaded last: the model holds its final weights
    if setup.models is not None and seed == args.seeds[0]:
        keep_model(setup, side, model)
    print(f"{side} seed {seed}: {done} updates, held-out MLM accuracy {curve[-1]['mlm_acc']:.4f}", flush=True)
    return {"seed": seed, "planned_steps": steps, "steps": done, "curve": curve, "final": curve[-1]["mlm_acc"]}


def time_to(curve: list[dict[str, float]], target: float) -> float | None:
    """Seconds at which the curve first reaches ``target`` (linear between points); None if never."""
    previous = None
    for point in curve:
        if point["mlm_acc"] >= target:
            if previous is None or point["mlm_acc"] == previous["mlm_acc"]:
                return point["seconds"]
            share = (target - previous["mlm_acc"]) / (point["mlm_acc"] - previous["mlm_acc"])
            return round(previous["seconds"] + share * (point["seconds"] - previous["seconds"]), 2)
        previous = point
    return None


def table(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Time of each side to reach the final accuracy of each transformers run, and the two goals, seed by seed:
    the i-th run of a side against the i-th run of the peer. ``seconds`` holds the first seed's times; a goal is
    met when every seed meets it, and its ``ratio`` is the mean over seeds."""
    out: dict[str, Any] = {}
    for reference in ("hf-mlm", "hf-pretraining"):
        if reference not in results:
            continue
        per_seed = [
            {
                "seed": peer_run["seed"],
                "target_mlm_acc": peer_run["final"],
                "seconds": {
                    side: time_to(runs[i]["curve"], peer_run["final"])
                    for side, runs in results.items()
                    if i < len(runs)
                },
            }
            for i, peer_run in enumerate(results[reference])
        ]
        first = per_seed[0]
        out[reference] = {"target_mlm_acc": first["target_mlm_acc"], "seconds": first["seconds"], "per_seed": per_seed}
    goals = {}
    for mine, peer, share in (("bertkit-modern", "hf-mlm", 1 / 4), ("bertkit-bert", "hf-pretraining", 1 / 3)):
        if mine in results and peer in out:
            ratios = [_ratio(row["seconds"].get(mine), row["seconds"][peer]) for row in out[peer]["per_seed"]]
            known = [r for r in ratios if r is not None]
            ratio = statistics.mean(known) if ratios and len(known) == len(ratios) else None
            met = ratio is not None and max(known) <= share
            goals[f"{mine} vs {peer}"] = {"ratio": ratio, "ratios": ratios, "goal": share, "met": met}
    out["goals"] = goals
    return out


def _ratio(own: float | None, theirs: float | None) -> float | None:
    return own / theirs if own is not None and theirs else None


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Mean and sd over seeds of the final accuracy, and the mean curve, per variant."""
    out = {}
    for side, runs in results.items():
        finals = [r["final"] for r in runs]
        out[side] = {
            "final_mean": round(statistics.mean(finals), 5),
            "final_sd": round(statistics.stdev(finals), 5) if len(finals) > 1 else 0.0,
            "steps_mean": round(statistics.mean(r["steps"] for r in runs), 1),
        }
    return out


def plot(results: dict[str, list[dict[str, Any]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for side, runs in results.items():
        for i, run in enumerate(runs):
            xs = [p["seconds"] for p in run["curve"]]
            ys = [p["mlm_acc"] for p in run["curve"]]
            ax.plot(xs, ys, marker=".", label=side if i == 0 else None, color=f"C{list(results).index(side)}")
    ax.set_xlabel("seconds of training")
    ax.set_ylabel("held-out MLM accuracy (15 % masked)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ downstream
RANDOM_INIT = "random init"
TASKS = {"polarity": "accuracy", "punctuation": "f1"}
"""The demo's two fine-tuning tasks and the dev metric each is scored by (punctuation: F1 of the marks)."""


def folder_of(models: Path, side: str) -> Path:
    return models / side.replace(" ", "-")


def keep_model(setup: Setup, side: str, model: Any) -> Path:
    """``side``'s weights as a model directory with the benchmark's tokenizer: bertkit's ``save_pretrained`` for
    a bertkit model; for a transformers one its own ``save_pretrained`` and the tokenizer files it trained with
    (a Hugging Face layout, which bertkit loads)."""
    assert setup.models is not None
    folder = folder_of(setup.models, side)
    if side.startswith("hf-"):
        from transformers import BertTokenizerFast

        model.save_pretrained(folder)
        BertTokenizerFast(str(setup.tokenizer_dir / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    else:
        save_pretrained(model, folder, tokenizer=Tokenizer.from_pretrained(setup.tokenizer_dir))
    return folder


def keep_random_init(setup: Setup) -> Path:
    """The network every side trains, at random initialisation (seeded by ``--seed``): the baseline row."""
    torch.manual_seed(setup.args.seed)
    return keep_model(setup, RANDOM_INIT, BertForPreTraining(BertConfig.load(setup.model_config)))


def demo_config(args: argparse.Namespace, work: Path) -> DemoConfig:
    """The demo's fine-tuning recipe (``DemoConfig``'s defaults) with the sizes given on the command line."""
    dev = ROOT / "data" / "polarity" / "dev.tsv"
    if args.polarity_dev_examples:  # a smoke run: the first rows of the dev file
        rows = dev.read_text(encoding="utf-8").splitlines(keepends=True)[: args.polarity_dev_examples + 1]
        dev = work / "polarity-dev.tsv"
        dev.write_text("".join(rows), encoding="utf-8")
    sizes = {
        "finetune_examples": args.polarity_examples,
        "finetune_epochs": args.polarity_epochs,
        "punctuation_examples": args.punctuation_examples,
        "punctuation_epochs": args.punctuation_epochs,
    }
    dev_windows = {"punctuation_dev_examples": args.punctuation_dev_examples} if args.punctuation_dev_examples else {}
    return DemoConfig(
        labeled_train=str(ROOT / "data" / "polarity" / "train.tsv"),
        labeled_dev=str(dev),
        output=str(work),
        punctuation_text=str(ROOT / "data" / "punctuation"),
        reference_model=None,
        finetune_seeds=tuple(args.downstream_seeds),
        threads=args.threads,
        scale=DemoScale(finetune_curves=False, **dev_windows),
        **{name: value for name, value in sizes.items() if value is not None},
    )


def fine_tune_side(config: DemoConfig, side: str, start: Path, task: str, recipe: Recipe) -> dict[str, Any]:
    """``start`` fine-tuned on ``task`` with each seed: each seed's dev score after the last epoch (not the best
    epoch's, which ``FinetuneResult.metrics`` holds: the dev set picks nothing), their mean and sample sd."""
    scores, seconds, examples = [], [], 0
    for seed in config.finetune_seeds:
        run = finetune_once(config, f"{task} {side}", start, seed, recipe)
        scores.append(round(float(run.evaluations[-1][TASKS[task]]), 5))
        seconds.append(round(run.train_seconds, 1))
        examples = run.num_train_examples
    print(f"{side} {task}: {TASKS[task]} {scores}", flush=True)
    row = {"seeds": list(config.finetune_seeds), "scores": scores, "train_seconds": seconds}
    return with_stats({**row, "train_examples": examples})


def with_stats(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the mean and the sample sd of its scores."""
    scores = row["scores"]
    sd = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return {**row, "mean": round(statistics.mean(scores), 5), "sd": round(sd, 5)}


def downstream(args: argparse.Namespace, models: Path) -> dict[str, Any]:
    """Every kept model and the random start fine-tuned on the demo's tasks (``--downstream-tasks``), the same
    way: the scores, the settings and the command."""
    order = [*SIDES, *ABLATION, RANDOM_INIT]
    starts = {side: folder_of(models, side) for side in order if (folder_of(models, side) / "config.json").is_file()}
    work = scratch_folder("bertkit-ttq-downstream-")
    config = demo_config(args, work)
    recipes: dict[str, Recipe] = {}
    settings: dict[str, Any] = {
        "seeds": list(config.finetune_seeds),
        "batch": config.finetune_batch_size,
        "max_seq_length": config.finetune_max_seq_length,
    }
    if "polarity" in args.downstream_tasks:
        recipes["polarity"] = polarity_recipe(config)
        dev_rows = len(Path(config.labeled_dev).read_text(encoding="utf-8").splitlines()) - 1
        settings["polarity"] = {"train": "data/polarity/train.tsv", "dev_examples": dev_rows}
    if "punctuation" in args.downstream_tasks:
        task = punctuation_task(config, work)
        assert task is not None
        splits, recipes["punctuation"] = task
        settings["punctuation"] = {"text": "data/punctuation", "train_examples": splits.train_examples,
                                   "dev_examples": splits.dev_examples, "tag_counts": splits.tag_counts}  # fmt: skip
    for name, recipe in recipes.items():
        settings[name].update({k: v for k, v in dataclasses.asdict(recipe).items() if not k.endswith("_file")})
    results = {side: {name: fine_tune_side(config, side, start, name, r) for name, r in recipes.items()}
               for side, start in starts.items()}  # fmt: skip
    command = "python benchmarks/bench_time_to_quality.py " + shlex.join(args.argv)
    run = {"command": command, "machine": machine(), "note": args.note, "tasks": list(recipes)}
    return {"settings": settings, "results": results, "runs": [run]}


def merge_downstream(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` scores beside ``old`` ones, by task and seed (new wins): fine-tuning split into commands, one
    for some tasks or seeds each."""
    if old is None:
        return new
    for side, row in new["results"].items():
        for task, scores in row.items():
            before = old["results"].setdefault(side, {}).get(task)
            if before is not None:
                kept = [i for i, seed in enumerate(before["seeds"]) if seed not in scores["seeds"]]
                scores = {**scores, **{k: [before[k][i] for i in kept] + scores[k] for k in ("seeds", "scores", "train_seconds")}}  # fmt: skip
            old["results"][side][task] = with_stats(scores)
    seeds = sorted({*old["settings"]["seeds"], *new["settings"]["seeds"]})
    old["settings"].update({**new["settings"], "seeds": seeds})
    old["runs"] += new["runs"]
    return old


def downstream_only(args: argparse.Namespace) -> int:
    """Fine-tune the models kept by an earlier run in ``--keep-models`` and add the scores to its ``--output``
    (beside those of the other task, where another command added them)."""
    import fcntl

    if not (args.keep_models and args.output and Path(args.output).is_file()):
        raise SystemExit("--downstream-only needs --keep-models DIR and --output RESULT of the run that kept them")
    path = Path(args.output)
    scores = downstream(args, Path(args.keep_models))
    with open(
        Path(tempfile.gettempdir()) / f"{path.name}.lock", "w"
    ) as lock:  # two commands, one task each, may end together
        fcntl.flock(lock, fcntl.LOCK_EX)
        payload = json.loads(path.read_text(encoding="utf-8"))
        payload["downstream"] = merge_downstream(payload.get("downstream"), scores)
        write_json(path, payload)
    print(json.dumps({side: {k: v["mean"] for k, v in row.items()} for side, row in scores["results"].items()}))
    return 0


# ------------------------------------------------------------------------------------------ the docs section
DOC = ROOT / "docs" / "pretraining.md"
DOWNSTREAM = "time_to_quality_downstream"
"""The result file of a run with ``--downstream`` whose fine-tuning scores the section shows."""
BEGIN, END = "<!-- recipes: begin (python benchmarks/bench_time_to_quality.py --doc) -->", "<!-- recipes: end -->"


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f} s"


def _where(result: dict[str, Any]) -> str:
    if "merged" in result:
        parts = "; ".join(_where(part) for part in result["merged"])
        return f"{len(result['merged'])} runs merged by `{result['command']}`: {parts}"
    info = result["machine"]
    load = ", ".join(f"{x:.1f}" for x in info.get("load_average") or [])
    return f"`{result['command']}` on {info['cpu']} ({info['cpu_features']}), load average {load} at the end; {result['note']}"


def downstream_lines(result: dict[str, Any]) -> list[str]:
    """The fine-tuning scores of a ``--downstream`` result: a row per side, mean ± sample sd over seeds."""
    down = result["downstream"]
    settings = down["settings"]
    tasks = []
    if "polarity" in settings:
        pol = settings["polarity"]
        sentences = next(r["polarity"]["train_examples"] for r in down["results"].values() if "polarity" in r)
        tasks.append(
            f"sentence polarity on {sentences:,} sentences of `{pol['train']}`, {pol['epochs']:g} epochs at "
            f"{pol['lr']:g}, accuracy on {pol['dev_examples']:,} dev sentences"
        )
    if "punctuation" in settings:
        punc = settings["punctuation"]
        tasks.append(
            f"punctuation restoration on {punc['train_examples']:,} windows of `{punc['text']}`, {punc['epochs']:g} "
            f"epochs at {punc['lr']:g}, F1 of the marks on {punc['dev_examples']:,} dev windows"
        )
    lines = [
        f"Each side's final weights from a run of {result['settings']['budget']:g} s a side, and the same network "
        f"at random initialisation, fine-tuned the way the demo fine-tunes (`bertkit.demo.finetuning`, batch "
        f"{settings['batch']}, {settings['max_seq_length']} tokens): {'; '.join(tasks)}. Each score is the dev "
        f"score after the last epoch, mean ± sample sd over seeds {', '.join(map(str, settings['seeds']))}. "
        f"Pre-training measured with {_where(result)}; fine-tuning with "
        f"{'; '.join(_where(run) for run in down['runs'])}.",
        "",
        "| side | pre-training updates | held-out MLM accuracy | polarity accuracy | punctuation F1 |",
        "|---|---|---|---|---|",
    ]
    for side, row in down["results"].items():
        run = result["results"][side][0] if side in result["results"] else None
        updates, mlm = (str(run["steps"]), f"{run['final']:.4f}") if run else ("0", "")
        scores = [_scores(row.get(task), len(settings["seeds"])) for task in TASKS]
        lines.append(f"| {side} | {updates} | {mlm} | {' | '.join(scores)} |")
    return [*lines, ""]


def _scores(row: dict[str, Any] | None, seeds: int) -> str:
    if row is None:
        return "not run"
    cell = f"{row['mean']:.4f} ± {row['sd']:.4f}"
    return cell if len(row["seeds"]) == seeds else f"{cell} (seeds {', '.join(map(str, row['seeds']))})"


def _updates(runs: list[dict[str, Any]]) -> str:
    return ", ".join(str(run["steps"]) for run in runs)


def _finals(runs: list[dict[str, Any]]) -> str:
    finals = [run["final"] for run in runs]
    return f"{finals[0]:.4f}" if len(finals) == 1 else f"{statistics.mean(finals):.4f} ± {statistics.stdev(finals):.4f}"


def _times(reference: dict[str, Any] | None, side: str) -> str:
    """The seconds ``side`` took to reach the peer's final accuracy, seed by seed."""
    if reference is None:
        return "not run"
    return " / ".join(_seconds(row["seconds"].get(side)) for row in reference["per_seed"])


def _goal_line(name: str, goal: dict[str, Any]) -> str:
    verdict = "met" if goal["met"] else "missed"
    ratios = goal["ratios"]
    if goal["ratio"] is None:
        ratio = "never reached" if len(ratios) == 1 else "not reached on every seed"
    elif len(ratios) == 1:
        ratio = f"{goal['ratio']:.2f} of the peer's time"
    else:
        each = ", ".join(f"{r:.2f}" for r in ratios)
        ratio = f"{goal['ratio']:.2f} of the peer's time, the mean of seeds at {each}"
        verdict = f"{verdict} on every seed" if goal["met"] else f"{verdict} on at least one seed"
    return f"- {name}: {ratio} (goal at most {goal['goal']:.2f}): {verdict}."


def render_section(
    ttq: dict[str, Any] | None, ablation: dict[str, Any] | None, downstream: dict[str, Any] | None = None
) -> str:
    """The recipes section of docs/pretraining.md, from the result files."""
    lines = [BEGIN, ""]
    if ttq is not None:
        table_ = ttq["table"]
        lines += [
            f"Held-out MLM accuracy against seconds of training, every side with the same corpus, vocabulary, "
            f"`{ttq['settings']['model']}` model, seed, {ttq['settings']['threads']} thread(s) and a budget of "
            f"{ttq['settings']['budget']:g} s ({ttq['heldout']['masked']} masked positions of one held-out book). "
            f"Measured with {_where(ttq)}.",
            "",
            "| side | updates | final accuracy | time to the transformers MLM run's final | "
            "time to BertForPreTraining's final |",
            "|---|---|---|---|---|",
        ]
        for side, runs in ttq["results"].items():
            times = [_times(table_.get(peer), side) for peer in ("hf-mlm", "hf-pretraining")]
            lines.append(f"| {side} | {_updates(runs)} | {_finals(runs)} | {' | '.join(times)} |")
        lines.append("")
        lines += [_goal_line(name, goal) for name, goal in table_["goals"].items()]
        lines += ["", "![time to quality](../benchmarks/results/time_to_quality.png)", ""]
    if downstream is not None and "downstream" in downstream:
        lines += downstream_lines(downstream)
    if ablation is not None:
        summary_ = ablation["summary"]
        base = summary_.get("bert (paper)")
        lines += [
            f"Each option alone on top of the paper's recipe, {ablation['settings']['budget']:g} s a run, seeds "
            f"{', '.join(map(str, ablation['settings']['seeds']))}: final held-out MLM accuracy, mean ± sd. Measured "
            f"with {_where(ablation)}.",
            "",
            "| recipe | updates (mean) | final accuracy | vs the paper's recipe |",
            "|---|---|---|---|",
        ]
        for side, row in summary_.items():
            delta = "" if base is None or side == "bert (paper)" else f"{row['final_mean'] - base['final_mean']:+.4f}"
            lines.append(
                f"| {side} | {row['steps_mean']:g} | {row['final_mean']:.4f} ± {row['final_sd']:.4f} | {delta} |"
            )
        lines += ["", "![recipe ablation](../benchmarks/results/recipe_ablation.png)", ""]
    return "\n".join([*lines, END])


def write_doc(check: bool) -> int:
    """Put the section between its markers in docs/pretraining.md (``check``: exit 1 if it differs)."""
    results = [RESULTS / f"{name}.json" for name in ("time_to_quality", "recipe_ablation", DOWNSTREAM)]
    ttq, ablation, downstream = (json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None for p in results)
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = head + render_section(ttq, ablation, downstream) + tail
    if check:
        return int(new != text)
    DOC.write_text(new, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


SAME_SETTINGS = ("ablation", "budget", "calibrate", "model", "seq", "batch", "lr", "vocab_size", "dupe_factor",
                 "heldout_book", "heldout_blocks", "threads", "clock", "seed")  # fmt: skip
"""The settings runs must share to be merged: everything but the training seeds and the note."""


def merge(paths: list[Path], output: Path, argv: list[str]) -> dict[str, Any]:
    """One result from the runs of ``paths`` (the same settings, other seeds: one run per core or machine), with
    the summary, table and curves computed over all their seeds."""
    parts = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:], strict=True):
        differ = [k for k in SAME_SETTINGS if part["settings"].get(k) != first["settings"].get(k)]
        if differ or list(part["results"]) != list(first["results"]):
            what = ", ".join(differ) or "sides"
            raise SystemExit(f"--merge: {path} differs from {paths[0]} in {what}; merge runs of the same settings only")
    results = {side: [run for part in parts for run in part["results"][side]] for side in first["results"]}
    seeds = [run["seed"] for run in next(iter(results.values()))]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"--merge: the files repeat a seed ({seeds}); merge runs of other seeds")
    ablation = first["settings"]["ablation"]
    payload = {
        "command": "python benchmarks/bench_time_to_quality.py " + shlex.join(argv),
        "merged": [{key: part[key] for key in ("command", "machine", "note")} for part in parts],
        "machine": first["machine"],
        "note": "; ".join(part["note"] for part in parts),
        "settings": {**first["settings"], "seeds": seeds},
        "heldout": first["heldout"],
        "pace_updates_per_s": [part["pace_updates_per_s"] for part in parts],
        "summary": summary(results),
        "table": None if ablation else table(results),
        "results": results,
    }
    write_json(output, payload)
    settings = first["settings"]
    plot(results, output.with_suffix(".png"), f"{settings['model']}, {settings['threads']} thread(s), "
         f"{settings['budget']:g} s a side, seeds {', '.join(map(str, seeds))}")  # fmt: skip
    return payload


def print_merged(payload: dict[str, Any]) -> int:
    print(json.dumps(payload["table"] or payload["summary"], indent=1))
    return 0


def result_file_options(parser: argparse.ArgumentParser) -> None:
    """What is done with result files instead of a run: the docs section, and merging runs of other seeds."""
    parser.add_argument("--doc", action="store_true", help="write the recipes section of docs/pretraining.md")
    parser.add_argument("--check", action="store_true", help="with --doc: exit 1 if the section is out of date")
    parser.add_argument(
        "--merge", nargs="+", type=Path, default=None, help="result files of other seeds to merge into --output"
    )


def downstream_options(parser: argparse.ArgumentParser) -> None:
    """The fine-tuning of ``--downstream``; a size left out is the demo's (``DemoConfig``)."""
    parser.add_argument(
        "--downstream", action="store_true", help="fine-tune each side's final weights on the demo's tasks"
    )
    parser.add_argument(
        "--downstream-only",
        action="store_true",
        help="only fine-tune the models in --keep-models; the scores go into --output (which must exist)",
    )
    parser.add_argument("--keep-models", default=None, help="folder to keep each side's final weights in")
    parser.add_argument("--downstream-seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--downstream-tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    parser.add_argument("--polarity-examples", type=int, default=None, help="training sentences (default: all)")
    parser.add_argument("--polarity-dev-examples", type=int, default=None, help="dev sentences (default: all)")
    parser.add_argument("--polarity-epochs", type=float, default=None, help="default: the demo's")
    parser.add_argument("--punctuation-examples", type=int, default=None, help="training windows (default: the demo's)")
    parser.add_argument("--punctuation-dev-examples", type=int, default=None, help="dev windows (default: the demo's)")
    parser.add_argument("--punctuation-epochs", type=float, default=None, help="default: the demo's")  # fmt: skip


def smoke_settings(args: argparse.Namespace) -> None:
    """A few seconds a side on a slice of two books; every side fine-tuned once on a few sentences and windows."""
    args.budget, args.calibrate, args.vocab_size, args.heldout_blocks, args.dupe_factor = 3.0, 1.5, 400, 16, 1
    args.seeds = args.seeds[:1]
    if args.ablation:
        args.sides = args.sides or ["bert (paper)", "masking 30%->15%"]
    else:
        args.downstream, args.downstream_seeds, args.polarity_epochs, args.punctuation_epochs = True, [1], 1, 1
        args.polarity_examples, args.polarity_dev_examples = 32, 32
        args.punctuation_examples, args.punctuation_dev_examples = 16, 8


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of training per side")
    parser.add_argument("--calibrate", type=float, default=10.0, help="seconds of the pace-measuring run")
    parser.add_argument("--sides", nargs="+", default=None, help=f"default: {' '.join(SIDES)}")
    parser.add_argument("--ablation", action="store_true", help="the paper's recipe and each option alone")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--seed", type=int, default=1, help="data preparation seed")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--dupe-factor", type=int, default=3)
    parser.add_argument("--heldout-book", default="pg174", help="the book left out of training (file name start)")
    parser.add_argument("--heldout-blocks", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu", help=CLOCK_HELP)
    parser.add_argument("--note", default="shared machine: other engineers' jobs ran on the same 2 cores")
    result_file_options(parser)
    downstream_options(parser)
    add_options(parser)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.doc:
        return write_doc(args.check)
    if args.merge:
        if not args.output:
            raise SystemExit("--merge needs --output: the file the merged result goes to")
        return print_merged(merge(args.merge, Path(args.output), args.argv))
    if args.smoke:
        smoke_settings(args)
    set_threads(args.threads)
    if args.downstream_only:
        return downstream_only(args)
    sides = args.sides or (list(ABLATION) if args.ablation else list(SIDES))
    setup = make_setup(args)
    pace: dict[str, float] = {}
    results = {side: [measure(setup, side, seed, pace) for seed in args.seeds] for side in sides}
    name = "recipe_ablation.json" if args.ablation else "time_to_quality.json"
    path = output_path(args, RESULTS / name)
    payload = {
        "command": "python benchmarks/bench_time_to_quality.py " + shlex.join(args.argv),
        "machine": machine(),
        "note": args.note,
        "settings": {k: v for k, v in vars(args).items() if k not in ("output", "smoke")},
        "heldout": {"blocks": len(setup.heldout), "masked": int((setup.labels != -100).sum())},
        "pace_updates_per_s": {k: round(v, 2) for k, v in pace.items()},
        "summary": summary(results),
        "table": table(results) if not args.ablation else None,
        "results": results,
    }
    if args.downstream:
        assert setup.models is not None
        payload["downstream"] = downstream(args, setup.models)
    write_json(path, payload)
    title = f"{args.model}, {args.threads} thread(s), {args.budget:g} s a side"
    plot(results, path.with_suffix(".png"), title)
    print(json.dumps(payload["summary"], indent=1))
    if payload["table"]:
        print(json.dumps(payload["table"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
