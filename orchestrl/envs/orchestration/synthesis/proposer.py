"""Candidate steps proposed from the data: cleaning, joins and filters, each with a prior.

Everything is read off the public inputs (:mod:`.evidence`), deterministically, with no word
lists and no random draws:

- cleaning of one table (:func:`cleanings`): numbers written as text are parsed, dates in one
  non-ISO format are written as ISO dates when the example rows show ISO dates, stray spaces are
  trimmed; optional, as alternatives with their priors: one letter case for a column that holds a
  value in several or that the example rows show in one case (that case, else the most common),
  dropping exact duplicate rows, dropping rows that repeat a key, the column whose repeated rows
  agree most on the others (versions of one record in a change log; likelier when the output shows
  the key, unlikely when it shows a text identifier every row has its own); a column of numbers
  among a few words is parsed when the example rows show numbers;
- joins (:func:`joins`): the fact table's column and the other table's nearly unique column whose
  values overlap most (names decide between equal overlaps), inner, and left where keys go
  unmatched (the likelier of the two when the output lists the fact table's rows);
- filters (:func:`filters`): on a category (few values for its rows, or values written more than
  once) equal on a value that occurs, not equal on one of a small text category's values, in a set
  of values (those the example rows show, or two of the commonest); numeric thresholds at the
  roundest number of each gap between the data's values; not-null on a column with missing values.
  A filter is the rows it keeps: none that keeps every row, repeats a likelier one's rows, or
  drops every row holding a value the example rows show. Filters the user's words name (values,
  bounds, columns to fill: :mod:`.request`) are likelier than none.

A prior is the probability a person writing the pipeline would take the step before seeing the
example rows; :mod:`.search` adds what the example rows say.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.spec import DedupDuty, DeriveDuty, FilterDuty, JoinDuty, Role
from orchestrl.envs.orchestration.synthesis.evidence import (
    ISO_DATE,
    ColumnFacts,
    TargetFacts,
    case_of,
    column_facts,
    decimals_shown,
    name_similarity,
    values_occur,
)
from orchestrl.envs.orchestration.synthesis.request import MENTION_ODDS, Request

FILTER_PRIOR = {"eq": 0.03, "ne": 0.006, "in": 0.004, "shown": 0.03, "threshold": 0.02, "notnull": 0.03}
"""Prior of one filter of each kind (no filter: 1); ``shown``: keeping exactly the values the
example rows show."""
MAX_CATEGORY = 30
"""Text columns with more distinct values than this get no equality filters."""
MIN_AGREEMENT = 0.25
"""Rows repeating a key must agree on at least this share of their other columns
(:func:`_versions`) for the key to be deduplicated on."""
MAX_EXCLUDED = 8
"""Text columns with more distinct values than this get no not-equal filters (everything but one
status or type, not everything but one day or customer)."""
MAX_SET_VALUES = 12
"""Text columns with more distinct values than this get no ``in`` filters (a category, not names)."""


@dataclass(frozen=True)
class Step:
    """One node of a stream: a role and duty; a join also names the table it merges in."""

    role: Role
    duty: Any
    other: str | None = None


@dataclass(frozen=True)
class Option:
    """An alternative with its prior (log probability) and the steps it adds."""

    log_prior: float
    steps: tuple[Step, ...]
    label: str = ""


def _derive(op: str, column: str, **extra: Any) -> Step:
    return Step(Role.DERIVE, DeriveDuty(name=column, op=op, left=column, **extra))


def rewrites(facts: Mapping[str, ColumnFacts], target: Mapping[str, TargetFacts]) -> list[Option]:
    """The fixed rewrites of a table (parse numbers and dates, trim) and the alternative date
    formats, as options (the first is the most likely). A column of mostly numbers among words is
    parsed when the example rows show it as numbers."""
    wants_dates = any(t.iso_dates for t in target.values())
    steps: list[Step] = []
    dated: list[ColumnFacts] = []
    for f in facts.values():
        shown = target.get(f.name)
        if f.kind == "number_text" and (shown is None or shown.numeric):
            steps.append(_derive("number", f.name))
        elif f.kind == "text" and shown is not None and shown.numeric and f.numbers >= 0.5:
            steps.append(_derive("number", f.name))  # numbers among a few words ('NV', 'TBC')
        elif f.kind == "date_text" and wants_dates:
            dated.append(f)
        elif f.spaces:
            steps.append(_derive("trim", f.name))
    options = [Option(0.0, tuple(steps), "")]
    for f in dated:  # each date column in each format that parses it (month first is likelier)
        options = [
            Option(
                o.log_prior + math.log(0.7 if i == 0 else 0.3 / max(len(f.date_formats) - 1, 1)),
                (*o.steps, _derive("date", f.name, fmt=fmt)),
                f"{o.label} {f.name}:{fmt}",
            )
            for o in options
            for i, fmt in enumerate(f.date_formats[:3])
        ]
    return options


def cleanings(
    frame: pd.DataFrame,
    target: Mapping[str, TargetFacts],
    fact: pd.DataFrame | None = None,
    request: Request | None = None,
) -> list[Option]:
    """Alternative cleanings of one (rewritten) table, most likely first. A lookup table (``fact``:
    the fact table it joins to) is only deduplicated on a key the fact table's values occur in:
    one row per machine, not one per site the machines stand at. A ``request`` that says only each
    record's latest row counts (:data:`.request.LATEST`) makes one row per key
    :data:`.request.MENTION_ODDS` times likelier, and marks it requested (:func:`requested`)."""
    facts = column_facts(frame)
    options = [Option(0.0, ())]
    for f in facts.values():
        shown = target.get(f.name)
        in_examples = shown is not None and shown.case is not None
        other_case = in_examples and _other_case(frame[f.name], shown.case)
        if f.kind != "text" or not (f.case_variants or other_case):
            continue
        case = shown.case if in_examples else f.majority_case
        if case is None:
            continue
        p = 0.9 if in_examples else 0.6
        options = [
            alt
            for o in options
            for alt in (
                Option(o.log_prior + math.log(p), (*o.steps, _derive(case, f.name)), f"{o.label} {case}"),
                Option(o.log_prior + math.log(1 - p), o.steps, o.label),
            )
        ]
    if frame.duplicated().any():
        options = [
            alt
            for o in options
            for alt in (
                Option(
                    o.log_prior + math.log(0.8), (*o.steps, Step(Role.DEDUP, DedupDuty())), f"{o.label} dedup"
                ),
                Option(o.log_prior + math.log(0.2), o.steps, o.label),
            )
        ]
    distinct = frame.drop_duplicates()
    keys = {
        f.name: agreement
        for f in facts.values()
        if _repeated_key(distinct[f.name], f)
        and (fact is None or _joins_on(distinct[f.name], fact))
        and (agreement := _versions(distinct, f.name)) >= MIN_AGREEMENT
    }
    key = max(keys, key=lambda k: (keys[k], k in target, distinct[k].nunique()), default=None)
    key = facts[key] if key is not None else None
    if key is not None:  # a key the output shows is likelier one row per key
        p = 0.6 if key.name in target else 0.3
        if _own_records(distinct, facts, target):
            p = 0.1
        latest = request is not None and request.latest
        if latest:
            p = p * MENTION_ODDS / (p * MENTION_ODDS + 1 - p)
        options = [
            alt
            for o in options
            for alt in (
                Option(
                    o.log_prior + math.log(p),
                    (*o.steps, Step(Role.DEDUP, DedupDuty(subset=(key.name,)))),
                    f"{o.label} dedup:{key.name}{REQUESTED if latest else ''}",
                ),
                Option(o.log_prior + math.log(1 - p), o.steps, o.label),
            )
        ]
    return sorted(options, key=lambda o: -o.log_prior)


def _joins_on(column: pd.Series, fact: pd.DataFrame) -> bool:
    """Whether most values of some column of ``fact`` occur in ``column`` (a key to join on)."""
    have = set(column.dropna().astype(str))
    return any(fact[c].dropna().astype(str).isin(have).mean() >= 0.5 for c in fact.columns)


def _own_records(
    frame: pd.DataFrame, facts: Mapping[str, ColumnFacts], target: Mapping[str, TargetFacts]
) -> bool:
    """The output shows a text identifier each row has its own (a job number, not a date): each row
    is a record, not a version of one, and one row per repeated value is unlikely."""
    return any(
        f.key
        and f.kind == "text"
        and name in target
        and not frame[name].astype(str).str.match(ISO_DATE).all()
        for name, f in facts.items()
    )


def _other_case(column: pd.Series, case: str) -> bool:
    """Some value of a text column is written in another letter case than ``case`` (mixed
    spellings such as ``'MacLeod'`` are no case)."""
    return any(case_of(str(v)) not in (case, None) for v in column.dropna())


def _repeated_key(column: pd.Series, facts: ColumnFacts) -> bool:
    """A column that could identify rows (filled, a third of its values distinct or more, not
    measured in fractions, not dates: a day is shared, not an identity) and still repeats a value
    once exact duplicate rows are gone."""
    if facts.kind not in ("text", "number") or (facts.kind == "number" and not facts.integer):
        return False
    if facts.kind == "text" and column.astype(str).str.match(ISO_DATE).all():
        return False
    filled = column.notna().all()
    return bool(filled and column.duplicated().any() and column.nunique() >= len(column) / 3)


def _versions(distinct: pd.DataFrame, key: str) -> float:
    """How much rows that repeat a value of ``key`` agree on the other columns (the share of
    (repeated value, other column) pairs with one value): versions of one record (a change log:
    its attributes stay, its status changes) agree, different records that happen to share a
    value do not."""
    others = [c for c in distinct.columns if c != key]
    repeated = distinct[distinct[key].duplicated(keep=False)]
    if not others or repeated.empty:
        return 0.0
    same = repeated.groupby(key, dropna=False)[others].nunique(dropna=False) <= 1
    return float(same.to_numpy().mean())


def joins(
    fact: pd.DataFrame,
    other: pd.DataFrame,
    table: str,
    needed: bool,
    listed: bool = False,
    request: Request | None = None,
) -> list[Option]:
    """Ways to merge ``other`` into the fact stream, most likely first: on the key pair whose values
    overlap most (inner, and left when some fact rows find no match); leaving it out when no
    target column needs it. When some fact rows find no match, ``listed`` (the output lists the
    fact table's rows: it shows their key) makes the left join, which keeps them, the likelier; a
    ``request`` that keeps rows a lookup lacks (:data:`.request.KEEP_UNMATCHED`) makes it
    :data:`.request.MENTION_ODDS` times likelier and marks it requested (:func:`requested`)."""
    keep = request is not None and request.keeps_unmatched
    pairs = []
    for right in other.columns:
        values = other[right].dropna()
        if values.empty or values.nunique() < 0.9 * len(values):
            continue
        have = set(values.astype(str))
        for left in fact.columns:
            column = fact[left].dropna()
            if column.empty or (column.dtype.kind in "fc") != (values.dtype.kind in "fc"):
                continue
            overlap = float(column.astype(str).isin(have).mean())
            if overlap >= 0.5:
                score = overlap + 0.1 * name_similarity(str(left), str(right))
                pairs.append((score, overlap, str(left), str(right)))
    pairs.sort(key=lambda p: -p[0])
    options = []
    for rank, (_, overlap, left, right) in enumerate(pairs[:2]):
        prior = math.log(0.8 if rank == 0 else 0.2)
        duty = JoinDuty(left_on=left, right_on=right)
        unmatched = math.log(0.5) if overlap < 1.0 else 0.0  # the less likely of inner and left
        inner = prior + (unmatched if listed else 0.0)
        options.append(Option(inner, (Step(Role.JOIN, duty, table),), f"join {table} on {left}={right}"))
        if overlap < 1.0:
            left_join = JoinDuty(left_on=left, right_on=right, how="left")
            said = math.log(MENTION_ODDS) if keep else 0.0
            options.append(
                Option(
                    prior + (0.0 if listed else unmatched) + said,
                    (Step(Role.JOIN, left_join, table),),
                    f"left{REQUESTED if keep else ''}",
                )
            )
    if not needed:
        options.append(Option(math.log(0.3), (), f"without {table}"))
    return sorted(options, key=lambda o: -o.log_prior)


def filters(frame: pd.DataFrame, examples: pd.DataFrame, request: Request | None = None) -> list[Option]:
    """Single filters on ``frame``'s columns with their priors, most likely first. A filter is
    the rows it keeps: one that keeps every row, or the same rows as a likelier one, is left
    out, and so is one that drops every row holding a value the example rows show of a column
    (a group key, or a column of the output's rows: :func:`_shown_values`; numbers only when the
    example rows are rows of ``frame``, :func:`_rows_shown`). Filters the user's ``request`` names
    are likelier (:func:`_requested`)."""
    frame = frame.reset_index(drop=True)
    facts = column_facts(frame)
    singles = []
    bounds = _requested_bounds(frame, facts, request) if request is not None else {}
    for name, f in facts.items():
        singles += _column_filters(name, f, frame[name], examples.get(name), len(frame))
        if request is not None:
            singles += _requested(name, f, frame[name], request, bounds.get(name, []))
    shown = {
        name: values
        for name in frame.columns
        if (values := _shown_values(frame[name], examples.get(name))) is not None
    }
    if not _rows_shown(frame, examples, shown):  # numbers of a grouped output: per-group values
        shown = {name: values for name, values in shown.items() if not _is_number(values)}
    out, seen = [], set()
    for option in sorted(singles, key=lambda o: -o.log_prior):
        rows = kept_rows(frame, option.steps[0].duty)
        if len(rows) == len(frame) or rows.tobytes() in seen:
            continue
        if all(_shown_values(frame[name].iloc[rows], values) is not None for name, values in shown.items()):
            seen.add(rows.tobytes())
            out.append(option)
    return out


def kept_rows(frame: pd.DataFrame, duty: FilterDuty) -> np.ndarray:
    """The positions of the rows of ``frame`` (a default index) that the filter ``duty`` keeps:
    the compiled pipeline's own mask (:func:`.ops.filter_mask`), without taking the rows."""
    _, keep = ops.filter_mask(frame, duty.column, duty.op, duty.value, "small")
    return np.flatnonzero(keep.to_numpy())


def categories(frame: pd.DataFrame) -> list[str]:
    """The columns of ``frame`` that hold a category a person might name a value of: text that is
    not a key, with two to :data:`MAX_SET_VALUES` distinct values."""
    return [
        name
        for name, f in column_facts(frame).items()
        if f.kind == "text" and not f.key and 1 < f.distinct <= MAX_SET_VALUES
    ]


def _column_filters(
    name: str, f: ColumnFacts, column: pd.Series, shown: pd.Series | None, rows: int
) -> list[Option]:
    """The single filters on one column (``shown``: the example rows' column of that name)."""
    out: list[Option] = []
    if f.missing > 0 and f.missing < 0.6:
        out.append(_filter(name, "notnull", None, "notnull"))
    if f.key or rows == 0:
        return out
    counts = column.value_counts()
    if f.kind in ("text", "date_text") and 1 < f.distinct <= MAX_CATEGORY and _repeats(counts):
        for value, count in counts.items():
            share = count / rows
            if 0.01 < share < 0.99:
                out.append(_filter(name, "eq", str(value), "eq"))
                if share > 0.05 and f.distinct <= MAX_EXCLUDED and f.kind == "text":
                    out.append(_filter(name, "ne", str(value), "ne"))
        if f.distinct <= MAX_SET_VALUES:
            for group, read_off in _value_sets(counts, shown):
                option = _filter(name, "in", group, "shown" if read_off else "in")
                longer = math.log(0.5) * (len(group) - 2)  # each value listed is one more choice
                if read_off and len(group) > 2:  # read off the examples: one of many such sets
                    longer -= math.log(math.comb(f.distinct, len(group)))
                out.append(Option(option.log_prior + longer, option.steps, option.label))
    elif f.kind == "number" and f.distinct >= 2:
        for value, roundness in _thresholds(column.dropna().to_numpy(dtype=float)):
            for op in ("ge", "lt"):
                option = _filter(name, op, value, "threshold")
                out.append(Option(option.log_prior + math.log(roundness), option.steps, option.label))
    return out


def _requested(
    name: str, f: ColumnFacts, column: pd.Series, request: Request, bounds: list[tuple[str, float]]
) -> list[Option]:
    """The filters on one column that the request names, each as likely as an equality filter
    would be at :data:`.request.MENTION_ODDS` times its prior (likelier than no filter): not-null
    on a column it says must be filled, its ``bounds`` on a number column (:func:`_requested_bounds`),
    on a category each value it names (equal; and in the set of them when it
    names several) or leaves out (not equal, or in the set of the others), and on a yes/no column
    it names the value it keeps (:meth:`.request.Request.flag`)."""
    out: list[tuple[str, Any]] = []
    if f.missing > 0 and request.wants_filled(name):
        out.append(("notnull", None))
    if f.kind == "number" and f.distinct >= 2:
        out += bounds
    elif f.kind in ("text", "date_text") and 1 < f.distinct <= MAX_CATEGORY:
        values = sorted(str(v) for v in column.dropna().unique())
        said = {v: request.names(v, values) for v in values}
        keep = [v for v in values if said[v] is True]
        drop = [v for v in values if said[v] is False]
        rest = tuple(v for v in values if v not in drop)
        out += [("eq", v) for v in keep] + [("ne", v) for v in drop]
        if (kept := request.flag(name, values)) is not None:  # a yes/no column named by its name
            out.append(("eq", kept))
        if 1 < len(keep) < len(values):
            out.append(("in", tuple(keep)))
        if len(drop) > 1 and 0 < len(rest) <= MAX_SET_VALUES:
            out.append(("in", rest))
    prior = math.log(FILTER_PRIOR["eq"] * MENTION_ODDS)
    named = [_filter(name, op, value, "eq") for op, value in out]
    return [Option(prior, o.steps, o.label + REQUESTED) for o in named]


REQUESTED = " (requested)"
"""The end of the label of a filter the user's request names (:func:`requested`)."""


def requested(option: Option) -> bool:
    """Whether ``option`` is a filter the user's request names (:func:`_requested`), one row per
    key when it says only each record's latest row counts (:func:`cleanings`), or a left join (or a
    plan of joins with one) when it keeps rows a lookup lacks (:func:`joins`)."""
    return option.label.endswith(REQUESTED)


def _requested_bounds(
    frame: pd.DataFrame, facts: Mapping[str, ColumnFacts], request: Request
) -> dict[str, list[tuple[str, float]]]:
    """The request's bounds on each number column: on the columns its words name best
    (:meth:`.request.Request.placed`); one whose words name no number column ("30 cubic metres or
    more" of ``Vol (m3)``) on each number column whose values lie on both sides of it (the example
    rows decide between them)."""
    numbers = [name for name, f in facts.items() if f.kind == "number" and f.distinct >= 2]
    out = request.placed(numbers)
    for op, value in request.unplaced(numbers):
        for name in (n for n in numbers if frame[n].min() < value <= frame[n].max()):
            out.setdefault(name, []).append((op, value))
    return out


def _repeats(counts: pd.Series) -> bool:
    """Whether a text column holds a category to filter on: few values for its rows, or most of
    its values written more than once; not free text or names written once per row."""
    return bool(len(counts) * 2 <= counts.sum() or (counts > 1).sum() * 2 >= len(counts))


def _shown_values(column: pd.Series, shown: pd.Series | None) -> pd.Series | None:
    """The example rows' values of the target column named like ``column`` when they are its row
    values (every one occurs in it, up to the decimals the examples show), else None."""
    if shown is None:
        return None
    shown = shown.dropna()
    if shown.empty:
        return None
    numeric = pd.api.types.is_numeric_dtype(column) and pd.api.types.is_numeric_dtype(shown)
    if not values_occur(shown, column, decimals_shown(shown) if numeric else 0):
        return None
    return shown if numeric else shown.astype(str)


def _rows_shown(frame: pd.DataFrame, examples: pd.DataFrame, shown: Mapping[str, pd.Series]) -> bool:
    """Whether each example row occurs among ``frame``'s rows on the columns in ``shown``: its
    numbers are then row values, not a per-group sum that happens to equal some row's value."""
    columns = [name for name in shown if name in examples.columns]
    for _, example in examples[columns].iterrows():
        match = np.ones(len(frame), dtype=bool)
        for name in columns:
            value = example[name]
            if pd.isna(value):
                continue
            if _is_number(shown[name]):
                digits = decimals_shown(shown[name])
                match &= np.round(frame[name].to_numpy(dtype=float), digits) == round(float(value), digits)
            else:
                match &= frame[name].astype(str).to_numpy() == str(value)
        if not match.any():
            return False
    return True


def _is_number(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _filter(column: str, op: str, value: Any, kind: str) -> Option:
    duty = FilterDuty(column=column, op=op, value=value)
    return Option(math.log(FILTER_PRIOR[kind]), (Step(Role.FILTER, duty),), f"{column} {op} {value}")


def _value_sets(counts: pd.Series, shown: pd.Series | None) -> list[tuple[tuple[str, ...], bool]]:
    """Sets of values an ``in`` filter keeps, and whether they are what the example rows show:
    those the example rows show (when there are two or more and fewer than all), and pairs and
    triples of the commonest values."""
    values = [str(v) for v in counts.index]
    sets: dict[tuple[str, ...], bool] = {}
    if shown is not None:
        seen = sorted({str(v) for v in shown.dropna()} & set(values))
        if 2 <= len(seen) <= len(values) / 2:
            sets[tuple(seen)] = True
    common = values[:6]
    for size in (2, 3):
        if size < len(values):
            for c in itertools.combinations(common, size):
                sets.setdefault(tuple(sorted(c)), False)
    return list(sets.items())


def _thresholds(values: np.ndarray, keep: int = 8) -> list[tuple[float, float]]:
    """Cut points between the data's distinct values: for each gap, its roundest number (a
    threshold a person would write) and how round it is (1 for a power of ten, less for others);
    the ``keep`` roundest."""
    distinct = np.unique(values)
    scale = float(np.abs(distinct).max()) if len(distinct) else 1.0
    cuts = []
    for low, high in itertools.pairwise(distinct.tolist()):
        value, roundness = _roundest(low, high, scale)
        cuts.append((roundness, value))
    cuts.sort(key=lambda c: -c[0])
    return [(value, roundness) for roundness, value in cuts[:keep]]


def _roundest(low: float, high: float, scale: float) -> tuple[float, float]:
    """The roundest number in ``(low, high]`` and its roundness in (0, 1], relative to the
    column's ``scale`` (its largest magnitude): 100 is round for prices up to 900, 5 is not."""
    top = math.floor(math.log10(max(scale, abs(low), abs(high), 1e-9)))
    for exponent in range(top + 1, -4, -1):
        step = 10.0**exponent
        for multiple, roundness in ((1, 1.0), (5, 0.8), (2, 0.6), (25, 0.5)):
            unit = step * multiple / (10 if multiple == 25 else 1)
            candidate = math.floor(high / unit) * unit
            if low < candidate <= high:
                return round(candidate, 6), roundness * 0.7 ** max(0, top - exponent)
    return high, 0.05
