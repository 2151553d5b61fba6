"""The ``ner`` task family: word tags from CoNLL or CoNLL-U files, scored by ``conlleval``'s chunk rules.

``FAMILY`` is what the registry knows of it; ``task`` holds the reader, the word-window features and the
first-subtoken decoding; ``metrics`` the entity scores (``conlleval``) and the token scores of tags that are not
chunked; ``pipeline`` tags raw text (``tag``: words and entities with character offsets).
"""

from __future__ import annotations

from bertkit.tasks.family import Family
from bertkit.tasks.ner.options import NerTaskOptions
from bertkit.tasks.ner.task import NerExample, NerPrediction, NerTask, read_conll

FAMILY = Family(name="ner", task=NerTask, head="BertForTokenClassification", pipeline="tag", options=NerTaskOptions)

__all__ = ["FAMILY", "NerExample", "NerPrediction", "NerTask", "read_conll"]
