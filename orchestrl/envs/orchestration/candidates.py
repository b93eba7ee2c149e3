"""Candidate duties, proposed from a task's public inputs alone.

Each role gets ``level.duties`` candidates: its base duty first, then duties a data engineer would
consider for these tables (:func:`propose`):

- filter: ``eq`` / ``ne`` on a value that occurs in a category column (5-90% of its rows), ``gt`` /
  ``lt`` at a quartile of a number column (numbers stored as text included), ``notnull`` on a
  column with missing or blank values (always proposed: the data asks for it);
- dedup: on a column or a pair; a near-unique column that repeats (a key with duplicates) is
  always proposed;
- join: every column name a dimension shares with the fact table (always proposed), and pairs of
  differently named text columns (with one table, self-joins on its text columns);
- derive: arithmetic on every pair of number columns, named by the domain's convention;
- aggregate: every measure by every category column (or pair), ``name = fn_column``;
- top-k: every number column, k in 3, 5, 10;
- select: mappings that produce the target's column names from known columns (keeping a name, or
  the domain's usual rename), and near misses of them.

Candidates the inputs call for (marked above as always proposed, and for derive, aggregate and
select those whose names occur in the target's columns) come first (joins in the order of their
tables, aggregates that yield all of the target's columns before those that yield part of them);
the rest are drawn with a seeded generator and follow in the order drawn: the order the solver
meets them in. The team sees the same duties in a canonical order (:func:`canonical`: the base duty,
then by column, operator and value), so an index says which duty it is, never how likely. Nothing
here reads the hidden reference or the hidden target: two tasks with the same public inputs get the
same candidates (a test checks it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations, permutations, product
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.domains import ALIASES, DOMAINS, Domain
from orchestrl.envs.orchestration.profiles import SKIP_COLUMNS, profile
from orchestrl.envs.orchestration.spec import (
    ROLES,
    AggregateDuty,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    SelectDuty,
    TopKDuty,
    base_duty,
)

SOURCED = (Role.FILTER, Role.DEDUP, Role.JOIN)
"""Roles whose candidates depend on the sources only (the others also read the target's columns)."""
FILTER_KIND_WEIGHTS = {"eq": 0.4, "ne": 0.15, "gt": 0.25, "lt": 0.2}


def rename(column: str) -> str:
    """The name a select gives a column it renames: the domain's usual alias, else ``<name>_out``."""
    return ALIASES.get(column, f"{column}_out")


def domain_of(name: str | Domain) -> Domain:
    """The domain a task's public inputs name: one of :data:`.domains.DOMAINS` by name, or a
    :class:`.domains.Domain` given as is (a user's tables, :func:`.byexample.infer_domain`)."""
    if isinstance(name, Domain):
        return name
    found = next((d for d in DOMAINS if d.name == name), None)
    if found is None:
        raise ValueError(f"unknown domain {name!r} (known: {', '.join(d.name for d in DOMAINS)})")
    return found


def propose(
    public: Any, sourced: Mapping[Role, tuple[Any, ...]] | None = None
) -> dict[Role, tuple[Any, ...]]:
    """Every role's candidates for a task's :class:`.tasks.PublicInputs` (``sourced``: what
    :func:`propose_sourced` gave for the same sources, to save computing it again)."""
    d = domain_of(public.domain)
    out = (
        dict(sourced)
        if sourced is not None
        else propose_sourced(public.sources, d, public.level, public.candidate_seed)
    )
    known = _known_columns(public.sources, d)
    target = tuple(public.target_columns)
    k = public.level.duties
    pools: dict[Role, Callable[[], tuple[list[Any], list[Any]]]] = {
        Role.DERIVE: lambda: _derive_pool(public.sources, d, target),
        Role.AGGREGATE: lambda: _aggregate_pool(public.sources, d, target),
        Role.TOPK: lambda: _topk_pool(public.sources, d),
        Role.SELECT: lambda: _select_pool(known, target),
    }
    for role, make in pools.items():
        salient, rest = make()
        out[role] = _choose(role, salient, rest, k, _rng(public.candidate_seed, role))
    return {role: out[role] for role in ROLES}


def canonical(duties: Sequence[Any]) -> tuple[Any, ...]:
    """A role's proposed duties as the team sees them: the base duty (first in every proposal), then
    the others sorted by their fields (column, operator, value, ...), whatever order proposed them."""
    head, *rest = duties
    return (head, *sorted(rest, key=lambda d: json.dumps(d.model_dump(mode="json"), sort_keys=True)))


def propose_sourced(
    sources: Mapping[str, pd.DataFrame], d: Domain, level: Any, seed: tuple[int, ...]
) -> dict[Role, tuple[Any, ...]]:
    """The filter, dedup and join candidates: functions of the sources alone."""
    frames = list(sources.values())
    k = level.duties
    filters = _filter_pool(frames)
    home = {str(c): i for i, f in reversed(list(enumerate(frames))) for c in f.columns}
    weight = functools.partial(_filter_weight, home=home)
    out = {Role.FILTER: _choose(Role.FILTER, *filters, k, _rng(seed, Role.FILTER), weights=weight)}
    out[Role.DEDUP] = _choose(Role.DEDUP, *_dedup_pool(frames, d), k, _rng(seed, Role.DEDUP))
    out[Role.JOIN] = _choose(Role.JOIN, *_join_pool(frames), k, _rng(seed, Role.JOIN))
    return out


def _rng(seed: tuple[int, ...], role: Role) -> np.random.Generator:
    return np.random.default_rng([*seed, 100 + ROLES.index(role)])


def _choose(
    role: Role,
    salient: list[Any],
    rest: list[Any],
    k: int,
    rng: np.random.Generator,
    weights: Callable[[list[Any]], np.ndarray] | None = None,
) -> tuple[Any, ...]:
    """Base duty, then the salient candidates (in their pool's order), then draws from the rest
    (in the order drawn); duplicates and base-equal duties dropped."""
    base = base_duty(role)
    chosen: list[Any] = []
    for duty in salient:
        if len(chosen) < k - 1 and duty not in chosen and duty != base:
            chosen.append(duty)
    taken = {base, *chosen}
    rest = [r for r in dict.fromkeys(rest) if r not in taken]
    while len(chosen) < k - 1 and rest:
        p = weights(rest) if weights else np.full(len(rest), 1.0 / len(rest))
        chosen.append(rest.pop(int(rng.choice(len(rest), p=p / p.sum()))))
    while len(chosen) < k - 1:  # tiny tables: pad with top-k duties that are never right
        filler = TopKDuty(column=None, k=len(chosen) + 1) if role is Role.TOPK else None
        if filler is None:
            break
        chosen.append(filler)
    return (base, *chosen)


# ------------------------------------------------------------------------------ column kinds
def category_columns(frame: pd.DataFrame) -> list[str]:
    return [name for name, p in profile(frame).items() if p.category]


def number_columns(frame: pd.DataFrame) -> list[str]:
    return [name for name, p in profile(frame).items() if p.number]


def _known_columns(sources: Mapping[str, pd.DataFrame], d: Domain) -> list[str]:
    """Every column a pipeline could carry: the sources', derived measures and aggregates."""
    cols = [str(c) for f in sources.values() for c in f.columns]
    derived = [duty.name for duty in _derive_all(sources, d)]
    measures = [*_numbers_of(sources), d.derived]
    aggregates = [f"{fn}_{m}" for m in measures for fn in ("sum", "mean", "max", "min")]
    return list(dict.fromkeys([*cols, *derived, *aggregates, f"count_{d.fact_id}", "count"]))


# ------------------------------------------------------------------------------ pools
def _filter_pool(frames: list[pd.DataFrame]) -> tuple[list[Any], list[Any]]:
    salient, rest = [], []
    for frame in frames:
        columns = profile(frame)
        for c, p in columns.items():
            if c not in SKIP_COLUMNS and p.missing.any():
                salient.append(FilterDuty(column=c, op="notnull"))
        for c in category_columns(frame):
            shares = columns[c].text.value_counts(normalize=True)
            for value, share in shares.items():
                if 0.05 <= share <= 0.9:
                    rest += [FilterDuty(column=c, op="eq", value=str(value))]
                    rest += [FilterDuty(column=c, op="ne", value=str(value))]
        for c in number_columns(frame):
            numbers = columns[c].numbers.dropna()  # type: ignore[union-attr]
            decimals = 0 if numbers.max() - numbers.min() > 20 else 1
            for t in sorted(set(np.round(numbers.quantile([0.25, 0.5, 0.75]).to_numpy(), decimals).tolist())):
                rest += [
                    FilterDuty(column=c, op="gt", value=float(t)),
                    FilterDuty(column=c, op="lt", value=float(t)),
                ]
    return salient, rest


def _filter_weight(rest: list[Any], home: Mapping[str, int]) -> np.ndarray:
    """Each table as likely as any other, and within it each kind as FILTER_KIND_WEIGHTS."""
    counts: dict[tuple[int, str], int] = {}
    for duty in rest:
        counts[home[duty.column], duty.op] = counts.get((home[duty.column], duty.op), 0) + 1
    kinds = {h: sum(FILTER_KIND_WEIGHTS[op] for (g, op) in counts if g == h) for h, _ in counts}
    return np.array(
        [FILTER_KIND_WEIGHTS[d.op] / kinds[home[d.column]] / counts[home[d.column], d.op] for d in rest]
    )


def _dedup_pool(frames: list[pd.DataFrame], d: Domain) -> tuple[list[Any], list[Any]]:
    salient, rest = [], []
    for frame in frames:
        columns = profile(frame)
        cols = [c for c in columns if c not in SKIP_COLUMNS]
        for c in cols:
            if columns[c].key and columns[c].repeated_frac > 0:
                salient.append(DedupDuty(subset=(c,)))
        categories = category_columns(frame)
        rest += [DedupDuty(subset=(c,)) for c in cols if c in categories or columns[c].key]
        rest += [DedupDuty(subset=pair) for pair in combinations(categories, 2)]
    return salient, rest


def _join_pool(frames: list[pd.DataFrame]) -> tuple[list[Any], list[Any]]:
    fact = frames[0]
    salient, rest = [], []
    left_text = [c for c, p in profile(fact).items() if not p.numeric]
    for dim in frames[1:]:
        shared = [str(c) for c in dim.columns if c in fact.columns]
        salient += [JoinDuty(left_on=c, right_on=c) for c in shared]
        right_text = [c for c, p in profile(dim).items() if not p.numeric]
        rest += [
            JoinDuty(left_on=a, right_on=b) for a in dict.fromkeys(left_text) for b in right_text if a != b
        ]
    if len(frames) == 1:  # one table: nothing to join; keys of a self-join keep the list full
        rest += [JoinDuty(left_on=c, right_on=c) for c in left_text]
    return salient, rest


def _numbers_of(sources: Mapping[str, pd.DataFrame]) -> list[str]:
    return list(dict.fromkeys(c for f in sources.values() for c in number_columns(f)))


def _categories_of(sources: Mapping[str, pd.DataFrame]) -> list[str]:
    return list(dict.fromkeys(c for f in sources.values() for c in category_columns(f)))


def _derive_name(d: Domain, op: str, left: str, right: str) -> str:
    natural = (d.derived_op, d.derived_left, d.derived_right)
    if (op, left, right) == natural or (op in ("mul", "add") and (op, right, left) == natural):
        return d.derived
    return f"{left}_{op}_{right}"


def _derive_all(sources: Mapping[str, pd.DataFrame], d: Domain) -> list[DeriveDuty]:
    numbers = _numbers_of(sources)
    out = []
    for a, b in combinations(numbers, 2):
        for op in ("mul", "add", "sub", "div"):
            for left, right in ((a, b), (b, a)) if op in ("sub", "div") else ((a, b),):
                out.append(DeriveDuty(name=_derive_name(d, op, left, right), op=op, left=left, right=right))
    return out


def _mentioned(name: str, target: tuple[str, ...]) -> bool:
    """The target has this column, renamed or not, or an aggregate of it."""
    return name in target or rename(name) in target or any(t.endswith(f"_{name}") for t in target)


def _derive_pool(
    sources: Mapping[str, pd.DataFrame], d: Domain, target: tuple[str, ...]
) -> tuple[list, list]:
    every = _derive_all(sources, d)
    return [x for x in every if _mentioned(x.name, target)], [
        x for x in every if not _mentioned(x.name, target)
    ]


def _aggregate_all(sources: Mapping[str, pd.DataFrame], d: Domain) -> list[AggregateDuty]:
    categories = _categories_of(sources)
    measures = [*_numbers_of(sources), d.derived]
    groups = [(c,) for c in categories] + list(permutations(categories, 2))
    out = []
    for by in groups:
        for m in dict.fromkeys(measures):
            for fn in ("sum", "mean", "max", "min"):
                out.append(AggregateDuty(by=by, column=m, fn=fn, name=f"{fn}_{m}"))
        out.append(AggregateDuty(by=by, column=d.fact_id, fn="count", name=f"count_{d.fact_id}"))
    return out


def _aggregate_pool(
    sources: Mapping[str, pd.DataFrame], d: Domain, target: tuple[str, ...]
) -> tuple[list, list]:
    def fits(x: AggregateDuty) -> bool:
        return x.name in target and all(b in target or rename(b) in target for b in x.by or ())

    def exact(x: AggregateDuty) -> bool:
        return len(x.by or ()) + 1 == len(target)

    every = _aggregate_all(sources, d)
    salient = [x for x in every if fits(x)]
    return sorted(salient, key=lambda x: not exact(x)), [x for x in every if not fits(x)]


def _topk_pool(sources: Mapping[str, pd.DataFrame], d: Domain) -> tuple[list, list]:
    columns = [*_numbers_of(sources), d.derived]
    return [], [
        TopKDuty(column=c, k=k, ascending=a) for c in columns for k in (3, 5, 10) for a in (False, True)
    ]


def _select_pool(known: list[str], target: tuple[str, ...]) -> tuple[list, list]:
    options = [[c for c in known if t in (c, rename(c))] for t in target]
    salient: list[SelectDuty] = []
    if all(options):
        for olds in list(product(*options))[:24]:
            if len(set(olds)) == len(olds):
                salient.append(SelectDuty(columns=tuple(zip(olds, target, strict=True))))
    rest: list[SelectDuty] = []
    for duty in salient[:2]:
        mapping = list(duty.columns or ())
        if len(mapping) > 1:
            rest += [SelectDuty(columns=tuple(mapping[:i] + mapping[i + 1 :])) for i in range(len(mapping))]
        rest.append(SelectDuty(columns=tuple((old, old) for old, _ in mapping)))
        rest.append(SelectDuty(columns=tuple((old, f"{old}_out") for old, _ in mapping)))
    plain = [c for c in known if c in target or rename(c) in target]
    for size in (2, 3):
        for cols in combinations(plain[:8], size):
            rest.append(SelectDuty(columns=tuple((c, rename(c)) for c in cols)))
    return salient, [r for r in rest if _valid_select(r)]


def _valid_select(duty: SelectDuty) -> bool:
    mapping = duty.columns or ()
    return len({o for o, _ in mapping}) == len(mapping) == len({n for _, n in mapping}) > 0
