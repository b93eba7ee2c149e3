"""Observation vectors, built from a task's public inputs and the team's own execution feedback.

:meth:`ObservationBuilder.task_features` reads a :class:`.tasks.PublicInputs` (the sources, the
target's column names and example rows) and the candidates proposed from it; it never sees a
:class:`.tasks.Task`, so nothing hidden (the reference pipeline, the rest of the target) can reach
it. One fixed layout per level (``blocks`` lists it), identical for every agent:

- ``slot``: one-hot agent index, its family in the level's skeleton (prep / join / post) and its
  rank within that family;
- ``round``: round / rounds, first-round flag;
- ``sources``: per source slot: present, size, columns, missing values, text dirt, number dirt,
  repeated keys, share of its columns the target names, share of the example values it holds;
- ``target``: number of columns, and the share of them that name a source column (as is or
  renamed), an aggregate (``sum_...``) or a derived measure;
- ``columns``: per target column: which sources hold a column of that name (as is or renamed),
  whether its example values are numbers, whether it names an aggregate;
- ``candidates``: per role and candidate duty (in each agent's observation only the roles of its
  skeleton family: cleaning, joins or post-processing; the others are zeros), what it is (base duty
  or not, the table it acts on, its operator) and how it relates to the data and the examples:
  whether the columns it reads and writes are in the target, the share of rows it keeps, whether the
  examples can be checked against it and the share that agree (a filter's predicate on the example
  rows, directly or through a key the target shows; a derived value recomputed; a renamed column's
  example values found in the source column), how improbable that agreement is by chance (share kept
  ^ examples), the read columns' distinctness, repeats, missing values and dirt, a join's key
  overlap. Nothing of the solver's conclusions: not the prior it ranks cleaning stages by, nor how a
  candidate fares inside the plan it ranks first (:meth:`.analysis.PublicView.context_agree`), and
  each role's candidates come in canonical order (:meth:`.tasks.PublicInputs.candidates`);
- ``feedback`` (after the first round): the agent's own node (outcome kind, rows out / rows in,
  its output's column overlap with the target's, is the output, and its own last action; not
  whether it was cached: that depends on what ran before, so the same inputs would not give the
  same observation);
  the team's output against the target: valid, column overlap, output rows / target rows, and for
  each example row whether the output holds it, once or more than once;
- ``team_spec`` (after the first round): every agent's last action, one-hot per component: the
  spec the team wrote, so a revision can wire to what the others actually did;
- ``board`` (after the first round): every agent's node as the shared board reports it
  (:mod:`.board`): whether it wrote one, its status, rows out / rows in, its columns against the
  target's, whether it is the output, and for each example row whether it survives through it: so
  an agent sees where the example rows were lost, not only that they were.

Values are finite and clipped to [-CLIP, CLIP] (non-finite inputs become 0 or the bound).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.actions import ActionLayout
from orchestrl.envs.orchestration.analysis import CANDIDATE_NUMBERS, PublicView
from orchestrl.envs.orchestration.board import NodeReport
from orchestrl.envs.orchestration.candidates import rename
from orchestrl.envs.orchestration.plans import POST, Family, family_of
from orchestrl.envs.orchestration.spec import (
    ROLES,
    AggregateDuty,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    TopKDuty,
)

CLIP = 5.0
TARGET_COLUMNS = 16
MAX_EXAMPLES = 6
FEEDBACK_KINDS = ("ok", "idle", "invalid", "exception", "upstream", "timeout", "limit", "denied", "crash")
_KIND_ALIASES = {"bad_output": "exception", "memory": "limit", "cpu_limit": "limit", "protocol": "crash"}
OPS = 6
"""Operator one-hot width (filter: eq ne gt lt notnull complete-rows; derive: mul add sub div
nonnull; aggregate: sum mean max min count size; dedup: one column, two, all; join: same name,
other names, natural; top-k: descending, ascending)."""
AGGREGATE_PREFIXES = ("sum_", "mean_", "max_", "min_", "count_")
OWN_NODE = 4
"""Feedback numbers on the agent's own node: log rows ratio, schema match, is the output, ran ok."""
BOARD_NODE = 7
"""Board numbers per node, before its example rows: wrote a node, ok, error, skipped, log rows ratio,
schema match, is the output."""


