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
import sys
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
from bertkit.tokenizer import Tokenizer
from bertkit.training.pretrain import build_config, pretrain
from harness import RESULTS, ROOT, add_options, output_path, scratch_folder, set_threads, write_json
from machine_info import machine
from time_to_quality_clock import CLOCK_HELP, CLOCKS, Snapshots
from time_to_quality_downstream import downstream, downstream_only, downstream_options, keep_model, keep_random_init
from time_to_quality_results import merge as merge
from time_to_quality_results import plot, print_merged, result_file_options, summary, table, write_doc
from time_to_quality_results import render_section as render_section

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
        return downstream_only(args, [*SIDES, *ABLATION])
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
        payload["downstream"] = downstream(args, setup.models, [*SIDES, *ABLATION])
    write_json(path, payload)
    title = f"{args.model}, {args.threads} thread(s), {args.budget:g} s a side"
    plot(results, path.with_suffix(".png"), title)
    print(json.dumps(payload["summary"], indent=1))
    if payload["table"]:
        print(json.dumps(payload["table"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
