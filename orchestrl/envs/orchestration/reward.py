"""The score of an executed spec: R = success + efficiency bonus - graph cost (+ shaping).

Terms, each reported separately:

- ``r_success``: 1 if the output equals the target up to row order, column order and float
  tolerance; otherwise partial credit ``0.5 * column Jaccard * row overlap`` (< 0.5).
- ``r_efficiency``: ``efficiency * min(1, reference work / work)``, only for an exact success (a
  cheap wrong answer earns nothing). Work is the measured cost of what ran (:mod:`.ops`), so an
  unneeded large capacity or an extra node costs.
- ``r_graph``: ``-graph * (nodes + edges) / (3 * agents)`` (a full graph of the level costs
  ``graph``).
- ``r_process``: dense shaping, weighted ``process * (1 - schedule)``: the share of the hidden
  reference's stages whose output some node reproduces exactly (same output hash), so every
  correct node earns credit the moment it is right, even while a later node is still wrong.
  (A mean of per-node schema similarity, the first version, paid a team for leaving upstream
  nodes idle: a lone final stage reading the raw source matched the target's schema best. It
  stays each agent's ``schema_match`` feedback, ``Score.node_progress``, and the fallback of a
  scorer given no reference outputs.)
- ``r_penalty``: ``-penalty[kind] * (1 - 0.75 * schedule)`` for the worst failure (invalid spec,
  exception, timeout, limit breach, sandbox violation).

``schedule`` in [0, 1] is the curriculum knob: 0 = dense early training (shaping and penalties
at full weight), 1 = final-heavy (shaping off, penalties at a quarter). The reference solution
scores at least ``1 + efficiency - graph`` > 0.99 at any schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from orchestrl.envs.orchestration.executor import Execution
from orchestrl.envs.orchestration.tables import Match, TargetIndex

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
    """Scores executions of one task (the target is indexed once; matches are memoised)."""

    def __init__(
        self,
        target: TargetIndex,
        reference_work: float,
        agents: int,
        config: RewardConfig,
        memoise: bool = True,
        reference_outputs: frozenset[str] = frozenset(),
    ) -> None:
        self.target = target
        self.reference_outputs = reference_outputs  # output hashes of the reference's stages
        self.reference_work = reference_work
        self.agents = agents
        self.config = config
        self.memoise = memoise
        self._matches: dict[str, Match] = {}

    def invalid(self) -> Score:
        c = self.config
        return Score(0.0, 0.0, 0.0, 0.0, 0.0, -c.penalties["invalid"] * c.penalty_scale, failure="invalid")

    def score(self, execution: Execution) -> Score:
        c = self.config
        spec = execution.spec
        match = Match(False, 0.0, 0.0, 0.0)
        broken = False
        if execution.ok:
            key = str(execution.output_hash)
            match = self._matches.get(key) if self.memoise else None  # type: ignore[assignment]
            if match is None:
                output = execution.output
                broken = output is None  # the worker sent something that is not a table
                match = self.target.compare(output) if output is not None else Match(False, 0.0, 0.0, 0.0)
                self._matches[key] = match
        success = 1.0 if match.exact else 0.0
        work = execution.work
        efficiency = c.efficiency * min(1.0, self.reference_work / max(work, 1e-9)) if match.exact else 0.0
        graph = -c.graph * (len(spec.nodes) + spec.edges()) / (3.0 * self.agents)
        progress = {
            n.node_id: schema_progress(n.columns, self.target.columns) if n.status == "ok" else 0.0
            for n in execution.nodes.values()
        }
        process = c.process_weight * self._process(execution, progress)
        kinds = [k for k in execution.error_kinds if k != "upstream"] + (["protocol"] if broken else [])
        failure = max(kinds, key=lambda k: c.penalties.get(k, 0.25)) if kinds else None
        penalty = -c.penalties.get(failure, 0.25) * c.penalty_scale if failure else 0.0
        return Score(success, match.credit, efficiency, graph, process, penalty, work, failure, progress)

    def _process(self, execution: Execution, progress: Mapping[str, float]) -> float:
        """Share of reference stages reproduced (module docstring); schema mean without them."""
        if not self.reference_outputs:
            return sum(progress.values()) / len(progress) if progress else 0.0
        produced = {n.output_hash for n in execution.nodes.values() if n.status == "ok"}
        return len(self.reference_outputs & produced) / len(self.reference_outputs)
