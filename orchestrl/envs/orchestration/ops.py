"""Runtime of compiled pipelines: one pure pandas function per role.

This module is inlined verbatim into every compiled pipeline, so a generated ``pipeline.py`` runs
stand-alone, and the task generator (which computes the hidden target in-process) runs exactly the
code the sandbox runs. Keep it self-contained: ``re``, ``numpy`` and ``pandas`` only.

Capacity is the effort a node spends on the columns it compares, groups or parses:

- ``small``: raw values (exact string keys, pandas' own number parsing);
- ``medium``: text normalised first (strip, collapse inner whitespace, casefold; blank = missing),
  so ``'ACME  Corp '`` matches ``'acme corp'``;
- ``large``: medium, plus numbers parsed out of messy text (``'$1,204.50'``).

Normalised columns are written back, so downstream nodes see clean values. On clean data every
capacity gives the same output; only the cost differs. Each op returns ``(frame, work)``:
``work = rows_in * (ROLE_COST[role] + CAPACITY_COST[capacity] * columns_normalised)``, a
deterministic cost of what actually ran (measured CPU time is reported too, but too noisy to
reward: counterfactual contrasts would drown in it). The constants are per-row costs relative to
a plain filter, set from pandas timings on small frames (``benchmarks/sandbox.py`` prints
``cost_model``: what normalising a text column and parsing messy numbers cost in filters; see
``benchmarks/RESULTS.md``, section "LEMON sandbox").
"""

import re

import numpy as np
import pandas as pd

ROLE_COST = {
    "filter": 1.0,
    "dedup": 1.5,
    "join": 2.0,
    "derive": 0.5,
    "aggregate": 3.0,
    "topk": 2.0,
    "select": 0.2,
}
CAPACITY_COST = {"small": 0.0, "medium": 0.5, "large": 1.0}
_MONEY = re.compile(r"[$€£,\s]")
_DIGIT = re.compile(r"\d")


def _is_text(s: pd.Series) -> bool:
    return not (
        pd.api.types.is_numeric_dtype(s)
        or pd.api.types.is_bool_dtype(s)
        or pd.api.types.is_datetime64_any_dtype(s)
    )


def _text_columns(df: pd.DataFrame) -> list:
    return [c for c in df.columns if _is_text(df[c])]


def as_text(s: pd.Series, capacity: str) -> pd.Series:
    """A text column as this capacity sees it (unchanged at ``small`` or for non-text columns)."""
    if capacity == "small" or not _is_text(s):
        return s
    out = [clean_text(v) for v in s.to_numpy(dtype=object, na_value=None)]
    return pd.Series(out, index=s.index, name=s.name, dtype="str")


def clean_text(value):
    if value is None or (isinstance(value, float) and value != value):
        return None
    return " ".join(str(value).split()).casefold() or None


def as_numbers(s: pd.Series, capacity: str) -> pd.Series:
    """A column as numbers; what cannot be parsed at this capacity becomes NaN."""
    if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
        return s
    if capacity == "small":
        return pd.to_numeric(s, errors="coerce")
    values = s.to_numpy(dtype=object, na_value=None)
    if capacity == "large":
        text = [None if v is None else _MONEY.sub("", str(v)) for v in values]
    else:
        text = [None if v is None else str(v).strip() for v in values]
    return pd.to_numeric(pd.Series(text, index=s.index, name=s.name, dtype=object), errors="coerce")


def _work(role: str, rows: int, capacity: str, normalised: int) -> float:
    return float(rows) * (ROLE_COST[role] + CAPACITY_COST[capacity] * normalised)


def _first(df: pd.DataFrame, numeric: bool) -> str:
    for name in df.columns:
        if pd.api.types.is_numeric_dtype(df[name]) == numeric:
            return str(name)
    raise KeyError(f"no {'numeric' if numeric else 'text'} column in {list(df.columns)}")


def _normalised(df: pd.DataFrame, columns, capacity: str, numeric: bool = False) -> pd.DataFrame:
    """``df`` with ``columns`` as this capacity reads them (a shallow copy only when one changes)."""
    out = df
    for c in columns:
        before = out[c]
        after = as_numbers(before, capacity) if numeric else as_text(before, capacity)
        if after is not before:
            if out is df:
                out = df.copy(deep=False)
            out[c] = after
    return out


def op_filter(df: pd.DataFrame, column, op: str, value, capacity: str):
    """Keeps rows whose ``column`` satisfies ``op value``; base duty (no column): complete rows."""
    out, keep = filter_mask(df, column, op, value, capacity)
    normalised = 1 if column is not None else len(_text_columns(df))
    return out[keep], _work("filter", len(df), capacity, normalised)


