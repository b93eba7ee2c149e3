"""Comparing tables up to row order, column order, dtype spelling and float tolerance.

Rows are hashed after a canonical conversion (numbers -> float64 rounded to ``DECIMALS``, text ->
str, missing -> one marker), so equality is a sorted-hash comparison and overlap is a multiset
intersection. When hashes differ only because a float sits on a rounding boundary, a sorted
``isclose`` comparison decides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

DECIMALS = 6
RTOL = 1e-6
_MISSING = "\x00<NA>"


def _is_number(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)


def canonical_column(s: pd.Series) -> np.ndarray:
    """The column as float64 (rounded) or as object array of str with a missing marker."""
    if _is_number(s):
        values = np.asarray(s.astype("float64"), dtype="float64")
        values = np.round(values, DECIMALS)
        values[values == 0.0] = 0.0  # -0.0 and 0.0 hash alike
        return values
    if pd.api.types.is_string_dtype(s.dtype) and not pd.api.types.is_object_dtype(s.dtype):
        return s.to_numpy(dtype=object, na_value=_MISSING)
    values = s.to_numpy(dtype=object, copy=True)
    missing = pd.isna(values)
    if pd.api.types.infer_dtype(values, skipna=True) == "string":
        values[missing] = _MISSING
        return values
    return np.array(
        [_MISSING if gone else str(v) for v, gone in zip(values, missing, strict=True)], dtype=object
    )


def row_hashes(frame: pd.DataFrame, columns: list[str] | None = None) -> np.ndarray:
    """One uint64 per row over ``columns`` (sorted names; default all), independent of column order."""
    names = sorted(str(c) for c in frame.columns) if columns is None else sorted(columns)
    return _combine([canonical_column(frame[n]) for n in names], len(frame))


def _combine(columns: list[np.ndarray], rows: int) -> np.ndarray:
    out = np.zeros(rows, dtype=np.uint64)
    for values in columns:
        out = (out * np.uint64(1_000_003)) ^ pd.util.hash_array(values, categorize=False)
    return out


@dataclass(frozen=True)
class Match:
    exact: bool
    credit: float  # 1.0 when exact, else 0.5 * column Jaccard * row overlap on shared columns
    column_overlap: float
    row_overlap: float


class TargetIndex:
    """A target table prepared once for many comparisons."""

    def __init__(self, target: pd.DataFrame) -> None:
        self.frame = target
        self.columns = frozenset(str(c) for c in target.columns)
        self.rows = len(target)
        self._canon = {str(c): canonical_column(target[c]) for c in target.columns}
        self._sorted = np.sort(self._hash(self._canon, sorted(self.columns)))

    def _hash(self, canon: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
        rows = len(next(iter(canon.values()))) if canon else 0
        return _combine([canon[n] for n in names], rows)

    def compare(self, frame: pd.DataFrame) -> Match:
        columns = frozenset(str(c) for c in frame.columns)
        if len(columns) != len(frame.columns) or not columns:
            return Match(False, 0.0, 0.0, 0.0)
        canon = {str(c): canonical_column(frame[c]) for c in frame.columns}
        shared = sorted(self.columns & columns)
        col_overlap = len(shared) / len(self.columns | columns)
        if columns == self.columns and len(frame) == self.rows:
            ours = self._hash(canon, shared)
            if np.array_equal(np.sort(ours), self._sorted) or self._close(canon, shared):
                return Match(True, 1.0, 1.0, 1.0)
        if not shared:
            return Match(False, 0.0, 0.0, 0.0)
        common = _multiset_intersection(self._hash(canon, shared), self._hash(self._canon, shared))
        row_overlap = common / max(len(frame), self.rows, 1)
        return Match(False, 0.5 * col_overlap * row_overlap, col_overlap, row_overlap)

    def _close(self, canon: dict[str, np.ndarray], columns: list[str]) -> bool:
        """Equal up to float tolerance (for values on a rounding boundary): the non-float parts
        must match exactly as multisets; rows are then aligned by them and floats compared."""
        floats = [c for c in columns if canon[c].dtype == np.float64 and self._canon[c].dtype == np.float64]
        if not floats:
            return False
        others = [c for c in columns if c not in floats]
        ours, theirs = self._hash(canon, others), self._hash(self._canon, others)
        if not np.array_equal(np.sort(ours), np.sort(theirs)):
            return False
        a = np.column_stack([canon[c] for c in floats])
        b = np.column_stack([self._canon[c] for c in floats])
        order_a = np.lexsort((*np.round(a, 3).T[::-1], ours))
        order_b = np.lexsort((*np.round(b, 3).T[::-1], theirs))
        return bool(
            np.array_equal(ours[order_a], theirs[order_b])
            # canonical values are rounded: one unit in the last decimal is the boundary case
            and np.allclose(a[order_a], b[order_b], rtol=RTOL, atol=1.01 * 10.0**-DECIMALS, equal_nan=True)
        )


def _multiset_intersection(a: np.ndarray, b: np.ndarray) -> int:
    ua, ca = np.unique(a, return_counts=True)
    ub, cb = np.unique(b, return_counts=True)
    _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
    return int(np.minimum(ca[ia], cb[ib]).sum())


def held_share(
    examples: pd.DataFrame, output: pd.DataFrame | None, hashes: np.ndarray | None = None
) -> float:
    """Share of the example rows an output holds, as a multiset (0 unless the output has the
    examples' columns); ``hashes``: the examples' :func:`row_hashes`, when already computed."""
    columns = sorted(str(c) for c in examples.columns)
    if output is None or sorted(str(c) for c in output.columns) != columns:
        return 0.0
    wanted = row_hashes(examples, columns) if hashes is None else hashes
    values, counts = np.unique(row_hashes(output, columns), return_counts=True)
    have = dict(zip(values.tolist(), counts.tolist(), strict=True))
    held = 0
    for h in wanted.tolist():
        if have.get(h, 0) > 0:
            have[h] -= 1
            held += 1
    return held / max(len(wanted), 1)


def same_table(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Same columns (in order), same rows in the same order, values equal after canonicalisation."""
    if [str(c) for c in a.columns] != [str(c) for c in b.columns] or len(a) != len(b):
        return False
    for x, y in zip(a.items(), b.items(), strict=True):
        left, right = x[1], y[1]
        if left.dtype == right.dtype and np.array_equal(left.index, right.index) and left.equals(right):
            continue
        cl, cr = canonical_column(left), canonical_column(right)
        if cl.dtype != cr.dtype or not np.array_equal(cl, cr, equal_nan=cl.dtype == "float64"):
            return False
    return True
