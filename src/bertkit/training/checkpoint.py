"""Training checkpoints that never lose work.

Layout of ``<output_dir>/checkpoint-<step>/``:

* ``model.safetensors`` + ``config.json``: the weights, in Hugging Face layout for bertkit models (so a
  checkpoint is also a model directory fine-tuning and ``transformers`` load), as the module names them
  for any other module,
* ``trainer_state.pt``: optimizer, scaler, step, RNG states, data-loader position and metrics so far, made
  of tensors/numbers/strings/lists/dicts only so that it loads with ``torch.load(weights_only=True)``,
* any extra files (tokenizer) written by a caller's hook,
* ``manifest.json``, written last: size and SHA-256 of every other file.

The directory is built as ``checkpoint-<step>.tmp`` and renamed when complete, so a crash mid-write leaves
no directory that looks finished; a checkpoint whose files do not match its manifest (truncated, corrupt)
is skipped by :func:`latest_valid_checkpoint` with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertkit.checkpoint_files import (
    SAFETENSORS_NAME,
    load_hf_state_dict,
    load_module_weights,
    read_weights,
    write_module_weights,
)
from bertkit.config import PRE_LN_MODEL_TYPE, BertConfig, ModernBertConfig, model_type_of
from bertkit.errors import CheckpointError, ConfigError
from bertkit.io import atomic_write_text
from bertkit.models import registry
from bertkit.notices import notice
from bertkit.weights import save_pretrained

MANIFEST = "manifest.json"
WEIGHTS = SAFETENSORS_NAME
TRAINER_STATE = "trainer_state.pt"
_NAME = re.compile(r"^checkpoint-(\d+)$")


def _is_bertkit(model: nn.Module) -> bool:
    """Whether ``model``'s weights go into a checkpoint under Hugging Face's names through its architecture's name
    table (BERT's); any other module's go in under its own names (safetensors' ``save_model``)."""
    architecture = registry.of_model(model)
    return architecture is not None and architecture.hf_names is not None


def checkpoint_dir(output_dir: str | os.PathLike, step: int) -> Path:
    return Path(output_dir) / f"checkpoint-{step}"


def list_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Finished checkpoint directories (not ``.tmp``), oldest step first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(
    output_dir: str | os.PathLike,
    step: int,
    model: nn.Module,
    trainer_state: dict[str, Any],
    *,
    extra_files: Callable[[Path], None] | None = None,
    keep_last: int | None = None,
) -> Path:
    """Write ``checkpoint-<step>/`` atomically and return it; then delete all but the newest ``keep_last``.

    ``model`` is the bare module (not a DDP wrapper). ``extra_files(directory)`` may add files (tokenizer).
    """
    final = checkpoint_dir(output_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    try:
        _write_checkpoint(tmp, final, step, model, trainer_state, extra_files)
    except OSError as exc:  # disk full, read-only or vanished directory: say so, keep the older checkpoints
        shutil.rmtree(tmp, ignore_errors=True)
        previous = [p for p in list_checkpoints(output_dir) if p != final]
        kept = f"the previous checkpoint {previous[-1]} is intact" if previous else "no earlier checkpoint exists"
        raise CheckpointError(
            f"cannot write checkpoint {final}: {exc.strerror or exc} ({exc.filename or tmp}); free disk space or "
            f"make {Path(output_dir)} writable, then resume; {kept}"
        ) from None
    if keep_last is not None:
        rotate_checkpoints(output_dir, keep_last)
    return final


def _write_checkpoint(
    tmp: Path,
    final: Path,
    step: int,
    model: nn.Module,
    trainer_state: dict[str, Any],
    extra_files: Callable[[Path], None] | None,
) -> None:
    """Build ``tmp`` completely (files, then the manifest) and rename it to ``final``."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    layout = "hf" if _is_bertkit(model) else "native"
    if layout == "hf":
        save_pretrained(model, tmp)  # the HF name table is lossless (fused QKV splits and re-joins)
    else:
        write_module_weights(model, tmp / WEIGHTS)  # under its own names, ties stored once
    torch.save(trainer_state, tmp / TRAINER_STATE)
    if extra_files is not None:
        extra_files(tmp)
    files = {}
    for path in sorted(p for p in tmp.rglob("*") if p.is_file()):
        with open(path, "rb+") as handle:  # data on disk before the manifest vouches for it
            os.fsync(handle.fileno())
        files[path.relative_to(tmp).as_posix()] = {"size": path.stat().st_size, "sha256": _sha256(path)}
    atomic_write_text(
        tmp / MANIFEST,
        json.dumps({"format": 1, "step": step, "weights_layout": layout, "files": files}, indent=1) + "\n",
    )
    _fsync_dir(tmp)
    if final.exists():  # a re-save of the same step (e.g. end of run right after a periodic save)
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(final.parent)


def rotate_checkpoints(output_dir: str | os.PathLike, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` checkpoints (and stale ``.tmp`` directories); return those deleted."""
    root = Path(output_dir)
    removed = []
    for stale in root.glob("checkpoint-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(stale)
    for old in list_checkpoints(root)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
        removed.append(old)
    return removed


def validate_checkpoint(path: str | os.PathLike, *, checksums: bool = True) -> str | None:
    """``None`` if the checkpoint matches its manifest, else a short reason why not."""
    path = Path(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        return "no manifest.json (the write did not finish)"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable manifest.json ({exc})"
    for required in (WEIGHTS, TRAINER_STATE):
        if required not in files:
            return f"manifest does not list {required}"
    for name, meta in files.items():
        file = path / name
        if not file.is_file():
            return f"{name} is missing"
        if file.stat().st_size != meta["size"]:
            return f"{name} has {file.stat().st_size} bytes, the manifest says {meta['size']} (truncated?)"
        if checksums and _sha256(file) != meta["sha256"]:
            return f"{name} does not match its SHA-256 in the manifest (corrupt)"
    return None


def latest_valid_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The newest checkpoint in ``output_dir`` that passes :func:`validate_checkpoint`; broken newer ones are
    reported with a warning and skipped. ``None`` if there is none."""
    for path in reversed(list_checkpoints(output_dir)):
        problem = validate_checkpoint(path)
        if problem is None:
            return path
        notice(f"skipping checkpoint {path}: {problem}; falling back to an older one", logging.WARNING)
    return None


def _architecture(model_type: str) -> str:
    """``bert`` or ``modernbert``: a pre-LN BERT's ``model_type`` is BERT's architecture."""
    return "bert" if model_type == PRE_LN_MODEL_TYPE else model_type


def _check_architecture(path: Path, model: nn.Module) -> None:
    """A checkpoint of another architecture than the model's (a ModernBERT run resumed as BERT) is refused as
    such, before its weight names make the mismatch look like a damaged file."""
    config = getattr(model, "config", None)
    if not isinstance(config, BertConfig | ModernBertConfig) or not (path / "config.json").is_file():
        return
    ours = "modernbert" if isinstance(config, ModernBertConfig) else "bert"
    try:
        theirs = _architecture(model_type_of(path))
    except ConfigError:
        return  # an unreadable config.json: the weights' own check says what is wrong
    if theirs != ours:
        raise CheckpointError(
            f"checkpoint {path} holds a {theirs} model but this run builds a {ours} model; resume with "
            f"--architecture {theirs}, or start a new run with another --output"
        )


def load_checkpoint(
    path: str | os.PathLike, model: nn.Module, *, map_location: str | torch.device = "cpu", validate: bool = True
) -> dict[str, Any]:
    """Load the weights of checkpoint ``path`` into ``model`` (in place) and return its trainer state."""
    path = Path(path)
    if validate:
        problem = validate_checkpoint(path)
        if problem is not None:
            raise CheckpointError(f"checkpoint {path} is not usable: {problem}")
    _check_architecture(path, model)
    if _is_bertkit(model):
        report = load_hf_state_dict(model, read_weights(path / WEIGHTS), source=str(path))
        if report.initialised:
            raise CheckpointError(f"checkpoint {path} lacks {report.initialised[:3]}; it was written for another head")
        return read_trainer_state(path, map_location)
    missing, unexpected = load_module_weights(model, path / WEIGHTS, map_location)
    if missing or unexpected:
        raise CheckpointError(
            f"checkpoint {path} does not fit this model (missing {sorted(missing)[:5]}, unexpected "
            f"{sorted(unexpected)[:5]}); was it written for another model size or head?"
        )
    return read_trainer_state(path, map_location)


def read_trainer_state(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """The trainer state of checkpoint ``path`` (step, epoch, elapsed seconds...), without its weights."""
    path = Path(path)
    # weights_only: a trainer state is plain values and tensors; anything else in it is refused, never run.
    try:
        state = torch.load(path / TRAINER_STATE, map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as exc:
        reason = str(exc).split("Trying to load unsupported", 1)[-1].strip().splitlines()[0][:120]
        raise CheckpointError(
            f"{path / TRAINER_STATE} holds something other than plain values and tensors "
            f"({reason}); refusing to unpickle it"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path / TRAINER_STATE} is not a trainer state (a dict)")
    return state
