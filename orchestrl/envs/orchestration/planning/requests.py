"""What a person writes when they ask for the wanted table: a generated task's request in words.

People who bring an export often say what they want in a sentence or two beside the example rows
("total sales per region, not the cancelled ones; orders of 50 or more"). :func:`describe` writes
such a request for a generated task from its hidden pipeline: the wanted table in a phrase (its
measures, per which keys, highest first) and, each with probability :data:`NAMED`, the filters it
keeps rows by, in the ways :mod:`..synthesis.request` reads (a value kept or left out, a bound with
the column's words beside it, a column that must be filled), and of a change log the pipeline counts
once per record, that only each record's latest row counts (:data:`LATEST`), and of a left join,
that rows the lookup lacks are kept (:data:`UNMATCHED`), each with probability :data:`ROWS_SAID`.
Only English function words are used; every other word comes from the task's own column names and
values. A request is drawn for a share of tasks (:data:`DESCRIBED`); the rest have only the example
rows, as many users give.

People also say more than the pipeline needs, and a reader of their words proposes those filters
too: a kept value often comes with the values it leaves out ("only Posted, not Pending or
Reversed": :data:`REDUNDANT`), which are implied by it, and an aside can name a value of a column
nothing filters on ("in-app feedback is in there too": :data:`ASIDE`). So a filter the request
names is likely, not certain; the example rows decide, as on users' requests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.spec import Role
from orchestrl.envs.orchestration.synthesis.proposer import Step, categories

DESCRIBED = 0.75
"""Share of generated tasks that come with a request in words."""
NAMED = 0.75
"""Probability that a request names one of the pipeline's filters (people leave some out)."""
REDUNDANT = 0.35
"""Probability that a named kept value comes with one or two of the column's other values, left out
in words (implied by the kept value)."""
ROWS_SAID = 0.9
"""Probability that a request says which rows count where the data leaves it open: that only each
record's latest row of a change log counts, or that rows a lookup lacks are kept (people nearly
always say so)."""
ASIDE = 0.15
"""Probability that a request names, in an aside, a value of a category column nothing filters on."""

KEEP = ("only {v}", "just the {v} ones", "for {v}", "{v} only", "the {v} ones")
LEAVE_OUT = ("not {v}", "leave out {v}", "excluding {v}", "ignore the {v} ones", "{v} doesn't count")
AT_LEAST = ("{c} of {n} or more", "at least {n} {c}", "{c} {n} and above", "with {c} of at least {n}")
BELOW = ("{c} under {n}", "less than {n} {c}", "with {c} below {n}", "{c} lower than {n}")
FILLED = ("skip rows with no {c}", "leave out those without a {c}", "ignore any with no {c}")
ALSO = ("{v} ones included", "including {v}", "{v} as well", "{v} are in there too")
LATEST = (
    "the export lists every change, newest first, so only each {k}'s latest row counts",
    "go by each {k}'s latest status",
    "only the latest version of each {k} counts",
    "the log has every update with the newest at the top, so take each {k}'s most recent row",
    "it's a change log, newest change first: count each {k} once, as it currently stands",
)
UNMATCHED = (
    "with the {t} details where we have them",
    "keep the ones we can't match to {t} too",
    "even if they aren't in {t}",
    "keep them in even without a match in {t}",
)
PER = ("{m} per {k}", "{m} by {k}", "for each {k}, the {m}")
ORDER = ("highest first", "biggest first", "sorted by {m}")


def describe(
    filters: Sequence[Step],
    shape: Sequence[Step],
    rng: np.random.Generator,
    table: pd.DataFrame | None = None,
    latest: str | None = None,
    unmatched: str | None = None,
) -> str | None:
    """A request for the wanted table that ``filters`` then ``shape`` make from ``table`` (the rows
    the filters read; without it, no value beyond the pipeline's is named), or None (no request:
    :data:`DESCRIBED`); ``latest``: the key a change log is counted once per (its latest row);
    ``unmatched``: the lookup whose unmatched rows are kept (a left join)."""
    if rng.random() >= DESCRIBED:
        return None
    sentences = [_wanted(shape, rng)]
    for step in filters:
        if rng.random() < NAMED:
            sentences.append(_filter(step, rng))
            if table is not None and step.duty.op == "eq" and rng.random() < REDUNDANT:
                sentences.append(_left_out(step, table, rng))
    if latest is not None and rng.random() < ROWS_SAID:
        sentences.append(_pick(LATEST, rng).format(k=_words(latest)))
    if unmatched is not None and rng.random() < ROWS_SAID:
        sentences.append(_pick(UNMATCHED, rng).format(t=_words(unmatched)))
    if table is not None and rng.random() < ASIDE:
        sentences.append(_aside(filters, table, rng))
    said = [s[0].upper() + s[1:] for s in sentences if s]
    return ". ".join(said) + "." if said else None


