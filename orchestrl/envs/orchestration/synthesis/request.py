"""What a request in the user's own words says about the rows to keep.

A person asking for a table names what they filter on: a value of a category ("the overdue
invoices", "in the North and East regions"), values to leave out ("cash and app jobs don't
count"), a bound on a measure ("3 hours or more", "more than 6 tonnes of salt") or a column that
must be filled ("skip records with no count"). :class:`Request` reads those mentions; the proposer
(:func:`.proposer.filters`) makes the filters they name likelier than no filter
(:data:`MENTION_ODDS`), and the example rows still decide: a named filter that drops a value the
examples show is screened out like any other. A person handing over a change log also says that
only each record's latest row counts ("the export lists every change, newest first": :data:`LATEST`),
which makes one row per key likelier (:func:`.proposer.cleanings`); and one who wants rows a
lookup lacks kept says so ("with the phone number where we have one": :data:`KEEP_UNMATCHED`),
which makes a left join likelier (:func:`.proposer.joins`).

Only English function words are read (directions, negations, "no"); values and column names
come from the data, never from a list of domain words. Without a request nothing changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrl.envs.orchestration.synthesis.evidence import name_tokens

MENTION_ODDS = 50.0
"""How much likelier a filter the request names is than its prior (a likelihood ratio: a person
names the value, bound or column they filter on far more often than one they do not)."""

NEGATIONS = re.compile(
    r"\b(?:not|no longer|except|excluding|exclude|skip|skipping|leave out|leaving out|ignore|ignoring|"
    r"other than|apart from|rather than|instead of|without)\b|n't\b"
)
"""Words that make a clause name what to leave out."""

_NUMBER = r"[$£€]?\s?(\d+(?:\.\d+)?)"
_UNITS = r"(?:[a-z]+\s+){0,2}"  # "30 cubic metres or more"
BOUNDS_BEFORE = {
    "gt": ("more than", "over", "above", "greater than", "higher than", "longer than", "bigger than"),
    "ge": ("at least", "no less than", "not less than", "a minimum of", "minimum"),
    "lt": ("less than", "under", "below", "fewer than", "lower than", "shorter than", "smaller than"),
    "le": ("at most", "up to", "no more than", "not more than", "a maximum of", "maximum"),
}
"""A direction written before the number ("more than 6 tonnes")."""
BOUNDS_AFTER = {
    "ge": (
        *("or more", "or over", "or above", "or higher", "or greater", "or longer", "or deeper", "or later"),
        *("or bigger", "and up", "and above", "and over", "plus"),
    ),
    "le": (
        *("or less", "or fewer", "or under", "or below", "or lower", "or shorter", "or earlier"),
        *("or smaller", "and under", "and below"),
    ),
}
"""A direction written after the number and at most two unit words ("30 cubic metres or more")."""
LATEST = re.compile(
    r"\b(?:latest|newest|most recent|current|currently|last (?:update|change|status|version|entry))\b"
)
"""Words that say only each record's latest version counts (of a change log, newest first)."""
KEEP_UNMATCHED = re.compile(
    r"\b(?:where (?:we|i|they) (?:have|know)|if (?:we|i) (?:have|know)|even (?:if|though|without)|anyway|"
    r"keep (?:\w+ ){0,4}(?:in|too)|(?:can't|cannot|couldn't) match|where known|if known|if any)\b"
)
"""Words that keep the rows a lookup has no match for ("the client's email where I have it", "keep
the visit even if the account isn't on the list")."""
THOUSANDS = r"(?<=\d),(?=\d{3}\b)"
NEAR = 3
"""Words either side of a bound that may name its column ("review score of 4 or more")."""
MISSING = re.compile(r"\b(?:no|without|missing|blank|empty)\s+(?!more\b|less\b|longer\b|fewer\b)(\w+)")
""""with no count", "without a score" (one article allowed): the word after names a column."""
FUNCTION_WORDS = frozenset(
    (
        "a an the and or of in on at to for by with no not "
        "yes all any none other each per is are be this that"
    ).split()
)
"""Values that are also function words (a ``Yes``/``No`` column) are not read as mentions."""


@dataclass(frozen=True)
class Bound:
    """A number with a direction (``op``: gt, ge, lt, le) and the words around it."""

    op: str
    value: float
    words: frozenset[str]


