"""Column profiles: what a data engineer reads off a source table before writing any code.

For every column: its values as the large capacity reads them (text normalised, numbers parsed out
of money formats), missing values (blank text counts), and statistics: null share, text dirt (share
of values that normalising changes: case, stray spaces), number dirt (share of values only the
large capacity parses: ``'$1,204.50'``), distinct share and repeated share; and its kind: a key
(near-unique text or integers, mostly filled), a category (12 values or fewer) or a number
(more than two values).
Computed from the data alone, once per table (memoised by identity).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops

SKIP_COLUMNS = ("batch",)
"""Bookkeeping columns no duty is proposed on."""
MAX_CATEGORY_VALUES = 12
_CACHE: OrderedDict[int, tuple[pd.DataFrame, dict[str, ColumnProfile]]] = OrderedDict()
_CACHE_SIZE = 8192


@dataclass(frozen=True)
class ColumnProfile:
    name: str
    text: pd.Series  # the values as medium/large capacity compares them (numbers unchanged)
    numbers: pd.Series | None  # float64 as the large capacity parses them; None for text
    missing: np.ndarray  # bool per row; blank text is missing
    key: bool
    category: bool
    number: bool
    null_frac: float
    blank_frac: float  # present but blank text (missing only once normalised)
    dirt_text: float
    dirt_num: float
    distinct_frac: float
    repeated_frac: float  # rows whose (normalised) value an earlier row already has

    @property
    def numeric(self) -> bool:
        return self.numbers is not None


def _missing(series: pd.Series) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(series):
        return series.isna().to_numpy()
    values = series.to_numpy(dtype=object, na_value=None)
    return np.array([v is None or not str(v).strip() for v in values], dtype=bool)


def _profile_column(name: str, series: pd.Series) -> ColumnProfile:
    missing = _missing(series)
    present = max(int((~missing).sum()), 1)
    rows = max(len(series), 1)
    numbers: pd.Series | None = None
    dirt_text = dirt_num = 0.0
    if pd.api.types.is_bool_dtype(series):
        text = series
    elif pd.api.types.is_numeric_dtype(series):
        numbers, text = series.astype("float64"), series
    else:
        raw = series.to_numpy(dtype=object, na_value=None)
        parsed = ops.as_numbers(series, "large")
        if (~missing).sum() and parsed.notna().sum() >= 0.8 * (~missing).sum():
            numbers, text = parsed.astype("float64"), series
            plain = pd.to_numeric(series, errors="coerce").notna().to_numpy()
            dirt_num = float(((~missing) & ~plain).sum()) / present
        else:
            text = ops.as_text(series, "large")
            changed = np.array([v is not None and ops.clean_text(v) != v for v in raw], dtype=bool)
            dirt_text = float((changed & ~missing).sum()) / present
    values = text.where(~missing) if numbers is None else numbers
    distinct = int(values.nunique())
    integer_like = numbers is not None and pd.api.types.is_integer_dtype(series)
    key = (
        (numbers is None or integer_like)
        and distinct >= 0.65 * present
        and missing.mean() < 0.2
        and not pd.api.types.is_bool_dtype(series)
    )
    category = (
        numbers is None and not key and 0 < distinct <= MAX_CATEGORY_VALUES and name not in SKIP_COLUMNS
    )
    number = numbers is not None and not key and distinct > 2 and name not in SKIP_COLUMNS
    repeated = values[~missing].duplicated().sum() / rows if (~missing).any() else 0.0
    return ColumnProfile(
        name=name,
        text=text,
        numbers=numbers,
        missing=missing,
        key=bool(key),
        category=bool(category),
        number=bool(number),
        null_frac=float(missing.sum()) / rows,
        blank_frac=float((missing & ~series.isna().to_numpy()).sum()) / rows,
        dirt_text=dirt_text,
        dirt_num=dirt_num,
        distinct_frac=distinct / rows,
        repeated_frac=float(repeated),
    )


def profile(frame: pd.DataFrame) -> dict[str, ColumnProfile]:
    """Every column's profile (memoised per table object)."""
    hit = _CACHE.get(id(frame))
    if hit is not None and hit[0] is frame:
        _CACHE.move_to_end(id(frame))
        return hit[1]
    out = {str(c): _profile_column(str(c), frame[c]) for c in frame.columns}
    _CACHE[id(frame)] = (frame, out)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out
