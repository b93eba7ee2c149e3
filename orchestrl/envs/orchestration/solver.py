"""The solver: programming by example over a task's public inputs, checked in the sandbox.

It never reads the hidden reference or the hidden target (:func:`solve` strips them from the task
before it starts; a test runs it on a task without them). Like Scythe or AutoPandas it enumerates
candidate plans, prunes them without running anything, ranks them, and runs the best ones until
one is consistent with the examples:

1. *plans*: every way to fill the level's skeleton (:mod:`.plans`) with the proposed candidates:
   cleaning stages (filter / dedup, at most one per table and role), one join per dimension
   table, and post stages (derive, aggregate, top-k, select, in that order);
2. *schema pruning*: the plan's output columns, computed from column names alone, must be the
   target's columns, and every column a stage reads must exist where it runs;
3. *ranking*: a cleaning stage whose predicate fails on an example row it can be checked against
   is dropped; the others are ranked by how unlikely their agreement with the examples is by chance
   (share of rows kept ^ examples), a dedup on a key that repeats and a not-null filter on a column
   with missing values first; joins on shared key names first;
4. *checking*: each plan runs in the sandbox with capacities read off the data (large where a read
   column holds messy numbers, medium where it holds messy text or blanks, else small; a stage that
   normalised a column leaves it clean for later ones) and passes when its output has the target's
   columns and holds every example row. The first passing plan is the answer; when none passes
   within the budget, the plan that held the most example rows.

Several plans may pass the examples and differ on the hidden rows: the solver cannot tell them
apart, so its success rate is below 1 (``benchmarks/orchestration_env.py`` measures it).
:func:`successful_plans` (benchmarks and tests only: it reads the hidden target) counts the
distinct plans that produce the target, including stage orders the skeleton convention never
writes (a filter after the join).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.actions import ActionLayout, agent_id
from orchestrl.envs.orchestration.features import CANDIDATE_NUMBERS, PublicView
from orchestrl.envs.orchestration.plans import (
    POST,
    POST_ROLES,
    PREP_ROLES,
    Family,
    Stage,
    assign_slots,
    plan_signature,
    run_spec,
    wire,
)
from orchestrl.envs.orchestration.spec import (
    AggregateDuty,
    Capacity,
    DeriveDuty,
    OrchestrationSpec,
    Role,
    SelectDuty,
    SpecError,
    TopKDuty,
    parse_spec,
)
from orchestrl.envs.orchestration.tables import TargetIndex, row_hashes

BUDGET = {1: 40, 2: 60, 3: 80, 4: 200}
"""Sandbox executions the solver may spend per task, per level."""


@dataclass(frozen=True)
class Solution:
    slots: dict[int, Stage]  # agent slot -> stage; missing slots stay idle
    spec: OrchestrationSpec | None
    consistent: bool  # the output had the target's columns and held every example row
    executions: int
    seconds: float


def public_only(task: Any) -> Any:
    """The task without its hidden part (what the solver works on)."""
    return dataclasses.replace(task, reference=None, target=None, reference_work=0.0)


def solve(task: Any, executor: Any, budget: int | None = None) -> Solution:
    """The solver's plan for ``task`` (its hidden part is removed first), executions run through
    ``executor`` (a :class:`.executor.Executor` on the sandbox pool)."""
    started = time.perf_counter()
    task = public_only(task)
    public = task.public
    level = public.level
    budget = budget or BUDGET[level.number]
    view = public.view
    checker = _ExampleCheck(public)
    best: tuple[float, dict[int, Stage], OrchestrationSpec | None] = (-1.0, {}, None)
    executions = 0
    for slots in _ranked_plans(view, task.candidates, level):
        spec = _spec(slots, public, task.key.ref(), view)
        if spec is None:
            continue
        execution = executor.execute(task, spec)
        executions += 1
        held = checker.held(execution.output if execution.ok else None)
        if held >= 1.0:
            return Solution(slots, spec, True, executions, time.perf_counter() - started)
        if held > best[0]:
            best = (held, slots, spec)
        if executions >= budget:
            break
    return Solution(best[1], best[2], False, executions, time.perf_counter() - started)


def spec_actions(spec: OrchestrationSpec | None, task: Any, layout: ActionLayout) -> dict[str, np.ndarray]:
    """One action per agent slot that writes ``spec`` (nodes ``agent_<slot>``; idle where it has
    no node). Deps that are a table's chain head become table references (see :mod:`.actions`)."""
    nodes = list(spec.nodes) if spec is not None else []
    by_id = {n.id: n for n in nodes}
    out = {}
    for i in range(layout.agents):
        before = [n.model_dump(mode="json") for n in nodes if int(n.id.rsplit("_", 1)[1]) < i]
        out[agent_id(i)] = layout.encode(task, i, by_id.get(agent_id(i)), before)
    return out