def filter_mask(df: pd.DataFrame, column, op: str, value, capacity: str):
    """``op_filter``'s rows as a boolean mask over ``df``'s rows, beside ``df`` as this capacity
    reads it (what the kept rows are taken from)."""
    if column is None:
        out = _normalised(df, _text_columns(df), capacity)
        return out, out.notna().all(axis=1)
    if op in ("gt", "ge", "lt", "le"):
        out = _normalised(df, [column], capacity, numeric=True)
        keep = getattr(out[column], op)(value)
    else:
        out = _normalised(df, [column], capacity)
        if op == "notnull":
            keep = out[column].notna()
        elif op == "eq":
            keep = out[column] == value
        elif op == "ne":
            keep = (out[column] != value) & out[column].notna()
        elif op == "in":
            keep = out[column].isin(list(value))
        else:
            raise ValueError(f"unknown filter op {op!r}")
    return out, keep.fillna(False).astype(bool)


def op_dedup(df: pd.DataFrame, subset, capacity: str):
    """Drops rows repeating an earlier row on ``subset`` (all columns for the base duty)."""
    cols = list(df.columns) if subset is None else list(subset)
    out = _normalised(df, cols, capacity)
    return out.drop_duplicates(subset=cols, keep="first"), _work("dedup", len(df), capacity, len(cols))


def op_join(left: pd.DataFrame, right: pd.DataFrame, left_on, right_on, how: str, capacity: str):
    """Merges on ``left_on == right_on``; the base duty joins on every shared column name."""
    if left_on is None:
        lkeys = rkeys = [c for c in left.columns if c in set(right.columns)]
        if not lkeys:
            raise KeyError("no shared column to join on")
    else:
        lkeys, rkeys = [left_on], [right_on]
    work = _work("join", len(left) + len(right), capacity, 1)
    left, right = _normalised(left, lkeys, capacity), _normalised(right, rkeys, capacity)
    if left_on is None or left_on == right_on:
        return left.merge(right, on=lkeys, how=how, suffixes=("", "_right")), work
    return left.merge(right, left_on=left_on, right_on=right_on, how=how, suffixes=("", "_right")), work


_NUMBER_TEXT = re.compile(r"[$€£¥,%\s]")
_CURRENCY_CODE = re.compile(
    r"^[A-Z]{3}(?P<before>\s*)(?=[-+]?[$€£¥]?[\d.])|(?<=[\d.])(?P<after>\s*)[A-Z]{3}$"
)
"""Three capitals before or after a number: a currency code (``'EUR 12'``, ``'12.50 GBP'``) where
a space or a written-out amount (decimals, separators) says so; glued to bare digits
(``'ACC-1051'``, ``'SKU1001'``) they are an identifier, and ``'Bay 12'`` is a name."""
NA_TOKENS = frozenset({"", "-", "--", "n/a", "na", "nan", "null", "none", "?"})


