"""Observation vectors: task features, the agent's slot, and feedback on its own node.

Built only from a task's public part (sources, goal, candidates and their evidence; see
:mod:`.evidence`), never from the hidden reference or target. One fixed layout per level
(``BLOCKS`` lists it), identical for every agent of the level:

- ``slot``: one-hot agent index;
- ``round``: round / rounds, first-round flag;
- ``sources``: per source slot: present, size, columns, share of rows feeding the target, missing
  values, text dirt, number dirt, share of columns the target reads;
- ``target``: size, columns, size relative to the largest source, share of copied / derived /
  aggregated columns;
- ``lineage``: per target column: present, copied / derived / aggregated, which sources it reads;
- ``candidates``: per role and candidate duty: supported by the goal, where it would act
  (source slot or post-processing), dirt of the columns it reads;
- ``plan``: the supported stages summarised (cleaning stages per source, joins, post stages);
- ``brief``: the supported stage at this agent's position in the canonical order (role or idle,
  phase, where, which candidate, the dirt it still meets and the capacity that calls for, and its
  inputs under the canonical wiring): the analysis a data engineer would start from;
- ``feedback`` (after the first round): the agent's node outcome (ok / idle / invalid spec /
  exception / upstream failure / timeout / limit / denied / crash), schema match with the
  target, row-count ratio, share of the team's compute, cached, is the output; and the team's
  last score, success and match credit.

Values are finite and clipped to [-CLIP, CLIP] (non-finite inputs become 0 or the bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from orchestrl.envs.orchestration.actions import ActionLayout
from orchestrl.envs.orchestration.evidence import POST, POST_ROLES, PREP_ROLES, plan_inputs
from orchestrl.envs.orchestration.spec import CAPACITIES, ROLES, Role
from orchestrl.envs.orchestration.tasks import Task

CLIP = 5.0
TARGET_COLUMNS = 8
FEEDBACK_KINDS = ("ok", "idle", "invalid", "exception", "upstream", "timeout", "limit", "denied", "crash")
_KIND_ALIASES = {"bad_output": "exception", "memory": "limit", "cpu_limit": "limit", "protocol": "crash"}


@dataclass(frozen=True)
class Feedback:
    """What an agent learns about its own node after a round."""

    kind: str  # one of FEEDBACK_KINDS (aliases folded)
    schema_match: float = 0.0
    rows_ratio: float = 1.0
    cost_share: float = 0.0
    cached: bool = False
    is_output: bool = False
    team_score: float = 0.0
    team_success: float = 0.0
    team_match: float = 0.0


class ObservationBuilder:
    """Turns a task (and feedback) into the level's fixed-size observation vector."""

    def __init__(self, layout: ActionLayout) -> None:
        self.layout = layout
        s, k = layout.sources, layout.duties
        self.blocks: list[tuple[str, int]] = [
            ("slot", layout.agents),
            ("round", 2),
            ("sources", s * 8),
            ("target", 6),
            ("lineage", TARGET_COLUMNS * (4 + s)),
            ("candidates", len(ROLES) * k * (s + 4)),
            ("plan", s + 6),
            (
                "brief",
                1
                + len(ROLES)
                + 3
                + (s + 1)
                + k
                + len(CAPACITIES)
                + 2
                + int(layout.nvec[3])
                + int(layout.nvec[4]),
            ),
            ("feedback", len(FEEDBACK_KINDS) + 9),
        ]
        self.size = sum(n for _, n in self.blocks)

    def offsets(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, n in self.blocks:
            out[name] = slice(start, start + n)
            start += n
        return out

    # ------------------------------------------------------------------------------ static parts
    def task_features(self, task: Task) -> np.ndarray:
        """The part shared by all agents: sources, target, lineage, candidates, plan."""
        return np.concatenate(
            [
                self._sources(task),
                self._target(task),
                self._lineage(task),
                self._candidates(task),
                self._plan(task),
            ]
        ).astype(np.float32)

    def _sources(self, task: Task) -> np.ndarray:
        out = np.zeros((self.layout.sources, 8))
        for i, info in enumerate(task.infos[: self.layout.sources]):
            cols = info.columns
            out[i] = [
                1.0,
                math.log1p(info.rows) / 6.0,
                len(cols) / 16.0,
                len(info.contributing) / max(info.rows, 1),
                float(np.mean([c.null_frac for c in cols])) if cols else 0.0,
                max((c.dirt_text for c in cols), default=0.0),
                max((c.dirt_num for c in cols), default=0.0),
                float(np.mean([c.in_target for c in cols])) if cols else 0.0,
            ]
        return out.reshape(-1)

    @staticmethod
    def _kind(expression: str) -> int:
        """0 copied, 1 derived, 2 aggregated."""
        if expression.startswith(("sum(", "mean(", "max(", "min(", "count(", "size(")):
            return 2
        return 1 if "(" in expression else 0

    def _target(self, task: Task) -> np.ndarray:
        goal = task.goal
        kinds = np.bincount([self._kind(e) for e in goal.lineage.values()], minlength=3) / max(
            len(goal.lineage), 1
        )
        biggest = max((info.rows for info in task.infos), default=1)
        return np.array(
            [math.log1p(goal.rows) / 6.0, len(goal.columns) / 16.0, goal.rows / max(biggest, 1), *kinds]
        )

    def _lineage(self, task: Task) -> np.ndarray:
        s = self.layout.sources
        out = np.zeros((TARGET_COLUMNS, 4 + s))
        names = task.source_names
        for row, column in enumerate(task.goal.columns[:TARGET_COLUMNS]):
            expression = task.goal.lineage.get(column, "")
            out[row, 0] = 1.0
            out[row, 1 + self._kind(expression)] = 1.0
            for i, name in enumerate(names[:s]):
                keyed = any(f"@{k}" in expression and k in task.sources[name].columns for k in task.keys)
                out[row, 4 + i] = float(f"{name}." in expression or keyed)
        return out.reshape(-1)

    def _home(self, home: int | None) -> np.ndarray:
        out = np.zeros(self.layout.sources + 1)
        if home is not None:
            out[self.layout.sources if home == POST else min(home, self.layout.sources - 1)] = 1.0
        return out

    def _candidates(self, task: Task) -> np.ndarray:
        k, s = self.layout.duties, self.layout.sources
        out = np.zeros((len(ROLES), k, s + 4))
        for r, role in enumerate(ROLES):
            for j, ev in enumerate(task.evidence[role][:k]):
                out[r, j] = [float(ev.consistent), *self._home(ev.home), ev.dirt_text, ev.dirt_num]
        return out.reshape(-1)

    def _plan(self, task: Task) -> np.ndarray:
        s = self.layout.sources
        prep = np.zeros(s)
        joins = 0
        post = dict.fromkeys(POST_ROLES, 0.0)
        for st in task.plan:
            if st.role in PREP_ROLES and 0 <= st.home < s:
                prep[st.home] += 0.5
            elif st.role is Role.JOIN:
                joins += 1
            elif st.role in post:
                post[st.role] = 1.0
        return np.array([*prep, joins / 2.0, *post.values(), len(task.plan) / self.layout.agents])

    def brief(self, task: Task, slot: int) -> np.ndarray:
        k, s = self.layout.duties, self.layout.sources
        nvec = self.layout.nvec
        role = np.zeros(1 + len(ROLES))
        phase = np.zeros(3)
        candidate = np.zeros(k)
        dirt = np.zeros(2)
        capacity = np.zeros(len(CAPACITIES))
        input_a, input_b = np.zeros(nvec[3]), np.zeros(nvec[4])
        plan = task.plan
        home = np.zeros(s + 1)
        if slot < len(plan):
            st = plan[slot]
            role[1 + ROLES.index(st.role)] = 1.0
            phase[0 if st.role in PREP_ROLES else 1 if st.role is Role.JOIN else 2] = 1.0
            home = self._home(st.home)
            candidate[st.candidate] = 1.0
            dirt[:] = [st.dirt_text, st.dirt_num]
            capacity[CAPACITIES.index(st.capacity)] = 1.0
            inputs = [i if kind == "source" else s + i for kind, i in plan_inputs(plan)[slot]]
            if inputs[0] < nvec[3]:
                input_a[inputs[0]] = 1.0
            if len(inputs) > 1 and inputs[1] + 1 < nvec[4]:
                input_b[inputs[1] + 1] = 1.0
        else:
            role[0] = 1.0
        return np.concatenate([role, phase, home, candidate, capacity, dirt, input_a, input_b])

    # ------------------------------------------------------------------------------ full vector
    def build(
        self,
        task_part: np.ndarray,
        task: Task,
        slot: int,
        round_index: int,
        rounds: int,
        feedback: Feedback | None,
    ) -> np.ndarray:
        slot_vec = np.zeros(self.layout.agents)
        slot_vec[slot] = 1.0
        round_vec = np.array([round_index / max(rounds, 1), float(round_index == 0)])
        parts = [slot_vec, round_vec, task_part, self.brief(task, slot), self._feedback(feedback)]
        return sanitise(np.concatenate(parts))

    @staticmethod
    def _feedback(fb: Feedback | None) -> np.ndarray:
        kinds = np.zeros(len(FEEDBACK_KINDS))
        if fb is None:
            return np.concatenate([kinds, np.zeros(9)])
        kinds[FEEDBACK_KINDS.index(_KIND_ALIASES.get(fb.kind, fb.kind))] = 1.0
        ratio = math.log(max(fb.rows_ratio, 1e-3))
        return np.concatenate(
            [
                kinds,
                [
                    fb.schema_match,
                    ratio / 3.0,
                    fb.cost_share,
                    float(fb.cached),
                    float(fb.is_output),
                    fb.team_score,
                    fb.team_success,
                    fb.team_match,
                    1.0,
                ],
            ]
        )


def sanitise(vector: np.ndarray) -> np.ndarray:
    """float32, finite, within [-CLIP, CLIP]."""
    out = np.nan_to_num(np.asarray(vector, dtype=np.float64), nan=0.0, posinf=CLIP, neginf=-CLIP)
    return np.clip(out, -CLIP, CLIP).astype(np.float32)


def feedback_kind(kind: str | None) -> str:
    """Folds executor failure kinds into :data:`FEEDBACK_KINDS`."""
    if kind is None:
        return "ok"
    return _KIND_ALIASES.get(kind, kind) if _KIND_ALIASES.get(kind, kind) in FEEDBACK_KINDS else "crash"
