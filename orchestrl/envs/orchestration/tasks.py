"""The LEMON task family: programming by example over business tables.

A task is what a data engineer is handed: source tables, and the schema of the table they must
produce with a handful of its rows (:class:`PublicInputs`). Everything an agent observes comes from
those public inputs (:mod:`.candidates`, :mod:`.features`). The rest of the target, and the hidden
reference pipeline that made it, are only used to score.

Reproducible from ``(level, split, seed)``; ``split`` selects disjoint generator seeds (train uses
``seed``, heldout ``HELDOUT_OFFSET + seed``). Generation:

1. pick a domain and a plan *shape*: the stages' roles and where they act (clean the fact or a
   dimension table, join every dimension, then derive / aggregate / select), fitting the level's
   skeleton (:mod:`.plans`);
2. generate the sources: duplicates where the shape deduplicates, missing values where it drops
   incomplete rows; from level 3 on, dirt (case, stray spaces, blanks, money-formatted numbers)
   on columns drawn at random, whether the plan reads them or not, and distractor columns;
3. propose the cleaning and join candidates from the sources alone (:func:`.candidates.propose`)
   and draw the plan's cleaning duties among them; the post stages' duties are drawn on the data;
4. run the plan at the large capacity: the target. Each node then gets the smallest capacity that
   still yields it (so dirty tasks need larger capacity at some nodes only);
5. sample the example rows; propose all candidates from the public inputs. An attempt whose plan
   is degenerate (a stage that changes nothing, fewer target rows than examples) or not expressible
   with the proposed candidates is dropped for the next one. Nothing checks that the public inputs
   imply one plan: several plans often produce the target (see :mod:`.solver`).
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.candidates import canonical, propose, propose_sourced, rename
from orchestrl.envs.orchestration.domains import ALIASES, DOMAINS, Domain
from orchestrl.envs.orchestration.plans import (
    POST,
    PREP_ROLES,
    Family,
    Stage,
    assign_slots,
    cleaning_fits,
    main_output,
    run_spec,
    run_stages,
    wire,
)
from orchestrl.envs.orchestration.spec import (
    CAPACITIES,
    AggregateDuty,
    Capacity,
    DedupDuty,
    DeriveDuty,
    FilterDuty,
    JoinDuty,
    OrchestrationSpec,
    Role,
    SelectDuty,
    TaskRef,
)
from orchestrl.envs.orchestration.tables import TargetIndex, same_table
from orchestrl.envs.orchestration.task_store import active_store

HELDOUT_OFFSET = 1_000_000_000
MAX_ATTEMPTS = 400
P, J, Q = Family.PREP, Family.JOIN, Family.POST


@dataclass(frozen=True)
class Level:
    number: int
    agents: int
    max_sources: int
    duties: int  # candidates per role; index 0 is the base duty
    examples: int  # target rows shown
    skeleton: tuple[Family, ...]  # one family per agent slot (the team's convention)
    dirty: bool
    distractors: bool
    fact_rows: tuple[int, int]
    filters_per_table: int = 1  # filters one table may get (2: conjunctions), besides one dedup

    @property
    def stages(self) -> tuple[int, int]:
        """Fewest and most stages a plan of this level has."""
        return {1: (1, 2), 2: (3, 3), 3: (4, 5), 4: (6, 8), 5: (7, 10)}[self.number]


LEVELS: dict[int, Level] = {
    1: Level(1, 2, 1, 4, 5, (P, Q), dirty=False, distractors=False, fact_rows=(40, 90)),
    2: Level(2, 3, 2, 4, 5, (P, J, Q), dirty=False, distractors=False, fact_rows=(60, 120)),
    3: Level(3, 5, 3, 6, 6, (P, J, J, Q, Q), dirty=True, distractors=True, fact_rows=(80, 150)),
    4: Level(4, 8, 3, 6, 6, (P, P, P, J, J, Q, Q, Q), dirty=True, distractors=True, fact_rows=(90, 160)),
    5: Level(
        5,
        10,
        3,
        8,
        6,
        (P, P, P, P, P, J, J, Q, Q, Q),
        dirty=True,
        distractors=True,
        fact_rows=(150, 240),
        filters_per_table=2,
    ),
}


@dataclass(frozen=True)
class TaskKey:
    level: int
    split: str
    seed: int

    def ref(self) -> TaskRef:
        return TaskRef(level=self.level, split=self.split, seed=self.seed)  # type: ignore[arg-type]


@dataclass(frozen=True)
class PublicInputs:
    """What the team is given: the sources, the target's columns and a few of its rows, and the
    seed that orders the candidate lists (:func:`.candidates.propose`)."""

    level: Level
    domain: str | Domain
    """A generated task's domain name, or a :class:`.domains.Domain` (a user's tables)."""
    sources: Mapping[str, pd.DataFrame]
    target_columns: tuple[str, ...]
    examples: pd.DataFrame
    candidate_seed: tuple[int, ...]

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(self.sources)

    @cached_property
    def proposed(self) -> dict[Role, tuple[Any, ...]]:
        """The candidate duties proposed from these inputs (:func:`.candidates.propose`)."""
        return propose(self)

    @cached_property
    def candidates(self) -> dict[Role, tuple[Any, ...]]:
        """The proposed candidates as the team sees them, each role's in canonical order
        (:func:`.candidates.canonical`): a duty's index names it and says nothing of how strongly
        the data, the target's names or the solver's prior call for it."""
        return {role: canonical(duties) for role, duties in self.proposed.items()}

    @cached_property
    def view(self) -> Any:
        """The inputs indexed for features and the solver (:class:`.analysis.PublicView`, built
        once per task)."""
        from orchestrl.envs.orchestration.analysis import PublicView

        return PublicView(self)


@dataclass(frozen=True)
class Task:
    """One task: its public inputs, the candidates proposed from them, and the hidden part
    (``reference``, ``target``), which observations and the solver never read."""

    key: TaskKey
    public: PublicInputs
    reference: OrchestrationSpec | None = None
    target: pd.DataFrame | None = None
    reference_work: float = 0.0
    attempts: int = 1

    @property
    def level(self) -> Level:
        return self.public.level

    @property
    def candidates(self) -> Mapping[Role, tuple[Any, ...]]:
        return self.public.candidates

    @property
    def domain(self) -> str | Domain:
        return self.public.domain

    @property
    def sources(self) -> Mapping[str, pd.DataFrame]:
        return self.public.sources

    @property
    def source_names(self) -> tuple[str, ...]:
        return self.public.source_names

    @cached_property
    def source_blobs(self) -> dict[str, tuple[str, bytes]]:
        """Pickled sources keyed by content hash (what the sandbox and the node cache use)."""
        return pickled_sources(self.sources)


def pickled_sources(sources: Mapping[str, pd.DataFrame]) -> dict[str, tuple[str, bytes]]:
    """Each source pickled, with its content hash: what the sandbox and the node cache read."""
    out = {}
    for name, frame in sources.items():
        blob = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        out[name] = (hashlib.blake2b(blob, digest_size=16).hexdigest(), blob)
    return out


TASK_CACHE = 1024
"""Tasks a process keeps (their size on disk: ``benchmarks/RESULTS.md``, section "Task store"):
room for the configs' ``task_pool: 1000``. Per-task
caches elsewhere (the env's scorers, the solver's plans) use the same size."""


def generate_task(level: int, split: str, seed: int) -> Task:
    """The task for ``(level, split, seed)``; deterministic, cached per process and in the
    on-disk task store if one is set (:mod:`.task_store`)."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, not {level!r}")
    return _generate(int(level), split, int(seed) % HELDOUT_OFFSET)


