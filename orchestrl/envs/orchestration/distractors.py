"""Distractor duties: plausible candidates the task does not need.

Every role's candidate list is the base duty, the reference duties and distractors drawn from
these pools (the generator keeps only distractors the public evidence rejects, so the analysis
stays unambiguous). Pools cover the domain's columns and vocabularies: filters on every category
value and on number quantiles, dedups on keys and categories, joins between mismatched columns,
arithmetic on every pair of numbers, aggregates of every measure by every category, top-k on
every number and k, and near misses of the reference select.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.domains import ALIASES, Domain
from orchestrl.envs.orchestration.spec import (
    AggregateDuty,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    SelectDuty,
    TopKDuty,
)


def distractor_pool(
    role: Role,
    d: Domain,
    sources: dict[str, pd.DataFrame],
    reference_select: SelectDuty | None,
    final: pd.DataFrame,
    rng: np.random.Generator,
) -> list[tuple[type, dict[str, Any]]]:
    """A shuffled pool of plausible but (mostly) wrong duties for ``role``, built lazily:
    ``(duty class, kwargs)`` pairs, some of which may fail validation. ``final`` is the target
    as the pipeline produces it (its aggregate columns seed top-k candidates) and
    ``reference_select`` the reference's select duty, if any (its near misses seed select)."""
    frames = list(sources.values())
    text_cols = [(i, c) for i, f in enumerate(frames) for c in f.columns if c in _categoricals(d)]
    num_cols = [(i, c) for i, f in enumerate(frames) for c in f.columns if c in _numbers(d)]
    pool: list[Any] = []
    if role is Role.FILTER:
        for _, c in text_cols:
            for v in _vocabulary(d, c):
                pool += [
                    _lazy(FilterDuty, column=c, op="eq", value=v),
                    _lazy(FilterDuty, column=c, op="ne", value=v),
                ]
            pool.append(_lazy(FilterDuty, column=c, op="notnull"))
        for i, c in num_cols:
            values = ops.as_numbers(frames[i][c], "large").to_numpy(dtype="float64", na_value=np.nan)
            for t in np.round(np.nanquantile(values, (0.15, 0.5, 0.85)), 0).tolist():
                pool += [
                    _lazy(FilterDuty, column=c, op="gt", value=t),
                    _lazy(FilterDuty, column=c, op="lt", value=t),
                ]
    elif role is Role.DEDUP:
        for f in frames:
            cols = [c for c in f.columns if c in _categoricals(d) or c in _keys(d) or c == d.fact_id]
            pool += [_lazy(DedupDuty, subset=(c,)) for c in cols]
            pool += [_lazy(DedupDuty, subset=pair) for pair in combinations(cols, 2)]
    elif role is Role.JOIN:
        lefts = [d.dims[0].key, d.dims[1].key, d.cat, d.status]
        rights = [c for dim in d.dims for c in (dim.key, dim.cat, dim.cat2)]
        pool += [_lazy(JoinDuty, left_on=a, right_on=b) for a in lefts for b in rights]
    elif role is Role.DERIVE:
        numbers = sorted({c for _, c in num_cols} | {d.n1, d.n2})
        for a, b in combinations(numbers, 2):
            for op in ("mul", "add", "sub", "div"):
                pool.append(_lazy(DeriveDuty, name=f"{a}_{op}_{b}", op=op, left=a, right=b))
    elif role is Role.AGGREGATE:
        by_cols = sorted({c for _, c in text_cols})
        measures = sorted({c for _, c in num_cols} | {d.derived})
        for by in by_cols:
            for column in measures:
                for fn in ("sum", "mean", "max"):
                    pool.append(_lazy(AggregateDuty, by=(by,), column=column, fn=fn, name=f"{fn}_{column}"))
            pool.append(
                _lazy(AggregateDuty, by=(by,), column=d.fact_id, fn="count", name=f"count_{d.fact_id}")
            )
    elif role is Role.TOPK:
        aggregates = {str(c) for c in final.columns if str(c).startswith(("sum_", "mean_", "max_", "count_"))}
        columns = sorted({c for _, c in num_cols} | {d.derived} | aggregates)
        for c in columns:
            for k in range(2, 11):
                pool.append(_lazy(TopKDuty, column=str(c), k=k))
    else:
        pool += _select_pool(d, sources, reference_select, final, rng)
    order = rng.permutation(len(pool))
    return [pool[i] for i in order]


def _select_pool(
    d: Domain,
    sources: dict[str, pd.DataFrame],
    reference: SelectDuty | None,
    final: pd.DataFrame,
    rng: np.random.Generator,
) -> list[tuple[type, dict[str, Any]]]:
    pool = []
    base_cols = [str(c) for c in final.columns]
    if reference is not None and reference.columns:
        mapping = list(reference.columns)
        if len(mapping) > 1:
            for i in range(len(mapping)):
                pool.append(_lazy(SelectDuty, columns=tuple(mapping[:i] + mapping[i + 1 :])))
        pool.append(_lazy(SelectDuty, columns=tuple((old, old) for old, _ in mapping)))
        pool.append(_lazy(SelectDuty, columns=tuple((old, f"{new}_out") for old, new in mapping)))
    fact_cols = [str(c) for c in next(iter(sources.values())).columns]
    for _ in range(12):
        cols = list(dict.fromkeys(str(c) for c in rng.choice(fact_cols + base_cols, int(rng.integers(2, 5)))))
        renamed = str(rng.choice(cols))
        mapping = tuple((c, ALIASES.get(c, f"{c}_out") if c == renamed else c) for c in cols)
        if len({new for _, new in mapping}) == len(mapping):
            pool.append(_lazy(SelectDuty, columns=mapping))
    return pool


def _lazy(cls: type, **kwargs: Any) -> tuple[type, dict[str, Any]]:
    """A distractor, built only if drawn (pools are large, few are used)."""
    return cls, kwargs


def _categoricals(d: Domain) -> tuple[str, ...]:
    return (d.status, d.cat, *(c for dim in d.dims for c in (dim.cat, dim.cat2)))


def _numbers(d: Domain) -> tuple[str, ...]:
    return (d.n1, d.n2, *(dim.num for dim in d.dims))


def _keys(d: Domain) -> tuple[str, ...]:
    return tuple(dim.key for dim in d.dims)


def _vocabulary(d: Domain, column: str) -> tuple[str, ...]:
    if column == d.status:
        return d.status_values
    if column == d.cat:
        return d.cat_values
    for dim in d.dims:
        if column == dim.cat:
            return dim.cat_values
        if column == dim.cat2:
            return dim.cat2_values
    return ()
