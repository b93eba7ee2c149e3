"""The solver: programming by example over a task's public inputs, checked in the sandbox.

It never reads the hidden reference or the hidden target (:func:`solve` strips them from the task
before it starts; a test runs it on a task without them). Like Scythe or AutoPandas it enumerates
candidate plans, prunes them without running anything, ranks them, and runs the best ones until
one is consistent with the examples:

1. *plans*: every way to fill the level's skeleton (:mod:`.plans`) with the proposed candidates:
   cleaning stages (one dedup per table, at most the level's ``filters_per_table`` filters on
   distinct columns: two make a conjunction at level 5), one join per dimension table, and post
   stages (derive, aggregate, top-k, select, in that order);
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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrl.envs.orchestration.actions import ActionLayout, agent_id
from orchestrl.envs.orchestration.analysis import PublicView
from orchestrl.envs.orchestration.plans import (
    POST,
    PREP_ROLES,
    Family,
    Stage,
    assign_slots,
    cleaning_fits,
    plan_signature,
    run_spec,
    wire,
)
from orchestrl.envs.orchestration.spec import (
    OrchestrationSpec,
    Role,
    SpecError,
)
from orchestrl.envs.orchestration.tables import TargetIndex

BUDGET = {1: 40, 2: 60, 3: 80, 4: 200, 5: 300}
"""Sandbox executions the solver may spend per task, per level."""

PREP_OPTIONS = {1: 12, 2: 12, 3: 12, 4: 12, 5: 16}
"""The best-ranked cleaning stages the enumeration combines, per level."""

SHAPE_OPTIONS = {1: 4, 2: 4, 3: 4, 4: 4, 5: 8}
"""The best-ranked shapes (joins and post stages) the enumeration crosses them with, per level."""


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


@dataclass(frozen=True)
class Attempt:
    """One sandbox execution of the search: the plan, its spec, and the share of example rows its
    output held (0 for a failed run)."""

    slots: dict[int, Stage]
    spec: OrchestrationSpec
    held: float


def attempts(task: Any, executor: Any) -> Iterator[Attempt]:
    """The search's executions in its order (best prior first), each run through ``executor``;
    the hidden part of ``task`` is removed first. The caller decides when to stop."""
    task = public_only(task)
    public = task.public
    view = public.view
    for slots in _ranked_plans(view, public.level):
        spec = _spec(slots, public, task.key.ref(), view)
        if spec is None:
            continue
        execution = executor.execute(task, spec)
        yield Attempt(slots, spec, view.held(execution.output if execution.ok else None))


def answer_index(held: Sequence[float]) -> int | None:
    """Which of several executed plans answers, from the share of example rows each held (public
    feedback only): the first that held every row, else the first that held the most (None when
    nothing ran). ``solver_k`` answers by it, and so does a team after k rounds."""
    best: int | None = None
    for i, share in enumerate(held):
        if share >= 1.0:
            return i
        if best is None or share > held[best]:
            best = i
    return best


def answer_at(trace: list[Attempt], k: int) -> Attempt | None:
    """``solver_k``'s answer when stopped after ``k`` executions of ``trace`` (:func:`answer_index`)."""
    i = answer_index([attempt.held for attempt in trace[:k]])
    return None if i is None else trace[i]


def search(task: Any, executor: Any, executions: int, deadline: float | None = None) -> list[Attempt]:
    """The search's :func:`attempts` until one holds every example row, ``executions`` have run,
    or ``time.monotonic()`` passes ``deadline``: what ``solver_k`` sees for every
    ``k <= executions`` (:func:`answer_at`)."""
    trace: list[Attempt] = []
    for attempt in attempts(task, executor):
        trace.append(attempt)
        if attempt.held >= 1.0 or len(trace) >= executions:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
    return trace


