"""Each agent's ``MultiDiscrete`` action: which node it writes into the spec.

Components (``COMPONENTS``), for agent slot ``i`` of a level with ``S`` source slots, ``K``
candidate duties per role and ``N`` agents:

- ``role``: 0 = idle (no node), else 1 + index in :data:`.spec.ROLES`;
- ``duty``: index into the task's candidate list for that role (0 = the base duty);
- ``capacity``: small / medium / large, or ``auto`` (3): the capacity the data calls for, read
  off the profile of the columns the duty reads (large for money-formatted numbers, medium for
  messy text or blanks, else small; a column an earlier node read above small counts as clean);
- ``input_a``: a source table (0..S-1) *as the team has it so far*, an earlier agent's node
  (S + j), or ``auto`` (S + N - 1): the table the duty's columns live in for a cleaning duty, the
  main (fact) stream otherwise. A table reference resolves, in slot order, to the latest node of
  an earlier agent whose first input is that table's chain (a filter on ``orders``, then a join
  into it, ...), or to the raw table when none is: "read the orders as cleaned so far", which is
  how a data engineer wires a pipeline, and what lets an agent wire its node without knowing
  which earlier agents stay idle;
- ``input_b``: 0 = none, else 1 + the same choices; only joins read it (they need it); ``auto``
  is the table holding the join's right key.

``auto`` delegates a choice to what the data profile implies; the spec records the resolved
capacity and inputs, so counterfactual edits act on concrete nodes.

The mask (factorised: one 0/1 vector per component, concatenated) allows every role, duty and
capacity, the task's existing sources and the agents before ``i``. So every spec whose deps point
backwards and that reads no raw table after an earlier agent cleaned it is expressible; invalid
combinations the mask cannot rule out (a join without a second input or joining a table with
itself, a dependency on an idle agent) are caught by spec validation and penalised.

Table references in a single node's action (:meth:`ActionLayout.decode_node`, e.g. a swapped-in
alternative in a counterfactual) resolve against the earlier nodes it is given, else against the
last spec the env executed (``context``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.spaces import MultiDiscrete

from orchestrl.envs.orchestration.spec import (
    CAPACITIES,
    DUTY_TYPES,
    ROLES,
    Capacity,
    NodeSpec,
    Role,
    SpecError,
    SpecIssue,
)
from orchestrl.envs.orchestration.tasks import Task

COMPONENTS = ("role", "duty", "capacity", "input_a", "input_b")
AUTO = len(CAPACITIES)
"""The ``capacity`` value meaning ``auto``."""


def agent_id(slot: int) -> str:
    return f"agent_{slot}"


class MaskedMultiDiscrete(MultiDiscrete):
    """``MultiDiscrete`` whose ``sample(mask=...)`` also accepts the observation's flat float mask.

    PettingZoo's ``parallel_api_test`` samples with ``obs["action_mask"]``; gymnasium expects a
    tuple of int8 vectors, one per component. Everything else is plain ``MultiDiscrete``."""

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        if mask is not None and not isinstance(mask, tuple):
            flat = np.asarray(mask).reshape(-1)
            cuts = np.cumsum(self.nvec)[:-1]
            mask = tuple(part.astype(np.int8) for part in np.split(flat, cuts))
        return super().sample(mask=mask, probability=probability)


@dataclass(frozen=True)
class ActionLayout:
    agents: int
    sources: int  # source slots of the level
    duties: int  # candidates per role
    live_duties: int = 0  # candidates the tasks really have (0: all); fewer when spaces are padded
    context: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    """``nodes``: the last executed spec's nodes (as data), for :meth:`decode_node` without
    ``before``."""

    @property
    def nvec(self) -> np.ndarray:
        inputs = self.sources + self.agents  # tables, earlier agents, auto
        return np.array([1 + len(ROLES), self.duties, AUTO + 1, inputs, 1 + inputs], dtype=np.int64)

    @property
    def auto_input(self) -> int:
        """The ``input_a`` value meaning ``auto`` (``input_b`` uses one more)."""
        return self.sources + self.agents - 1

    def space(self) -> MaskedMultiDiscrete:
        return MaskedMultiDiscrete(self.nvec)

    def input_name(self, task: Task, index: int, heads: Mapping[int, str]) -> str:
        """The dep an ``input_a`` index names (``input_b`` uses ``index - 1``)."""
        if index < self.sources:
            return heads.get(index, f"missing_source_{index}")
        return agent_id(index - self.sources)

    def heads(self, task: Task, before: Sequence[Mapping[str, Any]]) -> dict[int, str]:
        """Each source table's chain head after the nodes ``before`` (in slot order): the latest
        node whose first input is on that table's chain, else the table itself."""
        heads = {i: name for i, name in enumerate(task.source_names)}
        chain = {name: i for i, name in enumerate(task.source_names)}
        for node in before:
            deps = list(node["deps"])
            c = chain.get(deps[0]) if deps else None
            if c is not None:
                chain[node["id"]] = c
                heads[c] = node["id"]
        return heads

    def mask(self, task: Task, slot: int) -> np.ndarray:
        """The factorised mask of agent ``slot`` (every component keeps at least one 1)."""
        nvec = self.nvec
        inputs = np.zeros(nvec[3], dtype=np.float32)
        inputs[: len(task.source_names)] = 1.0
        inputs[self.sources : self.sources + slot] = 1.0
        inputs[self.auto_input] = 1.0
        parts = [
            np.ones(nvec[0]),
            (np.arange(nvec[1]) < (self.live_duties or self.duties)).astype(np.float32),
            np.ones(nvec[2]),
            inputs,
            np.concatenate([[1.0], inputs]),
        ]
        return np.concatenate(parts).astype(np.float32)

    def check(self, action: Any) -> np.ndarray:
        """The action as int64 components; raises ``ValueError`` when it is not one."""
        values = np.asarray(action)
        if values.shape != (len(COMPONENTS),):
            raise ValueError(f"action must have {len(COMPONENTS)} components, got shape {values.shape}")
        if not np.issubdtype(values.dtype, np.number) or not np.all(np.isfinite(values)):
            raise ValueError(f"action must be finite integers, got {values.tolist()}")
        ints = values.astype(np.int64)
        if not np.array_equal(ints, values) or np.any(ints < 0) or np.any(ints >= self.nvec):
            raise ValueError(f"action {values.tolist()} is outside MultiDiscrete({self.nvec.tolist()})")
        return ints

    def decode_node(
        self, task: Task, slot: int, action: Any, before: Sequence[Mapping[str, Any]] | None = None
    ) -> dict[str, Any] | None:
        """The node (as spec data, unvalidated) agent ``slot`` writes, or None when idle. Table
        references resolve against ``before`` (the nodes of earlier slots; default: those of the
        last executed spec, see the module docstring)."""
        role_i, duty_i, cap_i, a, b = (int(v) for v in self.check(action))
        if role_i == 0:
            return None
        if before is None:
            before = [n for n in self.context.get("nodes", ()) if _slot(n["id"]) < slot]
        heads = self.heads(task, before)
        role = ROLES[role_i - 1]
        duty = task.candidates[role][duty_i]
        view = task.public.view
        home = view.home(role, duty)
        if a == self.auto_input:
            a = home if role in (Role.FILTER, Role.DEDUP) and home is not None and home >= 0 else 0
        deps = [self.input_name(task, a, heads)]
        if role is Role.JOIN and b > 0:
            if b == self.auto_input + 1:
                b = 1 + (home if home is not None and home > 0 else _unjoined(task, before))
            deps.append(self.input_name(task, b - 1, heads))
        if cap_i == AUTO:
            where = home
            if role in (Role.FILTER, Role.DEDUP):
                where = _chain_of(task, before, deps[0])
            elif role is Role.JOIN and len(deps) > 1:
                where = _chain_of(task, before, deps[1])
            capacity = view.capacity_needed(role, duty, where, _cleaned(task, before))[0]
        else:
            capacity = CAPACITIES[cap_i]
        return {
            "id": agent_id(slot),
            "role": role.value,
            "duty": duty.model_dump(mode="json"),
            "capacity": capacity.value,
            "deps": deps,
        }

    def decode(self, task: Task, actions: Mapping[str, Any]) -> dict[str, Any]:
        """Spec data for the team's actions; raises :class:`SpecError` for malformed actions or
        an all-idle team. The output is the last active agent's node."""
        nodes: list[dict[str, Any]] = []
        issues = []
        for slot in range(self.agents):
            name = agent_id(slot)
            if name not in actions:
                continue
            try:
                node = self.decode_node(task, slot, actions[name], before=nodes)
            except (ValueError, TypeError, IndexError) as exc:
                issues.append(SpecIssue(code="bad_action", location=name, message=str(exc)))
                continue
            if node is not None:
                nodes.append(node)
        if issues:
            raise SpecError(issues)
        if not nodes:
            raise SpecError([SpecIssue(code="empty", location="nodes", message="every agent is idle")])
        return {
            "task": task.key.ref().model_dump(),
            "sources": list(task.source_names),
            "nodes": nodes,
            "output": nodes[-1]["id"],
        }

    def encode(
        self, task: Task, slot: int, node: NodeSpec | None, before: Sequence[Mapping[str, Any]] = ()
    ) -> np.ndarray:
        """The action that makes agent ``slot`` write ``node`` after the nodes ``before`` (idle
        when None), using ``auto`` wherever it resolves to the node's own choice; otherwise a dep
        that is a table's chain head becomes that table's reference, any other earlier node its
        agent's index."""
        if node is None:
            return np.zeros(len(COMPONENTS), dtype=np.int64)
        duty = task.candidates[node.role].index(node.duty)
        role = 1 + ROLES.index(node.role)
        heads = {name: c for c, name in self.heads(task, before).items()}
        deps = [heads[d] if d in heads else self.sources + _slot(d) for d in node.deps]
        explicit = [CAPACITIES.index(node.capacity), deps[0], deps[1] + 1 if len(deps) > 1 else 0]
        auto = [AUTO, self.auto_input, self.auto_input + 1 if len(deps) > 1 else 0]
        action = np.array([role, duty, *explicit], dtype=np.int64)
        for c in range(3):  # take auto for a component where it yields the same node
            trial = action.copy()
            trial[2 + c] = auto[c]
            if self.decode_node(task, slot, trial, before) == self.decode_node(task, slot, action, before):
                action = trial
        return action


