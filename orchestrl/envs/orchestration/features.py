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
- ``candidates``: per role and candidate duty, what it is (base duty or not, the table it acts
  on, its operator) and how it relates to the data and the examples: whether the columns it reads
  and writes are in the target, the share of rows it keeps, whether the examples can be checked
  against it and the share that agree (a filter's predicate on the example rows, directly or
  through a key the target shows; a derived value recomputed; a renamed column's example values
  found in the source column), how improbable that agreement is by chance (share kept ^ examples),
  the read columns' distinctness, repeats, missing values and dirt, a join's key overlap;
- ``feedback`` (after the first round): the agent's own node (outcome kind, rows out / rows in,
  its output's column overlap with the target's, cached, is the output, and its own last action);
  the team's output against the target: valid, column overlap, output rows / target rows, and for
  each example row whether the output holds it, once or more than once;
- ``team_spec`` (after the first round): every agent's last action, one-hot per component: the
  spec the team wrote, so a revision can wire to what the others actually did.

Values are finite and clipped to [-CLIP, CLIP] (non-finite inputs become 0 or the bound).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.actions import ActionLayout
from orchestrl.envs.orchestration.candidates import domain_of, rename
from orchestrl.envs.orchestration.plans import POST, Family
from orchestrl.envs.orchestration.profiles import ColumnProfile, profile
from orchestrl.envs.orchestration.spec import (
    CAPACITIES,
    ROLES,
    AggregateDuty,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    SelectDuty,
    TopKDuty,
)

CLIP = 5.0
TARGET_COLUMNS = 16
MAX_EXAMPLES = 5
FEEDBACK_KINDS = ("ok", "idle", "invalid", "exception", "upstream", "timeout", "limit", "denied", "crash")
_KIND_ALIASES = {"bad_output": "exception", "memory": "limit", "cpu_limit": "limit", "protocol": "crash"}
OPS = 6
"""Operator one-hot width (filter: eq ne gt lt notnull complete-rows; derive: mul add sub div
nonnull; aggregate: sum mean max min count size; dedup: one column, two, all; join: same name,
other names, natural; top-k: descending, ascending)."""
CANDIDATE_NUMBERS = (
    "evidence",  # -log(surprise) / 5 when the examples agree, -1 when one disagrees, 0 unchecked
    "reads_in_target",
    "writes_target_column",
    "writes_aggregated_column",
    "yields_target_columns",
    "keep",  # share of its table's rows a cleaning duty keeps
    "checkable",  # share of example rows it can be checked against
    "agree",  # share of those that agree
    "surprise",  # keep ^ examples: how likely the agreement is by chance
    "distinct",
    "repeats",  # repeated values of a key it reads (x5, capped at 1)
    "missing",
    "dirt_text",
    "dirt_num",
    "numeric",
    "key_overlap",
    "unknown_column",  # reads a column no source has
    "reads_key",
)
"""The numbers describing a candidate (:meth:`PublicView.numbers`), in order."""
AGGREGATE_PREFIXES = ("sum_", "mean_", "max_", "min_", "count_")


@dataclass(frozen=True)
class Feedback:
    """What an agent learns after a round: its own node, and the team's output."""

    kind: str  # one of FEEDBACK_KINDS (aliases folded)
    rows_ratio: float = 1.0  # own node: rows out / rows in
    schema_match: float = 0.0  # own node's columns against the target's (Jaccard)
    cached: bool = False
    is_output: bool = False
    action: tuple[int, ...] | None = None  # the agent's own last action
    team_valid: bool = False
    team_schema: float = 0.0  # the output's columns against the target's (Jaccard)
    team_rows_ratio: float = 0.0  # output rows / target rows (0 without an output)
    examples_found: tuple[int, ...] = field(default_factory=tuple)  # per example row: times in the output
    team_actions: tuple[tuple[int, ...] | None, ...] = ()  # every agent's last action (None: none)


