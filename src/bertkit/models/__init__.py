"""Encoder architectures beside BERT (``bertkit.models.bert``), each in its own module with the same heads.

- ``modernbert``: ModernBERT (rotary positions, GeGLU, pre-norm, no biases, alternating global and
  sliding-window attention, unpadded variable-length attention), in ``transformers``' tensor layout
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
