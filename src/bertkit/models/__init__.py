"""Every architecture bertkit builds, and what they share.

- ``bert``: BERT (post-LN, or pre-LN with ``layer_norm_position``), its heads, in Hugging Face's names through
  ``bertkit.checkpoint_files``
- ``modernbert``: ModernBERT (rotary positions, GeGLU, pre-norm, no biases, alternating global and
  sliding-window attention, unpadded), in ``transformers``' tensor layout
- ``attention``: the packed batch (``Packed``), the kernels (sdpa, flex, varlen; with an optional window) and the
  one policy that picks a kernel by device (``choose_attention``)
- ``heads``: the outputs of each role and the head computations every architecture shares (masked LM on the
  predicted rows, the classification, token and span losses, pooling)
- ``parts``: activations by name and the initialisation
- ``architecture``: the ``Architecture`` record; ``registry``: the records, and the questions the rest of bertkit
  asks of a model, a config or a directory (a new architecture: one module and one ``register`` call)
"""

from bertkit.models.modernbert import (
    MODERNBERT_CLASSES,
    ModernBertForMaskedLM,
    ModernBertForQuestionAnswering,
    ModernBertForSequenceClassification,
    ModernBertForTokenClassification,
    ModernBertModel,
)

__all__ = [
    "MODERNBERT_CLASSES",
    "ModernBertForMaskedLM",
    "ModernBertForQuestionAnswering",
    "ModernBertForSequenceClassification",
    "ModernBertForTokenClassification",
    "ModernBertModel",
]
