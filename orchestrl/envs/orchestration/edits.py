"""LEMON's one-agent edits, applied to a spec for counterfactual re-execution.

An :class:`~orchestrl.envs.counterfactual.Edit` (the counterfactual protocol's) changes exactly one
agent's choice:

- ``BASE_DUTY``: the duty goes back to its role's base duty;
- ``DROP_EDGE``: one dependency edge is removed. The node then works from what the dropped parent
  worked from (its first input): the analogue of an agent losing a parent's message and seeing
  only the task. Dropping a source edge leaves nothing to fall back on: the spec is invalid;
- ``DOWNGRADE_CAPACITY``: large -> medium -> small;
- ``ALTERNATIVE``: the agent's action is replaced by a given alternative (any action, even idle),
  and the team's whole joint action is decoded again: the true counterfactual of the team's
  actions, in which every later agent's table references and ``auto`` choices (inputs, capacity;
  see :mod:`.actions`) resolve against the edited node, as they would have had the agent acted so.

The first three edit the spec as LEMON defines them (they change agent i's node, not its action:
a dropped edge can leave a node no action writes) and leave the other nodes as written. An edit
that changes nothing (reverting a base duty, downgrading ``small``, an idle agent) is
reported as not applicable, with ``delta = 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orchestrl.envs.counterfactual import Edit, EditFamily
from orchestrl.envs.orchestration.spec import (
    ARITY,
    CAPACITIES,
    OrchestrationSpec,
    SpecError,
    SpecIssue,
    base_duty,
    parse_spec,
)


@dataclass(frozen=True)
class CounterfactualResult:
    """``delta = base_reward - reward``: how much the agent's original choice was worth."""

    agent: str
    edit: Edit
    applicable: bool
    reward: float
    base_reward: float
    terms: Mapping[str, float] = field(default_factory=dict)
    spec: OrchestrationSpec | None = None  # the edited spec (None when invalid or not applicable)
    spec_errors: tuple[str, ...] = ()
    nodes_run: int = 0  # nodes the sandbox actually ran for the edited spec
    cache_hits: int = 0
    examples_held: float = 0.0  # the edited spec's output: share of the example rows it holds

    @property
    def delta(self) -> float:
        return self.base_reward - self.reward


def apply_edit(
    spec: OrchestrationSpec,
    node_id: str,
    edit: Edit,
    decode: Callable[[tuple[int, ...]], Mapping[str, Any]],
) -> OrchestrationSpec | None:
    """The edited spec; None when the edit changes nothing; raises :class:`SpecError` when the
    edited spec is invalid. ``decode`` turns an ALTERNATIVE action of ``node_id``'s agent into the
    spec data of the team's joint action with that agent's action replaced (the env's own decode
    of the actions that wrote ``spec``; raises :class:`SpecError` for a team it cannot decode)."""
    if edit.family is EditFamily.ALTERNATIVE:
        if edit.action is None:
            raise ValueError("an alternative edit needs an action")
        edited = parse_spec(decode(tuple(int(v) for v in np.asarray(edit.action).reshape(-1))))
        return None if edited == spec else edited
    data = spec.model_dump(mode="json")
    nodes = data["nodes"]
    index = next((i for i, n in enumerate(nodes) if n["id"] == node_id), None)
    if index is None:
        return None
    node = nodes[index]
    if edit.family is EditFamily.BASE_DUTY:
        base = base_duty(node["role"]).model_dump(mode="json")
        if node["duty"] == base:
            return None
        node["duty"] = base
    elif edit.family is EditFamily.DOWNGRADE_CAPACITY:
        level = [c.value for c in CAPACITIES].index(node["capacity"])
        if level == 0:
            return None
        node["capacity"] = CAPACITIES[level - 1].value
    elif edit.family is EditFamily.DROP_EDGE:
        deps = list(node["deps"])
        if not deps:
            return None
        position = edit.edge % len(deps)
        dropped = deps.pop(position)
        if len(deps) < ARITY[spec.node(node_id).role]:
            parent = next((n for n in nodes if n["id"] == dropped), None)
            if parent is None:
                raise SpecError(
                    [
                        SpecIssue(
                            code="arity",
                            location=node_id,
                            message=f"dropping source {dropped} leaves {node_id} without input",
                        )
                    ]
                )
            deps.insert(position, parent["deps"][0])
        node["deps"] = deps
    return parse_spec(data)