@dataclass(frozen=True)
class Request:
    """The request's clauses (normalised text, whether it says what to leave out), its bounds, the
    words it says are missing ("no count"), whether it says only each record's latest row counts
    (:data:`LATEST`) and whether it keeps rows a lookup has no match for (:data:`KEEP_UNMATCHED`)."""

    clauses: tuple[tuple[str, bool], ...]
    bounds: tuple[Bound, ...]
    unfilled: frozenset[str]
    latest: bool = False
    keeps_unmatched: bool = False

    @classmethod
    def read(cls, words: str | None) -> Request | None:
        """The request ``words`` (None or blank: no request)."""
        if words is None or not words.strip():
            return None
        clauses, bounds, unfilled = [], [], set()
        for part in re.split(r"[;:!?()\n]+|(?<!\d)\.|\.(?!\d)|\bbut\b", words.casefold()):
            text = normalise(part)
            if not text:
                continue
            clauses.append((text, bool(NEGATIONS.search(part))))
            for piece in re.split(r",", re.sub(THOUSANDS, "", part)):  # a bound's words stop at a comma
                bounds += _bounds(normalise(piece))
            missing = MISSING.finditer(_without_articles(text))
            unfilled |= {word for m in missing for word in name_tokens(m.group(1))}
        folded = words.casefold().replace("\u2019", "'")
        latest, unmatched = (LATEST.search(folded) is not None, KEEP_UNMATCHED.search(folded) is not None)
        return cls(tuple(clauses), tuple(bounds), frozenset(unfilled), latest, unmatched)

    def names(self, value: str, others: Sequence[str] = ()) -> bool | None:
        """Whether the request names ``value``: True in a clause keeping it, False in one leaving it
        out, None when it does not name it (or the value is a number or a function word). A value
        with numbers among its words is also named by its words alone ("this autumn"), unless one
        of the column's ``others`` has the same words ("Court 1", "Court 2")."""
        phrase = normalise(value)
        if len(phrase) < 2 or phrase in FUNCTION_WORDS or not re.search(r"[a-z]", phrase):
            return None
        found = [negated for text, negated in self.clauses if _says(phrase, text)]
        words = _words(phrase)  # "Autumn 2026": "this autumn"
        if not found and words != phrase and len(words) >= 3 and words not in FUNCTION_WORDS:
            if all(_words(normalise(o)) != words for o in others if o != value):
                found = [negated for text, negated in self.clauses if _says(words, text)]
        if not found:
            return None
        return not all(found)

    def bounds_on(self, column: str) -> list[tuple[str, float]]:
        """The bounds of clauses that name ``column`` (a word of its name)."""
        return [(b.op, b.value) for b in self._bounds_naming(column)]

    def unplaced(self, columns: list[str]) -> list[tuple[str, float]]:
        """The bounds whose words name none of ``columns``."""
        named = {b for column in columns for b in self._bounds_naming(column)}
        return [(b.op, b.value) for b in self.bounds if b not in named]

    def _bounds_naming(self, column: str) -> list[Bound]:
        tokens = name_tokens(column) - FUNCTION_WORDS
        return [b for b in self.bounds if tokens & b.words]

    def wants_filled(self, column: str) -> bool:
        """Whether the request leaves out rows with ``column`` missing ("skip records with no count")."""
        return bool((name_tokens(column) - FUNCTION_WORDS) & self.unfilled)


def normalise(text: str) -> str:
    """Lower case, hyphens, slashes and underscores as spaces, thousands separators dropped, other
    punctuation gone, single spaces: ``'Click-charge'`` -> ``'click charge'``."""
    text = re.sub(THOUSANDS, "", text.casefold())
    text = re.sub(r"[-_/]", " ", text)
    text = re.sub(r"[^\w\s.$£€%]|(?<!\d)\.|\.(?!\d)", " ", text)
    return " ".join(text.split())


def _words(phrase: str) -> str:
    return " ".join(w for w in phrase.split() if not w.isdigit())


def _says(phrase: str, text: str) -> bool:
    """``text`` holds ``phrase`` as whole words (with a plural or past-tense ending)."""
    return re.search(rf"\b{re.escape(phrase)}(?:s|es|d|ed)?\b", text) is not None


def _without_articles(text: str) -> str:
    return re.sub(r"\b(?:a|an|the|any)\s+", "", text)


def _bounds(text: str) -> list[Bound]:
    """Numbers with a direction, each with the words around it (:data:`NEAR` either side), longest
    phrase first: "no more than 5" is at most 5, not also more than 5."""
    phrases = [(p, op, True) for op, ps in BOUNDS_BEFORE.items() for p in ps]
    phrases += [(p, op, False) for op, ps in BOUNDS_AFTER.items() for p in ps]
    found = []
    for phrase, op, before in sorted(phrases, key=lambda p: -len(p[0])):
        pattern = rf"\b{phrase}\s+{_NUMBER}" if before else rf"{_NUMBER}\s*%?\s*{_UNITS}{phrase}\b"
        for m in re.finditer(pattern, text):
            near = (
                text[: m.start()].split()[-NEAR:]
                + text[m.start() : m.end()].split()
                + text[m.end() :].split()[:NEAR]
            )
            found.append(Bound(op, float(m.group(1)), name_tokens(" ".join(near))))
        text = re.sub(pattern, lambda m: " " * len(m.group(0)), text)  # read once
    return found
