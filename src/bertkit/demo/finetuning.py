"""Stage 5: fine-tune the pre-trained start and the random one the same way, with the same seeds, on
sentence polarity and on punctuation restoration (word tagging on books the pre-training never read).
Each run is scored on the dev set after its last epoch: the dev set chooses nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bertkit.data.punctuation import PunctuationSplits, build_punctuation_data
from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.records import Comparison, Pretraining, Punctuation
from bertkit.demo.timing import timed
from bertkit.training.finetune import FinetuneConfig, FinetuneResult, finetune


@dataclass(frozen=True)
class Recipe:
    """How both starts of one comparison are fine-tuned."""

    epochs: float
    lr: float
    examples: int | None = None
    """Training examples (the first N of the shuffled file); None: all."""
    task: str = "classification"
    train_file: str | None = None
    """None: the demo's labeled sentences (``labeled_train``, ``labeled_dev``)."""
    dev_file: str | None = None


def compare(
    config: DemoConfig, label: str, starts: tuple[Path, Path], seeds: tuple[int, ...], recipe: Recipe
) -> Comparison:
    """Fine-tune the pre-trained and the random start (``starts``, in that order) with each seed; runs are
    named ``"{label}pre-trained"`` and ``"{label}random init"``."""
    comparison = Comparison(seeds, [], [])
    for seed in seeds:
        comparison.pretrained.append(finetune_once(config, f"{label}pre-trained", starts[0], seed, recipe))
        comparison.random_init.append(finetune_once(config, f"{label}random init", starts[1], seed, recipe))
    return comparison


def finetune_once(config: DemoConfig, name: str, start: Path, seed: int, recipe: Recipe) -> FinetuneResult:
    """One fine-tuning run from ``start`` into ``output/finetune-<name>-seed<seed>``."""
    with timed(config.timings, f"fine-tune ({name}, seed {seed})"):
        return finetune(
            FinetuneConfig.from_options(
                task=recipe.task,
                model=str(start),
                train_file=recipe.train_file or config.labeled_train,
                dev_file=recipe.dev_file or config.labeled_dev,
                output=str(Path(config.output) / f"finetune-{name.replace(' ', '-')}-seed{seed}"),
                epochs=recipe.epochs,
                lr=recipe.lr,
                micro_batch_size=config.finetune_batch_size,
                max_seq_length=config.finetune_max_seq_length,
                max_train_examples=recipe.examples,
                seed=seed,
                precision="fp32",
                progress=False,
                plot=config.scale.finetune_curves,
            )
        )


def polarity_recipe(config: DemoConfig) -> Recipe:
    """How the demo fine-tunes on sentence polarity."""
    return Recipe(config.finetune_epochs, config.finetune_lr, config.finetune_examples)


def polarity(config: DemoConfig, pretraining: Pretraining) -> Comparison:
    """Sentence polarity, on the labeled sentences."""
    starts = (pretraining.checkpoint, pretraining.random_init)
    return compare(config, "", starts, config.finetune_seeds, polarity_recipe(config))


def punctuation_task(config: DemoConfig, out: Path) -> tuple[PunctuationSplits, Recipe] | None:
    """The punctuation-restoration data, built from ``punctuation_text`` into ``out/punctuation``, and how the
    demo fine-tunes on it; None without ``punctuation_text``."""
    if not config.punctuation_text:
        return None
    with timed(config.timings, "build the punctuation data"):
        data = build_punctuation_data(
            [config.punctuation_text],
            out / "punctuation",
            train_examples=config.punctuation_examples,
            dev_examples=config.scale.punctuation_dev_examples,
            seed=config.seed,
        )
    recipe = Recipe(
        config.punctuation_epochs,
        config.punctuation_lr,
        task="ner",
        train_file=str(data.train),
        dev_file=str(data.dev),
    )
    return data, recipe


def punctuation(config: DemoConfig, pretraining: Pretraining, out: Path) -> Punctuation | None:
    """Punctuation restoration, built from ``punctuation_text`` into ``out/punctuation``; None without it."""
    task = punctuation_task(config, out)
    if task is None:
        return None
    data, recipe = task
    starts = (pretraining.checkpoint, pretraining.random_init)
    return Punctuation(data, compare(config, "punctuation ", starts, config.finetune_seeds, recipe))
