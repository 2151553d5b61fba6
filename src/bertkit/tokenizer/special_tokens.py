"""BERT's special tokens, and the rules every vocabulary keeps: each of them present, ids exactly 0..V-1."""

from __future__ import annotations

from bertkit.errors import TokenizerError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
"""Reserved tokens, in the order (and so with the ids 0-4) a freshly trained vocabulary gives them."""


def vocab_from_list(tokens: list[str], source: str) -> dict[str, int]:
    """Tokens in id order as a token -> id mapping; a repeated token raises ``TokenizerError``."""
    vocab: dict[str, int] = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            raise TokenizerError(
                f"{source}: token {tok!r} appears twice (ids {vocab[tok]} and {i}); remove the duplicate"
            )
        vocab[tok] = i
    return vocab


def check_vocab(vocab: dict[str, int], source: str) -> None:
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise TokenizerError(
            f"{source} lacks the special token(s) {' '.join(missing)}; a BERT vocabulary needs all of {' '.join(SPECIAL_TOKENS)}"
        )
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise TokenizerError(f"{source}: token ids must be exactly 0..{len(vocab) - 1} without gaps or repeats")