@dataclass(frozen=True)
class Feedback:
    """What an agent learns after a round: its own node, and the team's output."""

    kind: str  # one of FEEDBACK_KINDS (aliases folded)
    rows_ratio: float = 1.0  # own node: rows out / rows in
    schema_match: float = 0.0  # own node's columns against the target's (Jaccard)
    is_output: bool = False
    action: tuple[int, ...] | None = None  # the agent's own last action
    team_valid: bool = False
    team_schema: float = 0.0  # the output's columns against the target's (Jaccard)
    team_rows_ratio: float = 0.0  # output rows / the caller's target_rows (1 without; 0 without an output)
    examples_found: tuple[int, ...] = field(default_factory=tuple)  # per example row: times in the output
    team_actions: tuple[tuple[int, ...] | None, ...] = ()  # every agent's last action (None: none)
    board: tuple[NodeReport | None, ...] = ()  # every agent's node (None: it wrote none)


class ObservationBuilder:
    """Turns public inputs (and feedback) into the level's fixed-size observation vector."""

    def __init__(self, layout: ActionLayout, skeleton: Sequence[Family]) -> None:
        self.layout = layout
        self.skeleton = tuple(skeleton)
        s, k = layout.sources, layout.duties
        self.candidate_width = 2 + (s + 1) + OPS + len(CANDIDATE_NUMBERS)
        own_action = 1 + len(ROLES) + k + int(layout.nvec[2])
        self.blocks: list[tuple[str, int]] = [
            ("slot", layout.agents + len(Family) + 3),
            ("round", 2),
            ("sources", s * 10),
            ("target", 5),
            ("columns", TARGET_COLUMNS * (s + 4)),
            ("candidates", len(ROLES) * k * self.candidate_width),
            ("feedback", len(FEEDBACK_KINDS) + OWN_NODE + own_action + 4 + 2 * MAX_EXAMPLES + 1),
            ("team_spec", layout.agents * int(layout.nvec.sum())),
            ("board", layout.agents * (BOARD_NODE + MAX_EXAMPLES)),
        ]
        self.size = sum(n for _, n in self.blocks)
        self._masks: dict[Family, np.ndarray] = {}

    def offsets(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, n in self.blocks:
            out[name] = slice(start, start + n)
            start += n
        return out

    def candidate_number_columns(self, numbers: Sequence[str]) -> list[int]:
        """Where the named :data:`CANDIDATE_NUMBERS` stand in the observation: row by row of the
        candidate block (each row ends with the numbers), each row's in :data:`CANDIDATE_NUMBERS`'s
        order, whatever the order asked. What an ablation of the observation drops."""
        unknown = sorted(set(numbers) - set(CANDIDATE_NUMBERS))
        if unknown:
            raise ValueError(f"unknown candidate numbers {unknown} (known: {CANDIDATE_NUMBERS})")
        block, width = self.offsets()["candidates"], self.candidate_width
        first = width - len(CANDIDATE_NUMBERS)
        wanted = sorted(CANDIDATE_NUMBERS.index(n) for n in numbers)
        return [row + first + i for row in range(block.start, block.stop, width) for i in wanted]

    # ------------------------------------------------------------------------------ task part
    def task_features(self, public: Any, candidates: Mapping[Role, Sequence[Any]]) -> np.ndarray:
        """The part shared by all agents, from the public inputs and their candidates only."""
        view = public.view
        return np.concatenate(
            [
                self._sources(view),
                self._target(view),
                self._columns(view),
                self._candidates(view, candidates),
            ]
        ).astype(np.float32)

    def _sources(self, view: PublicView) -> np.ndarray:
        out = np.zeros((self.layout.sources, 10))
        for i, frame in enumerate(view.frames[: self.layout.sources]):
            cols = list(view.profiles[i].values())
            named = [c for c in cols if c.name in view.target or rename(c.name) in view.target]
            out[i] = [
                1.0,
                math.log1p(len(frame)) / 6.0,
                len(cols) / 16.0,
                max((c.null_frac for c in cols), default=0.0),
                max((c.dirt_text for c in cols), default=0.0),
                max((c.dirt_num for c in cols), default=0.0),
                max((c.repeated_frac for c in cols if c.key), default=0.0) * 5.0,
                len(named) / max(len(view.target), 1),
                view.example_overlap(i),
                float(i == 0),
            ]
        return out.reshape(-1)

    def _target(self, view: PublicView) -> np.ndarray:
        target = view.target
        n = max(len(target), 1)
        sourced = sum(view.holders(t) != [] for t in target)
        renamed = sum(t not in view.all_columns and view.holders(t) != [] for t in target)
        aggregated = sum(t.startswith(AGGREGATE_PREFIXES) for t in target)
        derived = sum(t == view.domain.derived or t == rename(view.domain.derived) for t in target)
        return np.array([len(target) / 16.0, sourced / n, renamed / n, aggregated / n, derived / n])

    def _columns(self, view: PublicView) -> np.ndarray:
        s = self.layout.sources
        out = np.zeros((TARGET_COLUMNS, s + 4))
        for row, column in enumerate(view.target[:TARGET_COLUMNS]):
            out[row, 0] = 1.0
            for i in view.holders(column):
                if i < s:
                    out[row, 1 + i] = 1.0
            values = view.examples[column] if column in view.examples.columns else pd.Series(dtype=object)
            out[row, s + 1] = float(pd.api.types.is_numeric_dtype(values))
            out[row, s + 2] = float(column.startswith(AGGREGATE_PREFIXES))
            out[row, s + 3] = float(column not in view.all_columns and not view.holders(column))
        return out.reshape(-1)

    def _candidates(self, view: PublicView, candidates: Mapping[Role, Sequence[Any]]) -> np.ndarray:
        k, width = self.layout.duties, self.candidate_width
        out = np.zeros((len(ROLES), k, width))
        for r, role in enumerate(ROLES):
            for j, duty in enumerate(list(candidates[role])[:k]):
                out[r, j] = self._candidate(view, role, duty)
        return out.reshape(-1)

    def _candidate(self, view: PublicView, role: Role, duty: Any) -> np.ndarray:
        s = self.layout.sources
        home = view.home(role, duty)
        where = np.zeros(s + 1)
        if home is not None:
            where[s if home == POST else min(home, s - 1)] = 1.0
        return np.concatenate(
            [[1.0, float(duty.is_base)], where, _op_code(duty), view.numbers(role, duty, home)]
        )

    # ------------------------------------------------------------------------------ full vector
    def build(
        self, task_part: np.ndarray, slot: int, round_index: int, rounds: int, feedback: Feedback | None
    ) -> np.ndarray:
        slot_vec = np.zeros(self.layout.agents + len(Family) + 3)
        slot_vec[slot] = 1.0
        family = self.skeleton[slot]
        slot_vec[self.layout.agents + list(Family).index(family)] = 1.0
        rank = sum(1 for f in self.skeleton[:slot] if f is family)
        slot_vec[self.layout.agents + len(Family) + min(rank, 2)] = 1.0
        round_vec = np.array([round_index / max(rounds, 1), float(round_index == 0)])
        mine = sanitise(task_part) * self._family_mask(family)  # finite first: inf * 0 is nan
        parts = [
            slot_vec,
            round_vec,
            mine,
            self._feedback(feedback),
            self._team_spec(feedback),
            self._board(feedback),
        ]
        return sanitise(np.concatenate(parts))

    def _family_mask(self, family: Family) -> np.ndarray:
        """1 over the task part, except the candidates of roles outside ``family`` (0)."""
        mask = self._masks.get(family)
        if mask is None:
            offsets = self.offsets()
            start = offsets["candidates"].start - offsets["sources"].start
            rows = np.repeat(
                [float(family_of(r) is family) for r in ROLES], self.layout.duties * self.candidate_width
            )
            size = offsets["candidates"].stop - offsets["sources"].start
            mask = np.ones(size, dtype=np.float32)
            mask[start:] = rows
            self._masks[family] = mask
        return mask

    def _team_spec(self, fb: Feedback | None) -> np.ndarray:
        """The team's last actions, one one-hot per action component and agent (zeros before the
        first round and for agents without a recorded action)."""
        nvec = self.layout.nvec
        out = np.zeros((self.layout.agents, int(nvec.sum())))
        if fb is not None:
            starts = np.concatenate([[0], np.cumsum(nvec)[:-1]])
            for slot, action in enumerate(fb.team_actions[: self.layout.agents]):
                if action is not None:
                    for c, value in enumerate(action):
                        out[slot, starts[c] + min(int(value), int(nvec[c]) - 1)] = 1.0
        return out.reshape(-1)

    def _board(self, fb: Feedback | None) -> np.ndarray:
        """Every agent's node on the shared board (zeros before the first round and for agents
        that wrote no node)."""
        out = np.zeros((self.layout.agents, BOARD_NODE + MAX_EXAMPLES))
        for slot, report in enumerate(fb.board[: self.layout.agents] if fb is not None else ()):
            if report is None:
                continue
            status = ("ok", "error", "skipped").index(report.status)
            out[slot, 0] = 1.0
            out[slot, 1 + status] = 1.0
            out[slot, 4] = math.log(max(report.rows_ratio, 1e-3)) / 3.0
            out[slot, 5] = report.schema_match
            out[slot, 6] = float(report.is_output)
            survived = report.survived[:MAX_EXAMPLES]
            out[slot, BOARD_NODE : BOARD_NODE + len(survived)] = survived
        return out.reshape(-1)

    def _feedback(self, fb: Feedback | None) -> np.ndarray:
        kinds = np.zeros(len(FEEDBACK_KINDS))
        k = self.layout.duties
        action = np.zeros(1 + len(ROLES) + k + int(self.layout.nvec[2]))
        found = np.zeros(2 * MAX_EXAMPLES)
        if fb is None:
            return np.concatenate([kinds, np.zeros(OWN_NODE), action, np.zeros(4), found, [0.0]])
        kinds[FEEDBACK_KINDS.index(_KIND_ALIASES.get(fb.kind, fb.kind))] = 1.0
        if fb.action is not None:
            role, duty, capacity = (int(v) for v in fb.action[:3])
            action[role] = 1.0
            if role:
                action[1 + len(ROLES) + min(duty, k - 1)] = 1.0
                action[1 + len(ROLES) + k + capacity] = 1.0
        for i, times in enumerate(fb.examples_found[:MAX_EXAMPLES]):
            found[2 * i] = float(times >= 1)
            found[2 * i + 1] = float(times >= 2)
        own = [
            math.log(max(fb.rows_ratio, 1e-3)) / 3.0,
            fb.schema_match,
            float(fb.is_output),
            float(fb.kind == "ok"),
        ]
        ratio = math.log(max(fb.team_rows_ratio, 1e-3)) / 3.0 if fb.team_rows_ratio > 0 else -CLIP
        team = [float(fb.team_valid), fb.team_schema, ratio, examples_held(fb.examples_found)]
        return np.concatenate([kinds, own, action, team, found, [1.0]])


def _op_code(duty: Any) -> np.ndarray:
    out = np.zeros(OPS)
    index: int | None = None
    if isinstance(duty, FilterDuty):
        index = 5 if duty.column is None else ("eq", "ne", "gt", "lt", "notnull").index(duty.op)
    elif isinstance(duty, DeriveDuty):
        index = ("mul", "add", "sub", "div", "nonnull").index(duty.op)
    elif isinstance(duty, AggregateDuty):
        index = ("sum", "mean", "max", "min", "count", "size").index(duty.fn)
    elif isinstance(duty, DedupDuty):
        index = 2 if duty.subset is None else min(len(duty.subset), 2) - 1
    elif isinstance(duty, JoinDuty):
        index = 2 if duty.left_on is None else int(duty.left_on != duty.right_on)
    elif isinstance(duty, TopKDuty):
        index = int(duty.ascending)
    if index is not None:
        out[index] = 1.0
    return out


def examples_held(found: Sequence[int]) -> float:
    """The share of example rows the team's output holds (``found``: per row, its times in the
    output); 0 without example rows."""
    return float(np.mean([times >= 1 for times in found])) if len(found) else 0.0


def sanitise(vector: np.ndarray) -> np.ndarray:
    """float32, finite, within [-CLIP, CLIP]."""
    out = np.nan_to_num(np.asarray(vector, dtype=np.float64), nan=0.0, posinf=CLIP, neginf=-CLIP)
    return np.clip(out, -CLIP, CLIP).astype(np.float32)


def feedback_kind(kind: str | None) -> str:
    """Folds executor failure kinds into :data:`FEEDBACK_KINDS`."""
    if kind is None:
        return "ok"
    return _KIND_ALIASES.get(kind, kind) if _KIND_ALIASES.get(kind, kind) in FEEDBACK_KINDS else "crash"