class ObservationBuilder:
    """Turns public inputs (and feedback) into the level's fixed-size observation vector."""

    def __init__(self, layout: ActionLayout, skeleton: Sequence[Family]) -> None:
        self.layout = layout
        self.skeleton = tuple(skeleton)
        s, k = layout.sources, layout.duties
        self.candidate_width = 2 + (s + 1) + OPS + len(CANDIDATE_NUMBERS)
        self.blocks: list[tuple[str, int]] = [
            ("slot", layout.agents + len(Family) + 3),
            ("round", 2),
            ("sources", s * 10),
            ("target", 5),
            ("columns", TARGET_COLUMNS * (s + 4)),
            ("candidates", len(ROLES) * k * self.candidate_width),
            (
                "feedback",
                len(FEEDBACK_KINDS) + 5 + 1 + len(ROLES) + k + len(CAPACITIES) + 4 + 2 * MAX_EXAMPLES + 1,
            ),
            ("team_spec", layout.agents * int(layout.nvec.sum())),
        ]
        self.size = sum(n for _, n in self.blocks)

    def offsets(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, n in self.blocks:
            out[name] = slice(start, start + n)
            start += n
        return out

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
        return np.concatenate([[1.0, float(duty.is_base)], where, _op_code(duty), view.numbers(role, duty, home)])

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
        parts = [slot_vec, round_vec, task_part, self._feedback(feedback), self._team_spec(feedback)]
        return sanitise(np.concatenate(parts))

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

    def _feedback(self, fb: Feedback | None) -> np.ndarray:
        kinds = np.zeros(len(FEEDBACK_KINDS))
        k = self.layout.duties
        action = np.zeros(1 + len(ROLES) + k + len(CAPACITIES))
        found = np.zeros(2 * MAX_EXAMPLES)
        if fb is None:
            return np.concatenate([kinds, np.zeros(5), action, np.zeros(4), found, [0.0]])
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
            float(fb.cached),
            float(fb.is_output),
            float(fb.kind == "ok"),
        ]
        ratio = math.log(max(fb.team_rows_ratio, 1e-3)) / 3.0 if fb.team_rows_ratio > 0 else -CLIP
        team = [float(fb.team_valid), fb.team_schema, ratio, float(np.mean(found[0::2]) if fb.examples_found else 0.0)]
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


