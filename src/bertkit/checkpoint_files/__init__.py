"""Checkpoint files below the model: the name tables (Hugging Face, Google TensorFlow), the files
(safetensors, ``pytorch_model.bin`` read tensors-only, TensorFlow tensor bundles), and a model directory read
or written as a whole. Nothing here imports the model: its ``from_pretrained``/``save_pretrained`` call down
into this, and ``bertkit.weights`` (load and save with quantization, compilation, the tokenizer) builds on it.

- ``hf_names``: bertkit <-> Hugging Face names; ``tf_names``: Google's TF names -> Hugging Face names
- ``hf_files``: safetensors and PyTorch files; ``tf_files``: TensorFlow checkpoints, without TensorFlow
- ``reading``: which file of a directory holds the weights, its tensors whatever the format, their names
- ``named_layout``: checkpoints under a model's own names (ModernBERT's, a registered architecture's): read,
  written, loaded with the encoder checked
- ``state_dicts``: a model's tensors to and from Hugging Face names, with the loading checks
- ``pretrained``: ``config.json`` + weights, read together and checked, or written
- ``weight_files``: what the rest of bertkit reads and writes weights through: a directory's tensors, named
  tensors as safetensors, a module that is no bertkit model under its own names
"""

from bertkit.checkpoint_files.hf_files import PYTORCH_INDEX, PYTORCH_NAME, SAFETENSORS_INDEX, SAFETENSORS_NAME
from bertkit.checkpoint_files.hf_names import HEAD_NAMES, encoder_names, infer_architecture
from bertkit.checkpoint_files.pretrained import (
    QUANTIZATION_KEY,
    Pretrained,
    apply_overrides,
    read_pretrained,
    write_pretrained,
)
from bertkit.checkpoint_files.reading import read_state_dict, weights_file
from bertkit.checkpoint_files.state_dicts import LoadReport, load_hf_state_dict, to_hf_state_dict
from bertkit.checkpoint_files.tf_files import checkpoint_index, checkpoint_prefix, read_tf_checkpoint
from bertkit.checkpoint_files.tf_names import TF_NAMES, tf_to_hf_state_dict
from bertkit.checkpoint_files.weight_files import load_module_weights, read_weights, write_module_weights, write_weights

__all__ = [
    "HEAD_NAMES",
    "PYTORCH_INDEX",
    "PYTORCH_NAME",
    "QUANTIZATION_KEY",
    "SAFETENSORS_INDEX",
    "SAFETENSORS_NAME",
    "TF_NAMES",
    "LoadReport",
    "Pretrained",
    "apply_overrides",
    "checkpoint_index",
    "checkpoint_prefix",
    "encoder_names",
    "infer_architecture",
    "load_hf_state_dict",
    "load_module_weights",
    "read_pretrained",
    "read_state_dict",
    "read_tf_checkpoint",
    "read_weights",
    "tf_to_hf_state_dict",
    "to_hf_state_dict",
    "weights_file",
    "write_module_weights",
    "write_pretrained",
    "write_weights",
]
