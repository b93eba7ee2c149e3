"""What the public inputs say, read the way a data engineer reads an export before writing code.

For each source column (:class:`ColumnFacts`): what it holds (numbers, numbers written as text,
dates in one non-ISO format, text), its dirt (stray spaces, the same value in several cases,
missing values) and whether it is a key (filled, no value repeated). For each target column
(:class:`TargetFacts`): what the example rows show (numbers and how many decimals, ISO dates,
one letter case). Everything here is computed from the sources and the example rows alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops

DATE_FORMATS = (
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%d.%m.%Y",
    "%Y/%m/%d",
    "%d-%m-%Y",
    "%m-%d-%Y",
    "%m/%d/%y",
    "%d/%m/%y",
    "%d %b %Y",
    "%d-%b-%Y",
    "%d-%b-%y",
    "%b %d %Y",
    "%b %d, %Y",
    "%d %B %Y",
    "%B %d, %Y",
    "%a %m/%d/%Y",
    "%a %d/%m/%Y",
    "%a %d/%m/%y",
    "%a %d %b %Y",
    "%a, %d %b %Y",
    "%A %d %B %Y",
)
"""Non-ISO date formats an export may use, in the order tried (month first before day first)."""
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
Kind = Literal["number", "number_text", "date_text", "text"]
Case = Literal["lower", "upper", "title"]


@dataclass(frozen=True)
class ColumnFacts:
    name: str
    kind: Kind
    date_formats: tuple[str, ...]
    """Formats that parse every filled value (``date_text`` only)."""
    spaces: bool
    """Some text value has leading, trailing or repeated inner spaces."""
    case_variants: bool
    """Some text value occurs in two letter cases (``'North'`` and ``'north'``)."""
    majority_case: Case | None
    missing: float
    numbers: float
    """Share of the filled values that read as numbers (:func:`..ops.parse_number`)."""
    distinct: int
    key: bool
    """Filled in every row and no value repeated (after dropping exact duplicate rows); for
    numbers also whole and dense (ids, not a measure whose values happen to differ)."""
    integer: bool


@dataclass(frozen=True)
class TargetFacts:
    name: str
    numeric: bool
    decimals: int
    """Most decimals an example value shows (0 for text)."""
    iso_dates: bool
    case: Case | None
    """The one letter case every example value is written in, if any."""
    aggregates: frozenset[str]
    """The per-group functions the column's name says (:func:`aggregates_named`)."""
    per_group: bool
    """The column's name can only be a per-group value (:func:`says_aggregate`)."""


def case_of(value: str) -> Case | None:
    letters = [c for c in value if c.isalpha()]
    if not letters:
        return None
    if value == value.lower():
        return "lower"
    if value == value.upper():
        return "upper"
    return "title" if value == value.title() else None


def _text_values(series: pd.Series) -> list[str]:
    return [str(v) for v in series.to_numpy(dtype=object, na_value=None) if v is not None]


def column_facts(frame: pd.DataFrame) -> dict[str, ColumnFacts]:
    """Facts of every column of a table (each distinct value read once, weighted by its count)."""
    distinct_rows = frame.drop_duplicates()
    out = {}
    for name in frame.columns:
        series = frame[name]
        counts = Counter(_text_values(series))
        filled = {v: n for v, n in counts.items() if v.strip().casefold() not in ops.NA_TOKENS}
        total = sum(filled.values())
        kind: Kind = "text"
        formats: tuple[str, ...] = ()
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        parsed = total
        if numeric:
            kind = "number"
        elif filled:
            parsed = sum(n for v, n in filled.items() if ops.parse_number(v) is not None)
            if parsed >= 0.9 * total and parsed > 0:
                kind = "number_text"
            elif not all(ISO_DATE.match(v.strip()) for v in filled):
                formats = tuple(f for f in DATE_FORMATS if _parses(list(filled), f))
                kind = "date_text" if formats else "text"
        cases: Counter[Case] = Counter()
        if kind == "text":
            for v, n in filled.items():
                if (case := case_of(v)) is not None:
                    cases[case] += n
        folded: dict[str, set[str]] = {}
        for v in filled:
            folded.setdefault(" ".join(v.split()).casefold(), set()).add(" ".join(v.split()))
        column = distinct_rows[name]
        unique = bool(column.notna().all() and not column.duplicated().any() and len(column) > 1)
        if unique and numeric:  # a numeric key numbers its rows densely; a measure that happens
            values = column.to_numpy(dtype=float)  # to be distinct (stock on hand) does not
            unique = bool((values == values.round()).all() and np.ptp(values) < 2 * len(values))
        out[str(name)] = ColumnFacts(
            name=str(name),
            kind=kind,
            date_formats=formats,
            spaces=kind == "text" and any(v != " ".join(v.split()) for v in filled),
            case_variants=kind == "text" and any(len(forms) > 1 for forms in folded.values()),
            majority_case=max(sorted(cases), key=cases.__getitem__) if cases else None,
            missing=1.0 - total / max(len(series), 1),
            numbers=parsed / total if total else 0.0,
            distinct=int(series.nunique()),
            key=unique,
            integer=bool(pd.api.types.is_integer_dtype(series)),
        )
    return out