def _wanted(shape: Sequence[Step], rng: np.random.Generator) -> str:
    """The wanted table in a phrase: its measures per its keys, or its columns, and its order."""
    kinds = {step.role for step in shape}
    if Role.AGGREGATE in kinds:
        duty = next(s.duty for s in shape if s.role is Role.AGGREGATE)
        measures = [duty.name, *(m[0] for m in duty.more)]
        phrase = _pick(PER, rng).format(m=_and(measures), k=_and(list(duty.by)))
    else:
        select = next((s.duty for s in shape if s.role is Role.SELECT), None)
        columns = [c for c, _ in select.columns] if select is not None else []
        phrase = "the " + _and(columns) if columns else ""
    if Role.TOPK in kinds and rng.random() < 0.6:
        top = next(s.duty for s in shape if s.role is Role.TOPK)
        if top.k is not None:
            phrase = f"top {top.k}: {phrase}"
        elif not top.ascending:
            phrase += ", " + _pick(ORDER, rng).format(m=_words(top.column))
    return phrase


def _filter(step: Step, rng: np.random.Generator) -> str:
    duty = step.duty
    column = _words(duty.column)
    if duty.op == "eq":
        return _pick(KEEP, rng).format(v=_value(duty.value, rng))
    if duty.op == "ne":
        return _pick(LEAVE_OUT, rng).format(v=_value(duty.value, rng))
    if duty.op == "in":
        return _pick(KEEP, rng).format(v=_listed([_value(v, rng) for v in duty.value], "or"))
    if duty.op in ("ge", "gt"):
        return _pick(AT_LEAST, rng).format(c=column, n=_number(float(duty.value), rng))
    if duty.op in ("lt", "le"):
        return _pick(BELOW, rng).format(c=column, n=_number(float(duty.value), rng))
    if duty.op == "notnull":
        return _pick(FILLED, rng).format(c=column.split()[-1] if column else "value")
    return ""


def _left_out(step: Step, table: pd.DataFrame, rng: np.random.Generator) -> str:
    """One or two of the column's other values, left out in words (the kept value implies it)."""
    others = sorted({str(v) for v in table[step.duty.column].dropna()} - {str(step.duty.value)})
    if not others:
        return ""
    picked = rng.choice(others, size=min(len(others), int(rng.integers(1, 3))), replace=False)
    return _pick(LEAVE_OUT, rng).format(v=_listed([_value(v, rng) for v in picked], "and"))


def _aside(filters: Sequence[Step], table: pd.DataFrame, rng: np.random.Generator) -> str:
    """A value of a category column (:func:`.proposer.categories`) no filter reads, named in passing."""
    filtered = {step.duty.column for step in filters}
    named = [c for c in categories(table) if c not in filtered]
    if not named:
        return ""
    values = sorted(str(v) for v in table[named[int(rng.integers(len(named)))]].dropna().unique())
    return _pick(ALSO, rng).format(v=_value(values[int(rng.integers(len(values)))], rng))


def _pick(phrases: Sequence[str], rng: np.random.Generator) -> str:
    return phrases[int(rng.integers(len(phrases)))]


def words(name: Any) -> list[str]:
    """A column name's words, lower case (``'Unit Price'``, ``unit_price``, ``unitPrice``)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(name))
    return [w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def _words(name: str) -> str:
    return " ".join(words(name))


def _value(value: object, rng: np.random.Generator) -> str:
    text = str(value).strip()
    return text.lower() if rng.random() < 0.5 else text


def _number(value: float, rng: np.random.Generator) -> str:
    """``value`` as people write it, with thousands separators or without."""
    return f"{value:,.10g}" if rng.random() < 0.5 else f"{value:.10g}"


def _and(names: Sequence[str]) -> str:
    """Column names in words, listed: "unit price, qty and total"."""
    return _listed([_words(n) for n in names], "and")


def _listed(items: Sequence[str], word: str) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]