@functools.lru_cache(maxsize=TASK_CACHE)
def _generate(level: int, split: str, seed: int) -> Task:
    store = active_store()
    task = store.load(level, split, seed) if store is not None else None
    if task is None:
        task = _build(level, split, seed)
        if store is not None:
            store.save(task)
    return task


def _build(level: int, split: str, seed: int) -> Task:
    config = LEVELS[level]
    base = seed + (HELDOUT_OFFSET if split == "heldout" else 0)
    for attempt in range(MAX_ATTEMPTS):
        try:
            return _Builder(config, TaskKey(level, split, seed), (level, base, attempt)).build(attempt + 1)
        except _Reject:
            continue
    raise RuntimeError(f"no valid task for level {level} seed {seed} after {MAX_ATTEMPTS} attempts")


def write_task_data(task: Task, directory: str | Path) -> Path:
    """Writes one ``<source>.parquet`` per source (what ``pipeline.py --data DIR`` reads)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, frame in task.sources.items():
        frame.to_parquet(directory / f"{name}.parquet", index=False)
    return directory


class _Reject(Exception):
    """This attempt produced a degenerate task, or one its candidates cannot express."""


def _check(condition: bool) -> None:
    if not condition:
        raise _Reject


@dataclass
class _Shape:
    """A planned stage before its duty: role, where it acts, and what kind of duty it gets."""

    role: Role
    home: int
    kind: str = ""  # filter: eq / ne / gt / lt / notnull
    column: str = ""  # filter column chosen before the data (notnull), dedup: exact copies or not
    duty: Any = None


FILTER_KINDS = ("eq", "ne", "gt", "lt", "notnull")
FILTER_WEIGHTS = (0.45, 0.1, 0.2, 0.1, 0.15)


class _Builder:
    def __init__(self, level: Level, key: TaskKey, seed: tuple[int, int, int]) -> None:
        self.level = level
        self.key = key
        self.seed = seed
        self.rng = np.random.default_rng([*seed, 0])
        self.domain: Domain = DOMAINS[int(self.rng.integers(len(DOMAINS)))]

    # ------------------------------------------------------------------------------ shape
    def _shape(self) -> tuple[int, list[_Shape]]:
        lv, rng, d = self.level, self.rng, self.domain
        n = {1: 1, 2: 2, 3: int(rng.integers(2, 4)), 4: 3, 5: 3}[lv.number]
        if lv.number == 1:
            n_prep, n_post = 1, int(rng.random() < 0.7)
        elif lv.number == 2:
            n_prep, n_post = 1, 1
        elif lv.number == 3:
            n_prep, n_post = 1, 2
        elif lv.number == 4:
            n_prep, n_post = int(rng.integers(2, 4)), int(rng.integers(2, 4))
        else:
            n_prep, n_post = int(rng.integers(4, 6)), int(rng.integers(2, 4))
        shapes: list[_Shape] = []
        places = np.repeat(np.arange(n), lv.filters_per_table)
        homes = [int(h) for h in rng.choice(places, size=n_prep, replace=False)] if n_prep else []
        if lv.number >= 4 and all(h == 0 for h in homes):
            homes[0] = int(rng.integers(1, n))  # branching: a dimension is cleaned before its join
        for i, home in enumerate(homes):
            second = home in homes[:i]  # a table's second cleaning stage: a filter (a conjunction)
            if not second and rng.random() < 0.3:
                shapes.append(_Shape(Role.DEDUP, home, column="exact" if rng.random() < 0.3 else "later"))
            else:
                kinds = FILTER_KINDS[:-1] if second else FILTER_KINDS  # one not-null column per table
                weights = np.array(FILTER_WEIGHTS[: len(kinds)])
                kind = str(rng.choice(kinds, p=weights / weights.sum()))
                shapes.append(_Shape(Role.FILTER, home, kind=kind))
        shapes += [_Shape(Role.JOIN, b) for b in range(1, n)]
        posts = {
            0: [()],
            1: [(Role.DERIVE,), (Role.AGGREGATE,), (Role.SELECT,)],
            2: [(Role.DERIVE, Role.AGGREGATE), (Role.DERIVE, Role.SELECT), (Role.AGGREGATE, Role.SELECT)],
            3: [(Role.DERIVE, Role.AGGREGATE, Role.SELECT)],
        }[n_post]
        shapes += [_Shape(r, POST) for r in posts[int(rng.integers(len(posts)))]]
        for s in shapes:
            if s.role is Role.FILTER and s.kind == "notnull":
                s.column = d.cat if s.home == 0 else d.dims[s.home - 1].cat2
        return n, shapes

    # ------------------------------------------------------------------------------ sources
    def _sources(self, n: int, shapes: list[_Shape]) -> dict[str, pd.DataFrame]:
        d, rng, lv = self.domain, self.rng, self.level
        dims = []
        for dim in d.dims:
            names = [f"{a} {b}" for a in dim.first_words for b in dim.last_words]
            m = int(rng.integers(8, 14))
            keys = list(rng.choice(names, size=m, replace=False))
            dims.append(
                pd.DataFrame(
                    {
                        dim.key: pd.array(keys, dtype="str"),
                        dim.cat: pd.array(rng.choice(dim.cat_values, m), dtype="str"),
                        dim.cat2: pd.array(rng.choice(dim.cat2_values, m), dtype="str"),
                        dim.num: np.round(rng.uniform(*dim.num_range, m), 2),
                        "updated": rng.integers(2019, 2025, m).astype("int64"),
                    }
                )
            )
        rows = int(rng.integers(*lv.fact_rows))
        weights = rng.dirichlet(np.ones(len(d.status_values)) * 3)
        n1 = (
            rng.integers(int(d.n1_range[0]), int(d.n1_range[1]) + 1, rows)
            if d.n1_integer
            else np.round(rng.uniform(*d.n1_range, rows), 1)
        )
        fact = pd.DataFrame(
            {
                d.fact_id: np.arange(1001, 1001 + rows, dtype="int64"),
                d.dims[0].key: pd.array(rng.choice(dims[0][d.dims[0].key], rows), dtype="str"),
                d.dims[1].key: pd.array(rng.choice(dims[1][d.dims[1].key], rows), dtype="str"),
                d.status: pd.array(rng.choice(d.status_values, rows, p=weights), dtype="str"),
                d.cat: pd.array(rng.choice(d.cat_values, rows), dtype="str"),
                d.n1: n1,
                d.n2: np.round(rng.uniform(*d.n2_range, rows), 2),
                "batch": np.ones(rows, dtype="int64"),
            }
        )
        if lv.distractors:
            codes = pd.array([f"c-{v}" for v in rng.integers(1000, 9999, rows)], dtype="str")
            fact[d.distractors[0]] = codes
            fact.loc[rng.random(rows) < 0.5, d.distractors[0]] = None
            words = np.array(["late", "gift", "urgent", "fragile", "repeat", "ok", "check"])
            fact[d.distractors[1]] = pd.array(
                [" ".join(rng.choice(words, 2)) for _ in range(rows)], dtype="str"
            )
            fact[d.distractors[2]] = pd.array(rng.choice(["y", "n"], rows), dtype="str")
            fact.loc[rng.random(rows) < 0.1, d.distractors[2]] = None
        tables = [fact, *dims][:n]
        for s in shapes:
            if s.role is Role.DEDUP:
                tables[s.home] = self._with_duplicates(tables[s.home], s.home, exact=s.column == "exact")
            if s.role is Role.FILTER and s.kind == "notnull":
                t = tables[s.home].copy()
                t.loc[rng.random(len(t)) < 0.2, s.column] = None
                tables[s.home] = t
        names = [d.fact, d.dims[0].table, d.dims[1].table][:n]
        sources = {name: t.reset_index(drop=True) for name, t in zip(names, tables, strict=True)}
        return self._dirty(sources) if lv.dirty else sources

    def _with_duplicates(self, table: pd.DataFrame, home: int, exact: bool) -> pd.DataFrame:
        rng = self.rng
        if home == 0:
            picks = table.sample(n=max(3, len(table) // 10), random_state=int(rng.integers(2**31)))
            if not exact:
                picks = picks.assign(batch=2)  # re-ingested: the same order from a later batch
        else:
            picks = table.sample(n=min(3, len(table) - 1), random_state=int(rng.integers(2**31)))
            if not exact:
                picks = picks.assign(updated=2025)  # a later copy of the same entity
        both = pd.concat([table, picks], ignore_index=True)
        return both.sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index(drop=True)

    def _dirty(self, sources: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
        """Messes up 2-4 columns drawn among every source's keys, categories and numbers (plus,
        half the time, the fact's free text); blanks out part of the missing text values."""
        d, rng = self.domain, self.rng
        names = list(sources)
        pool = []
        for i, name in enumerate(names):
            if i == 0:
                cols = [d.dims[0].key, d.status, d.cat, d.n1, d.n2]
                cols += [d.dims[1].key] if len(names) > 2 else []
            else:
                dim = d.dims[i - 1]
                cols = [dim.key, dim.cat, dim.cat2, dim.num]
            pool += [(name, c) for c in cols]
        picks = [pool[i] for i in rng.choice(len(pool), int(rng.integers(2, 5)), replace=False)]
        if rng.random() < 0.5:
            picks.append((names[0], d.distractors[1]))
        out = {n: f.copy() for n, f in sources.items()}
        for name, column in picks:
            frame = out[name]
            if pd.api.types.is_numeric_dtype(frame[column]):
                frame[column] = _money(frame[column], rng)
            else:
                frame[column] = _messy_text(frame[column], rng)
        for name, frame in out.items():  # part of the missing text values become blanks
            for column in frame.columns:
                s = frame[column]
                if not pd.api.types.is_numeric_dtype(s) and s.isna().any() and (name, column) not in picks:
                    frame[column] = _messy_text(s, rng, share=0.0)
        return out

    # ------------------------------------------------------------------------------ duties
    def _prep_duty(
        self,
        s: _Shape,
        sources: dict[str, pd.DataFrame],
        pool: tuple[Any, ...],
        taken: set,
        drawn: list[Stage],
    ) -> Any:
        """A cleaning duty drawn among the proposed candidates that fit the shape: a dedup on the
        home table's key, a not-null filter on the column given missing values, or another filter
        keeping 20-85% of a table's rows (kinds weighted as FILTER_WEIGHTS; on the planned home
        table if one fits, else on another table no other cleaning stage uses). With the stages
        ``drawn`` so far the table's cleaning must still fit (:func:`.plans.cleaning_fits`)."""
        names = list(sources)
        homes = [s.home] if s.role is Role.DEDUP or s.kind == "notnull" else [s.home, *range(len(names))]
        per_table = self.level.filters_per_table
        for home in dict.fromkeys(h for h in homes if h == s.home or h not in taken):
            frame = sources[names[home]]
            fitting, weights = [], []
            for duty in pool:
                if not cleaning_fits([*drawn, Stage(s.role, duty, home)], per_table):
                    continue
                if s.role is Role.DEDUP and isinstance(duty, DedupDuty) and duty.subset is not None:
                    key = self.domain.fact_id if home == 0 else self.domain.dims[home - 1].key
                    if duty.subset == (key,):
                        fitting.append(duty)
                        weights.append(1.0)
                elif s.role is Role.FILTER and isinstance(duty, FilterDuty) and duty.column in frame.columns:
                    if (duty.op == "notnull") != (s.kind == "notnull") or (
                        s.kind == "notnull" and duty.column != s.column
                    ):
                        continue
                    if 0.2 <= _keep_share(frame, duty) <= 0.85:
                        fitting.append(duty)
                        weights.append(FILTER_WEIGHTS[FILTER_KINDS.index(duty.op)])
            if fitting:
                s.home = home
                p = np.array(weights) / sum(weights)
                return fitting[int(self.rng.choice(len(fitting), p=p))]
        raise _Reject

    def _post_duty(self, s: _Shape, frame: pd.DataFrame, shapes: list[_Shape], joined: list[int]) -> Any:
        d, rng = self.domain, self.rng
        roles = {x.role for x in shapes}
        cols = [str(c) for c in frame.columns]
        if s.role is Role.DERIVE:
            return DeriveDuty(name=d.derived, op=d.derived_op, left=d.derived_left, right=d.derived_right)
        if s.role is Role.AGGREGATE:
            eq_filtered = {x.duty.column for x in shapes if x.role is Role.FILTER and x.duty.op == "eq"}
            groups = [c for i in joined for c in (d.dims[i - 1].cat, d.dims[i - 1].cat2)]
            groups += [d.status, d.cat]
            groups = [c for c in groups if c in cols and c not in eq_filtered]
            _check(bool(groups))
            by = [str(rng.choice(groups))]
            if rng.random() < 0.25 or frame[by[0]].nunique() <= self.level.examples + 1:
                second = [c for c in groups if c != by[0]]
                if second:
                    by.append(str(rng.choice(second)))
            if Role.DERIVE in roles:
                column, fn = d.derived, str(rng.choice(["sum", "mean", "max"]))
            else:
                options = [(d.n2, "sum"), (d.n2, "mean"), (d.n2, "max"), (d.n1, "sum"), (d.fact_id, "count")]
                column, fn = options[int(rng.integers(len(options)))]
            return AggregateDuty(by=tuple(by), column=column, fn=fn, name=f"{fn}_{column}")
        # select: after an aggregate, renames its group columns; otherwise keeps a few columns
        if Role.AGGREGATE in roles:
            keep = cols
            renamable = [c for c in cols if c not in frame.columns[-1:]]  # the group columns
        else:
            must = [d.derived] if Role.DERIVE in roles else []
            must += [str(rng.choice([dim.cat, dim.cat2, dim.num])) for dim in (d.dims[i - 1] for i in joined)]
            filtered = [x.duty.column for x in shapes if x.role is Role.FILTER and x.duty.column in cols]
            must += [c for c in filtered if rng.random() < 0.7]
            if rng.random() < 0.6:
                must.append(d.fact_id)
            rest = [
                c
                for c in cols
                if c not in must and not c.startswith(("batch", "updated")) and c not in d.distractors
            ]
            extra = list(rng.choice(rest, min(len(rest), int(rng.integers(1, 3))), replace=False))
            chosen = set(must) | set(extra)
            keep = [c for c in cols if c in chosen]
            renamable = keep
        renamable = [c for c in renamable if c in ALIASES] or renamable
        renamed = set(rng.choice(renamable, min(len(renamable), int(rng.integers(1, 3))), replace=False))
        mapping = tuple((c, rename(c) if c in renamed else c) for c in keep)
        _check(bool(renamed) or len(keep) < len(cols))
        _check(len({new for _, new in mapping}) == len(mapping))
        return SelectDuty(columns=mapping)

    # ------------------------------------------------------------------------------ build
    def build(self, attempts: int) -> Task:
        lv, d = self.level, self.domain
        n, shapes = self._shape()
        sources = self._sources(n, shapes)
        names = list(sources)
        sourced = propose_sourced(sources, d, lv, self.seed)
        for s in shapes:
            if s.role in PREP_ROLES:
                taken = {x.home for x in shapes if x.role in PREP_ROLES and x is not s}
                drawn = [
                    Stage(x.role, x.duty, x.home)
                    for x in shapes
                    if x.role in PREP_ROLES and x.duty is not None
                ]
                s.duty = self._prep_duty(s, sources, sourced[s.role], taken, drawn)
            elif s.role is Role.JOIN:
                key = d.dims[s.home - 1].key
                s.duty = JoinDuty(left_on=key, right_on=key)
        cleaning = [Stage(s.role, s.duty, s.home) for s in shapes if s.role in PREP_ROLES]
        _check(cleaning_fits(cleaning, lv.filters_per_table))
        _check(lv.number < 4 or any(st.home > 0 for st in cleaning))
        # the post duties are drawn on the data the pipeline has made by then (at large capacity)
        stages = sorted(
            (Stage(s.role, s.duty, s.home) for s in shapes if s.duty is not None), key=Stage.order
        )
        joined = [s.home for s in shapes if s.role is Role.JOIN]
        post = [s for s in shapes if s.duty is None]
        for s in sorted(post, key=lambda x: Stage(x.role, None, POST).order()):
            frame = main_output(sources, names, [st.with_capacity(Capacity.LARGE) for st in stages])
            s.duty = self._post_duty(s, frame, shapes, joined)
            stages.append(Stage(s.role, s.duty, POST))
        stages.sort(key=Stage.order)
        large = [st.with_capacity(Capacity.LARGE) for st in stages]
        outputs = run_stages(sources, names, large)
        for st, out in zip(stages, outputs, strict=True):
            _check(_changes(st.role, out, _input_rows(st, sources, names, stages, outputs)))
        target = outputs[-1].reset_index(drop=True)
        _check(len(target) > lv.examples and len(target.columns) >= 2)
        stages = self._capacities(sources, names, stages, target)
        slots = assign_slots(stages, lv.skeleton)
        _check(slots is not None)
        assert slots is not None
        reference = wire(slots, names, self.key.ref())
        run = run_spec(sources, reference)
        _check(run.output is not None and TargetIndex(target).compare(run.output).exact)
        examples = target.sample(n=lv.examples, random_state=int(self.rng.integers(2**31))).reset_index(
            drop=True
        )
        public = PublicInputs(lv, d.name, sources, tuple(str(c) for c in target.columns), examples, self.seed)
        public.__dict__["proposed"] = propose(public, sourced)  # what its cached property computes
        for node in reference.nodes:
            _check(node.duty in public.candidates[node.role])
        return Task(
            key=self.key,
            public=public,
            reference=reference,
            target=target,
            reference_work=run.work,
            attempts=attempts,
        )

    def _capacities(
        self, sources: dict[str, pd.DataFrame], names: list[str], stages: list[Stage], target: pd.DataFrame
    ) -> list[Stage]:
        """Each stage's smallest capacity that still yields the target (later stages at large).
        A capacity whose stage output equals the large one's yields the target without running
        the rest; otherwise the rest runs at large from there."""
        index = TargetIndex(target)
        large = run_stages(sources, names, [st.with_capacity(Capacity.LARGE) for st in stages])
        heads = {i: sources[n] for i, n in enumerate(names)}
        chosen: list[Stage] = []
        for i, stage in enumerate(stages):
            rest = [st.with_capacity(Capacity.LARGE) for st in stages[i + 1 :]]
            for capacity in CAPACITIES:
                trial = stage.with_capacity(capacity)
                try:
                    out = run_stages(sources, names, [trial], dict(heads))[0]
                    fine = (
                        same_table(out, large[i])
                        or index.compare(run_stages(sources, names, [trial, *rest], dict(heads))[-1]).exact
                    )
                except Exception:
                    continue
                if fine:
                    chosen.append(trial)
                    heads[stage.home if stage.role in PREP_ROLES else 0] = out
                    break
            else:
                raise _Reject
        if self.level.dirty:
            capacities = {st.capacity for st in chosen}
            _check(Capacity.SMALL in capacities and capacities != {Capacity.SMALL})
        return chosen