def _cleaned(task: Task, before: Sequence[Mapping[str, Any]]) -> set[tuple[int, str]]:
    """``(chain, column)`` pairs the nodes ``before`` left clean (see
    :meth:`.analysis.PublicView.cleaned_after`)."""
    view = task.public.view
    chain = {name: i for i, name in enumerate(task.source_names)}
    out: set[tuple[int, str]] = set()
    for node in before:
        deps = list(node["deps"])
        c = chain.get(deps[0]) if deps else None
        if c is None:
            continue
        chain[node["id"]] = c
        role = Role(node["role"])
        duty = DUTY_TYPES[role].model_validate(node["duty"])
        if role in (Role.FILTER, Role.DEDUP):
            home: int | None = c
        elif role is Role.JOIN:
            home = chain.get(deps[1]) if len(deps) > 1 else None
        else:
            home = -1
        reads = view.reads(role, duty, home)
        out = view.cleaned_after(role, home, Capacity(node["capacity"]), reads, out)
    return out


def _chain_of(task: Task, before: Sequence[Mapping[str, Any]], name: str) -> int | None:
    """The source chain a dep belongs to (None for an unknown name)."""
    chain = {n: i for i, n in enumerate(task.source_names)}
    for node in before:
        if node["deps"] and node["deps"][0] in chain:
            chain[node["id"]] = chain[node["deps"][0]]
    return chain.get(name)


def _unjoined(task: Task, before: Sequence[Mapping[str, Any]]) -> int:
    """The first dimension table no earlier join has read (1 when all have been)."""
    read = {d for node in before if node["role"] == Role.JOIN.value for d in node["deps"]}
    heads = {}
    chain = {name: i for i, name in enumerate(task.source_names)}
    for node in before:
        if node["deps"] and node["deps"][0] in chain:
            chain[node["id"]] = chain[node["deps"][0]]
    for name, i in chain.items():
        heads.setdefault(i, set()).add(name)
    for i in range(1, len(task.source_names)):
        if not heads.get(i, set()) & read:
            return i
    return 1


def _slot(node_id: str) -> int:
    return int(node_id.rsplit("_", 1)[1])
