"""BERT pre-training (masked LM + next sentence prediction) on a dataset prepared by ``bertkit.data``.

``pretrain(PretrainConfig(...))`` builds the model (or loads it for phase 2), the resumable shard stream
and the held-out evaluation, runs :func:`bertkit.training.loop.train`, and exports the final model as a
Hugging Face directory (``<output>/final``: config.json, model.safetensors, tokenizer files) that
bertkit's fine-tuning and ``transformers.BertForPreTraining`` both load.

Two phases as in the paper: phase 1 on a dataset prepared at 128 tokens, then phase 2 with
``init_from=<phase 1>/final`` on a dataset prepared at 512, with its own schedule and output directory;
the position table already has 512 rows, so nothing is resized.

A dataset prepared without next-sentence pairs (``--no-nsp``, RoBERTa's full-sentence blocks) trains a
``BertForMaskedLM``: no pooler, no next-sentence head, no NSP loss. ``--recipe`` picks a set of defaults for
the options not given (:mod:`bertkit.data.recipes`); ``masking_rate``/``masking_rate_end`` redraw the dynamic
masks at a rate that decays over the run, a pure function of the micro-batch's place in it.

``architecture="modernbert"`` (or a ``config.json``/``init_from`` with ``model_type: modernbert``) trains a
``ModernBertForMaskedLM`` instead (:mod:`bertkit.models.modernbert`), masked LM only, on data prepared without
next-sentence pairs; ``final/`` then loads in ``transformers.ModernBertForMaskedLM``.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

import torch

from bertkit.config import (
    PRE_LN_MODEL_TYPE,
    PRESETS,
    BertConfig,
    ModernBertConfig,
    model_type_of,
)
from bertkit.data.masking import MaskingRate
from bertkit.data.recipes import PRETRAIN_DEFAULTS, RecipeName, check_recipe, with_recipe
from bertkit.errors import ConfigError, DataError
from bertkit.hub import resolve_model
from bertkit.io import atomic_directory, atomic_write_text
from bertkit.models import registry
from bertkit.models.architecture import Architecture as ModelArchitecture
from bertkit.notices import notice
from bertkit.option_groups import at_least, between, check_numbers
from bertkit.training import distributed
from bertkit.training.loop import TrainResult, train
from bertkit.training.precision import precision_name
from bertkit.training.resume_options import check_resumed_options, record_options, run_options
from bertkit.training.run_log import mfu_peak, pretraining_flops_per_token
from bertkit.training.state import find_resume
from bertkit.training.tracking import log_model, run_context
from bertkit.training.train_config import TrainConfig, split_options
from bertkit.weights import declare_inputs, save_pretrained

Architecture = Literal["bert", "modernbert"]
"""The built-in architectures the flag offers; one registered from Python (``bertkit.models.registry``) is taken
by name too."""
LayerNormPosition = Literal["post", "pre"]

FINAL_DIR = "final"
VERIFIED_DATA = "data-verified.json"
"""Sizes and modification times of the shards that passed the full SHA-256 check for this run."""


@dataclass
class PretrainConfig:
    """What to pre-train on and where; ``train`` holds the loop's options (batch, lr, steps...)."""

    data: str
    """A dataset directory written by ``bertkit prepare-data`` (shards, ``dataset.json``, ``tokenizer/``)."""
    output: str
    """Run directory: checkpoints, metrics, curves and ``final/`` (the exported model)."""
    model_config: str = "mini"
    """A preset (tiny, mini, small, medium, base, large) or a ``config.json``; ``vocab_size`` and
    ``pad_token_id`` are taken from the dataset's tokenizer."""
    architecture: Architecture | None = None
    """``bert``, or ``modernbert``: rotary positions, GeGLU, alternating global and sliding-window attention
    (docs/modernbert.md), masked LM only, on data prepared without next-sentence pairs (``--recipe modern`` or
    ``--no-nsp``); the presets then have ModernBERT's deep-and-narrow shapes. Default: the ``model_type`` of the
    ``--model-config`` file or of ``--init-from``, else ``bert``."""
    init_from: str | None = None
    """Start from these weights (a model directory or checkpoint) instead of random: phase 2, or continued
    pre-training. Its ``config.json`` then defines the model and ``model_config`` is ignored."""
    attn_implementation: str | None = None
    """``sdpa`` (default) or ``eager`` attention; for ModernBERT ``sdpa``, ``flex`` or ``varlen`` (default: by
    device)."""
    eval_batches: int = field(default=50, metadata=at_least(0))
    """Held-out batches per evaluation (the dataset's ``eval`` split); 0 disables evaluation."""
    num_workers: int = field(default=0, metadata=at_least(0))
    """Data-loader worker processes per training process (masks and order do not depend on it)."""
    recipe: RecipeName = "bert"
    """``bert`` (the paper's recipe) or ``modern`` (full-sentence data with masks redrawn every pass, no
    dropout, warmup-stable-decay: docs/pretraining.md, "Recipes"); fills only the options not given. The
    schedule is a ``train`` option: :func:`build_config` (the command line) fills it, a ``TrainConfig`` built
    by hand keeps its own."""
    masking_rate: float | None = field(default=None, metadata=between(0, 1, low_open=True, high_open=True))
    """Rate of dynamic masking at the start of the run (needs data prepared with ``--masking dynamic``);
    default: the dataset's ``--masked-lm-prob``."""
    masking_rate_end: float | None = field(default=None, metadata=between(0, 1, low_open=True, high_open=True))
    """Rate the dynamic masking decays to, linearly over the run's ``max_steps`` (Ankner et al. 2023's dynamic
    masking rate: 0.3 to 0.15); default: no decay."""
    dropout: float | None = field(default=None, metadata=between(0, 1, high_open=True))
    """Hidden and attention dropout of a new model (0: off, as Cramming); default: the recipe's (``bert``: the
    model config's, 0.1; ``modern``: 0)."""
    layer_norm_position: LayerNormPosition | None = None
    """LayerNorms of a new BERT model: ``post`` (BERT's, after each residual add) or ``pre`` (before attention
    and the feed-forward block, and a final one: RoBERTa-PreLayerNorm's layout, masked LM only); default: the
    ``--model-config``'s (``post`` for a preset). ``--init-from`` keeps its checkpoint's."""
    tie_word_embeddings: bool | None = None
    """Whether a new model's masked-LM decoder is its word embedding matrix (BERT's tied output embedding)
    or a matrix of its own (``--no-tie-word-embeddings``: the input embeddings no longer serve as the output
    softmax, which keeps them better spread for fine-tuning; docs/pretraining.md); default: the
    ``--model-config``'s (tied for a preset). ``--init-from`` keeps its checkpoint's."""
    train: TrainConfig = field(default_factory=lambda: TrainConfig.from_options(max_steps=1000))
    """The loop's options; ``train.output_dir`` is set to ``output``."""

    def __post_init__(self) -> None:
        if isinstance(self.train, Mapping):
            self.train = TrainConfig.from_dict(dict(self.train))
        self.train.output_dir = Path(self.output)
        defaults = PRETRAIN_DEFAULTS[check_recipe(self.recipe)]
        for name in ("masking_rate", "masking_rate_end", "dropout", "layer_norm_position"):
            if getattr(self, name) is None:
                setattr(self, name, defaults.get(name))
        check_numbers(self)
        if self.masking_rate_end is not None and self.masking_rate is None:
            raise ConfigError("--masking-rate-end needs --masking-rate (the rate it decays from)")
        if self.layer_norm_position not in (None, *get_args(LayerNormPosition)):
            raise ConfigError(f"--layer-norm-position must be post or pre, got {self.layer_norm_position!r}")
        if not Path(self.data).is_dir():
            raise DataError(f"--data {self.data} is not a directory; prepare one with `bertkit prepare-data`")
        if self.init_from is not None:  # a hub name becomes its cached snapshot
            self.init_from = str(resolve_model(self.init_from))
        if self.init_from is not None and not Path(self.init_from).exists():
            raise ConfigError(f"--init-from {self.init_from} does not exist")
        if self.init_from is None and self.model_config not in PRESETS and not Path(self.model_config).exists():
            raise ConfigError(
                f"--model-config {self.model_config!r} is neither a preset ({', '.join(PRESETS)}) nor a config.json"
            )
        self.architecture = _resolve_architecture(self)
        _check_applies(self)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "train"}
        out["train"] = self.train.to_dict()
        return out


