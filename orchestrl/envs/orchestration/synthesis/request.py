"""What a request in the user's own words says about the rows to keep.

A person asking for a table names what they filter on: a value of a category ("the overdue
invoices", "in the North and East regions"), values to leave out ("cash and app jobs don't
count"), a bound on a measure ("3 hours or more", "more than 6 tonnes of salt"), a column that
must be filled ("skip records with no count") or a yes/no column by its name ("billable hours",
"hasn't booked the retest": :meth:`Request.flag`). :class:`Request` reads those mentions; the proposer
(:func:`.proposer.filters`) makes the filters they name likelier than no filter
(:data:`MENTION_ODDS`), and the example rows still decide: a named filter that drops a value the
examples show is screened out like any other. A person handing over a change log also says that
only each record's latest row counts ("the export lists every change, newest first": :data:`LATEST`),
which makes one row per key likelier (:func:`.proposer.cleanings`); and one who wants rows a
lookup lacks kept says so ("with the phone number where we have one": :data:`KEEP_UNMATCHED`),
which makes a left join likelier (:func:`.proposer.joins`).

Only English function words are read (directions, negations, "no", numbers up to twenty); values
and column names come from the data, never from a list of domain words. Words are compared by their
stems (Snowball's English stemmer), so "cancellations" names ``Cancelled``. An aside in brackets
says what its clause says ("skip records with no count (heard only)"), unless it has a negation of
its own ("paid orders (not refunds)"). Without a request nothing changes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from orchestrl.envs.orchestration.synthesis.evidence import name_tokens

MENTION_ODDS = 50.0
"""How much likelier a filter the request names is than its prior (a likelihood ratio: a person
names the value, bound or column they filter on far more often than one they do not)."""

NEGATIONS = re.compile(
    r"\b(?:not|no longer|except|excluding|exclude|skip|skipping|leave out|leaving out|ignore|ignoring|"
    r"other than|apart from|rather than|instead of|without)\b|n't\b|\bout\s*$"
)
"""Words that make a clause name what to leave out ("out" ending it: "refunds and cancellations out")."""

_NUMBER = r"[$£€]?\s?(\d+(?:\.\d+)?)"
_UNITS = r"(?:[a-z]+\s+){0,2}"  # "30 cubic metres or more"
BOUNDS_BEFORE = {
    "gt": ("more than", "over", "above", "greater than", "higher than", "longer than", "bigger than"),
    "ge": (
        "at least",
        "no less than",
        "not less than",
        "a minimum of",
        "minimum",
        "at or over",
        "at or above",
    ),
    "lt": ("less than", "under", "below", "fewer than", "lower than", "shorter than", "smaller than"),
    "le": (
        "at most",
        "up to",
        "no more than",
        "not more than",
        "a maximum of",
        "maximum",
        "at or under",
        "at or below",
    ),
}
"""A direction written before the number, an article allowed between ("more than 6 tonnes", "at or
over the 40mm intervention depth")."""
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
NUMBER_WORDS = {
    word: str(n)
    for n, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
"""Numbers written as words ("three nights or more"), read as bounds like digits."""
YES = frozenset({"y", "yes", "true", "t"})
NO = frozenset({"n", "no", "false", "f"})
"""The values of a yes/no column (:meth:`Request.flag`)."""
BOTH_WAYS = re.compile(r"\b(?:or not|either way|whether)\b")
"""Words that say a yes/no column's rows count both ways ("paid or not")."""
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
    """The request's pieces (:meth:`read`), its bounds, the words it says are missing ("no count"),
    whether it says only each record's latest row counts (:data:`LATEST`) and whether it keeps rows
    a lookup has no match for (:data:`KEEP_UNMATCHED`)."""

    pieces: tuple[tuple[str, bool, bool], ...]
    """Normalised text between commas, each with whether it holds a negation and whether its clause
    does (:meth:`read`)."""
    bounds: tuple[Bound, ...]
    unfilled: frozenset[str]
    latest: bool = False
    keeps_unmatched: bool = False

    @classmethod
    def read(cls, words: str | None) -> Request | None:
        """The request ``words`` (None or blank: no request), in clauses (sentences, and text either
        side of an aside in brackets) and the pieces of a clause between commas. A piece leaves out
        what it names when it holds a negation (:data:`NEGATIONS`); otherwise it keeps what it names
        when it says "only" (beside the words naming it), and else says what its clause says ("cash,
        app and council jobs don't count"; "only lessons marked Attended count, not cancellations").
        An aside with no negation of its own leaves out what it names when the words next to it do
        ("skip records with no count (heard only)"; "free school meals (tender FSM) aren't
        takings")."""
        if words is None or not words.strip():
            return None
        pieces, bounds, unfilled = [], [], set()
        for sentence in re.split(r"[;:!?\n]+|(?<!\d)\.|\.(?!\d)|\bbut\b", words.casefold()):
            segments = re.split(r"(\([^()]*\)?)", sentence)  # clauses, asides at odd positions
            for i, segment in enumerate(segments):
                clause, beside = segment.strip("()"), ""
                if i % 2:  # an aside: the pieces next to it
                    beside = segments[i - 1].split(",")[-1] + " " + segments[i + 1].split(",")[0]
                leaves_out = NEGATIONS.search(clause + " " + beside) is not None
                for piece in re.split(r",", re.sub(THOUSANDS, "", clause)):  # a bound's words stop at a comma
                    bounds += _bounds(_digits(normalise(piece)))
                    if text := normalise(piece):
                        pieces.append((text, NEGATIONS.search(piece) is not None, leaves_out))
                missing = MISSING.finditer(_without_articles(normalise(clause)))
                unfilled |= {word for m in missing for word in name_tokens(m.group(1))}
        folded = words.casefold().replace("\u2019", "'")
        latest, unmatched = (LATEST.search(folded) is not None, KEEP_UNMATCHED.search(folded) is not None)
        return cls(tuple(pieces), tuple(bounds), frozenset(unfilled), latest, unmatched)

    def names(self, value: str, others: Sequence[str] = ()) -> bool | None:
        """Whether the request names ``value``: True in a piece keeping it, False in one leaving it
        out, None when it does not name it (or the value is a number or a function word). A value
        with numbers among its words is also named by its words alone ("this autumn"), unless one
        of the column's ``others`` has the same words ("Court 1", "Court 2")."""
        phrase = normalise(value)
        if len(phrase) < 2 or phrase in FUNCTION_WORDS or not re.search(r"[a-z]", phrase):
            return None
        longer = [normalise(o) for o in others if len(normalise(o).split()) > len(phrase.split())]
        found = [_leaves_out(p, span) for p in self.pieces for span in _said(phrase, p[0], longer)]
        words = _words(phrase)  # "Autumn 2026": "this autumn"
        if not found and words != phrase and len(words) >= 3 and words not in FUNCTION_WORDS:
            if all(_words(normalise(o)) != words for o in others if o != value):
                found = [_leaves_out(p, span) for p in self.pieces for span in _said(words, p[0])]
        if not found:
            return None
        return not all(found)

    def flag(self, column: str, values: Sequence[str]) -> str | None:
        """The value to keep of a yes/no ``column`` (``values``: its two values, one of :data:`YES`
        and one of :data:`NO`) that the request names by every word of its name: the yes value in a
        piece that keeps it ("billable hours"), the no value in one that leaves it out ("hasn't
        booked the retest", "had no queen seen"). None when it is not named, names both ways
        (:data:`BOTH_WAYS`), or the values are not yes and no."""
        folded = {str(v).strip().casefold(): str(v) for v in values}
        yes, no = [[v for k, v in folded.items() if k in words] for words in (YES, NO)]
        tokens = _stems(" ".join(_name_words(column)))
        if len(folded) != 2 or len(yes) != 1 or len(no) != 1 or not tokens:
            return None
        said = set()
        for piece in self.pieces:
            stems = _stems(piece[0])
            if set(tokens) <= set(stems) and not BOTH_WAYS.search(piece[0]):
                at = [i for i, stem in enumerate(stems) if stem in tokens]
                said.add(_leaves_out(piece, at) or (at[0] > 0 and stems[at[0] - 1] == "no"))
        return None if len(said) != 1 else (no[0] if said.pop() else yes[0])

    def bounds_on(self, column: str) -> list[tuple[str, float]]:
        """The bounds whose words name ``column`` (a word of its name)."""
        return self.placed([column]).get(column, [])

    def placed(self, columns: Sequence[str]) -> dict[str, list[tuple[str, float]]]:
        """Each bound on the ``columns`` whose names share the most words with its words (each of
        them on a tie: "30 m or deeper" of ``Max Depth (m)`` and ``Avg Depth (m)``; "over the 40mm
        depth" of ``depth_mm``, not ``width_mm``). A bound that names none is :meth:`unplaced`."""
        out: dict[str, list[tuple[str, float]]] = {}
        for bound in self.bounds:
            shared = {column: len(_name_words(column) & bound.words) for column in columns}
            most = max(shared.values(), default=0)
            for column in (c for c in columns if most and shared[c] == most):
                out.setdefault(column, []).append((bound.op, bound.value))
        return out

    def unplaced(self, columns: Sequence[str]) -> list[tuple[str, float]]:
        """The bounds whose words name none of ``columns``."""
        return [(b.op, b.value) for b in self.bounds if not any(_name_words(c) & b.words for c in columns)]

    def wants_filled(self, column: str) -> bool:
        """Whether the request leaves out rows with ``column`` missing ("skip records with no count")."""
        return bool(_name_words(column) & self.unfilled)


def normalise(text: str) -> str:
    """Lower case, hyphens, slashes and underscores as spaces, thousands separators dropped, other
    punctuation gone, single spaces: ``'Click-charge'`` -> ``'click charge'``."""
    text = re.sub(THOUSANDS, "", text.casefold())
    text = re.sub(r"[-_/]", " ", text)
    text = re.sub(r"[^\w\s.$£€%]|(?<!\d)\.|\.(?!\d)", " ", text)
    return " ".join(text.split())


def _words(phrase: str) -> str:
    return " ".join(w for w in phrase.split() if not w.isdigit())


_STEMMER = snowballstemmer.stemmer("english")


@lru_cache(maxsize=8192)
def _stems(text: str) -> tuple[str, ...]:
    """The stems of ``text``'s words (normalised text): "cancellations" and "cancelled" -> cancel."""
    return tuple(_STEMMER.stemWords(text.split()))


def _spans(phrase: str, text: str) -> list[range]:
    """Where ``text`` holds ``phrase``'s words, compared by stem, as ranges of word positions."""
    p, t = _stems(phrase), _stems(text)
    return [range(i, i + len(p)) for i in range(len(t) - len(p) + 1) if p and t[i : i + len(p)] == p]


def _said(phrase: str, text: str, longer: Sequence[str] = ()) -> list[range]:
    """Where ``text`` holds ``phrase`` as whole words (by stem), other than inside a ``longer``
    phrase it also holds ("part paid" does not name ``Paid``)."""
    inside = {i for other in longer for span in _spans(other, text) for i in span}
    return [span for span in _spans(phrase, text) if not set(span) <= inside]


def _leaves_out(piece: tuple[str, bool, bool], span: Collection[int]) -> bool:
    """Whether a ``piece`` (:attr:`Request.pieces`) leaves out what it names at ``span`` (word
    positions): a negation in the piece, else "only" outside the span keeps it, else its clause
    decides (:meth:`Request.read`)."""
    text, negated, clause = piece
    if negated:
        return True
    return False if any(w == "only" and i not in span for i, w in enumerate(text.split())) else clause


def _name_words(column: str) -> frozenset[str]:
    """A column name's words other than function words (what names it in a request)."""
    return name_tokens(column) - FUNCTION_WORDS


def _digits(text: str) -> str:
    """``text`` with numbers written as words in digits (:data:`NUMBER_WORDS`)."""
    return re.sub(r"\b[a-z]+\b", lambda m: NUMBER_WORDS.get(m.group(0), m.group(0)), text)


def _without_articles(text: str) -> str:
    return re.sub(r"\b(?:a|an|the|any)\s+", "", text)


def _bounds(text: str) -> list[Bound]:
    """Numbers with a direction, each with the words around it (:data:`NEAR` either side), longest
    phrase first: "no more than 5" is at most 5, not also more than 5."""
    phrases = [(p, op, True) for op, ps in BOUNDS_BEFORE.items() for p in ps]
    phrases += [(p, op, False) for op, ps in BOUNDS_AFTER.items() for p in ps]
    found = []
    for phrase, op, before in sorted(phrases, key=lambda p: -len(p[0])):
        pattern = (
            rf"\b{phrase}\s+(?:the\s+|a\s+)?{_NUMBER}" if before else rf"{_NUMBER}\s*%?\s*{_UNITS}{phrase}\b"
        )
        for m in re.finditer(pattern, text):
            near = (
                text[: m.start()].split()[-NEAR:]
                + text[m.start() : m.end()].split()
                + text[m.end() :].split()[:NEAR]
            )
            found.append(Bound(op, float(m.group(1)), name_tokens(" ".join(near))))
        text = re.sub(pattern, lambda m: " " * len(m.group(0)), text)  # read once
    return found
