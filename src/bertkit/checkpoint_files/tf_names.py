"""Google TensorFlow names: BERT's TF variable scopes as Hugging Face names, so a TF checkpoint then loads
through the Hugging Face table like any other."""

from __future__ import annotations

import re

import numpy as np
import torch
from torch import Tensor

from bertkit.errors import CheckpointError

# Google's TensorFlow names are Hugging Face's with "/" for "." and "layer_{i}" for "layer.{i}", except these
# whole names (the heads of run_pretraining.py, run_classifier.py and run_squad.py) and the leaf renames below.
TF_NAMES: dict[str, str] = {
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
}
# "kernel" is also transposed: TensorFlow stores a dense layer as [in, out], PyTorch as [out, in].
_TF_LEAVES = {"kernel": "weight", "gamma": "weight", "beta": "bias"}
# Optimizer slots and trainer bookkeeping (Google's AdamWeightDecayOptimizer, LAMB, loss scaling): not weights.
_TF_NOT_WEIGHTS = re.compile(
    r"(^|/)(adam_[mv]|lamb_[mv]|global_step|loss_scale|good_steps|bad_steps)$"
    r"|AdamWeightDecayOptimizer|(^|/)LAMB"
)


def tf_to_hf_state_dict(variables: dict[str, np.ndarray]) -> dict[str, Tensor]:
    """Google TensorFlow BERT variables (``read_tf_checkpoint``) as Hugging Face-named tensors, optimizer
    state dropped, which ``load_hf_state_dict`` then loads like any other checkpoint."""
    if any(name.endswith("/.ATTRIBUTES/VARIABLE_VALUE") for name in variables):
        raise CheckpointError(
            "this is a TF2 object-based checkpoint (TF Model Garden, Keras), whose names follow the "
            "Python objects, not BERT's scopes; bertkit reads Google's original name-based BERT "
            "checkpoints; export it to Hugging Face layout with transformers first"
        )
    out: dict[str, Tensor] = {}
    for name, value in variables.items():
        if _TF_NOT_WEIGHTS.search(name):
            continue
        tensor = torch.from_numpy(np.array(value))
        if name in TF_NAMES:
            out[TF_NAMES[name]] = tensor
            continue
        parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in name.split("/")]
        leaf = parts[-1]
        if leaf.endswith("_embeddings"):
            parts.append("weight")
        else:
            parts[-1] = _TF_LEAVES.get(leaf, leaf)
        if leaf == "kernel":
            tensor = tensor.T.contiguous()
        out[".".join(parts)] = tensor
    return out