def solve(task: Any, executor: Any, budget: int | None = None, deadline: float | None = None) -> Solution:
    """The solver's plan for ``task`` (its hidden part is removed first), executions run through
    ``executor`` (a :class:`.executor.Executor` on the sandbox pool): :func:`search` with
    ``budget`` executions (default :data:`BUDGET` of the level) and its :func:`answer_at`."""
    started = time.perf_counter()
    trace = search(task, executor, budget or BUDGET[task.public.level.number], deadline)
    answer = answer_at(trace, len(trace))
    seconds = time.perf_counter() - started
    if answer is None:
        return Solution({}, None, False, len(trace), seconds)
    return Solution(answer.slots, answer.spec, answer.held >= 1.0, len(trace), seconds)


def spec_actions(spec: OrchestrationSpec | None, task: Any, layout: ActionLayout) -> dict[str, np.ndarray]:
    """One action per agent slot that writes ``spec`` (nodes ``agent_<slot>``; idle where it has
    no node) of the task's level; a layout built for a larger level (``layout_level``) has more
    slots, which are not agents here. Deps that are a table's chain head become table references
    (see :mod:`.actions`)."""
    nodes = list(spec.nodes) if spec is not None else []
    by_id = {n.id: n for n in nodes}
    out = {}
    for i in range(min(layout.agents, task.level.agents)):
        before = [n.model_dump(mode="json") for n in nodes if int(n.id.rsplit("_", 1)[1]) < i]
        out[agent_id(i)] = layout.encode(task, i, by_id.get(agent_id(i)), before)
    return out


def solver_actions(solution: Solution, task: Any, layout: ActionLayout) -> dict[str, np.ndarray]:
    """The actions that write the solver's plan."""
    return spec_actions(solution.spec, task, layout)


# ------------------------------------------------------------------------------ enumeration
def _ranked_plans(view: PublicView, level: Any) -> Iterator[dict[int, Stage]]:
    """Plans that fit the skeleton and pass schema pruning, best prior first: the shapes (joins
    and post stages, :meth:`.analysis.PublicView.shapes`) crossed with sets of cleaning stages
    (:func:`.plans.cleaning_fits`, as many as the level's stage count allows)."""
    skeleton = level.skeleton
    n_prep = sum(f is Family.PREP for f in skeleton)
    shaped = view.shapes()
    preps = view.prep_options()
    low, _ = level.stages
    fixed = min((len(j) + len(p) for _, j, p in shaped), default=0)
    prep_sets: list[tuple[float, tuple[Stage, ...]]] = [(0.4, ())] if low <= fixed else []
    for size in range(1, n_prep + 1):
        for combo in itertools.combinations(preps[: PREP_OPTIONS[level.number]], size):
            stages = tuple(st for _, st in combo)
            if cleaning_fits(stages, level.filters_per_table):
                prep_sets.append((sum(s for s, _ in combo) - 0.2 * (size - 1), stages))
    pairs = [
        (prep_score_ + shape_score - 1.5 * rank, cleaning, joins, posts)
        for prep_score_, cleaning in prep_sets
        for rank, (shape_score, joins, posts) in enumerate(shaped[: SHAPE_OPTIONS[level.number]])
    ]
    pairs.sort(key=lambda x: -x[0])
    seen: set[tuple] = set()
    for _, cleaning, joins, posts in pairs:  # cleaning stages act on sources that hold their columns
        slots = assign_slots(sorted([*cleaning, *joins, *posts], key=Stage.order), skeleton)
        if slots is None:
            continue
        key = tuple(sorted((i, st.role, st.duty.model_dump_json(), st.home) for i, st in slots.items()))
        if key not in seen:
            seen.add(key)
            yield slots


def _spec(slots: dict[int, Stage], public: Any, ref: Any, view: PublicView) -> OrchestrationSpec | None:
    order = sorted(slots)
    staged = view.capacities([slots[i] for i in order])
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
    for slots in _ranked_plans(view, public.level):
        for variant in _variants(slots, public.level.agents):
            spec = (
                _spec(variant, public, task.key.ref(), view)
                if variant is slots
                else _spec_free(variant, public, view)
            )
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
    staged = view.capacities([dataclasses.replace(s, home=0) if s.home == POST else s for s in stages])
    sized = {
        slot: st.with_capacity(done.capacity) for slot, st, done in zip(order, stages, staged, strict=True)
    }
    try:
        return wire(sized, public.source_names)
    except SpecError:
        return None
