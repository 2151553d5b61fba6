"""Stages 2 to 4: MLM + NSP data, the network at random initialisation, pre-training, and fill-mask on probe
sentences before and after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from bertkit.config import BertConfig
from bertkit.data import PrepareConfig, prepare_dataset
from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.records import FillMask, Predictions, Pretraining, Vocabulary
from bertkit.demo.timing import timed
from bertkit.inference import fill_mask
from bertkit.models.bert import BertForPreTraining
from bertkit.notices import notice
from bertkit.training.loop import TrainResult
from bertkit.training.pretrain import FINAL_DIR, build_config, pretrain
from bertkit.weights import save_pretrained

PROBES = [
    "alice was beginning to get very [MASK] of sitting by her sister on the bank.",
    "the captain took out his [MASK] and lit it.",
    '"it is a [MASK] night," said the old man.',
    "holmes looked at me and [MASK].",
    "she opened the [MASK] and went into the garden.",
]


def run_pretraining(config: DemoConfig, vocabulary: Vocabulary, out: Path) -> tuple[Pretraining, FillMask]:
    """Prepare the data, save the random start, pre-train, and ask the probes of both."""
    data = prepare_data(config, vocabulary, out / "data")
    model_config = save_random_init(config, vocabulary, out)
    before = probe(out / "random-init")
    run = pretrain_model(config, out / "data", model_config, out / "pretrain")
    checkpoint = out / "pretrain" / "best"
    if not (checkpoint / "config.json").is_file():  # no held-out evaluation ran: the last weights
        checkpoint = out / "pretrain" / FINAL_DIR
    pretraining = Pretraining(data, run, checkpoint, out / "random-init")
    return pretraining, FillMask(PROBES, before, probe(checkpoint))


def prepare_data(config: DemoConfig, vocabulary: Vocabulary, output: Path) -> dict[str, Any]:
    """MLM + NSP instances; with dynamic masking the loader draws the masks, afresh for every pass."""
    with timed(config.timings, "prepare the pre-training data"):
        return prepare_dataset(
            PrepareConfig(
                inputs=vocabulary.inputs,
                output=str(output),
                tokenizer=str(vocabulary.directory),
                max_seq_length=config.max_seq_length,
                dupe_factor=config.dupe_factor,
                masking=config.masking,
                recipe=config.recipe,
                seed=config.seed,
                eval_fraction=0.05,
                workers=config.threads,
            ),
            progress=False,
        )


def save_random_init(config: DemoConfig, vocabulary: Vocabulary, out: Path) -> Path:
    """The network at random initialisation in ``out/random-init`` (the "before" of fill-mask and the baseline
    of fine-tuning), and its config in ``out/model-config``, whose path it returns."""
    tokenizer = vocabulary.tokenizer
    dropout = (
        {}
        if config.pretrain_dropout is None
        else {"hidden_dropout_prob": config.pretrain_dropout, "attention_probs_dropout_prob": config.pretrain_dropout}
    )
    model_config = BertConfig.preset(
        config.model,
        vocab_size=tokenizer.vocab_size,
        pad_token_id=tokenizer.pad_id,
        tie_word_embeddings=config.tie_word_embeddings,
        **dropout,
    )
    path = model_config.save(out / "model-config")
    torch.manual_seed(config.seed)
    save_pretrained(BertForPreTraining(model_config), out / "random-init", tokenizer=tokenizer)
    return path


def pretrain_model(config: DemoConfig, data: Path, model_config: Path, output: Path) -> TrainResult:
    """Pre-train for a wall-clock budget or a number of passes, whichever ends first; the schedule stretches
    over the shorter. Each new best held-out loss is exported to ``output/best``."""
    with timed(config.timings, "pre-train"):
        run = pretrain(
            build_config(  # the options `bertkit pretrain` takes, so the recipe fills what is not given
                {
                    "data": str(data),
                    "output": str(output),
                    "model_config": str(model_config),
                    "recipe": config.recipe,
                    "eval_batches": config.scale.eval_batches,
                    "max_time": config.pretrain_time,
                    "epochs": config.pretrain_epochs,
                    "max_steps": config.scale.pretrain_steps,
                    "micro_batch_size": config.micro_batch_size,
                    "lr": config.pretrain_lr,
                    "warmup_ratio": config.pretrain_warmup_ratio,
                    "adam_beta2": config.pretrain_adam_beta2,
                    "seed": config.seed,
                    "eval_every": config.pretrain_eval_every,
                    "save_every": 1000,
                    "log_every": 10,
                    "precision": "fp32",
                    "best_metric": "loss",
                    "best_mode": "min",
                }
            )
        )
    notice(f"demo: pre-training stopped ({run.stop_reason}) after {run.step} updates")
    return run


def probe(model: Path) -> Predictions:
    """The top 3 answers of ``model`` for every [MASK] of the probe sentences."""
    return fill_mask(PROBES, str(model), top_k=3)