def solver_actions(solution: Solution, task: Any, layout: ActionLayout) -> dict[str, np.ndarray]:
    """The actions that write the solver's plan."""
    return spec_actions(solution.spec, task, layout)


# ------------------------------------------------------------------------------ the examples
class _ExampleCheck:
    """Share of example rows an output holds (0 unless it has exactly the target's columns)."""

    def __init__(self, public: Any) -> None:
        self.columns = sorted(public.target_columns)
        self.examples = row_hashes(public.examples, self.columns)

    def held(self, output: pd.DataFrame | None) -> float:
        if output is None or sorted(str(c) for c in output.columns) != self.columns:
            return 0.0
        ours = row_hashes(output, self.columns)
        values, counts = np.unique(ours, return_counts=True)
        have = dict(zip(values.tolist(), counts.tolist(), strict=True))
        held = 0
        for h in self.examples.tolist():
            if have.get(h, 0) > 0:
                have[h] -= 1
                held += 1
        return held / max(len(self.examples), 1)


# ------------------------------------------------------------------------------ enumeration
def _options(view: PublicView, candidates: Mapping[Role, Sequence[Any]]) -> dict[Family, list[tuple[float, Stage]]]:
    """Every stage a candidate can make, with a prior score (higher first)."""
    n = len(view.frames)
    prep: list[tuple[float, Stage]] = []
    for role in PREP_ROLES:
        for duty in candidates[role]:
            for home in view.prep_homes(duty):
                score = _prep_score(view, role, duty, home)
                if score > -math.inf:
                    prep.append((score, Stage(role, duty, home)))
    joins: list[tuple[float, Stage]] = []
    for duty in candidates[Role.JOIN]:
        homes = range(1, n) if duty.is_base else [view.home(Role.JOIN, duty)]
        for home in homes:
            if home is None or home == POST or (duty.left_on is not None and duty.left_on not in view.profiles[0]):
                continue
            score = 2.0 if duty.left_on is not None and duty.left_on == duty.right_on else 1.0 if duty.is_base else 0.0
            joins.append((score, Stage(Role.JOIN, duty, home)))
    post = [(0.0, Stage(role, duty, POST)) for role in POST_ROLES for duty in candidates[role]]
    return {Family.PREP: prep, Family.JOIN: joins, Family.POST: post}


def _prep_score(view: PublicView, role: Role, duty: Any, home: int) -> float:
    numbers = dict(zip(CANDIDATE_NUMBERS, view.numbers(role, duty, home), strict=True))
    keep, checkable, agree, surprise = (numbers[k] for k in ("keep", "checkable", "agree", "surprise"))
    if keep >= 1.0 or keep <= 0.0:
        return -math.inf  # keeps everything or nothing: never a stage of a plan
    if role is Role.DEDUP:
        stats = [p for c in duty.columns_read() for p in view.stats(c, home)]
        return 10.0 if stats and all(p.key for p in stats) else -1.0  # a key that repeats
    if checkable > 0 and agree < 1.0:
        return -math.inf  # an example row it would drop
    evidence = -math.log(max(surprise, 1e-9)) if checkable > 0 else 0.5 - keep
    return evidence + (3.0 if duty.op == "notnull" and duty.column is not None else 0.0)


def _columns_after(view: PublicView, stages: Sequence[Stage]) -> list[str] | None:
    """The output columns of ``stages`` (canonical order, canonical wiring) from names alone;
    None when a stage reads a column its input lacks."""
    heads = {i: list(p) for i, p in enumerate(view.profiles)}
    for st in stages:
        chain = st.home if st.role in PREP_ROLES else 0
        cols = heads[chain]
        duty = st.duty
        reads = [c for c in duty.columns_read()]
        if st.role is Role.JOIN:
            right = heads[st.home]
            if duty.left_on is None:
                shared = [c for c in cols if c in right]
                if not shared:
                    return None
                out = cols + [c for c in right if c not in shared]
            else:
                if duty.left_on not in cols or duty.right_on not in right:
                    return None
                same = duty.left_on == duty.right_on
                out = cols + [
                    (f"{c}_right" if c in cols else c) for c in right if not (same and c == duty.right_on)
                ]
            heads[0] = out
            continue
        if any(c not in cols for c in reads):
            return None
        if isinstance(duty, SelectDuty) and duty.columns is not None:
            if any(old not in cols for old, _ in duty.columns):
                return None
        if isinstance(duty, DeriveDuty):
            out = cols + ([duty.name] if duty.name not in cols else [])
        elif isinstance(duty, AggregateDuty):
            out = list(duty.by or cols[:1]) + [duty.name]
        elif isinstance(duty, SelectDuty):
            out = cols if duty.columns is None else [new for _, new in duty.columns]
        elif isinstance(duty, TopKDuty) and duty.column is None:
            out = cols
        else:
            out = cols
        heads[chain] = out
    return heads[0]


