"""Learning a byte-level BPE tokenizer (RoBERTa's and ModernBERT's kind) from text: ``bertkit tokenizer train
--kind bpe``.

Byte-level: every text is first turned into bytes, each shown as one printable character, so no input is
ever unknown and spaces are part of the token that follows (``Ġworld``). The special tokens are RoBERTa's,
with ids 0-4: ``<s> <pad> </s> <unk> <mask>``. The post-processor frames a text as every bertkit path does
(``tokenizer.framing``: ``<s> A </s>``, ``<s> A </s> B </s>``, ModernBERT's template), so that
``transformers.AutoTokenizer`` on the saved files and bertkit give the same ids.
"""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import AddedToken, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as Backend

from bertkit.errors import TokenizerError
from bertkit.tokenizer.any_json import JsonTokenizer
from bertkit.tokenizer.framing import framing_processor

BPE_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
"""RoBERTa's special tokens, in the order (and so with the ids 0-4) a trained vocabulary gives them."""
ROLES = {"cls": "<s>", "pad": "<pad>", "sep": "</s>", "unk": "<unk>", "mask": "<mask>"}


def train_byte_level_bpe(
    texts: Iterable[str], *, vocab_size: int, min_frequency: int = 2, lowercase: bool = False
) -> JsonTokenizer:
    """A byte-level BPE tokenizer of ``vocab_size`` tokens (the 5 special ones and the 256 byte characters
    included) learned from ``texts``; ``lowercase`` lowercases before splitting (RoBERTa and ModernBERT are
    cased). Raises ``TokenizerError`` when the size leaves no room for merges or the texts are empty."""
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    floor = len(BPE_SPECIAL_TOKENS) + len(alphabet)
    if vocab_size <= floor:
        raise TokenizerError(
            f"--vocab-size {vocab_size} leaves no room for merges: byte-level BPE starts from {floor} tokens "
            f"(5 special ones and 256 bytes); ask for more, e.g. 8000 for a small corpus, 50265 as RoBERTa"
        )
    backend = Backend(models.BPE())
    if lowercase:
        backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, lstrip=t == "<mask>", special=True) for t in BPE_SPECIAL_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=specials, initial_alphabet=alphabet,
        show_progress=False,
    )  # fmt: skip
    try:
        backend.train_from_iterator(texts, trainer)
    except Exception as exc:  # the Rust trainer raises plain Exceptions
        raise TokenizerError(f"cannot learn a BPE vocabulary from the input: {exc}; give UTF-8 text") from None
    if backend.get_vocab_size() <= floor:
        raise TokenizerError("the training text is empty: no BPE merges were learned; pass non-empty text files")
    vocab = backend.get_vocab()
    backend.post_processor = framing_processor("<s>", vocab["<s>"], "</s>", vocab["</s>"])
    return JsonTokenizer(backend, ROLES)
