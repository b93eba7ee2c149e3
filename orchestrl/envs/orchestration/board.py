"""The shared board: after a round, every node's public outcome, seen by every agent.

A data engineer debugging a pipeline looks at each step, not only at the end: how many rows it
left, which of the wanted columns it already has, and whether the rows they expect are still
there. The board gives every agent that view of every node the team wrote (:func:`board`), so an
agent can see where the example rows were lost, or which node failed, and whose choice to revise.

Everything on it is computed from the execution and the public inputs (the target's column names
and its example rows): a node's status, its rows against its first input's, the overlap of its
columns with the target's, and for each example row whether a row of its output agrees with it on
the target columns the node has (``1``), none does (``-1``), or the node has none of those columns
(``0``: nothing to tell). Nothing hidden (the rest of the target, the reference) is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from orchestrl.envs.orchestration.executor import Execution
from orchestrl.envs.orchestration.reward import schema_progress
from orchestrl.envs.orchestration.spec import OrchestrationSpec
from orchestrl.envs.orchestration.tables import row_hashes


@dataclass(frozen=True)
class NodeReport:
    """One node's line on the board."""

    status: str  # "ok", "error" (its own code failed) or "skipped" (an input failed)
    rows_ratio: float = 1.0  # rows out / rows of its first input
    schema_match: float = 0.0  # its columns against the target's (Jaccard)
    survived: tuple[int, ...] = ()  # per example row: 1 held, -1 lost, 0 nothing to tell
    is_output: bool = False


def board(
    spec: OrchestrationSpec,
    execution: Execution,
    agents: Sequence[str],
    sources: Mapping[str, pd.DataFrame],
    target_columns: frozenset[str],
    examples: pd.DataFrame,
) -> tuple[NodeReport | None, ...]:
    """Per agent (in ``agents``' order), its node's report; None for an agent that wrote no node."""
    return tuple(
        _report(agent, spec, execution, sources, target_columns, examples)
        if agent in execution.nodes
        else None
        for agent in agents
    )


def _rows_in(
    spec: OrchestrationSpec, execution: Execution, node_id: str, sources: Mapping[str, pd.DataFrame]
) -> int:
    """Rows of a node's first input: a source table, or an earlier node's output."""
    first = spec.node(node_id).deps[0]
    return len(sources[first]) if first in sources else execution.nodes[first].rows


def _report(
    node_id: str,
    spec: OrchestrationSpec,
    execution: Execution,
    sources: Mapping[str, pd.DataFrame],
    target_columns: frozenset[str],
    examples: pd.DataFrame,
) -> NodeReport:
    run = execution.nodes[node_id]
    is_output = node_id == spec.output_id
    if run.status != "ok":
        return NodeReport(run.status, is_output=is_output)
    frame = execution.node_output(node_id)
    return NodeReport(
        "ok",
        rows_ratio=run.rows / max(_rows_in(spec, execution, node_id, sources), 1),
        schema_match=schema_progress(list(run.columns), target_columns),
        survived=survived(frame, target_columns, examples) if frame is not None else (),
        is_output=is_output,
    )


def survived(frame: pd.DataFrame, target_columns: frozenset[str], examples: pd.DataFrame) -> tuple[int, ...]:
    """Per example row: 1 when a row of ``frame`` agrees with it on every target column ``frame``
    has, -1 when none does, 0 for every row when ``frame`` has none of the target's columns."""
    frame = frame.rename(columns=str)
    shared = sorted(c for c in frame.columns if c in target_columns and c in examples.columns)
    if not shared:
        return (0,) * len(examples)
    have = set(row_hashes(frame, shared).tolist())
    return tuple(1 if h in have else -1 for h in row_hashes(examples, shared).tolist())