def _ranked_plans(view: PublicView, candidates: Mapping[Role, Sequence[Any]], level: Any) -> Iterator[dict[int, Stage]]:
    """Plans that fit the skeleton and pass schema pruning, best prior first."""
    options = _options(view, candidates)
    skeleton = level.skeleton
    n_prep, n_join, n_post = (sum(f is fam for f in skeleton) for fam in Family)
    target = sorted(view.target)
    dims = range(1, len(view.frames))
    # joins: one per dimension table, at most n_join of them
    join_sets: list[tuple[float, tuple[Stage, ...]]] = [(0.0, ())]
    if n_join and len(dims):
        per_dim = [[o for o in options[Family.JOIN] if o[1].home == d] for d in dims]
        if len(per_dim) <= n_join and all(per_dim):
            join_sets = [
                (sum(s for s, _ in combo), tuple(st for _, st in combo)) for combo in itertools.product(*per_dim)
            ]
    # post stages: distinct roles in canonical order
    by_role: dict[Role, list[Stage]] = {r: [st for _, st in options[Family.POST] if st.role is r] for r in POST_ROLES}
    wanted = set(target)

    def ends_right(stage: Stage) -> bool:
        """A select or an aggregate fixes the output's columns: they must be the target's."""
        duty = stage.duty
        if isinstance(duty, SelectDuty):
            return duty.columns is not None and {new for _, new in duty.columns} == wanted
        return isinstance(duty, AggregateDuty) and set(duty.by or ()) | {duty.name} == wanted

    post_sets: list[tuple[Stage, ...]] = [()]
    for size in range(1, n_post + 1):
        for roles in itertools.combinations(POST_ROLES, size):
            last = next((r for r in (Role.SELECT, Role.AGGREGATE) if r in roles), None)
            choices = [
                [st for st in by_role[r] if r is not last or ends_right(st)] for r in roles
            ]
            post_sets += list(itertools.product(*choices))
    # the output schema depends on the joins and the post stages only (cleaning keeps columns)
    shaped: list[tuple[float, tuple[Stage, ...], tuple[Stage, ...]]] = []
    for join_score, joins in join_sets:
        for posts in post_sets:
            stages = sorted([*joins, *posts], key=Stage.order)
            cols = _columns_after(view, stages)
            if cols is not None and sorted(cols) == target and len(set(cols)) == len(cols):
                base_penalty = sum(st.duty.is_base for st in posts) + 0.1 * len(posts)
                shaped.append((join_score - base_penalty, joins, posts))
    shaped.sort(key=lambda x: -x[0])
    # cleaning stages: up to n_prep of them, at most one per (table, role)
    preps = sorted(options[Family.PREP], key=lambda o: -o[0])
    low, high = level.stages
    fixed = len(dims) + min(len(p) for _, _, p in shaped) if shaped else 0
    prep_sets: list[tuple[float, tuple[Stage, ...]]] = [(0.4, ())] if low <= fixed else []
    for size in range(1, n_prep + 1):
        for combo in itertools.combinations(preps[:12], size):
            keys = [(st.home, st.role) for _, st in combo]
            if len(set(keys)) == len(keys):
                prep_sets.append((sum(s for s, _ in combo) - 0.2 * (size - 1), tuple(st for _, st in combo)))
    pairs = [
        (prep_score + shape_score - 1.5 * rank, cleaning, joins, posts)
        for prep_score, cleaning in prep_sets
        for rank, (shape_score, joins, posts) in enumerate(shaped[:4])
    ]
    pairs.sort(key=lambda x: -x[0])
    seen: set[tuple] = set()
    for _, cleaning, joins, posts in pairs:  # cleaning stages act on sources that hold their columns
        stages = sorted([*cleaning, *joins, *posts], key=Stage.order)
        slots = assign_slots(stages, skeleton)
        if slots is None:
            continue
        key = tuple(sorted((i, st.role, st.duty.model_dump_json(), st.home) for i, st in slots.items()))
        if key not in seen:
            seen.add(key)
            yield slots