class PublicView:
    """The public inputs, indexed for the candidate features (built once per task)."""

    def __init__(self, public: Any) -> None:
        self.public = public
        self.domain = domain_of(public.domain)
        self.names = list(public.sources)
        self.frames = [public.sources[n] for n in self.names]
        self.profiles = [profile(f) for f in self.frames]
        self.target = tuple(public.target_columns)
        self.examples: pd.DataFrame = public.examples
        self.all_columns = {c for p in self.profiles for c in p}
        self.n_examples = max(len(self.examples), 1)
        self._links: dict[int, list[pd.DataFrame | None]] = {}
        self._kept: dict[tuple[Any, int], np.ndarray | None] = {}
        self._numbers: dict[tuple[Role, Any, int | None], np.ndarray] = {}

    # --------------------------------------------------------------------------- lookups
    def holders(self, target_column: str) -> list[int]:
        """Sources holding a column the target column names (as is, or renamed)."""
        return [
            i
            for i, p in enumerate(self.profiles)
            if target_column in p or any(rename(c) == target_column for c in p)
        ]

    def shown_as(self, column: str) -> str | None:
        """The target column showing a source column (as is or renamed), if any."""
        if column in self.target:
            return column
        return rename(column) if rename(column) in self.target else None

    def stats(self, column: str, home: int | None = None) -> list[ColumnProfile]:
        places = [home] if home is not None and home >= 0 else range(len(self.profiles))
        return [self.profiles[i][column] for i in places if i < len(self.profiles) and column in self.profiles[i]]

    def home(self, role: Role, duty: Any) -> int | None:
        reads = duty.columns_read()
        if role in (Role.FILTER, Role.DEDUP):
            places = self.prep_homes(duty)
            if role is Role.DEDUP:
                keyed = [i for i in places if all(self.profiles[i][c].key for c in reads)]
                places = keyed or places
            return places[0] if places else None
        if role is Role.JOIN:
            if duty.right_on is None:
                return 1 if len(self.frames) > 1 else None
            places = [i for i, p in enumerate(self.profiles) if duty.right_on in p and i > 0]
            return places[0] if places else None
        return POST

    def prep_homes(self, duty: Any) -> list[int]:
        """The sources a cleaning duty can act on (those holding every column it reads)."""
        reads = duty.columns_read()
        return [i for i, p in enumerate(self.profiles) if all(c in p for c in reads)]

    def example_overlap(self, source: int) -> float:
        """Share of the examples' text values found among this source's (normalised) values."""
        values = set()
        for p in self.profiles[source].values():
            if not p.numeric:
                values |= set(p.text.dropna().astype(str))
        cells = [
            ops._clean(v)
            for c in self.examples.columns
            if not pd.api.types.is_numeric_dtype(self.examples[c])
            for v in self.examples[c].dropna()
        ]
        return sum(c in values for c in cells) / len(cells) if cells else 0.0

    def linked(self, home: int) -> list[pd.DataFrame | None]:
        """Per example row, the rows of source ``home`` that agree with it on every target column
        showing one of that source's columns (values compared as the large capacity reads them);
        without such a column, a dimension's rows are reached through the fact rows' keys. None
        where nothing links or no row agrees."""
        if home in self._links:
            return self._links[home]
        frame, columns = self.frames[home], self.profiles[home]
        shown = [(c, t) for c in columns if (t := self.shown_as(c)) is not None]
        out: list[pd.DataFrame | None] = [None] * len(self.examples)
        if shown:
            for i in range(len(self.examples)):
                mask = np.ones(len(frame), dtype=bool)
                for c, t in shown:
                    mask &= _agrees(columns[c], self.examples[t].iloc[i])
                out[i] = frame[mask] if mask.any() else None
        elif home > 0:
            key = self.domain.dims[home - 1].key
            if key in columns and key in self.profiles[0]:
                keys = columns[key].text
                for i, facts in enumerate(self.linked(0)):
                    if facts is not None:
                        wanted = set(self.profiles[0][key].text.loc[facts.index].dropna())
                        mask = keys.isin(wanted).to_numpy(dtype=bool)
                        out[i] = frame[mask] if mask.any() else None
        self._links[home] = out
        return out

    # --------------------------------------------------------------------------- numbers
    def numbers(self, role: Role, duty: Any, home: int | None) -> np.ndarray:
        """The candidate's :data:`CANDIDATE_NUMBERS` (``home``: the table a cleaning duty acts on)."""
        key = (role, duty, home)
        if key not in self._numbers:
            self._numbers[key] = self._compute_numbers(role, duty, home)
        return self._numbers[key]

    def _compute_numbers(self, role: Role, duty: Any, home: int | None) -> np.ndarray:
        reads = list(duty.columns_read())
        stats = [p for c in reads for p in self.stats(c, home if role in (Role.FILTER, Role.DEDUP) else None)]
        in_target = [self.shown_as(c) is not None for c in reads]
        writes, mentioned, exact = self._writes(role, duty)
        keep = self._keep(role, duty, home)
        checkable, agree = self._check(role, duty, home)
        surprise = keep**self.n_examples if checkable and agree >= 1.0 else 1.0
        evidence = (-math.log(max(surprise, 1e-9)) / 5.0 if agree >= 1.0 else -1.0) if checkable else 0.0
        return np.array(
            [
                evidence,
                float(np.mean(in_target)) if reads else 0.0,
                writes,
                mentioned,
                exact,
                keep,
                checkable,
                agree,
                surprise,
                max((p.distinct_frac for p in stats), default=0.0),
                min(max((p.repeated_frac for p in stats if p.key), default=0.0) * 5.0, 1.0),
                max((p.null_frac for p in stats), default=0.0),
                max((p.dirt_text for p in stats), default=0.0),
                max((p.dirt_num for p in stats), default=0.0),
                float(bool(stats) and all(p.numeric for p in stats)),
                self._key_overlap(duty) if isinstance(duty, JoinDuty) else 0.0,
                float(len(reads) > 0 and len(stats) < len(reads)),  # reads a column no source has
                float(any(p.key for p in stats)),
            ]
        )

    def _writes(self, role: Role, duty: Any) -> tuple[float, float, float]:
        """(writes a target column, writes something the target aggregates, yields exactly the
        target's columns)."""
        target = set(self.target)
        if isinstance(duty, DeriveDuty | AggregateDuty):
            shown = self.shown_as(duty.name) is not None
            mentioned = any(t.endswith(f"_{duty.name}") for t in self.target)
            exact = 0.0
            if isinstance(duty, AggregateDuty) and duty.by is not None:
                names = {self.shown_as(b) or b for b in duty.by} | {self.shown_as(duty.name) or duty.name}
                exact = float(names == target)
            return float(shown), float(mentioned), exact
        if isinstance(duty, SelectDuty):
            if duty.columns is None:
                return 0.0, 0.0, 0.0
            new = [n for _, n in duty.columns]
            return sum(n in target for n in new) / len(new), 0.0, float(set(new) == target)
        if isinstance(duty, JoinDuty):
            right = self.home(role, duty)
            if right is None or right == POST:
                return 0.0, 0.0, 0.0
            cols = [c for c in self.profiles[right] if c not in self.profiles[0]]
            return (sum(self.shown_as(c) is not None for c in cols) / len(cols) if cols else 0.0), 0.0, 0.0
        return 0.0, 0.0, 0.0

    def kept(self, duty: Any, home: int) -> np.ndarray | None:
        """The rows of source ``home`` a cleaning duty keeps at large capacity (None when it
        cannot run there); what ``ops`` computes, read off the column profiles."""
        key = (duty, home)
        if key not in self._kept:
            self._kept[key] = self._kept_rows(duty, home)
        return self._kept[key]

    def _kept_rows(self, duty: Any, home: int) -> np.ndarray | None:
        frame, columns = self.frames[home], self.profiles[home]
        if isinstance(duty, DedupDuty):
            try:
                out, _ = ops.op_dedup(frame, duty.subset, "large")
            except (KeyError, TypeError, ValueError):
                return None
            return frame.index.isin(out.index)
        if duty.column is None:
            try:
                out, _ = ops.op_filter(frame, None, "notnull", None, "large")
            except (KeyError, TypeError, ValueError):
                return None
            return frame.index.isin(out.index)
        column = columns.get(str(duty.column))
        if column is None:
            return None
        if duty.op in ("gt", "lt"):
            if column.numbers is None:
                numbers = pd.to_numeric(column.text, errors="coerce").to_numpy(dtype=float)
            else:
                numbers = column.numbers.to_numpy(dtype=float)
            with np.errstate(invalid="ignore"):
                return numbers > float(duty.value) if duty.op == "gt" else numbers < float(duty.value)
        present = ~column.missing
        if duty.op == "notnull":
            return present
        equal = (column.text == duty.value).fillna(False).to_numpy(dtype=bool) & present
        return equal if duty.op == "eq" else present & ~equal

    def _keep(self, role: Role, duty: Any, home: int | None) -> float:
        if home is None or home == POST or role not in (Role.FILTER, Role.DEDUP):
            return 1.0
        kept = self.kept(duty, home)
        return float(kept.mean()) if kept is not None and len(kept) else 0.0

    def _check(self, role: Role, duty: Any, home: int | None) -> tuple[float, float]:
        """(can the examples be checked against this duty, share of example rows that agree)."""
        if isinstance(duty, FilterDuty) and duty.column is not None and home is not None and home >= 0:
            return self._check_filter(duty, home)
        if isinstance(duty, DeriveDuty) and duty.left is not None:
            return self._check_derive(duty)
        if isinstance(duty, SelectDuty) and duty.columns:
            return self._check_select(duty)
        return 0.0, 0.0

    def _check_filter(self, duty: FilterDuty, home: int) -> tuple[float, float]:
        """A filter agrees with an example row when some source row it links to passes it (the
        column itself, when the target shows it, is one of the linking columns)."""
        kept = self.kept(duty, home)
        if kept is None:
            return 0.0, 0.0
        index = self.frames[home].index[kept]
        judged = [bool(r.index.isin(index).any()) for r in self.linked(home) if r is not None]
        if not judged:
            return 0.0, 0.0
        return len(judged) / self.n_examples, float(np.mean(judged))

    def _check_derive(self, duty: DeriveDuty) -> tuple[float, float]:
        shown = self.shown_as(duty.name)
        if shown is None:
            return 0.0, 0.0
        left, right = self.shown_as(str(duty.left)), self.shown_as(str(duty.right))
        judged = []
        for i in range(len(self.examples)):
            row = self.examples.iloc[[i]]
            if left is not None and right is not None:
                frame = pd.DataFrame({duty.left: row[left].to_numpy(), duty.right: row[right].to_numpy()})
            else:
                facts = self.linked(0)[i]
                if facts is None or duty.left not in facts.columns or duty.right not in facts.columns:
                    continue
                frame = facts.iloc[:1]
            try:
                value, _ = ops.op_derive(frame, "__v", duty.op, duty.left, duty.right, "large")
            except (KeyError, TypeError, ValueError):
                judged.append(False)
                continue
            want = pd.to_numeric(row[shown], errors="coerce").to_numpy(dtype=float)[0]
            got = float(value["__v"].iloc[0])
            judged.append(bool(np.isclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)))
        if not judged:
            return 0.0, 0.0
        return len(judged) / self.n_examples, float(np.mean(judged))

    def _check_select(self, duty: SelectDuty) -> tuple[float, float]:
        scores = []
        for old, new in duty.columns or ():
            if new not in self.examples.columns:
                scores.append(0.0)
                continue
            stats = self.stats(old)
            if not stats:
                continue  # a derived or aggregated column: nothing to look up
            pool = set()
            for p in stats:
                values = p.numbers if p.numbers is not None else p.text
                pool |= {_canon(v) for v in values.dropna()}
            shown = [_canon(v) for v in self.examples[new].dropna()]
            scores.append(sum(v in pool for v in shown) / len(shown) if shown else 1.0)
        if not scores:
            return 0.0, 0.0
        return 1.0, float(np.mean(scores))

    def _key_overlap(self, duty: JoinDuty) -> float:
        """Share of the fact's join values that the right table holds (normalised)."""
        if duty.left_on is None or duty.left_on not in self.profiles[0]:
            return 0.0
        right = self.home(Role.JOIN, duty)
        if right is None or right == POST or duty.right_on not in self.profiles[right]:
            return 0.0
        left_values = set(self.profiles[0][duty.left_on].text.dropna().astype(str))
        right_values = set(self.profiles[right][duty.right_on].text.dropna().astype(str))
        return len(left_values & right_values) / len(left_values) if left_values else 0.0


