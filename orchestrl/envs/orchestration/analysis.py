"""The public analysis of a task: what can be read off its public inputs without searching.

:class:`PublicView` indexes a task's :class:`.tasks.PublicInputs` (the sources, the target's
column names, the example rows) once, and answers what the observation features
(:mod:`.features`) and the solver (:mod:`.solver`) both ask:

- which sources hold a column a target column names, and which source rows an example row can
  have come from (the rows agreeing with it on every column the target shows);
- per candidate duty, :data:`CANDIDATE_NUMBERS`: how it relates to the data (rows it keeps, the
  distinctness, repeats, missing values and dirt of what it reads, a join's key overlap) and to the
  target (whether the columns it reads and writes are the target's, whether the example rows agree
  with it, and how likely that agreement is by chance);
- the *shapes*: joins and post stages whose output has exactly the target's columns (found from
  column names alone), and, for a cleaning duty, the share of example rows an output holds when it
  runs with the best shape (its *context*: checking a candidate against the examples, in process);
  with it, the prior the solver ranks cleaning stages by (:meth:`PublicView.prep_score`). The
  context and the prior are the solver's conclusions: no observation feature reads them;
- the capacities a plan's stages need, read off the dirt of the columns they read.

Everything here is a function of the public inputs (tests/envs/orchestration/
test_orchestration_public_inputs.py): nothing reads a hidden reference or target.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.candidates import domain_of, rename
from orchestrl.envs.orchestration.plans import POST, POST_ROLES, PREP_ROLES, Family, Stage, main_output
from orchestrl.envs.orchestration.profiles import ColumnProfile, profile
from orchestrl.envs.orchestration.spec import (
    AggregateDuty,
    Capacity,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    Role,
    SelectDuty,
    TopKDuty,
)
from orchestrl.envs.orchestration.tables import held_share, row_hashes

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
    "unknown_columns",  # share of the columns it reads (a select: maps) that no source holds
    "reads_key",
)
"""The numbers describing a candidate (:meth:`PublicView.numbers`), in order."""


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
        self._held_in_context: dict[Stage, float] = {}
        self._shapes: list[tuple[float, tuple[Stage, ...], tuple[Stage, ...]]] | None = None
        self._example_hashes: np.ndarray | None = None

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
        return [
            self.profiles[i][column] for i in places if i < len(self.profiles) and column in self.profiles[i]
        ]

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
            ops.clean_text(v)
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
                self._unknown(duty, reads, stats),
                float(any(p.key for p in stats)),
            ]
        )

    def _unknown(self, duty: Any, reads: list[str], stats: list[ColumnProfile]) -> float:
        """Share of the columns it reads (a select: maps) that no source holds: they must come
        from an earlier derive or aggregate."""
        if isinstance(duty, SelectDuty):
            olds = [old for old, _ in duty.columns or ()]
            return sum(not self.stats(old) for old in olds) / len(olds) if olds else 0.0
        return sum(not self.stats(c) for c in reads) / len(reads) if reads else 0.0

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

    # --------------------------------------------------------------------------- examples
    def held(self, output: pd.DataFrame | None) -> float:
        """Share of the example rows an output holds (0 unless it has the target's columns)."""
        if self._example_hashes is None:
            self._example_hashes = row_hashes(self.examples, sorted(self.target))
        return held_share(self.examples, output, self._example_hashes)

    # --------------------------------------------------------------------------- shapes
    def columns_after(self, stages: Sequence[Stage]) -> list[str] | None:
        """The output columns of ``stages`` (canonical order, canonical wiring) from names alone;
        None when a stage reads a column its input lacks."""
        heads = {i: list(p) for i, p in enumerate(self.profiles)}
        for st in stages:
            chain = st.home if st.role in PREP_ROLES else 0
            cols = heads[chain]
            duty = st.duty
            reads = [c for c in duty.columns_read()]
            if st.role is Role.JOIN:
                right = heads[st.home]
                if duty.left_on is None:
                    shared = [c for c in cols if c in right]
                    if not shared:
                        return None
                    out = cols + [c for c in right if c not in shared]
                else:
                    if duty.left_on not in cols or duty.right_on not in right:
                        return None
                    same = duty.left_on == duty.right_on
                    out = cols + [
                        (f"{c}_right" if c in cols else c) for c in right if not (same and c == duty.right_on)
                    ]
                heads[0] = out
                continue
            if any(c not in cols for c in reads):
                return None
            if isinstance(duty, SelectDuty) and duty.columns is not None:
                if any(old not in cols for old, _ in duty.columns):
                    return None
            if isinstance(duty, DeriveDuty):
                out = cols + ([duty.name] if duty.name not in cols else [])
            elif isinstance(duty, AggregateDuty):
                out = [*list(duty.by or cols[:1]), duty.name]
            elif isinstance(duty, SelectDuty):
                out = cols if duty.columns is None else [new for _, new in duty.columns]
            elif isinstance(duty, TopKDuty) and duty.column is None:
                out = cols
            else:
                out = cols
            heads[chain] = out
        return heads[0]

    def shapes(self) -> list[tuple[float, tuple[Stage, ...], tuple[Stage, ...]]]:
        """``(score, joins, post stages)`` whose output has exactly the target's columns, best
        first: one join per dimension table (keys of the same name first), post stages in
        canonical order (a select or an aggregate, when there is one, must yield the target's
        columns), fitting the level's skeleton; base duties and extra stages cost."""
        if self._shapes is not None:
            return self._shapes
        candidates, skeleton = self.public.proposed, self.public.level.skeleton
        n_join, n_post = (sum(f is fam for f in skeleton) for fam in (Family.JOIN, Family.POST))
        target = sorted(self.target)
        wanted = set(target)
        join_sets: list[tuple[float, tuple[Stage, ...]]] = [(0.0, ())]
        dims = range(1, len(self.frames))
        if n_join and len(dims):
            per_dim = [
                [
                    (self.join_score(d), Stage(Role.JOIN, d, h))
                    for d in candidates[Role.JOIN]
                    for h in self.join_homes(d)
                    if h == dim
                ]
                for dim in dims
            ]
            if len(per_dim) <= n_join and all(per_dim):
                join_sets = [
                    (sum(s for s, _ in c), tuple(st for _, st in c)) for c in itertools.product(*per_dim)
                ]

        def ends_right(stage: Stage) -> bool:
            duty = stage.duty
            if isinstance(duty, SelectDuty):
                return duty.columns is not None and {new for _, new in duty.columns} == wanted
            return isinstance(duty, AggregateDuty) and set(duty.by or ()) | {duty.name} == wanted

        by_role = {r: [Stage(r, d, POST) for d in candidates[r]] for r in POST_ROLES}
        post_sets: list[tuple[Stage, ...]] = [()]
        for size in range(1, n_post + 1):
            for roles in itertools.combinations(POST_ROLES, size):
                last = next((r for r in (Role.SELECT, Role.AGGREGATE) if r in roles), None)
                post_sets += list(
                    itertools.product(
                        *([st for st in by_role[r] if r is not last or ends_right(st)] for r in roles)
                    )
                )
        shaped = []
        for join_score, joins in join_sets:
            for posts in post_sets:
                cols = self.columns_after(sorted([*joins, *posts], key=Stage.order))
                if cols is not None and sorted(cols) == target and len(set(cols)) == len(cols):
                    penalty = sum(st.duty.is_base for st in posts) + 0.1 * len(posts)
                    shaped.append((join_score - penalty, joins, posts))
        shaped.sort(key=lambda x: -x[0])
        self._shapes = shaped
        return shaped

    def join_homes(self, duty: JoinDuty) -> list[int]:
        if duty.is_base:
            return list(range(1, len(self.frames)))
        home = self.home(Role.JOIN, duty)
        if home is None or home == POST or duty.left_on not in self.profiles[0]:
            return []
        return [home]

    @staticmethod
    def join_score(duty: JoinDuty) -> float:
        if duty.left_on is not None and duty.left_on == duty.right_on:
            return 2.0
        return 1.0 if duty.is_base else 0.0

    def context_agree(self, stage: Stage) -> float:
        """Share of example rows held by the output of a cleaning stage run with the best shape
        (its capacities read off the data), in process; -1 without a shape. The solver's evidence,
        not an observation feature: it runs the candidate inside the plan the solver ranks first."""
        if stage not in self._held_in_context:
            self._held_in_context[stage] = self._context_agree(stage)
        return self._held_in_context[stage]

    def _context_agree(self, stage: Stage) -> float:
        shapes = self.shapes()
        if not shapes:
            return -1.0
        _, joins, posts = shapes[0]
        stages = self.capacities(sorted([stage, *joins, *posts], key=Stage.order))
        try:
            output = main_output(self.public.sources, list(self.names), stages)
        except Exception:
            return 0.0
        return self.held(output)

    # --------------------------------------------------------------------------- priors
    def prep_score(self, role: Role, duty: Any, home: int) -> float:
        """The prior of a cleaning stage: minus infinity when it keeps every row or none, or
        drops an example row it can be checked against; a dedup on a key that repeats first; then
        how strongly the examples call for it (their agreement with it in context, how unlikely its
        agreement with them is by chance) and, for a not-null filter, the missing values it drops."""
        n = dict(zip(CANDIDATE_NUMBERS, self.numbers(role, duty, home), strict=True))
        if n["keep"] >= 1.0 or n["keep"] <= 0.0 or (n["checkable"] > 0 and n["agree"] < 1.0):
            return -math.inf
        held = self.context_agree(Stage(role, duty, home))
        context = 3.0 if held >= 1.0 else -3.0 if held >= 0 else 0.0
        if role is Role.DEDUP:
            return context + (10.0 if n["reads_key"] and n["repeats"] >= 0.15 else -1.0)
        evidence = -math.log(max(n["surprise"], 1e-9)) if n["checkable"] > 0 else 0.5 - n["keep"]
        return context + evidence + (1.0 if duty.op == "notnull" and duty.column is not None else 0.0)

    def prep_options(self) -> list[tuple[float, Stage]]:
        """Every cleaning stage a proposed candidate can make, with its prior, best first."""
        out = []
        for role in PREP_ROLES:
            for duty in self.public.proposed[role]:
                for home in self.prep_homes(duty):
                    score = self.prep_score(role, duty, home)
                    if score > -math.inf:
                        out.append((score, Stage(role, duty, home)))
        return sorted(out, key=lambda o: -o[0])

    # --------------------------------------------------------------------------- capacities
    def capacities(self, stages: Sequence[Stage]) -> list[Stage]:
        """Each stage with the capacity the data calls for (:meth:`capacity_needed`), in order."""
        cleaned: set[tuple[int, str]] = set()
        out = []
        for st in stages:
            capacity, reads = self.capacity_needed(st.role, st.duty, st.home, cleaned)
            cleaned = self.cleaned_after(st.role, st.home, capacity, reads, cleaned)
            out.append(st.with_capacity(capacity))
        return out

    def reads(self, role: Role, duty: Any, home: int | None) -> list[tuple[int, str]]:
        """``(chain, column)`` pairs a stage compares, groups or parses (what capacity acts on):
        a cleaning stage reads its table's chain, a join the main chain and its right table's,
        the others the main chain. Chain ``i`` is source ``i`` as the stages so far left it."""
        where = home if home is not None and home >= 0 else 0
        if role in (Role.FILTER, Role.DEDUP):
            columns = list(duty.columns_read())
            if duty.is_base:
                columns = [c for c, p in self.profiles[where].items() if not p.numeric or role is Role.DEDUP]
            return [(where, c) for c in columns]
        if role is Role.JOIN:
            if home is None or home <= 0:
                return []
            if duty.is_base:
                shared = [c for c in self.profiles[0] if c in self.profiles[home]]
                return [(0, c) for c in shared] + [(home, c) for c in shared]
            return [(0, str(duty.left_on)), (home, str(duty.right_on))]
        if role is Role.SELECT:
            return []
        return [(0, c) for c in duty.columns_read()]

    def dirt(self, chain: int, column: str) -> list[ColumnProfile]:
        """The profiles behind a column of a chain: its table's, or on the main chain a joined
        table's."""
        if chain < len(self.profiles) and column in self.profiles[chain]:
            return [self.profiles[chain][column]]
        if chain == 0:
            return [p[column] for p in self.profiles[1:] if column in p]
        return []

    def capacity_needed(
        self, role: Role, duty: Any, home: int | None, cleaned: set[tuple[int, str]]
    ) -> tuple[Capacity, list[tuple[int, str]]]:
        """The capacity a stage needs, read off the data, and what it reads (:meth:`reads`):
        large where a column it reads holds messy numbers, medium where one holds messy text or
        blanks, else small; pairs in ``cleaned`` (read above small by an earlier stage, which
        writes them back clean) count as clean."""
        reads = self.reads(role, duty, home)
        dirty = [p for chain, c in reads if (chain, c) not in cleaned for p in self.dirt(chain, c)]
        if any(p.dirt_num > 0 for p in dirty):
            return Capacity.LARGE, reads
        if any(p.dirt_text > 0 or p.blank_frac > 0 for p in dirty):
            return Capacity.MEDIUM, reads
        return Capacity.SMALL, reads

    @staticmethod
    def cleaned_after(
        role: Role,
        home: int | None,
        capacity: Capacity,
        reads: Sequence[tuple[int, str]],
        cleaned: set[tuple[int, str]],
    ) -> set[tuple[int, str]]:
        """What is clean after a stage: what it read, if above small; and a join brings its right
        table's clean columns into the main chain."""
        out = set(cleaned) | (set(reads) if capacity is not Capacity.SMALL else set())
        if role is Role.JOIN and home is not None and home > 0:
            out |= {(0, c) for chain, c in out if chain == home}
        return out


def _canon(value: Any) -> Any:
    if isinstance(value, str):
        return ops.clean_text(value)
    try:
        return round(float(value), 6)
    except (TypeError, ValueError):
        return str(value)


def _agrees(column: ColumnProfile, value: Any) -> np.ndarray:
    """Rows of a source column equal to an example value, both read as the large capacity reads
    them (missing matches missing)."""
    if column.numbers is not None:
        wanted = pd.to_numeric(
            ops.as_numbers(pd.Series([value], dtype=object), "large"), errors="coerce"
        ).iloc[0]
        values = column.numbers.to_numpy(dtype=float)
        if pd.isna(wanted):
            return np.isnan(values)
        return np.isclose(values, float(wanted), rtol=1e-9, atol=1e-6)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return column.missing
    return (column.text == ops.clean_text(value)).fillna(False).to_numpy(dtype=bool)