def _parses(values: list[str], fmt: str) -> bool:
    """Every value reads as a date in ``fmt``. The first value is tried alone first: most columns
    are no dates, and one value settles that at a fraction of the whole column's cost."""
    if values and pd.isna(pd.to_datetime(values[0].strip(), format=fmt, errors="coerce")):
        return False
    parsed = pd.to_datetime(pd.Series(values, dtype=object).str.strip(), format=fmt, errors="coerce")
    return bool(parsed.notna().all())


def target_facts(examples: pd.DataFrame) -> dict[str, TargetFacts]:
    """Facts of every column of the example rows."""
    out = {}
    for name in examples.columns:
        series = examples[name]
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        text = _text_values(series)
        cases = {case_of(v) for v in text} if not numeric else set()
        out[str(name)] = TargetFacts(
            name=str(name),
            numeric=numeric,
            decimals=decimals_shown(series) if numeric else 0,
            iso_dates=bool(text) and not numeric and all(ISO_DATE.match(v) for v in text),
            case=cases.pop() if len(cases) == 1 else None,
            aggregates=aggregates_named(str(name)),
            per_group=says_aggregate(str(name)),
        )
    return out


def decimals_shown(series: pd.Series) -> int:
    """The most decimals a number column's values show (at most 6)."""
    values = series.dropna().to_numpy(dtype=float)
    for digits in range(7):
        if np.allclose(np.round(values, digits), values, rtol=0, atol=1e-9):
            return digits
    return 6


def values_occur(wanted: pd.Series, column: pd.Series, decimals: int) -> bool:
    """Every filled value of ``wanted`` occurs in ``column``: numbers compared at ``decimals``
    decimals, anything else as text."""
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    if numeric and pd.api.types.is_numeric_dtype(wanted):
        have = np.round(column.to_numpy(dtype=float), decimals)
        want = np.round(wanted.dropna().to_numpy(dtype=float), decimals)
        return bool(np.isin(want, have).all())
    have_text = set(column.dropna().astype(str))
    return all(str(v) in have_text for v in wanted.dropna())


def name_tokens(name: str) -> frozenset[str]:
    """A column name's words, case, separators and a plural ``s`` ignored (``'Unit Prices'`` ->
    {unit, price})."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    words = (t for t in re.split(r"[^a-z0-9]+", spaced.casefold()) if t)
    return frozenset(t[:-1] if len(t) > 3 and t.endswith("s") and not t.endswith("ss") else t for t in words)


def name_similarity(a: str, b: str) -> float:
    """Jaccard similarity of two column names' words (1.0 for the same name up to spelling)."""
    ta, tb = name_tokens(a), name_tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


AGGREGATE_WORDS = {
    "count": "count",
    "cnt": "count",
    "sum": "sum",
    "total": "sum",
    "avg": "mean",
    "average": "mean",
    "mean": "mean",
    "max": "max",
    "maximum": "max",
    "highest": "max",
    "min": "min",
    "minimum": "min",
    "lowest": "min",
    "distinct": "nunique",
    "unique": "nunique",
    "nunique": "nunique",
}
"""English words a column name uses for a per-group function (pandas' names on the right)."""
ROW_LEVEL_TOO = frozenset({"total"})
"""Words also common in row-level names (``line_total = qty * price``)."""


def aggregates_named(name: str) -> frozenset[str]:
    """The per-group functions a column's name says (``'max_cost'`` -> {max}; ``'Order Count'`` ->
    {count, size}: a count of rows or of a column's filled values)."""
    fns = {AGGREGATE_WORDS[t] for t in name_tokens(name) if t in AGGREGATE_WORDS}
    return frozenset(fns | ({"size"} if "count" in fns else set()))


def says_aggregate(name: str) -> bool:
    """Whether a column's name can only be a per-group value (``avg_price``, not ``line_total``)."""
    return any(t in AGGREGATE_WORDS and t not in ROW_LEVEL_TOO for t in name_tokens(name))


def unproducible(sources: dict[str, pd.DataFrame], examples: pd.DataFrame) -> list[str]:
    """Target columns no pipeline can produce: text columns (not ISO dates) whose example values,
    spaces and case aside, occur in no source column (numbers can be computed, text cannot)."""
    have = [
        {" ".join(str(v).split()).casefold() for v in frame[c].dropna()}
        for frame in sources.values()
        for c in frame.columns
    ]
    out = []
    for name, facts in target_facts(examples).items():
        if facts.numeric or facts.iso_dates:
            continue
        wanted = {" ".join(str(v).split()).casefold() for v in examples[name].dropna()}
        if wanted and not any(wanted <= values for values in have):
            out.append(name)
    return out