def _resolve_architecture(config: PretrainConfig) -> Architecture:
    """The architecture asked for, checked against the ``model_type`` of the config file or weights given."""
    known = registry.names()
    if config.architecture is not None and config.architecture not in known:
        raise ConfigError(f"unknown --architecture {config.architecture!r}; choose {' or '.join(known)}")
    source = config.init_from or (None if config.model_config in PRESETS else config.model_config)
    try:
        found = model_type_of(source) if source is not None else None
    except ConfigError:  # no config file: building the model says so
        found = None
    if found == PRE_LN_MODEL_TYPE:  # a pre-LN BERT (BertConfig.layer_norm_position)
        found = "bert"
    if found is not None and found not in known:
        raise ConfigError(f"{source} describes a {found!r} model; bertkit pre-trains {' or '.join(known)}")
    if config.architecture is not None and found not in (None, config.architecture):
        raise ConfigError(
            f"--architecture {config.architecture} but {source} describes a {found} model; drop one of the two"
        )
    return cast(Architecture, config.architecture or found or "bert")


def _check_applies(config: PretrainConfig) -> None:
    """Refuse an option the chosen architecture does not read, rather than train without it."""
    architecture = registry.named(config.architecture or "bert")
    if not architecture.pre_ln and config.layer_norm_position is not None:
        raise ConfigError(
            f"--layer-norm-position does not apply to {architecture.title}, whose layers put their LayerNorms "
            "where the architecture does: drop it, or pre-train --architecture bert"
        )
    allowed = architecture.attention_implementations
    if config.attn_implementation not in (None, *allowed):
        raise ConfigError(
            f"--attn-implementation {config.attn_implementation} is not one of {architecture.title}'s: "
            f"{', '.join(allowed)}"
        )


