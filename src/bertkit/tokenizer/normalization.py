"""Normalisation rules: BERT's text clean-up and word splitting as a ``tokenizers`` pipeline, faithful to the
reference.

The reference is ``transformers.BertTokenizer``, the slow pure-Python algorithm (``bert-algorithms.md``
sections 1-3). ``tokenizers``' stock ``BertNormalizer``/``BertPreTokenizer`` come close but classify
characters with Rust Unicode tables that are older than Python's and skip some of the reference's steps:
unassigned code points (category Cn) are kept instead of deleted, punctuation and combining marks added in
recent Unicode versions are missed, one CJK extension block is not spaced, there is no NFC step, and the
Rust NFD lacks one decomposition. So bertkit assembles the pipeline from ``tokenizers`` building blocks
driven by character classes computed from Python's own ``unicodedata`` (the source the reference uses):

1. delete: NUL, U+FFFD and every category C* character except tab, newline and carriage return;
2. map the remaining whitespace (what ``str.split`` splits on) to a space;
3. NFC (the reference composes before splitting), unless accents are stripped, where NFD follows anyway;
4. lowercase per character (the reference lowercases char by char before its BasicTokenizer runs);
5. strip accents: NFD, then delete category Mn;
6. split on whitespace, isolate punctuation (ASCII symbols + category P*) and CJK ideographs;
7. WordPiece (the ``tokenizers`` model the ``Tokenizer`` adds).

Every step keeps the ``tokenizers`` alignment map, so offsets point into the original string. The full
pipeline is serialised into ``tokenizer.json``, so Hugging Face's ``BertTokenizerFast`` loads it as is.
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from tokenizers import Regex, normalizers, pre_tokenizers

# The 8 CJK ideograph blocks BERT puts spaces around; Hangul and kana are deliberately not among them.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip


@dataclass(frozen=True)
class CharClasses:
    delete: str  # regex classes, as Oniguruma source text
    space: str
    punctuation_or_cjk: str
    punctuation: str
    nonspacing_marks: str
    nfd_fixes: tuple[tuple[str, str], ...]  # (char, its NFD) where the Rust NFD disagrees with Python's


def _regex_class(ranges: Iterable[tuple[int, int]]) -> str:
    parts = (f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in sorted(ranges))
    return "[" + "".join(parts) + "]"


@functools.cache
def char_classes() -> CharClasses:
    """Classify every code point with Python's ``unicodedata``, as the reference does (a few 0.1 s, once)."""
    cats = list(map(unicodedata.category, map(chr, range(0x110000))))
    names = sorted(set(cats))
    codes = np.array(list(map({n: i for i, n in enumerate(names)}.__getitem__, cats)), dtype=np.int8)
    starts = np.flatnonzero(np.diff(codes)) + 1
    firsts = [0, *starts.tolist()]
    lasts = [*(starts - 1).tolist(), 0x10FFFF]
    runs = [(a, b, names[codes[a]]) for a, b in zip(firsts, lasts)]  # maximal runs of one category

    def where(pred: Callable[[str], bool]) -> list[tuple[int, int]]:
        return [(a, b) for a, b, cat in runs if pred(cat)]

    # Deleted: NUL, U+FFFD and category C* except tab, newline, CR (surrogates cannot occur in a Rust string).
    delete = _subtract(
        _merge_ranges(where(lambda cat: cat[0] == "C"), [(0xFFFD, 0xFFFD)]),
        [(0x09, 0x0A), (0x0D, 0x0D), (0xD800, 0xDFFF)],
    )
    # Mapped to a space: what str.split() splits on and was not deleted; a plain space needs no rewrite.
    space = _merge_ranges((c, c) for a, b in where(lambda cat: cat in ("Zs", "Zl", "Zp", "Cc")) for c in range(a, b + 1)
                          if chr(c).isspace() and (c in (0x09, 0x0A, 0x0D) or unicodedata.category(chr(c))[0] != "C") and c != 0x20)  # fmt: skip
    ascii_symbols = [(33, 47), (58, 64), (91, 96), (123, 126)]
    punct = _merge_ranges(ascii_symbols, where(lambda cat: cat[0] == "P"))
    marks = where(lambda cat: cat == "Mn")
    # Characters whose canonical decomposition the Rust NFD (an older Unicode table) does not know. One C-level
    # normalisation of all candidates per side; usually they agree and nothing needs fixing.
    candidates = (
        chr(c) for a, b in where(lambda cat: cat[0] not in "CZ") for c in range(a, b + 1) if not 0x4E00 <= c <= 0x9FFF
    )
    # Canonical decompositions (Hangul syllables decompose algorithmically, identically on both sides).
    assigned = [ch for ch in candidates if (d := unicodedata.decomposition(ch)) and d[0] != "<"]
    joined = "\n".join(assigned)
    python, rust = unicodedata.normalize("NFD", joined), normalizers.NFD().normalize_str(joined)
    fixes: tuple[tuple[str, str], ...] = ()
    if python != rust:
        fixes = tuple(
            (ch, want)
            for ch, want, got in zip(assigned, python.split("\n"), rust.split("\n"), strict=True)
            if want != got
        )
    return CharClasses(
        delete=_regex_class(delete),
        space=_regex_class(space),
        punctuation_or_cjk=_regex_class(_merge_ranges(punct, CJK_RANGES)),
        punctuation=_regex_class(punct),
        nonspacing_marks=_regex_class(marks),
        nfd_fixes=fixes,
    )


def _subtract(ranges: list[tuple[int, int]], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        pieces = [(a, b)]
        for ha, hb in holes:
            pieces = [p for x, y in pieces for p in ((x, min(y, ha - 1)), (max(x, hb + 1), y)) if p[0] <= p[1]]
        out += pieces
    return out


def _merge_ranges(*range_lists: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of inclusive code-point ranges, as the fewest sorted, non-touching ranges."""
    merged: list[list[int]] = []
    for a, b in sorted(itertools.chain(*range_lists)):
        if merged and merged[-1][1] >= a - 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def normalizer(lowercase: bool, strip_accents: bool) -> normalizers.Normalizer:
    classes = char_classes()
    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(Regex(classes.delete), ""),
        normalizers.Replace(Regex(classes.space), " "),
    ]
    if not strip_accents:  # with stripping, NFD follows and makes NFC moot
        steps.append(normalizers.NFC())
        steps += [normalizers.Replace(nfd, ch) for ch, nfd in classes.nfd_fixes]
    if lowercase:
        steps.append(normalizers.Lowercase())
    if strip_accents:
        steps.append(normalizers.NFD())
        steps += [normalizers.Replace(ch, nfd) for ch, nfd in classes.nfd_fixes]
        steps.append(normalizers.Replace(Regex(classes.nonspacing_marks), ""))
    return normalizers.Sequence(steps)


def pre_tokenizer(tokenize_chinese_chars: bool) -> pre_tokenizers.PreTokenizer:
    classes = char_classes()
    isolate = classes.punctuation_or_cjk if tokenize_chinese_chars else classes.punctuation
    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(isolate), "isolated")])
