"""Plans: stages placed into a level's agent slots, wired, and run in-process.

A *stage* is one node before it gets an agent: a role, a duty, where it acts (``home``: the source
a cleaning stage or a join's right side reads, or :data:`POST` for stages on the joined stream) and
a capacity. Each level has a *skeleton*, one family per agent slot (``prep`` cleans a source,
``join`` merges a table into the main stream, ``post`` shapes the output). The skeleton is the
team's convention, used by the task generator and the solver to decide which agent writes which
stage; the action space does not enforce it, and specs that break it (a filter after the join, a
join in the first slot) run and score like any other.

:func:`wire` gives the canonical wiring: a cleaning stage extends its source's chain, a join merges
that chain into the main (fact) stream, a post stage extends the main stream. :func:`run_spec`
runs a spec with the same :mod:`.ops` code the sandbox runs, in this process (the generator and
the benchmarks use it; agents' specs always run in the sandbox).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.compiler import CALLS
from orchestrl.envs.orchestration.spec import Capacity, OrchestrationSpec, Role, TaskRef, parse_spec

POST = -1
"""``home`` of stages that act on the main (joined) stream."""
PREP_ROLES = (Role.FILTER, Role.DEDUP)
POST_ROLES = (Role.DERIVE, Role.AGGREGATE, Role.TOPK, Role.SELECT)


class Family(StrEnum):
    PREP = "prep"
    JOIN = "join"
    POST = "post"


def family_of(role: Role) -> Family:
    if role in PREP_ROLES:
        return Family.PREP
    return Family.JOIN if role is Role.JOIN else Family.POST


@dataclass(frozen=True)
class Stage:
    role: Role
    duty: Any
    home: int
    capacity: Capacity = Capacity.SMALL

    def order(self) -> tuple[int, int, int, str]:
        """The canonical order: clean each source (filter, then dedup), join, then post-process.
        Two filters of one table (a conjunction, level 5) go in the order of their duties' fields,
        so a conjunction is one plan whichever filter was drawn first."""
        if self.role in PREP_ROLES:
            duty = "" if self.duty is None else self.duty.model_dump_json()
            return (0, self.home, PREP_ROLES.index(self.role), duty)
        if self.role is Role.JOIN:
            return (1, self.home, 0, "")
        return (2, 0, POST_ROLES.index(self.role), "")

    def with_capacity(self, capacity: Capacity) -> Stage:
        return replace(self, capacity=capacity)


def cleaning_fits(stages: Sequence[Stage], filters_per_table: int) -> bool:
    """Whether cleaning stages can share their tables: one dedup per table, at most
    ``filters_per_table`` filters on one table (two: a conjunction), no two of them reading the same
    column (a second filter on a column narrows the first, or empties the table)."""
    dedups = [st.home for st in stages if st.role is Role.DEDUP]
    filters = [st.home for st in stages if st.role is Role.FILTER]
    columns = [(st.home, st.duty.column) for st in stages if st.role is Role.FILTER]
    return (
        len(set(dedups)) == len(dedups)
        and all(filters.count(h) <= filters_per_table for h in set(filters))
        and len(set(columns)) == len(columns)
    )


def assign_slots(stages: Sequence[Stage], skeleton: Sequence[Family]) -> dict[int, Stage] | None:
    """Stages in canonical order, placed into the skeleton's slots of their family in order;
    None when a family has more stages than slots."""
    slots: dict[int, Stage] = {}
    free = {f: [i for i, g in enumerate(skeleton) if g is f] for f in Family}
    for stage in sorted(stages, key=Stage.order):
        places = free[family_of(stage.role)]
        if not places:
            return None
        slots[places.pop(0)] = stage
    return slots


def wire(
    slots: Mapping[int, Stage], source_names: Sequence[str], task: TaskRef | None = None
) -> OrchestrationSpec:
    """The spec of ``slots`` (slot -> stage) with the canonical wiring; node ids ``agent_<slot>``,
    the output is the last slot's node. A cleaning stage acts on its table's chain, or on the main
    stream when its home is :data:`POST`. Raises :class:`.spec.SpecError` for an impossible plan."""
    heads = {i: name for i, name in enumerate(source_names)}
    nodes = []
    for slot in sorted(slots):
        stage = slots[slot]
        node_id = f"agent_{slot}"
        if stage.role in PREP_ROLES and stage.home != POST:
            deps = [heads[stage.home]]
            heads[stage.home] = node_id
        elif stage.role is Role.JOIN:
            deps = [heads[0], heads[stage.home]]
            heads[0] = node_id
        else:
            deps = [heads[0]]
            heads[0] = node_id
        nodes.append(
            {
                "id": node_id,
                "role": stage.role.value,
                "duty": stage.duty.model_dump(mode="json"),
                "capacity": stage.capacity.value,
                "deps": deps,
            }
        )
    data: dict[str, Any] = {"sources": list(source_names), "nodes": nodes, "output": nodes[-1]["id"]}
    if task is not None:
        data["task"] = task.model_dump()
    return parse_spec(data)


def apply_node(
    role: Role, duty: Any, frames: list[pd.DataFrame], capacity: str
) -> tuple[pd.DataFrame, float]:
    """One node's op on its input frames (the code the sandbox runs, called as the compiled
    pipeline calls it: :data:`.compiler.CALLS`)."""
    name, fields = CALLS[Role(role).value]
    p = duty.model_dump()
    return getattr(ops, name)(*frames, **{f: p[f] for f in fields}, capacity=capacity)


def run_stages(
    sources: Mapping[str, pd.DataFrame],
    names: Sequence[str],
    stages: Sequence[Stage],
    heads: dict[int, pd.DataFrame] | None = None,
) -> list[pd.DataFrame]:
    """Each stage's output under the canonical wiring (stages in canonical order), from the given
    chain heads (default: the sources; updated in place)."""
    heads = {i: sources[n] for i, n in enumerate(names)} if heads is None else heads
    outputs = []
    for st in stages:
        chain = st.home if st.role in PREP_ROLES else 0
        frames = [heads[0], heads[st.home]] if st.role is Role.JOIN else [heads[chain]]
        out, _ = apply_node(st.role, st.duty, frames, st.capacity.value)
        heads[chain] = out
        outputs.append(out)
    return outputs


def main_output(
    sources: Mapping[str, pd.DataFrame], names: Sequence[str], stages: Sequence[Stage]
) -> pd.DataFrame:
    """The main (fact) stream after ``stages``, canonical wiring (the fact table if none touched it)."""
    heads = {i: sources[n] for i, n in enumerate(names)}
    run_stages(sources, names, stages, heads)
    return heads[0]


@dataclass(frozen=True)
class InProcessRun:
    outputs: dict[str, pd.DataFrame]
    work: float
    output: pd.DataFrame | None
    error: str | None = None


def run_spec(sources: Mapping[str, pd.DataFrame], spec: OrchestrationSpec) -> InProcessRun:
    """Runs ``spec`` on ``sources`` in this process; an op that raises ends the run with ``error``."""
    outputs: dict[str, pd.DataFrame] = {}
    work = 0.0
    for node_id in spec.topological_order():
        node = spec.node(node_id)
        frames = [sources[d] if d in sources else outputs[d] for d in node.deps]
        try:
            outputs[node_id], w = apply_node(node.role, node.duty, frames, node.capacity.value)
        except Exception as exc:
            return InProcessRun(outputs, work, None, f"{node_id}: {type(exc).__name__}: {exc}")
        work += w
    return InProcessRun(outputs, work, outputs[spec.output_id])


def plan_signature(spec: OrchestrationSpec) -> str:
    """What a spec computes, up to node ids, slot placement and capacities: the output node's
    role and duty over the signatures of its inputs (sources by name). Two specs with the same
    signature are the same plan."""
    memo: dict[str, str] = {}

    def sig(name: str) -> str:
        if name in spec.sources:
            return name
        if name not in memo:
            node = spec.node(name)
            inputs = ",".join(sig(d) for d in node.deps)
            memo[name] = f"{node.role.value}{node.duty.model_dump_json()}({inputs})"
        return memo[name]

    return sig(spec.output_id)
