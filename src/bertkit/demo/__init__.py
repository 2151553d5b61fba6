"""The end-to-end demo behind ``bertkit demo`` (the README's main command).

On a small real corpus it does what a user of bertkit does, in order: learn a WordPiece vocabulary,
prepare MLM+NSP data, pre-train a small BERT (``tiny``) for a wall-clock budget capped by a number of passes,
keep the checkpoint with the best held-out loss, compare fill-mask predictions before and after, and
fine-tune the pre-trained model and the same network from random initialisation on two labeled tasks, so that
the effect of pre-training is visible: sentence polarity, and punctuation restoration (word tagging built
from books the pre-training never read). Where a BERT pre-trained at scale is installed (all-MiniLM-L6-v2), it
gets the polarity comparison against its own architecture at random initialisation. It ends with a markdown
report and PNG curves. Everything is a call into the library; nothing here is demo-only logic.

Where things live: the options in ``demo_config``, each stage in its module (``vocabulary``, ``pretraining``,
``finetuning``, ``reference``), what they produce in ``records``, the order of the stages in ``run``, and the
markdown in ``report``.
"""

from __future__ import annotations

from bertkit.demo.demo_config import DemoConfig, DemoScale
from bertkit.demo.pretraining import PROBES
from bertkit.demo.reference import reference_checkpoint
from bertkit.demo.run import run_demo

__all__ = ["PROBES", "DemoConfig", "DemoScale", "reference_checkpoint", "run_demo"]
