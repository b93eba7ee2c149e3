"""What agents may know about a task, and which candidate duties it supports.

Everything here is computed from the *public* part of a task only: the source tables and the goal
description (:class:`Goal`: the target's columns, its row count, each target column's lineage
such as ``sum(mul(orders.qty,orders.unit_price))``, and which source rows feed it). The hidden
reference pipeline is never read. From that, :func:`evaluate` decides for each candidate duty
whether the goal supports it (a filter that keeps every feeding row and drops others, a join
whose keys overlap and whose right side reaches the target, an aggregate whose result is a target
column...), and :func:`canonical_plan` orders the supported ones the way a data engineer would
(per-source cleaning, then joins, then derive / aggregate / top-k / select). Observations carry
this analysis; the generator guarantees it is unambiguous (distractors it supports are dropped).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.spec import (
    AggregateDuty,
    Capacity,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    SelectDuty,
    TopKDuty,
)

POST = -1  # home of stages that act on the joined main stream
PREP_ROLES = (Role.FILTER, Role.DEDUP)
POST_ROLES = (Role.DERIVE, Role.AGGREGATE, Role.TOPK, Role.SELECT)
COMMUTATIVE = {"mul", "add"}
_NUMBER = re.compile(r"\s*[$€£]?\s*-?[\d,]+(?:\.\d+)?\s*")


@dataclass(frozen=True)
class ColumnStats:
    name: str
    numeric: bool  # numbers, or text that parses as numbers once cleaned
    null_frac: float
    dirt_text: float  # share of values that normalising text changes (case, spaces)
    dirt_num: float  # share of values only the large capacity parses as numbers ('$1,204.50')
    feed_dirt_text: float  # the same two, over the rows that feed the target
    feed_dirt_num: float
    distinct_frac: float
    in_target: bool  # some target column's lineage reads it


@dataclass(frozen=True)
class SourceInfo:
    name: str
    rows: int
    columns: tuple[ColumnStats, ...]
    contributing: frozenset[int]  # row labels that feed the target

    def stats(self, column: str) -> ColumnStats | None:
        for c in self.columns:
            if c.name == column:
                return c
        return None


@dataclass(frozen=True)
class Goal:
    """The public description of the target table."""

    columns: tuple[str, ...]
    rows: int
    lineage: Mapping[str, str]  # target column -> lineage expression

    @property
    def expressions(self) -> frozenset[str]:
        return frozenset(self.lineage.values())


@dataclass(frozen=True)
class Evidence:
    consistent: bool
    home: int | None  # source index (cleaning / join), POST, or None (no plausible place)
    dirt_text: float  # over the columns it reads, on the rows that feed the target
    dirt_num: float
    reads: tuple[tuple[int, str, float, float], ...] = ()  # (source, column, text dirt, number dirt)


def source_lineage(table: str, column: str, keys: frozenset[str]) -> str:
    """Lineage of a source column: shared name keys are source-agnostic (``@customer``)."""
    return f"@{column}" if column in keys else f"{table}.{column}"


def derive_lineage(op: str, left: str, right: str) -> str:
    if op in COMMUTATIVE:
        left, right = sorted((left, right))
    return f"{op}({left},{right})"


def aggregate_lineage(fn: str, column: str | None) -> str:
    return "size()" if column is None else f"{fn}({column})"


def column_stats(
    frame: pd.DataFrame, table: str, keys: frozenset[str], goal: Goal, contributing: frozenset[int]
) -> tuple[ColumnStats, ...]:
    out = []
    rows = max(len(frame), 1)
    target_text = " ".join(goal.expressions)
    feeding = np.fromiter((label in contributing for label in frame.index), dtype=bool, count=len(frame))
    n_feeding = max(int(feeding.sum()), 1)
    for name in frame.columns:
        s = frame[name]
        raw = s.to_numpy(dtype=object, na_value=None)
        present = np.array([v is not None and v == v for v in raw], dtype=bool)
        numeric = True
        text_flags = num_flags = np.zeros(len(raw), dtype=bool)
        if not pd.api.types.is_numeric_dtype(s):
            texts = [str(v) for v in raw]
            shape = np.array([bool(_NUMBER.fullmatch(t)) for t in texts]) & present
            numeric = bool(shape.sum() > 0.8 * present.sum()) if present.any() else False
            if numeric:  # numbers stored as text: those only the large capacity parses are dirty
                num_flags = present & np.array([not _plain_number(t) for t in texts])
            else:
                text_flags = present & np.array([ops.clean_text(t) != t for t in texts])
        n = max(int(present.sum()), 1)
        lineage = source_lineage(table, str(name), keys)
        out.append(
            ColumnStats(
                name=str(name),
                numeric=numeric,
                null_frac=1.0 - present.sum() / rows,
                dirt_text=text_flags.sum() / n,
                dirt_num=num_flags.sum() / n,
                feed_dirt_text=(text_flags & feeding).sum() / n_feeding,
                feed_dirt_num=(num_flags & feeding).sum() / n_feeding,
                distinct_frac=float(s.nunique()) / rows,
                in_target=lineage in target_text,
            )
        )
    return tuple(out)


def _plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class Context:
    """Public task knowledge used to judge candidates: sources, their stats, the goal."""

    def __init__(
        self,
        sources: Mapping[str, pd.DataFrame],
        infos: Sequence[SourceInfo],
        goal: Goal,
        keys: frozenset[str],
    ) -> None:
        self.frames = list(sources.values())
        self.names = list(sources.keys())
        self.infos = list(infos)
        self.goal = goal
        self.keys = keys
        self.defined: dict[str, str] = {}  # names defined by candidate derives / aggregates
        self.key_values: dict[tuple[int, str], set[str]] = {}
        self.normalised: dict[tuple[int, str, bool], pd.Series] = {}

    def define(self, name: str, lineage: str) -> None:
        self.defined.setdefault(name, lineage)

    def resolve(self, name: str | None) -> str | None:
        """Lineage of a column name as the pipeline would see it."""
        if name is None:
            return None
        if name in self.keys:
            return f"@{name}"
        for table, frame in zip(self.names, self.frames, strict=True):
            if name in frame.columns:
                return source_lineage(table, name, self.keys)
        return self.defined.get(name)

    def holders(self, column: str) -> list[int]:
        return [i for i, f in enumerate(self.frames) if column in f.columns]

    def reads(self, role: Role, duty: object, home: int | None) -> tuple[tuple[int, str, float, float], ...]:
        """(source, column, text dirt, number dirt) of every source column ``duty`` compares,
        groups or parses, over the rows it will see."""
        columns: list[tuple[int, str]] = []
        if isinstance(duty, JoinDuty) and home is not None:
            columns += [(a, str(duty.left_on)) for a in self.holders(str(duty.left_on)) if a != home]
            columns += [(home, str(duty.right_on))] if str(duty.right_on) in self.frames[home].columns else []
        elif role in PREP_ROLES and home is not None and home >= 0:
            columns += [(home, c) for c in duty.columns_read()]  # type: ignore[attr-defined]
        else:
            columns += [(i, c) for c in duty.columns_read() for i in self.holders(c)]  # type: ignore[attr-defined]
        out = []
        for source, column in columns:
            stats = self.infos[source].stats(column)
            if stats is None:
                continue
            if role in PREP_ROLES:  # cleaning stages see every row of their source
                out.append((source, column, stats.dirt_text, stats.dirt_num))
            else:  # later stages only see rows that survived cleaning
                out.append((source, column, stats.feed_dirt_text, stats.feed_dirt_num))
        return tuple(out)


def evaluate(role: Role, duty: object, ctx: Context) -> Evidence:
    """Whether the goal supports ``duty`` for ``role``, where it would act, and how dirty the
    columns it reads are. Base duties are generic defaults: never supported."""
    evidence = _judge(role, duty, ctx)
    reads = ctx.reads(role, duty, evidence.home)
    return replace(
        evidence,
        dirt_text=max((r[2] for r in reads), default=0.0),
        dirt_num=max((r[3] for r in reads), default=0.0),
        reads=reads,
    )


def _judge(role: Role, duty: object, ctx: Context) -> Evidence:
    text = num = 0.0
    if duty.is_base:  # type: ignore[attr-defined]
        return Evidence(False, None, text, num)
    if isinstance(duty, FilterDuty | DedupDuty):
        return _row_selection(duty, ctx, text, num)
    if isinstance(duty, JoinDuty):
        return _join(duty, ctx, text, num)
    goal = ctx.goal
    if isinstance(duty, DeriveDuty):
        lineage = derive_lineage(duty.op, str(ctx.resolve(duty.left)), str(ctx.resolve(duty.right)))
        ok = any(lineage in e for e in goal.expressions)
    elif isinstance(duty, AggregateDuty):
        lineage = aggregate_lineage(duty.fn, ctx.resolve(duty.column) if duty.column else None)
        ok = lineage in goal.expressions and all(ctx.resolve(b) in goal.expressions for b in duty.by or ())
    elif isinstance(duty, TopKDuty):
        ok = duty.k == goal.rows and not duty.ascending and ctx.resolve(duty.column) in goal.expressions
    elif isinstance(duty, SelectDuty):
        mapping = dict(duty.columns or ())
        ok = set(mapping.values()) == set(goal.columns) and all(
            ctx.resolve(old) == goal.lineage.get(new) for old, new in mapping.items()
        )
    else:
        raise TypeError(f"unknown duty {duty!r}")
    return Evidence(ok, POST, text, num)


def _row_selection(duty: FilterDuty | DedupDuty, ctx: Context, text: float, num: float) -> Evidence:
    """Supported when, on some source, the duty (at large capacity) keeps every row that feeds
    the target and drops at least one other."""
    columns = duty.columns_read()
    places = [i for i in range(len(ctx.frames)) if all(c in ctx.frames[i].columns for c in columns)]
    for i in places:
        try:
            keep = _filter_keep(ctx, i, duty) if isinstance(duty, FilterDuty) else _dedup_keep(ctx, i, duty)
        except (KeyError, TypeError, ValueError):
            continue
        kept = ctx.frames[i].index[keep]
        if 0 < len(kept) < len(keep) and ctx.infos[i].contributing <= set(kept):
            return Evidence(True, i, text, num)
    return Evidence(False, places[0] if places else None, text, num)


def _normalised(ctx: Context, source: int, column: str, numeric: bool) -> pd.Series:
    """A source column as the large capacity reads it (memoised per task)."""
    key = (source, column, numeric)
    if key not in ctx.normalised:
        raw = ctx.frames[source][column]
        ctx.normalised[key] = ops.as_numbers(raw, "large") if numeric else ops.as_text(raw, "large")
    return ctx.normalised[key]


def _filter_keep(ctx: Context, source: int, duty: FilterDuty) -> np.ndarray:
    """The rows ``ops.op_filter`` keeps at large capacity, without building the frame."""
    column = str(duty.column)
    if duty.op in ("gt", "lt"):
        values = _normalised(ctx, source, column, numeric=True).to_numpy(dtype="float64", na_value=np.nan)
        with np.errstate(invalid="ignore"):
            return values > float(duty.value) if duty.op == "gt" else values < float(duty.value)  # type: ignore[arg-type]
    values = _normalised(ctx, source, column, numeric=False)
    present = values.notna().to_numpy()
    if duty.op == "notnull":
        return present
    equal = (values == duty.value).fillna(False).to_numpy(dtype=bool)
    return equal if duty.op == "eq" else present & ~equal


def _dedup_keep(ctx: Context, source: int, duty: DedupDuty) -> np.ndarray:
    columns = list(duty.subset or ctx.frames[source].columns)
    if len(columns) == 1:
        return ~_normalised(ctx, source, columns[0], numeric=False).duplicated(keep="first").to_numpy()
    table = pd.DataFrame({c: _normalised(ctx, source, c, numeric=False) for c in columns})
    return ~table.duplicated(keep="first").to_numpy()


def _join(duty: JoinDuty, ctx: Context, text: float, num: float) -> Evidence:
    for a in ctx.holders(str(duty.left_on)):
        for b in ctx.holders(str(duty.right_on)):
            if a == b or b == 0:
                continue
            left = _keys(ctx, a, str(duty.left_on))
            right = _keys(ctx, b, str(duty.right_on))
            if not left or not right:
                continue
            overlap = max(len(left & right) / len(left), len(left & right) / len(right))
            reaches = any(f"{ctx.names[b]}." in e for e in ctx.goal.expressions)
            if overlap >= 0.5 and reaches:
                return Evidence(True, b, text, num)
    holders = ctx.holders(str(duty.right_on))
    return Evidence(False, holders[-1] if holders else None, text, num)


def _keys(ctx: Context, source: int, column: str) -> set[str]:
    """Normalised values of ``column`` over the rows of ``source`` that feed the target."""
    cached = ctx.key_values.get((source, column))
    if cached is None:
        feeding = ctx.frames[source].index.isin(list(ctx.infos[source].contributing))
        values = _normalised(ctx, source, column, numeric=False)[feeding]
        cached = {str(v) for v in values.dropna()}
        ctx.key_values[(source, column)] = cached
    return cached


@dataclass(frozen=True)
class PlannedStage:
    """One stage of the plan the evidence implies: a role, which candidate, where it acts, the
    dirt it still meets (after earlier stages cleaned what they read) and the capacity that needs."""

    role: Role
    candidate: int
    home: int  # source index for cleaning and joins, POST for the rest
    dirt_text: float
    dirt_num: float
    capacity: Capacity = Capacity.SMALL


def stage_order(role: Role, home: int) -> tuple[int, int, int]:
    """The canonical order: clean each source (filter, then dedup), join, then post-process."""
    if role in PREP_ROLES:
        return (0, home, PREP_ROLES.index(role))
    if role is Role.JOIN:
        return (1, home, 0)
    return (2, 0, POST_ROLES.index(role))


def canonical_plan(evidence: Mapping[Role, Sequence[Evidence]]) -> list[PlannedStage]:
    """Every supported candidate, in canonical order, with the capacity the data needs: large
    where a read column holds messy numbers, medium where it holds messy text, else small. A
    stage at medium or large writes what it read back clean, so later stages need less."""
    found = [(role, j, ev) for role, items in evidence.items() for j, ev in enumerate(items) if ev.consistent]
    found.sort(key=lambda f: stage_order(f[0], f[2].home if f[2].home is not None else POST))
    cleaned: set[tuple[int, str]] = set()
    plan = []
    for role, j, ev in found:
        dirty = [r for r in ev.reads if (r[0], r[1]) not in cleaned]
        text = max((r[2] for r in dirty), default=0.0)
        num = max((r[3] for r in dirty), default=0.0)
        capacity = Capacity.LARGE if num > 0 else Capacity.MEDIUM if text > 0 else Capacity.SMALL
        if capacity is not Capacity.SMALL:
            cleaned |= {(r[0], r[1]) for r in ev.reads}
        plan.append(PlannedStage(role, j, ev.home if ev.home is not None else POST, text, num, capacity))
    return plan


def plan_inputs(plan: Sequence[PlannedStage]) -> list[list[tuple[str, int]]]:
    """Each planned stage's inputs, as ``("source", i)`` or ``("node", position)``: cleaning
    stages extend their source's chain, joins merge that chain into the main (first) stream,
    post stages extend the main stream."""
    heads: dict[int, tuple[str, int]] = {}
    out = []
    for position, stage in enumerate(plan):
        if stage.role in PREP_ROLES:
            inputs = [heads.get(stage.home, ("source", stage.home))]
            heads[stage.home] = ("node", position)
        elif stage.role is Role.JOIN:
            inputs = [heads.get(0, ("source", 0)), heads.get(stage.home, ("source", stage.home))]
            heads[0] = ("node", position)
        else:
            inputs = [heads.get(0, ("source", 0))]
            heads[0] = ("node", position)
        out.append(inputs)
    return out
