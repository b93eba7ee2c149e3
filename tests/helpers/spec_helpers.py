"""Reading generated LEMON specs in tests (tasks and solver tests share it)."""

from __future__ import annotations

from orchestrl.envs.orchestration.spec import OrchestrationSpec, Role


def conjunctions(spec: OrchestrationSpec) -> list[tuple[str, str]]:
    """(first filter, second filter) node pairs where one filter reads the other: a table filtered
    twice, as level 5 plans do."""
    nodes = {n.id: n for n in spec.nodes}
    return [
        (n.deps[0], n.id)
        for n in spec.nodes
        if n.role is Role.FILTER and n.deps[0] in nodes and nodes[n.deps[0]].role is Role.FILTER
    ]
