"""Models by name: a Hugging Face hub id (``bert-base-uncased``, ``org/name``, ``org/name@revision``) becomes a
local directory in the hub's cache, through ``huggingface_hub`` (the optional ``hub`` extra).

An existing local path always wins; anything that cannot be a hub id (an absolute path, ``./x``, ``a/b/c``, a
name ending like a file) is returned as a path, so the caller's own "does not exist" message stays. Only the
files bertkit reads are fetched: the config, the tokenizer files, the weights (safetensors, else
``pytorch_model.bin``, which is read with ``torch.load(weights_only=True)``) and the sentence-transformers files.
``HF_HUB_OFFLINE`` and ``HF_HUB_CACHE`` are read on each call (not when ``huggingface_hub`` was imported), so a
process that sets them late is still never sent to the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from bertkit.errors import CheckpointError

HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*(?:@[\w./-]+)?$")
"""``name``, ``org/name``, optionally ``@revision`` (a branch, tag or commit)."""

FILE_SUFFIXES = (".txt", ".json", ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".index", ".npy", ".onnx")
"""A missing ``vocab.txt`` or ``model.bin`` is a path typed wrong, not a model name."""

METADATA = [
    "config.json",
    "bert_config.json",
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "*_Pooling/config.json",
]
SAFETENSORS = ["*.safetensors", "*.safetensors.index.json"]
PYTORCH = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]


def is_hub_id(name: str) -> bool:
    """Whether ``name`` could be a hub id rather than a local path."""
    if not HUB_ID.match(name) or "--" in name or ".." in name or name.split("@")[0].endswith(FILE_SUFFIXES):
        return False
    first = name.split("/")[0]
    return "/" not in name.split("@")[0] or not Path(first).is_dir()  # `dir/x` with `dir` here is a local path


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_model(name_or_path: str | os.PathLike) -> Path:
    """The local directory of a model: ``name_or_path`` itself when it exists or is no hub id, else the
    hub id's snapshot in the Hugging Face cache (downloaded unless ``HF_HUB_OFFLINE`` is set)."""
    path = Path(name_or_path)
    if path.exists() or not isinstance(name_or_path, str) or not is_hub_id(name_or_path):
        return path
    return download(name_or_path)


def download(name: str) -> Path:
    """The cached snapshot of hub id ``name`` (``org/name@revision``), fetched first when online."""
    repo, _, revision = name.partition("@")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise CheckpointError(
            f"{name} is not a local directory; to load it from the Hugging Face hub, pip install 'bertkit[hub]'"
        ) from None
    cache = os.environ.get("HF_HUB_CACHE") or None

    def fetch(patterns: list[str]) -> Path:
        folder = snapshot_download(
            repo, revision=revision or None, cache_dir=cache, allow_patterns=patterns, local_files_only=offline()
        )
        return Path(folder)

    try:
        folder = fetch(METADATA + SAFETENSORS)
        if not any(folder.glob("*.safetensors*")):  # older repos have only pickled PyTorch weights
            folder = fetch(METADATA + PYTORCH)
    except LocalEntryNotFoundError:
        if offline():
            raise CheckpointError(
                f"{name} is not a local directory and not in the Hugging Face cache (HF_HUB_OFFLINE is set): "
                f"download it once with network access, or give a model directory"
            ) from None
        raise CheckpointError(
            f"{name} is not a local directory, and the Hugging Face hub cannot be reached to download it"
        ) from None
    except GatedRepoError:
        raise CheckpointError(f"{repo} is gated on the Hugging Face hub: accept its terms and log in first") from None
    except RepositoryNotFoundError:
        raise CheckpointError(
            f"{repo} is neither a local directory nor a model on the Hugging Face hub (private? log in first)"
        ) from None
    except RevisionNotFoundError:
        raise CheckpointError(f"{repo} has no revision {revision!r} on the Hugging Face hub") from None
    except HfHubHTTPError as exc:
        raise CheckpointError(
            f"downloading {name} from the Hugging Face hub failed: {str(exc).splitlines()[0]}"
        ) from None
    if not (folder / "config.json").is_file() and not (folder / "bert_config.json").is_file():
        raise CheckpointError(f"{name} on the Hugging Face hub has no config.json: it is not a model bertkit reads")
    return folder