def capacities(view: PublicView, stages: Sequence[Stage]) -> list[Stage]:
    """Each stage's capacity read off the data: large where a column it reads holds messy numbers,
    medium where one holds messy text or blanks, else small. A stage above small writes what it
    read back clean, so later stages reading the same column need less."""
    cleaned: set[str] = set()
    out = []
    for st in stages:
        reads = list(st.duty.columns_read())
        if st.duty.is_base and st.role in (Role.FILTER, Role.DEDUP):
            home = st.home if st.home >= 0 else 0
            reads = [c for c, p in view.profiles[home].items() if not p.numeric or st.role is Role.DEDUP]
        elif st.duty.is_base and st.role is Role.JOIN:
            reads = [c for c in view.profiles[0] if c in view.profiles[st.home]]
        if st.role is Role.SELECT:
            reads = []
        dirty = [p for c in reads if c not in cleaned for p in view.stats(c)]
        blanks = any(p.blank_frac > 0 for p in dirty)
        if any(p.dirt_num > 0 for p in dirty):
            capacity = Capacity.LARGE
        elif any(p.dirt_text > 0 for p in dirty) or blanks:
            capacity = Capacity.MEDIUM
        else:
            capacity = Capacity.SMALL
        if capacity is not Capacity.SMALL:
            cleaned |= set(reads)
        out.append(st.with_capacity(capacity))
    return out


def _spec(slots: dict[int, Stage], public: Any, ref: Any, view: PublicView) -> OrchestrationSpec | None:
    order = sorted(slots)
    staged = capacities(view, [slots[i] for i in order])
    try:
        return wire(dict(zip(order, staged, strict=True)), public.source_names, ref)
    except SpecError:
        return None


# ------------------------------------------------------------------------------ several answers
def plan_space(task: Any) -> Iterator[OrchestrationSpec]:
    """Distinct plans (by :func:`.plans.plan_signature`) from the solver's enumeration, best
    prior first, each followed by its variants with a cleaning stage of the fact table moved
    after the joins (a wiring the skeleton convention never writes). Reads the public inputs only."""
    public = task.public
    view = public.view
    seen: set[str] = set()
    for slots in _ranked_plans(view, task.candidates, public.level):
        for variant in _variants(slots, public.level.agents):
            spec = _spec(variant, public, task.key.ref(), view) if variant is slots else _spec_free(variant, public, view)
            if spec is None:
                continue
            signature = plan_signature(spec)
            if signature not in seen:
                seen.add(signature)
                yield spec


def successful_plans(task: Any, limit: int = 400) -> list[OrchestrationSpec]:
    """The plans among the first ``limit`` of :func:`plan_space` whose output on the full sources
    equals the hidden target. Runs in-process (same ops code as the sandbox); reads the hidden
    target, so it is for benchmarks and tests only."""
    if task.target is None:
        raise ValueError("successful_plans needs the task's hidden target")
    index = TargetIndex(task.target)
    found = []
    for spec in itertools.islice(plan_space(task), limit):
        run = run_spec(task.public.sources, spec)
        if run.output is not None and index.compare(run.output).exact:
            found.append(spec)
    return found


def _variants(slots: dict[int, Stage], agents: int) -> Iterator[dict[int, Stage]]:
    """The plan, and the plan with each cleaning stage of the fact table moved after the joins
    (as a post stage: one agent earlier writes the join)."""
    yield slots
    stages = [slots[i] for i in sorted(slots)]
    for i, st in enumerate(stages):
        if st.role in PREP_ROLES and st.home == 0 and any(o.role is Role.JOIN for o in stages):
            rest = stages[:i] + stages[i + 1 :]
            last_join = max(j for j, o in enumerate(rest) if o.role is Role.JOIN)
            moved = [*rest[: last_join + 1], dataclasses.replace(st, home=POST), *rest[last_join + 1 :]]
            if len(moved) <= agents:
                yield dict(enumerate(moved))


def _spec_free(slots: dict[int, Stage], public: Any, view: PublicView) -> OrchestrationSpec | None:
    """Like :func:`_spec` for stages in slot order where a cleaning stage may act on the main
    stream (``home == POST``)."""
    order = sorted(slots)
    stages = [slots[i] for i in order]
    staged = capacities(view, [dataclasses.replace(s, home=0) if s.home == POST else s for s in stages])
    heads = {i: name for i, name in enumerate(public.source_names)}
    nodes = []
    for slot, original, st in zip(order, stages, staged, strict=True):
        node_id = f"agent_{slot}"
        if original.role in PREP_ROLES and original.home != POST:
            deps = [heads[original.home]]
            heads[original.home] = node_id
        elif original.role is Role.JOIN:
            deps = [heads[0], heads[original.home]]
            heads[0] = node_id
        else:
            deps = [heads[0]]
            heads[0] = node_id
        nodes.append(
            {
                "id": node_id,
                "role": st.role.value,
                "duty": st.duty.model_dump(mode="json"),
                "capacity": st.capacity.value,
                "deps": deps,
            }
        )
    try:
        return parse_spec({"sources": list(public.source_names), "nodes": nodes, "output": nodes[-1]["id"]})
    except SpecError:
        return None