def parse_number(value):
    """A number written as text (``'$1,234.50'``, ``'12%'``, ``'(30)'``, ``'EUR 12'``); None for
    NA tokens and what does not parse."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float, np.integer, np.floating)):
        return None if value != value else float(value)
    text = str(value).strip()
    if text.casefold() in NA_TOKENS:
        return None
    negative = text.startswith("(") and text.endswith(")")
    text = text.strip("()")
    code = _CURRENCY_CODE.search(text)
    if code is not None:
        rest = text[: code.start()] + text[code.end() :]
        if not (code.group("before") or code.group("after") or re.search(r"[.,]", rest)):
            return None
        text = rest
    text = _NUMBER_TEXT.sub("", text)
    try:
        number = float(text)
    except ValueError:
        return None
    return -number if negative else number


def _trim(value: str) -> str:
    return " ".join(value.split())


def _title(value: str) -> str:
    """Capitalised words (``'fresh produce'``, ``'Fresh produce'``, ``'FRESH PRODUCE'``); a value
    with a capital inside a word (``'MacLeod'``, ``'iPhone'``) stays as it is."""
    inner = any(c.isupper() for word in value.split() for c in word[1:])
    return value.title() if value == value.upper() or not inner else value


def _rewrite(s: pd.Series, op: str, digits, fmt) -> pd.Series:
    """One column rewritten by a unary derive op (missing values stay missing)."""
    if op == "number":
        return pd.Series([parse_number(v) for v in s.to_numpy(dtype=object)], index=s.index, dtype="float64")
    if op == "round":
        return pd.to_numeric(s, errors="coerce").round(int(digits))
    values = s.to_numpy(dtype=object, na_value=None)
    if op == "date":
        parsed = pd.to_datetime(pd.Series(values, index=s.index, dtype=object), format=fmt, errors="coerce")
        text = parsed.dt.strftime("%Y-%m-%d %H:%M:%S" if "%H" in fmt else "%Y-%m-%d")
        return text.astype(object).where(parsed.notna(), None)
    change = {"trim": _trim, "lower": str.lower, "upper": str.upper, "title": _title}[op]
    return pd.Series([None if v is None else change(str(v)) for v in values], index=s.index, dtype=object)


def binary(a: pd.Series, b: pd.Series, op: str) -> pd.Series:
    """``a <op> b`` as a derive node computes it on two numeric columns (``BINARY_OPS``); a ratio's
    infinities are missing."""
    if op == "mul":
        return a * b
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "div":
        return (a / b).replace([np.inf, -np.inf], np.nan)
    raise ValueError(f"unknown derive op {op!r}")


def op_derive(df: pd.DataFrame, name: str, op: str, left, right, capacity: str, digits=None, fmt=None):
    """Adds ``name = left <op> right``, or ``name = <op>(left)`` for a rewrite of one column
    (``number``, ``date``, ``trim``, ``lower``, ``upper``, ``title``, ``round``); base duty: the
    number of filled fields of each row."""
    if op == "nonnull":
        out = df.copy(deep=False)
        out[name] = df.notna().sum(axis=1).astype("int64")
        return out, _work("derive", len(df), capacity, 0)
    if right is None:
        out = df.copy(deep=False)
        out[name] = _rewrite(df[left], op, digits, fmt)
        return out, _work("derive", len(df), capacity, 1)
    out = _normalised(df, [left, right], capacity, numeric=True)
    value = binary(out[left], out[right], op)
    out = out.copy(deep=False) if out is df else out
    out[name] = value.astype("float64")
    return out, _work("derive", len(df), capacity, 2)


def op_aggregate(df: pd.DataFrame, by, column, fn: str, name: str, capacity: str, more=()):
    """One row per ``by`` group with ``name = fn(column)`` and one column per ``(name, fn,
    column)`` of ``more``; base duty: row count per first column."""
    keys = [str(df.columns[0])] if by is None else list(by)
    measures = [(name, fn, column), *more]
    out = _normalised(df, keys, capacity)
    numeric = [c for _, f, c in measures if f in ("sum", "mean", "max", "min")]
    out = _normalised(out, list(dict.fromkeys(numeric)), capacity, numeric=True)
    groups = out.groupby(keys, dropna=False, sort=True)
    frame = None
    for label, f, c in measures:
        result = (groups.size() if f == "size" else groups[c].agg(f)).reset_index(name=label)
        if f in ("sum", "mean", "max", "min"):
            result[label] = result[label].astype("float64")
        frame = result if frame is None else frame.assign(**{label: result[label].to_numpy()})
    read = len(keys) + sum(f != "size" for _, f, _ in measures)
    return frame, _work("aggregate", len(df), capacity, read)


def sorts_as_text(s: pd.Series) -> bool:
    """A text column sorted as text: words, none of which reads as a number (names, in
    alphabetical order), or digits written in one fixed shape (``2026-10-01``, ``3:04:12``: dates
    and times in time order)."""
    values = s.dropna()
    if not _is_text(s) or values.empty:
        return False
    shapes = {_DIGIT.sub("9", str(v)) for v in values}
    shape = next(iter(shapes))
    if len(shapes) == 1 and "9" in shape and not any(c.isalpha() for c in shape):
        return True
    return all(parse_number(v) is None for v in values.unique())


def op_topk(df: pd.DataFrame, column, k, ascending: bool, capacity: str):
    """The ``k`` rows with the largest (or smallest) ``column`` (every row, sorted, when ``k`` is
    None): numbers, or names, dates and times (:func:`sorts_as_text`); ties broken
    by the other columns, so the kept rows never depend on the input's row order. Base duty: top
    10 by the first number."""
    column = _first(df, numeric=True) if column is None else column
    out = _normalised(df, [column], capacity, numeric=not sorts_as_text(df[column]))
    others = [c for c in out.columns if c != column]
    order = out.sort_values(
        [column, *others], ascending=[ascending] + [True] * len(others), na_position="last", kind="mergesort"
    )
    return (order if k is None else order.head(int(k))), _work("topk", len(df), capacity, 1)


def op_select(df: pd.DataFrame, columns, capacity: str):
    """Keeps and renames columns (``{old: new}``); the base duty keeps everything."""
    if columns is None:
        return df, _work("select", len(df), capacity, 0)
    mapping = dict(columns)
    out = df[list(mapping)].rename(columns=mapping)
    return out, _work("select", len(df), capacity, 0)
