"""BERT WordPiece tokenization on the Hugging Face ``tokenizers`` library, faithful to the reference
``transformers.BertTokenizer``; offsets into the original text; files Hugging Face loads as they are.

- ``normalization``: the Unicode rules (clean-up, case, accents, splitting) as a ``tokenizers`` pipeline
- ``encoding``: the ``Encoding`` type, ``collate_encodings``, and ``BatchEncoding`` (what calling a tokenizer returns)
- ``tokenizer``: the ``Tokenizer`` class (build, encode, decode)
- ``files``: ``vocab.txt``/``tokenizer.json``/``tokenizer_config.json`` read and written
- ``special_tokens``: ``[PAD] [UNK] [CLS] [SEP] [MASK]`` and the rules of a vocabulary
- ``any_json``: ``JsonTokenizer``, any other ``tokenizer.json`` (BPE, Unigram: ModernBERT's...) run as the file
  says, with the special tokens its files name; ``Tokenizer.from_pretrained`` picks it for non-WordPiece files
- ``training``: learning a vocabulary from text (``Tokenizer.train``); growing a trained model's vocabulary
  is ``bertkit.vocab``, a floor up, as it reads corpora and checkpoints
"""

from bertkit.tokenizer.any_json import JsonTokenizer
from bertkit.tokenizer.encoding import BatchEncoding, Encoding, collate_encodings
from bertkit.tokenizer.files import SPECIAL_TOKENS_MAP_NAME, TOKENIZER_CONFIG_NAME, TOKENIZER_NAME, VOCAB_NAME
from bertkit.tokenizer.normalization import CJK_RANGES
from bertkit.tokenizer.special_tokens import CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK
from bertkit.tokenizer.tokenizer import (
    DEFAULT_MODEL_MAX_LENGTH,
    MAX_INPUT_CHARS_PER_WORD,
    Padding,
    Tokenizer,
    Truncation,
)

__all__ = [
    "CJK_RANGES",
    "CLS",
    "DEFAULT_MODEL_MAX_LENGTH",
    "MASK",
    "MAX_INPUT_CHARS_PER_WORD",
    "PAD",
    "SEP",
    "SPECIAL_TOKENS",
    "SPECIAL_TOKENS_MAP_NAME",
    "TOKENIZER_CONFIG_NAME",
    "TOKENIZER_NAME",
    "UNK",
    "VOCAB_NAME",
    "BatchEncoding",
    "Encoding",
    "JsonTokenizer",
    "Padding",
    "Tokenizer",
    "Truncation",
    "collate_encodings",
]
