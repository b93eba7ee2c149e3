"""The expert: the actions that write the task's hidden reference pipeline.

The reference is built in canonical order with node ids ``agent_0 .. agent_{k-1}`` and the
smallest capacity each node needs, so agent ``i`` writes reference node ``i`` and the agents after
the last stage stay idle. This is the solver behind ``OrchestrationEnv.expert_actions`` and the
demonstrations for behaviour-cloning warm starts; it scores 1 + efficiency - graph cost.
"""

from __future__ import annotations

import numpy as np

from orchestrl.envs.orchestration.actions import ActionLayout, agent_id
from orchestrl.envs.orchestration.tasks import Task


def expert_actions(task: Task, layout: ActionLayout) -> dict[str, np.ndarray]:
    """One action per agent slot reproducing ``task.reference`` (hidden: the expert may read it)."""
    if task.reference is None:
        raise ValueError("this task carries no reference pipeline")
    nodes = {n.id: n for n in task.reference.nodes}
    if len(nodes) > layout.agents:
        raise ValueError(f"reference has {len(nodes)} nodes for {layout.agents} agents")
    return {agent_id(i): layout.encode(task, i, nodes.get(agent_id(i))) for i in range(layout.agents)}