def _canon(value: Any) -> Any:
    if isinstance(value, str):
        return ops._clean(value)
    try:
        return round(float(value), 6)
    except (TypeError, ValueError):
        return str(value)


def _agrees(column: ColumnProfile, value: Any) -> np.ndarray:
    """Rows of a source column equal to an example value, both read as the large capacity reads
    them (missing matches missing)."""
    if column.numbers is not None:
        wanted = pd.to_numeric(ops._num(pd.Series([value], dtype=object), "large"), errors="coerce").iloc[0]
        values = column.numbers.to_numpy(dtype=float)
        if pd.isna(wanted):
            return np.isnan(values)
        return np.isclose(values, float(wanted), rtol=1e-9, atol=1e-6)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return column.missing
    return (column.text == ops._clean(value)).fillna(False).to_numpy(dtype=bool)


def sanitise(vector: np.ndarray) -> np.ndarray:
    """float32, finite, within [-CLIP, CLIP]."""
    out = np.nan_to_num(np.asarray(vector, dtype=np.float64), nan=0.0, posinf=CLIP, neginf=-CLIP)
    return np.clip(out, -CLIP, CLIP).astype(np.float32)


def feedback_kind(kind: str | None) -> str:
    """Folds executor failure kinds into :data:`FEEDBACK_KINDS`."""
    if kind is None:
        return "ok"
    return _KIND_ALIASES.get(kind, kind) if _KIND_ALIASES.get(kind, kind) in FEEDBACK_KINDS else "crash"
