"""A model's tensors to and from Hugging Face names, with the checks that make loading safe: missing or
misshapen encoder tensors raise, a missing head is reported and left initialised, other heads' tensors are
ignored with a notice."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from bertkit.checkpoint_files.hf_names import (
    BUFFERS,
    POOLER_NAMES,
    POSITIONS,
    TIED,
    encoder_names,
    layout,
    normalise_names,
)
from bertkit.errors import CheckpointError

# Named for the loader users call (``bertkit.weights``), the logger they filter on.
logger = logging.getLogger("bertkit.weights")


def to_hf_state_dict(model: nn.Module, params: dict[str, Tensor] | None = None) -> dict[str, Tensor]:
    """The model's tensors under Hugging Face names, as ``transformers`` would save the same class.
    ``params``: the tensors to rename, by bertkit name (default: the model's parameters)."""
    where = layout(model)
    prefix, saved = where.prefix, where.saved_prefix
    if params is None:
        params = dict(model.named_parameters(remove_duplicate=False))
    out: dict[str, Tensor] = {}
    for ours, theirs in encoder_names(where.config):
        tensor = params[prefix + ours].detach()
        if isinstance(theirs, tuple):
            for name, piece in zip(theirs, tensor.chunk(len(theirs), dim=0)):
                out[saved + name] = piece
        else:
            out[saved + theirs] = tensor
    offset = where.config.position_offset
    if offset:  # RoBERTa's positions start after the padding id: rows in front that no position reads
        table = out[saved + POSITIONS]
        out[saved + POSITIONS] = torch.cat([table.new_zeros(offset, table.shape[1]), table])
    if where.pooler:
        for ours, theirs in POOLER_NAMES:
            out[saved + theirs] = params[prefix + ours].detach()
    for ours, theirs in where.head:
        out[theirs] = params[ours].detach()
    # safetensors wants contiguous CPU tensors that share no memory (the Q/K/V chunks are views).
    return {name: t.to("cpu", copy=True).contiguous() for name, t in out.items()}


@dataclass
class LoadReport:
    """What ``load_hf_state_dict`` did, by Hugging Face name."""

    loaded: list[str] = field(default_factory=list)
    initialised: list[str] = field(default_factory=list)
    """Model tensors the checkpoint lacked (a fresh task head or pooler), left at their initial values."""
    ignored: list[str] = field(default_factory=list)
    """Checkpoint tensors this model has no place for (another class's head, buffers)."""


def _summary(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@torch.no_grad()
def load_hf_state_dict(
    model: nn.Module, state: dict[str, Tensor], *, ignore_mismatched_sizes: bool = False, source: str = "checkpoint"
) -> LoadReport:
    """Copy Hugging Face-named tensors into ``model`` (any bertkit class), with or without the ``bert.`` prefix.

    Missing or misshapen encoder tensors raise ``CheckpointError``; a missing task head or pooler is left
    freshly initialised, and tensors of other heads are ignored (both reported with one log line). With
    ``ignore_mismatched_sizes`` a head of another size (e.g. a different ``num_labels``) is re-initialised.
    """
    where = layout(model)
    state = normalise_names(state)
    offset = where.config.position_offset
    if offset and POSITIONS in state:  # the rows in front of a pre-LN model's table (see to_hf_state_dict)
        state[POSITIONS] = state[POSITIONS][offset:]
    loading = _Loading(dict(model.named_parameters(remove_duplicate=False)), state, source)
    loading.encoder(where.prefix, encoder_names(where.config))
    # Pooler and task head: each all or nothing, freshly initialised when absent.
    if where.pooler:
        loading.group([(where.prefix + ours, theirs) for ours, theirs in POOLER_NAMES])
    mismatched = loading.group(where.head, reinitialise_mismatched=ignore_mismatched_sizes)
    if mismatched:
        logger.warning(
            "%s: head weights %s have another size than the model's; they were re-initialised",
            type(model).__name__,
            _summary(mismatched),
        )
    report = loading.finish()
    if report.initialised:
        logger.warning(
            "%s: %s not in %s; newly initialised, train before use",
            type(model).__name__,
            _summary(report.initialised),
            source,
        )
    if report.ignored:
        logger.warning(
            "%s: ignored %d weights the model does not use (%s)",
            type(model).__name__,
            len(report.ignored),
            _summary(report.ignored),
        )
    return report


class _Loading:
    """One ``load_hf_state_dict`` call: the model's parameters, the checkpoint's tensors (normalised names)
    and what has been used of them so far."""

    def __init__(self, params: dict[str, Tensor], state: dict[str, Tensor], source: str) -> None:
        self.params, self.state, self.source = params, state, source
        self.report = LoadReport()
        self.used: set[str] = set()

    def copy(self, ours: str, tensor: Tensor, theirs: str) -> None:
        param = self.params[ours]
        if param.shape != tensor.shape:
            raise CheckpointError(
                f"{self.source}: {theirs} has shape {tuple(tensor.shape)} but the model expects "
                f"{tuple(param.shape)}; the config does not match the weights"
            )
        param.copy_(tensor)

    def encoder(self, prefix: str, names: list[tuple[str, str | tuple[str, ...]]]) -> None:
        """Every encoder tensor must be there."""
        missing = []
        for ours, theirs in names:
            parts = theirs if isinstance(theirs, tuple) else (theirs,)
            absent = [n for n in parts if n not in self.state]
            if absent:
                missing.extend(absent)
                continue
            tensor = torch.cat([self.state[n] for n in parts], dim=0) if len(parts) > 1 else self.state[parts[0]]
            self.copy(prefix + ours, tensor, parts[0] if len(parts) == 1 else f"{parts[0]}/key/value")
            self.used.update(parts)
            self.report.loaded.extend(parts)
        if missing:
            raise CheckpointError(
                f"{self.source} lacks {len(missing)} encoder weights ({_summary(missing)}); "
                f"it is truncated or not a BERT checkpoint for this config"
            )

    def group(self, group: list[tuple[str, str]], *, reinitialise_mismatched: bool | None = None) -> list[str]:
        """Load a pooler (``reinitialise_mismatched`` None) or a head, all or nothing; absent, it stays initialised.
        A head of another size raises, or with ``reinitialise_mismatched`` stays initialised: its names are
        returned then."""
        state, params = self.state, self.params
        present = [theirs for _, theirs in group if theirs in state]
        if not present:
            self.report.initialised.extend(theirs for _, theirs in group)
            return []
        if len(present) != len(group):
            absent = [theirs for _, theirs in group if theirs not in state]
            raise CheckpointError(f"{self.source} has part of a head but lacks {_summary(absent)}; is it truncated?")
        mismatched = [(ours, theirs) for ours, theirs in group if params[ours].shape != state[theirs].shape]
        if mismatched and reinitialise_mismatched:
            self.report.initialised.extend(theirs for _, theirs in group)
            self.used.update(theirs for _, theirs in group)
            return [theirs for _, theirs in mismatched]
        if mismatched and reinitialise_mismatched is not None:
            ours, theirs = mismatched[0]
            raise CheckpointError(
                f"{self.source}: {theirs} has shape {tuple(state[theirs].shape)} but the model expects "
                f"{tuple(params[ours].shape)}; pass a matching num_labels, or ignore_mismatched_sizes=True "
                f"to train a new head"
            )
        for ours, theirs in group:
            self.copy(ours, state[theirs], theirs)
            self.used.add(theirs)
            self.report.loaded.append(theirs)
        return []

    def finish(self) -> LoadReport:
        """Everything else: encoder-shaped leftovers mean the config is wrong; head leftovers are ignored."""
        leftovers = [n for n in self.state if n not in self.used and n not in BUFFERS and n not in TIED]
        stray = [n for n in leftovers if n.startswith(("embeddings.", "encoder."))]
        if stray:
            raise CheckpointError(
                f"{self.source} has encoder weights the config does not describe ({_summary(stray)}); "
                f"does config.json (num_hidden_layers) match the weights?"
            )
        self.report.ignored = leftovers
        return self.report
