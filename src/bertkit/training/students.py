"""The student of a distillation, built from the teacher as a model directory that fine-tuning starts from.

``--student`` is one of:

* a number ``n``: ``n`` of the teacher's layers (``take_layers``), with the teacher's embeddings, pooler and task
  head, so the student starts close to the teacher;
* a size preset (``tiny``, ``mini``, ``small``; see ``bertkit.config.PRESETS``): a narrower network, initialised
  at random, with the teacher's vocabulary, positions and labels;
* a model directory: any BERT with the teacher's vocabulary (a small pre-trained one); its head is made by
  fine-tuning as for any starting model.

``build_student`` writes the first two as an ordinary model directory (config, weights, the teacher's tokenizer
and sentence-transformers files) and returns a :class:`Student`, which also says which teacher layer each student
layer learns from when hidden states or attentions are transferred (``layer_map``).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bertkit.config import PRESETS, BertConfig, model_type_of
from bertkit.errors import ConfigError
from bertkit.sentence_config import read_sentence_config

__all__ = ["Student", "build_student", "take_layers"]


@dataclass
class Student:
    """A student model directory and how it relates to its teacher."""

    directory: Path
    """Where the starting student is (built, or the user's directory)."""
    kind: str
    """``layers`` (taken from the teacher), ``preset`` (random initialisation) or ``directory``."""
    layer_map: list[int]
    """For each student layer, the teacher layer (0-based) it starts from and whose states it learns."""
    config: BertConfig

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "layers": self.config.num_hidden_layers, "teacher_layers": self.layer_map}


def take_layers(teacher_layers: int, count: int) -> list[int]:
    """The 0-based teacher layers a ``count``-layer student takes: spread evenly from the first layer to the
    last, ``round(j * (N - 1) / (n - 1))`` for student layer ``j``, so that the lowest layer (next to the
    copied embeddings) and the top one (under the task head) are both kept. A 12-layer teacher gives a 6-layer
    student DistilBERT's layers ``[0, 2, 4, 7, 9, 11]``; a 6-layer teacher gives ``[0, 3, 5]`` for 3 and
    ``[0, 5]`` for 2. One layer is the top layer."""
    if not 1 <= count <= teacher_layers:
        raise ConfigError(f"--student {count}: choose between 1 and the teacher's {teacher_layers} layers")
    if count == 1:
        return [teacher_layers - 1]
    return [int(j * (teacher_layers - 1) / (count - 1) + 0.5) for j in range(count)]


def build_student(spec: str, teacher_dir: Path, directory: Path, *, seed: int = 0) -> Student:
    """The student ``spec`` describes (see the module doc), written to ``directory`` unless it is a directory
    already."""
    from bertkit.weights import load_model

    teacher = load_model(teacher_dir)
    config = teacher.config
    assert isinstance(config, BertConfig)  # load_model builds bertkit's models
    if spec.isdigit():
        layers = take_layers(config.num_hidden_layers, int(spec))
        student = _layers_of(teacher, layers)
        return _write(student, teacher_dir, directory, "layers", layers)
    if spec in PRESETS:
        torch.manual_seed(seed)
        small = BertConfig.preset(spec, **_kept_fields(config))
        model = type(teacher)(small)
        layers = take_layers(config.num_hidden_layers, min(small.num_hidden_layers, config.num_hidden_layers))
        layers += [config.num_hidden_layers - 1] * (small.num_hidden_layers - len(layers))
        return _write(model, teacher_dir, directory, "preset", layers)
    path = Path(spec)
    if not path.is_dir():
        raise ConfigError(
            f"--student {spec!r}: give a number of the teacher's layers, a preset ({', '.join(PRESETS)}) or a "
            "model directory"
        )
    if model_type_of(path) == "modernbert":
        raise ConfigError(
            f"--student {spec} is a ModernBERT model; a student is a BERT like its teacher: give a BERT model "
            "directory, a number of the teacher's layers or a preset"
        )
    _check_vocabulary(path, teacher_dir)
    own = BertConfig.load(path)
    layers = take_layers(config.num_hidden_layers, min(own.num_hidden_layers, config.num_hidden_layers))
    layers += [config.num_hidden_layers - 1] * (own.num_hidden_layers - len(layers))
    return Student(path, "directory", layers, own)


def _kept_fields(config: BertConfig) -> dict[str, object]:
    """What a preset student keeps of its teacher: the vocabulary, positions, segments and labels."""
    names = ("vocab_size", "max_position_embeddings", "type_vocab_size", "pad_token_id", "num_labels")
    kept: dict[str, object] = {name: getattr(config, name) for name in names}
    kept.update(id2label=config.id2label, problem_type=config.problem_type, extra=dict(config.extra))
    return kept


def _layers_of(teacher: nn.Module, layers: list[int]) -> nn.Module:
    """A copy of ``teacher`` (any head) with only ``layers`` of its encoder, in that order."""
    config = teacher.config
    assert isinstance(config, BertConfig)  # bertkit's models carry their BertConfig
    small = dataclasses.replace(config, num_hidden_layers=len(layers), extra=dict(config.extra))
    student = type(teacher)(small)
    state = {}
    prefix = _layers_prefix(teacher)
    for name, tensor in teacher.state_dict().items():
        if name.startswith(prefix):
            index, rest = name[len(prefix) :].split(".", 1)
            if int(index) not in layers:
                continue
            name = f"{prefix}{layers.index(int(index))}.{rest}"
        state[name] = tensor
    student.load_state_dict(state)
    return student


def _layers_prefix(model: nn.Module) -> str:
    """``bert.encoder.layers.`` in a head, ``encoder.layers.`` in a bare encoder."""
    names = [name for name, _ in model.named_modules() if name.endswith("encoder.layers")]
    return names[0] + "."


def _write(model: nn.Module, teacher_dir: Path, directory: Path, kind: str, layers: list[int]) -> Student:
    from bertkit.tokenizer import Tokenizer
    from bertkit.weights import save_pretrained

    tokenizer = Tokenizer.from_pretrained(teacher_dir)
    save_pretrained(model, directory, tokenizer=tokenizer, sentence=read_sentence_config(teacher_dir))
    config = model.config
    assert isinstance(config, BertConfig)
    return Student(directory, kind, layers, config)


def _check_vocabulary(student: Path, teacher: Path) -> None:
    """A student directory must tokenize as the teacher does: the soft targets are per token."""
    from bertkit.tokenizer import Tokenizer

    ours, theirs = Tokenizer.from_pretrained(student), Tokenizer.from_pretrained(teacher)
    if ours.vocab != theirs.vocab:
        raise ConfigError(
            f"--student {os.fspath(student)}: its vocabulary differs from the teacher's; a student must share "
            "the teacher's tokenizer"
        )
