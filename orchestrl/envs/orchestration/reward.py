"""The score of an executed spec: R = success + efficiency bonus - graph cost (+ shaping).

Terms, each reported separately:

- ``r_success``: 1 if the output equals the target up to row order, column order and float
  tolerance; otherwise partial credit ``0.5 * column Jaccard * row overlap`` (< 0.5).
- ``r_efficiency``: ``efficiency * min(1, reference work / work)``, only for an exact success (a
  cheap wrong answer earns nothing). Work is the measured cost of what ran (:mod:`.ops`), so an
  unneeded large capacity or an extra node costs.
- ``r_graph``: ``-graph * (nodes + edges) / (3 * agents)`` (a full graph of the level costs
  ``graph``).
- ``r_process``: dense shaping, weighted ``process * (1 - schedule)``, from public facts only (the
  ones round 2's feedback shows): ``(schema + held) / 2``, where ``schema`` is the column Jaccard
  of the team's output with the target's columns and ``held`` the share of the example rows the
  output holds (0 unless it has exactly the target's columns). It never looks at the hidden
  reference: several plans produce the target, and the version that paid for reproducing the
  reference's node outputs rewarded one arbitrary plan among them, for something no agent could
  see. Nor is it a mean over nodes: a mean of per-node schema similarity paid a team for leaving
  upstream nodes idle (a lone final stage reading the raw source matched the target's schema
  best); per-node schema similarity stays each agent's ``schema_match`` feedback and
  ``Score.node_progress``. Two targets that fit the same public inputs get the same shaping.
- ``r_penalty``: ``-penalty[kind] * (1 - 0.75 * schedule)`` for the worst failure (invalid spec,
  exception, timeout, limit breach, sandbox violation).

``schedule`` in [0, 1] is the curriculum knob: 0 = dense early training (shaping and penalties
at full weight), 1 = final-heavy (shaping off, penalties at a quarter). The reference solution
scores at least ``1 + efficiency - graph`` > 0.99 at any schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.executor import Execution
from orchestrl.envs.orchestration.tables import Match, TargetIndex, row_hashes

PENALTIES: Mapping[str, float] = {
    "invalid": 0.5,
    "exception": 0.25,
    "bad_output": 0.25,
    "timeout": 0.4,
    "cpu_limit": 0.4,
    "memory": 0.4,
    "denied": 0.5,
    "crash": 0.4,
    "protocol": 0.4,
}
TERMS = ("r_success", "r_efficiency", "r_graph", "r_process", "r_penalty")


@dataclass(frozen=True)
class RewardConfig:
    schedule: float = 0.0
    efficiency: float = 0.1
    graph: float = 0.05
    process: float = 0.3
    penalties: Mapping[str, float] = field(default_factory=lambda: dict(PENALTIES))

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.schedule) <= 1.0:
            raise ValueError(f"reward schedule must be in [0, 1], got {self.schedule}")

    @property
    def process_weight(self) -> float:
        return self.process * (1.0 - self.schedule)

    @property
    def penalty_scale(self) -> float:
        return 1.0 - 0.75 * self.schedule


@dataclass(frozen=True)
class Score:
    success: float  # 1.0 / 0.0: exact match
    r_success: float
    r_efficiency: float
    r_graph: float
    r_process: float
    r_penalty: float
    work: float = 0.0
    failure: str | None = None  # the worst failure kind, if any
    node_progress: Mapping[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.r_success + self.r_efficiency + self.r_graph + self.r_process + self.r_penalty

    def terms(self) -> dict[str, float]:
        return {"score": self.total, "success": self.success, **{t: float(getattr(self, t)) for t in TERMS}}


UNSCORED = Score(success=0.0, r_success=0.0, r_efficiency=0.0, r_graph=0.0, r_process=0.0, r_penalty=0.0)
"""The score of a round on a task with no hidden target (a user's own tables): nothing to score."""


def schema_progress(columns: tuple[str, ...] | list[str], target: frozenset[str]) -> float:
    cols = frozenset(columns)
    union = cols | target
    return len(cols & target) / len(union) if union else 0.0


class Scorer:
    """Scores executions of one task (the target is indexed once; matches are memoised).
    ``examples``: the task's public example rows, which ``r_process`` checks the output against
    (none: only the schema half of the shaping can be earned)."""

    def __init__(
        self,
        target: TargetIndex,
        reference_work: float,
        agents: int,
        config: RewardConfig,
        memoise: bool = True,
        examples: pd.DataFrame | None = None,
    ) -> None:
        self.target = target
        self.reference_work = reference_work
        self.agents = agents
        self.config = config
        self.memoise = memoise
        self.columns = frozenset(str(c) for c in examples.columns) if examples is not None else target.columns
        self._examples = (
            row_hashes(examples, sorted(self.columns)) if examples is not None else np.zeros(0, np.uint64)
        )
        self._matches: dict[str, tuple[Match, float]] = {}

    def invalid(self) -> Score:
        c = self.config
        return Score(0.0, 0.0, 0.0, 0.0, 0.0, -c.penalties["invalid"] * c.penalty_scale, failure="invalid")

    def score(self, execution: Execution) -> Score:
        c = self.config
        spec = execution.spec
        match, shaping = Match(False, 0.0, 0.0, 0.0), 0.0
        broken = False
        if execution.ok:
            key = str(execution.output_hash)
            memo = self._matches.get(key) if self.memoise else None
            if memo is None:
                output = execution.output
                broken = output is None  # the worker sent something that is not a table
                if output is not None:
                    memo = (self.target.compare(output), self.public_progress(output))
                    self._matches[key] = memo
            if memo is not None:
                match, shaping = memo
        success = 1.0 if match.exact else 0.0
        work = execution.work
        efficiency = c.efficiency * min(1.0, self.reference_work / max(work, 1e-9)) if match.exact else 0.0
        graph = -c.graph * (len(spec.nodes) + spec.edges()) / (3.0 * self.agents)
        progress = {
            n.node_id: schema_progress(n.columns, self.columns) if n.status == "ok" else 0.0
            for n in execution.nodes.values()
        }
        process = c.process_weight * shaping
        kinds = [k for k in execution.error_kinds if k != "upstream"] + (["protocol"] if broken else [])
        failure = max(kinds, key=lambda k: c.penalties.get(k, 0.25)) if kinds else None
        penalty = -c.penalties.get(failure, 0.25) * c.penalty_scale if failure else 0.0
        return Score(success, match.credit, efficiency, graph, process, penalty, work, failure, progress)

    def public_progress(self, output: pd.DataFrame) -> float:
        """``(schema + held) / 2`` of an output (module docstring, ``r_process``): public facts
        only, the same whichever plan produced the hidden target."""
        names = [str(c) for c in output.columns]
        schema = schema_progress(names, self.columns)
        held = 0.0
        if len(self._examples) and len(set(names)) == len(names) and frozenset(names) == self.columns:
            have = set(row_hashes(output, sorted(self.columns)).tolist())
            held = sum(h in have for h in self._examples.tolist()) / len(self._examples)
        return (schema + held) / 2.0
