"""The architectures bertkit builds, one ``Architecture`` record each, and the questions asked of them.

A new architecture is one module (its config, network, heads and record) and one ``register(RECORD)`` call,
here in ``BUILT_IN`` or from outside the package. Everything else finds it by a model (``of_model``), a config
(``of_config``), a model directory (``of_directory``) or its name (``named``).
"""

from __future__ import annotations

import os
from typing import Any, cast

from torch import nn

from bertkit.config import CONFIG_NAME, model_type_of
from bertkit.errors import ConfigError
from bertkit.hub import resolve_model
from bertkit.models.architecture import Architecture
from bertkit.models.bert import ARCHITECTURE as BERT
from bertkit.models.modernbert import ARCHITECTURE as MODERNBERT

BUILT_IN = (BERT, MODERNBERT)
_REGISTRY: dict[str, Architecture] = {}
MODEL_TYPE_ALIASES = {"roberta-prelayernorm": "bert"}
"""``model_type`` s another architecture reads (a pre-LN BERT is saved in RoBERTa-PreLayerNorm's layout)."""


def register(architecture: Architecture) -> Architecture:
    """Add ``architecture`` (replacing one of the same name); returns it."""
    _REGISTRY[architecture.name] = architecture
    return architecture


def unregister(name: str) -> None:
    """Remove an architecture added with ``register`` (a test's own)."""
    if name in (a.name for a in BUILT_IN):
        raise ConfigError(f"{name} is built in")
    _REGISTRY.pop(name, None)


for _architecture in BUILT_IN:
    register(_architecture)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def named(name: str) -> Architecture:
    """The architecture of ``model_type`` ``name``."""
    name = MODEL_TYPE_ALIASES.get(name, name)
    if name not in _REGISTRY:
        raise ConfigError(f"unknown architecture {name!r}; bertkit builds {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def of_model(model: nn.Module) -> Architecture | None:
    """The architecture ``model`` is a model of; None for any other module."""
    for architecture in _REGISTRY.values():
        if isinstance(model, architecture.base):
            return architecture
    return None


def require(model: nn.Module) -> Architecture:
    """``of_model``, for a model that must be a bertkit model."""
    architecture = of_model(model)
    if architecture is None:
        raise ConfigError(f"{type(model).__name__} is not a bertkit model ({', '.join(_REGISTRY)})")
    return architecture


def of_config(config: Any) -> Architecture:
    """The architecture whose config ``config`` is."""
    for architecture in _REGISTRY.values():
        if isinstance(config, architecture.config_class):
            return architecture
    raise ConfigError(f"{type(config).__name__} is no registered architecture's config")


def of_directory(path: str | os.PathLike) -> Architecture:
    """The architecture of a model directory, its weights file or a hub id (``model_type``; BERT without one)."""
    directory = resolve_model(path)
    directory = directory if directory.is_dir() else directory.parent
    if not (directory / CONFIG_NAME).is_file():
        return _REGISTRY["bert"]  # a TF checkpoint or bare weights: read as BERT, which says what is missing
    model_type = model_type_of(directory)
    return _REGISTRY.get(MODEL_TYPE_ALIASES.get(model_type, model_type), _REGISTRY["bert"])


def role_of(model: nn.Module) -> str | None:
    """The role (BERT's class name) of a bertkit model's class; None for any other module."""
    architecture = of_model(model)
    return architecture.role_of(model) if architecture is not None else None


def role_named(class_name: str) -> str | None:
    """The role of the class some architecture names ``class_name`` (``ModernBertForTokenClassification`` ->
    ``BertForTokenClassification``); None for a name no architecture has."""
    for architecture in _REGISTRY.values():
        for role, cls in architecture.classes.items():
            if cls.__name__ == class_name:
                return role
    return None


def encoder_of(model: nn.Module) -> nn.Module:
    """The encoder inside a bertkit model (the model itself for an encoder)."""
    return require(model).encoder_of(model)


def config_of(model: nn.Module) -> Any:
    """A bertkit model's config."""
    require(model)
    return cast(Any, model).config