def check_device(config: PretrainConfig, device: torch.device) -> None:
    """Refuse an attention path the device cannot train with (``varlen`` is FlashAttention: CUDA only; PyTorch's
    FlexAttention has no backward off CUDA), before the data and the model are read."""
    if config.attn_implementation == "varlen" and device.type != "cuda":
        raise ConfigError(
            f"--attn-implementation varlen runs on CUDA only (FlashAttention), not on {device}; use sdpa or flex"
        )
    if config.attn_implementation == "flex" and device.type != "cuda":
        raise ConfigError(
            f"--attn-implementation flex trains on CUDA only (PyTorch's FlexAttention has no backward on {device}); "
            "use sdpa"
        )


def build_config(options: Mapping[str, Any]) -> PretrainConfig:
    """A :class:`PretrainConfig` from flat options (config file merged with command-line flags)."""
    options = with_recipe(options, PRETRAIN_DEFAULTS)
    pre, train_options = split_options(options, PretrainConfig)
    for required in ("data", "output"):
        if required not in pre:
            raise ConfigError(f"--{required} is required (on the command line or in the config file)")
    return PretrainConfig(**pre, train=TrainConfig.from_options(output_dir=Path(pre["output"]), **train_options))


# ------------------------------------------------------------------------------------------ metrics
def pretraining_metrics(output: Any, batch: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """MLM/NSP losses and accuracies of one micro-batch (accuracies as exact (correct, count) pairs); MLM only
    without next-sentence labels."""
    if "next_sentence_label" not in batch:
        return {"mlm_loss": output.loss.detach(), "mlm_acc": (output.mlm_correct, output.mlm_count)}
    nsp_labels = batch["next_sentence_label"]
    return {
        "mlm_loss": output.mlm_loss.detach(),
        "nsp_loss": output.nsp_loss.detach(),
        "mlm_acc": (output.mlm_correct, output.mlm_count),
        "nsp_acc": ((output.nsp_logits.argmax(-1) == nsp_labels).sum(), nsp_labels.numel()),
    }


def make_evaluator(
    directory: str, batch_size: int, num_batches: int, device: torch.device
) -> Callable[[torch.nn.Module], dict[str, float]] | None:
    """``evaluate(model)``: MLM and NSP loss/accuracy over the first ``num_batches`` held-out batches.

    Losses are weighted by predictions (MLM) and sequences (NSP), so the result does not depend on how the
    held-out set is cut into batches. ``None`` when the dataset has no eval split.
    """
    from bertkit.data import PretrainingDataset, PretrainingLoader

    try:
        dataset = PretrainingDataset(directory, "eval")
    except DataError:
        return None
    if len(dataset) == 0 and num_batches:
        notice(
            f"warning: {directory} holds no eval instances, so this run reports no held-out loss; prepare the "
            f"data again with a larger --eval-fraction (or pass --eval-batches 0 to say you want none)"
        )
    if len(dataset) == 0 or num_batches == 0:
        return None
    loader = PretrainingLoader(directory, batch_size, split="eval", shuffle=False, drop_last=False, dataset=dataset)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        loader.epoch, loader.position = 0, 0
        mlm_loss = mlm_correct = mlm_count = nsp_loss = nsp_correct = sequences = 0.0
        for i, batch in enumerate(loader):
            if i >= num_batches:
                break
            batch = {k: v.to(device) for k, v in batch.items()}
            out = model(**batch)
            count = float(out.mlm_count)
            mlm_loss += float(out.loss if dataset.nsp is False else out.mlm_loss) * count
            mlm_correct += float(out.mlm_correct)
            mlm_count += count
            if dataset.nsp:
                n = batch["input_ids"].shape[0]
                nsp_loss += float(out.nsp_loss) * n
                nsp_correct += float((out.nsp_logits.argmax(-1) == batch["next_sentence_label"]).sum())
                sequences += n
        result = {"mlm_loss": mlm_loss / max(mlm_count, 1), "mlm_acc": mlm_correct / max(mlm_count, 1)}
        if dataset.nsp:
            result.update(nsp_loss=nsp_loss / max(sequences, 1), nsp_acc=nsp_correct / max(sequences, 1))
        return {**result, "loss": result["mlm_loss"] + result.get("nsp_loss", 0.0)}

    return evaluate


# ------------------------------------------------------------------------------------------ entry point
def build_model(config: PretrainConfig, meta: Mapping[str, Any]) -> torch.nn.Module:
    """A fresh pre-training model of the run's architecture (its record in ``bertkit.models.registry``), sized
    for the dataset's tokenizer, or the ``init_from`` weights: the next-sentence head beside masked LM
    (``BertForPreTraining``) on data with next-sentence pairs, masked LM alone (``BertForMaskedLM``'s role)
    without them."""
    from bertkit.checkpoint_files import read_weights

    architecture = registry.named(config.architecture or "bert")
    nsp = meta["settings"].get("nsp", True)
    if nsp and not architecture.nsp:
        raise ConfigError(
            f"{architecture.title} pre-trains with masked LM only, but {config.data} holds next-sentence pairs; "
            f"prepare the data with bertkit prepare-data --recipe modern (or --no-nsp)"
        )
    head = architecture.class_for("BertForPreTraining" if nsp else "BertForMaskedLM")
    tok = meta["tokenizer"]
    if config.init_from is not None:
        _check_same_vocabulary(Path(config.init_from), tok, config.data)
        model_config = architecture.config_class.load(config.init_from)
    elif isinstance(config.model_config, str) and config.model_config in architecture.presets:
        model_config = architecture.config_class.preset(config.model_config)
    else:
        model_config = architecture.config_class.load(config.model_config)
    if architecture.pretraining_config is not None:
        model_config = architecture.pretraining_config(model_config, tok, config.init_from is None)
    model_config = dataclasses.replace(model_config, architectures=[head.__name__])
    if config.dropout is not None and architecture.with_dropout is not None:
        model_config = architecture.with_dropout(model_config, config.dropout)
    if architecture.pre_ln:
        model_config = _with_layer_norm_position(config, model_config, nsp)
    model_config = _with_tie_word_embeddings(config, model_config)
    _check_positions(meta["settings"]["max_seq_length"], model_config.max_position_embeddings)
    model = head(model_config)
    if config.attn_implementation is not None:
        cast(Any, model).set_attention(config.attn_implementation)
    if config.init_from is not None:
        source = Path(config.init_from)
        architecture.load_state(model, read_weights(source), source=str(source))
    return model


_Config = TypeVar("_Config", BertConfig, ModernBertConfig)


def _with_tie_word_embeddings(config: PretrainConfig, model_config: _Config) -> _Config:
    """``model_config`` (BERT's or ModernBERT's) with the run's ``tie_word_embeddings``, for a new model only:
    ``--init-from`` keeps its checkpoint's, said once where the run asked otherwise."""
    wanted = config.tie_word_embeddings
    if wanted is None or wanted == model_config.tie_word_embeddings:
        return model_config
    if config.init_from is None:
        return dataclasses.replace(model_config, tie_word_embeddings=wanted)
    kept = "tied" if model_config.tie_word_embeddings else "untied"
    notice(f"--init-from {config.init_from} has {kept} output embeddings; they are kept")
    return model_config


def _with_layer_norm_position(config: PretrainConfig, model_config: BertConfig, nsp: bool) -> BertConfig:
    """``model_config`` with the run's ``layer_norm_position`` (a new model only), checked against the data: a
    pre-LN model has no ``transformers`` class with a next-sentence head, so it pre-trains on masked LM alone."""
    wanted = config.layer_norm_position
    if wanted is not None and config.init_from is None:
        model_config = dataclasses.replace(model_config, layer_norm_position=wanted)
    elif wanted is not None and wanted != model_config.layer_norm_position:
        notice(f"--init-from {config.init_from} is {model_config.layer_norm_position}-LN; its layout is kept")
    if model_config.pre_layer_norm and nsp:
        raise ConfigError(
            f"a pre-LN model pre-trains with masked LM only (RoBERTa-PreLayerNorm, its transformers class, has no "
            f"next-sentence head), but {config.data} holds next-sentence pairs; prepare it with --recipe modern "
            f"(or --no-nsp)"
        )
    return model_config


def _check_positions(seq: int, positions: int) -> None:
    if seq > positions:
        raise ConfigError(f"the dataset's sequences have {seq} tokens but the model has only {positions} positions")


def _check_same_vocabulary(init_from: Path, data_tokenizer: Mapping[str, Any], data: str) -> None:
    """Refuse weights whose tokenizer differs from the dataset's: the same ids would mean other words (an
    extended vocabulary keeps its size, so no shape check would catch it)."""
    from bertkit.tokenizer import TOKENIZER_NAME, VOCAB_NAME, Tokenizer

    if not ((init_from / VOCAB_NAME).is_file() or (init_from / TOKENIZER_NAME).is_file()):
        return  # weights without a tokenizer: the user vouches for the ids
    theirs = Tokenizer.from_pretrained(init_from).fingerprint
    if data_tokenizer.get("fingerprint") not in (None, theirs):
        raise ConfigError(
            f"--init-from {init_from} has another tokenizer (fingerprint {theirs}) than the data in "
            f"{data} ({data_tokenizer['fingerprint']}), so token ids would mean other words; prepare "
            f"the data with bertkit prepare-data --tokenizer {init_from}"
        )


def _read_json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def pretrain(
    config: PretrainConfig,
    *,
    env: distributed.DistEnv | None = None,
    evaluate: Callable[[torch.nn.Module], dict[str, float]] | None = None,
) -> TrainResult:
    """Run (or resume) pre-training as ``config`` says; see the module docstring. ``evaluate`` replaces the
    held-out evaluation on the dataset's ``eval`` split (a benchmark scoring every run on one set of its own)."""
    from bertkit.data import PretrainingLoader, open_dataset

    env = env or distributed.setup(config.train.distributed.device)
    check_device(config, env.device)
    options = run_options(config)
    resumed_from = find_resume(config.train)
    if resumed_from is not None:
        check_resumed_options(resumed_from.parent, options)
    config = dataclasses.replace(
        config, train=config.train.with_options(precision=precision_name(config.train.precision.mode, env.device))
    )
    meta = open_dataset(config.data)
    stamps = _verify_data(config)
    torch.manual_seed(config.train.seed)  # model initialisation, identical on every process
    model = build_model(config, meta)
    loader = PretrainingLoader(
        config.data,
        config.train.batch.micro_batch_size,
        split="train",
        seed=config.train.seed,
        rank=env.rank,
        world_size=env.world_size,
        num_workers=config.num_workers,
        pin_memory=env.device.type == "cuda",
        masking_rate=_masking_rate(config, 1),
    )
    if evaluate is None and env.is_main:
        evaluate = make_evaluator(config.data, config.train.batch.micro_batch_size, config.eval_batches, env.device)
    settings = meta["settings"]
    flops = _flops_per_token(model.config, settings["max_seq_length"], settings["max_predictions_per_seq"])
    config.train = config.train.for_epoch(len(loader), env.world_size)
    if loader.dataset.masking_rate is not None:  # the decay spans the run, now that its length is known
        max_steps = config.train.duration.max_steps
        if max_steps is None:  # a time budget: the rate follows the share of it spent, as the loop tells
            loader.follow_run_share()
        else:
            horizon = config.train.batch.micro_batches(max_steps, env.world_size) * env.world_size
            loader.dataset.masking_rate = _masking_rate(config, horizon)
    config.train = config.train.with_options(extra={**config.train.extra, "config": run_context(config.to_dict())})
    if config.train.logging.peak_flops is None and env.is_main:
        peak = _mfu_denominator(env.device, config.train.precision.mode, flops)
        config.train = config.train.with_options(peak_flops=peak)  # groups are shared with the caller's config
    if env.is_main:
        _write_run_files(config, stamps, len(loader) * env.world_size // config.train.accumulation(env.world_size))
        record_options(Path(config.output), options)
    tokenizer_dir = Path(config.data) / meta["tokenizer"].get("directory", "tokenizer")
    files = _ModelFiles(tokenizer_dir, registry.named(config.architecture or "bert"))
    result = train(
        model,
        loader,
        config.train,
        evaluate=evaluate,
        output_metrics=pretraining_metrics,
        flops_per_token=flops,
        extra_files=files.copy_tokenizer,
        export=files.export,
        env=env,
    )
    if env.is_main and result.stop_reason != "signal":
        assert result.model is not None  # the main process holds the full model
        final = Path(config.output) / FINAL_DIR
        files.export(result.model, final)  # unsharded (a gathered copy under FSDP)
        notice(f"exported the model to {final} (Hugging Face layout)")
        log_model(Path(config.output), final)
    distributed.barrier(env)
    return result


def _flops_per_token(model_config: Any, seq_len: int, masked: float) -> float:
    """Training FLOPs per token as the run executes it: its architecture's count, else BERT's."""
    count = registry.of_config(model_config).flops_per_token
    return (
        pretraining_flops_per_token(model_config, seq_len, masked)
        if count is None
        else count(model_config, seq_len, masked)
    )


def _masking_rate(config: PretrainConfig, horizon: int) -> MaskingRate | None:
    """The dynamic masking rate over ``horizon`` global micro-batches; None: the dataset's own rate."""
    if config.masking_rate is None:
        return None
    return MaskingRate(config.masking_rate, config.masking_rate_end, horizon)


def _verify_data(config: PretrainConfig) -> dict[str, Any] | None:
    """Check every shard against the sizes and SHA-256 of its metadata, now rather than when a damaged one is
    first read hours into the run (ids out of the vocabulary would crash it, others train silently).

    A resumed run skips the hashing when no shard's size or modification time changed since it passed: returns
    the stamps to record once the run starts, or None when they are recorded already.
    """
    from bertkit.data.shards import file_stamps, verify

    stamps = {"data": str(Path(config.data).resolve()), "files": file_stamps(config.data)}
    if _read_json_or_none(Path(config.output) / VERIFIED_DATA) == stamps:
        return None
    problems = verify(config.data)
    if problems:
        raise DataError(
            f"{config.data} is damaged: {'; '.join(problems[:3])}"
            f"{f' and {len(problems) - 3} more' if len(problems) > 3 else ''}; prepare it again"
        )
    return stamps


def _mfu_denominator(device: torch.device, precision: str, flops: float) -> float:
    """The peak FLOP/s of one device at ``precision``, announced with the model's FLOPs per token."""
    peak = mfu_peak(device, precision)
    second = "" if peak.measured == peak.flops else f"; measured matmul peak {peak.measured / 1e12:.2f} TFLOP/s"
    notice(
        f"MFU denominator: {peak.source} peak {peak.flops / 1e12:.2f} TFLOP/s per device{second}; "
        f"{flops / 1e6:.1f} MFLOPs per token"
    )
    return peak.flops


def _write_run_files(config: PretrainConfig, stamps: dict[str, Any] | None, updates_per_epoch: int) -> None:
    """``pretrain_config.json`` and the verified-data stamps in the output directory (main process)."""
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "pretrain_config.json", json.dumps(config.to_dict(), indent=2, default=str) + "\n")
    if stamps is not None:
        atomic_write_text(out / VERIFIED_DATA, json.dumps(stamps) + "\n")
    max_steps = config.train.duration.max_steps
    if max_steps and updates_per_epoch and max_steps > updates_per_epoch:
        notice(
            f"{max_steps} steps is {max_steps / updates_per_epoch:.1f} epochs of "
            f"{updates_per_epoch} updates over the prepared data"
        )


@dataclass
class _ModelFiles:
    """The model directories a run writes (``best/``, ``final/``) and the tokenizer every checkpoint carries."""

    tokenizer_dir: Path
    architecture: ModelArchitecture
    """Its tokenizer files name the model's inputs when it takes no token types (``declare_inputs``)."""

    def copy_tokenizer(self, directory: Path) -> None:
        for file in self.tokenizer_dir.iterdir():
            if file.is_file():
                shutil.copyfile(file, directory / file.name)
        declare_inputs(directory, self.architecture)

    def export(self, model: torch.nn.Module, directory: Path) -> None:
        """A complete model directory, as ``from_pretrained`` and fine-tuning read it: ``best/`` (with
        ``train.best_metric``, e.g. the held-out ``loss``) and ``final/``. A crash mid-export keeps the
        previous one."""
        with atomic_directory(directory) as staging:
            save_pretrained(model, staging)
            self.copy_tokenizer(staging)