def _input_rows(
    st: Stage, sources: Mapping[str, pd.DataFrame], names: list[str], stages: list[Stage], outputs: list
) -> int:
    """Rows of the stage's (first) input under the canonical wiring."""
    chain = st.home if st.role in PREP_ROLES else 0
    rows = len(sources[names[chain]])
    for other, out in zip(stages, outputs, strict=True):
        if other is st:
            return rows
        if (other.role in PREP_ROLES and other.home == chain) or (
            other.role not in PREP_ROLES and chain == 0
        ):
            rows = len(out)
    return rows


def _changes(role: Role, out: pd.DataFrame, rows_in: int) -> bool:
    """A plan's stage must do something, and leave something."""
    if role in (Role.FILTER, Role.DEDUP, Role.AGGREGATE):
        return 2 <= len(out) < rows_in
    if role is Role.JOIN:
        return len(out) >= 3
    return True


def _keep_share(frame: pd.DataFrame, duty: FilterDuty) -> float:
    """Share of rows a filter keeps at large capacity."""
    out, _ = ops.op_filter(frame, duty.column, duty.op, duty.value, "large")
    return len(out) / max(len(frame), 1)


def _messy_text(column: pd.Series, rng: np.random.Generator, share: float = 0.35) -> pd.Series:
    variants = [
        str.upper,
        str.title,
        lambda v: f" {v}",
        lambda v: f"{v}  ",
        lambda v: v.replace(" ", "  ") + " ",
    ]
    values = column.astype("object").to_numpy(copy=True)
    for i in np.flatnonzero(rng.random(len(values)) < share):
        v = values[i]
        if isinstance(v, str):
            values[i] = variants[int(rng.integers(len(variants)))](v)
    missing = pd.isna(column).to_numpy()
    blanks = missing & (rng.random(len(values)) < 0.5)
    values[blanks] = "  "
    return pd.Series(pd.array(values, dtype="str"), index=column.index, name=column.name)


def _money(column: pd.Series, rng: np.random.Generator) -> pd.Series:
    values = []
    for v, messy in zip(column.to_numpy(), rng.random(len(column)) < 0.35, strict=True):
        if pd.isna(v):
            values.append(None)
        elif messy:
            values.append(f"${float(v):,.2f}")
        else:
            values.append(f"{v}")
    return pd.Series(pd.array(values, dtype="str"), index=column.index, name=column.name)
