"""A deterministic word-level tokenizer: the ids a policy's text encoder embeds.

``tokenize`` splits text into words, numbers and punctuation and keeps their case, because the env
copies values ("New York", "24.5") verbatim from question tokens. Ids are looked up lower-cased.

Id layout of a :class:`Vocabulary` (``size`` ids in all):

- ``0`` ``<pad>`` (padding; never a real token), ``1`` ``<unk>`` (a symbol outside the vocabulary),
  then :data:`SPECIAL_TOKENS`' remaining entries;
- the known words, sorted, so the same texts always give the same ids;
- :data:`NUMBER_BUCKETS` ids for numbers not in the vocabulary (``crc32(text) % NUMBER_BUCKETS``);
- :data:`WORD_BUCKETS` ids for other unknown words: values such as "Berlin" get a stable id that is
  shared with a few other words, so a policy can still see that two tokens are the same word.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PAD_ID = 0
UNK_ID = 1
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<unk>", "<star>", "<text>", "<integer>", "<real>")
"""``<star>`` names column slot 0 (``*``); the type tokens end each column's block."""
NUMBER_BUCKETS = 32
WORD_BUCKETS = 64

_TOKEN = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+|[^\sA-Za-z\d]")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


def tokenize(text: str) -> list[str]:
    """Words, numbers (``24.5`` stays whole) and single punctuation marks, case preserved."""
    return _TOKEN.findall(text)


def identifier_words(identifier: str) -> list[str]:
    """A snake_case SQL identifier as words: ``ticket_price`` -> ["ticket", "price"]."""
    return [w for w in identifier.lower().split("_") if w]


def is_number(token: str) -> bool:
    return bool(_NUMBER.match(token))


@dataclass(frozen=True)
class Vocabulary:
    """Word -> id, built from texts; see the module docstring for the id layout."""

    words: tuple[str, ...]
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
        for i, word in enumerate(self.words, start=len(SPECIAL_TOKENS)):
            index[word] = i
        object.__setattr__(self, "_index", index)

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocabulary:
        """Every lower-cased word and number in ``texts`` (and the digits 0-10, for "top 3")."""
        words = {tok.lower() for text in texts for tok in tokenize(text) if tok.isalnum() or is_number(tok)}
        words.update(str(i) for i in range(11))
        return cls(tuple(sorted(words - set(SPECIAL_TOKENS))))

    @property
    def number_offset(self) -> int:
        return len(SPECIAL_TOKENS) + len(self.words)

    @property
    def word_offset(self) -> int:
        return self.number_offset + NUMBER_BUCKETS

    @property
    def size(self) -> int:
        return self.word_offset + WORD_BUCKETS

    def token_id(self, token: str) -> int:
        key = token.lower()
        if key in self._index:
            return self._index[key]
        if is_number(key):
            return self.number_offset + zlib.crc32(key.encode()) % NUMBER_BUCKETS
        if key.isalnum():
            return self.word_offset + zlib.crc32(key.encode()) % WORD_BUCKETS
        return UNK_ID

    def encode(self, tokens: Sequence[str], length: int) -> list[int]:
        """Ids of ``tokens``, cut or padded with :data:`PAD_ID` to ``length``."""
        ids = [self.token_id(t) for t in tokens[:length]]
        return ids + [PAD_ID] * (length - len(ids))
