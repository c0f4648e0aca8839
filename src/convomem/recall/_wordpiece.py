"""BERT's uncased WordPiece tokenizer in plain Python (what ``StaticEmbedder`` needs to
look its tokens up; the tests check it against HF ``tokenizers`` on the same vocabulary).

- **Basic**: control characters dropped, CJK ideographs split apart, lowercased, accents
  stripped (NFD, combining marks out), split at whitespace and around each punctuation
  character (ASCII symbols count as punctuation, as in BERT).
- **WordPiece**: each word, greedily, the longest vocabulary entry from its start, then
  the longest ``##`` continuation from where that ended; a word that cannot be covered
  (or is longer than ``MAX_CHARS``) is ``[UNK]``.

A word's pieces are memoized: conversation text repeats its words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Final

MAX_CHARS: Final = 100
_CONTROL: Final = frozenset(("Cc", "Cf", "Co", "Cs"))  # dropped; unassigned (Cn) kept
_ASCII_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MEMO_LIMIT: Final = 1 << 17


def _is_punct(c: str) -> bool:
    o = ord(c)
    if 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(o: int) -> bool:
    return (
        0x4E00 <= o <= 0x9FFF
        or 0x3400 <= o <= 0x4DBF
        or 0x20000 <= o <= 0x2A6DF
        or 0x2A700 <= o <= 0x2B73F
        or 0x2B740 <= o <= 0x2B81F
        or 0x2B820 <= o <= 0x2CEAF
        or 0xF900 <= o <= 0xFAFF
        or 0x2F800 <= o <= 0x2FA1F
    )


def basic_words(text: str) -> list[str]:
    """The words and punctuation marks of ``text``, lowercased, accents stripped."""
    out: list[str] = []
    if text.isascii() and not _ASCII_CONTROL.search(text):
        chars = text.lower()
    else:
        kept = []
        for c in text:
            o = ord(c)
            if o == 0xFFFD or (unicodedata.category(c) in _CONTROL and c not in "\t\n\r"):
                continue
            kept.append(f" {c} " if _is_cjk(o) else c)
        decomposed = unicodedata.normalize("NFD", "".join(kept).lower())
        chars = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    for word in chars.split():
        if word.isalnum() and word.isascii():
            out.append(word)
            continue
        start = 0
        for i, c in enumerate(word):
            if _is_punct(c):
                if i > start:
                    out.append(word[start:i])
                out.append(c)
                start = i + 1
        if start < len(word):
            out.append(word[start:])
    return out


class WordPiece:
    """A vocabulary (token -> id) and the tokenizer over it."""

    def __init__(self, vocab: Sequence[str], unknown: str = "[UNK]") -> None:
        self.ids = {t: i for i, t in enumerate(vocab)}
        self.unknown = self.ids[unknown]
        self._memo: dict[str, tuple[int, ...]] = {}

    def word_ids(self, word: str) -> tuple[int, ...]:
        """The ids of one basic word's pieces."""
        got = self._memo.get(word)
        if got is None:
            got = (self.unknown,) if len(word) > MAX_CHARS else self._pieces(word)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[word] = got
        return got

    def _pieces(self, word: str) -> tuple[int, ...]:
        ids = self.ids
        out: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = ids.get(word[start:end] if start == 0 else "##" + word[start:end])
                if piece is not None:
                    break
                end -= 1
            else:
                return (self.unknown,)
            out.append(piece)
            start = end
        return tuple(out)

    def encode(self, text: str) -> list[int]:
        """The token ids of ``text`` (no ``[CLS]`` / ``[SEP]``)."""
        out: list[int] = []
        for word in basic_words(text):
            out += self.word_ids(word)
        return out
