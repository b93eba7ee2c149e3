"""The LEMON task family: source tables plus a target made by a hidden reference pipeline.

A task is reproducible from ``(level, split, seed)``. Generation:

1. pick a domain and a *plan*: per-source cleaning stages (filter, dedup), joins of the dimension
   tables into the fact table, then post stages (derive, aggregate, top-k, select), all in the
   canonical order :func:`.evidence.stage_order`;
2. generate clean sources shaped by the plan (duplicates only where a dedup is planned, missing
   values where a not-null filter is, ...), and instantiate each stage's duty on the data;
3. from level 3 on, add dirt (case, stray spaces, blanks, money-formatted numbers) to some
   columns the plan reads, plus distractor columns; then give each node the smallest capacity
   whose output equals the large capacity's, which is why dirty tasks need larger capacity only at
   some nodes;
4. run the reference (in-process, same :mod:`.ops` code the sandbox runs) to get the target, its
   column lineage and the rows each source feeds it;
5. build per-role candidate duty lists: index 0 is the base duty, then the reference duties and
   distractors, shuffled. Distractors the public evidence would support are rejected, and a task
   whose evidence does not imply exactly the reference plan is regenerated (next attempt).

``split`` selects disjoint generator seeds: train uses ``seed``, heldout ``HELDOUT_OFFSET + seed``.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import ValidationError

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.distractors import distractor_pool
from orchestrl.envs.orchestration.domains import ALIASES, DOMAINS, Domain
from orchestrl.envs.orchestration.evidence import (
    POST,
    POST_ROLES,
    PREP_ROLES,
    Context,
    Evidence,
    Goal,
    PlannedStage,
    SourceInfo,
    aggregate_lineage,
    canonical_plan,
    column_stats,
    derive_lineage,
    evaluate,
    source_lineage,
    stage_order,
)
from orchestrl.envs.orchestration.spec import (
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
    TopKDuty,
    base_duty,
)
from orchestrl.envs.orchestration.tables import same_table

HELDOUT_OFFSET = 1_000_000_000
MAX_ATTEMPTS = 200


@dataclass(frozen=True)
class Level:
    number: int
    agents: int
    max_sources: int
    duties: int  # candidates per role; index 0 is the base duty
    stages: tuple[int, int]
    dirty: bool
    distractors: bool
    fact_rows: tuple[int, int]


LEVELS: dict[int, Level] = {
    1: Level(
        1,
        agents=2,
        max_sources=1,
        duties=4,
        stages=(1, 2),
        dirty=False,
        distractors=False,
        fact_rows=(40, 90),
    ),
    2: Level(
        2,
        agents=3,
        max_sources=2,
        duties=4,
        stages=(3, 3),
        dirty=False,
        distractors=False,
        fact_rows=(60, 120),
    ),
    3: Level(
        3, agents=5, max_sources=3, duties=6, stages=(4, 5), dirty=True, distractors=True, fact_rows=(80, 150)
    ),
    4: Level(
        4, agents=8, max_sources=3, duties=6, stages=(6, 8), dirty=True, distractors=True, fact_rows=(90, 160)
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
class Task:
    """One task. ``reference`` and ``target`` are hidden: observations never read them."""

    key: TaskKey
    level: Level
    domain: str
    sources: Mapping[str, pd.DataFrame]
    keys: frozenset[str]
    goal: Goal
    infos: tuple[SourceInfo, ...]
    candidates: Mapping[Role, tuple[Any, ...]]
    evidence: Mapping[Role, tuple[Evidence, ...]]
    reference: OrchestrationSpec | None = None
    target: pd.DataFrame | None = None
    reference_work: float = 0.0
    attempts: int = 1

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(self.sources)

    @cached_property
    def plan(self) -> list[PlannedStage]:
        """The stages the public evidence implies, in canonical order."""
        return canonical_plan(self.evidence)

    @cached_property
    def source_blobs(self) -> dict[str, tuple[str, bytes]]:
        """Pickled sources keyed by content hash (what the sandbox and the node cache use)."""
        out = {}
        for name, frame in self.sources.items():
            blob = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
            out[name] = (hashlib.blake2b(blob, digest_size=16).hexdigest(), blob)
        return out


TASK_CACHE = 1024
"""Tasks a process keeps (~130 KB each): room for the configs' ``task_pool: 1000``. Per-task
caches elsewhere (the env's scorers) use the same size, so a cached task keeps its scorer."""


def generate_task(level: int, split: str, seed: int) -> Task:
    """The task for ``(level, split, seed)``; deterministic, cached per process."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
    if level not in LEVELS:
        raise ValueError(f"level must be one of {sorted(LEVELS)}, not {level!r}")
    return _generate(int(level), split, int(seed) % HELDOUT_OFFSET)


@functools.lru_cache(maxsize=TASK_CACHE)
def _generate(level: int, split: str, seed: int) -> Task:
    config = LEVELS[level]
    base = seed + (HELDOUT_OFFSET if split == "heldout" else 0)
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([level, base, attempt])
        try:
            return _Builder(config, TaskKey(level, split, seed), rng).build(attempt + 1)
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
    """This attempt produced a degenerate or ambiguous task."""


def _check(condition: bool) -> None:
    if not condition:
        raise _Reject


@dataclass
class _Stream:
    frame: pd.DataFrame
    lineage: dict[str, str]
    head: str  # node id or source name


@dataclass
class _Stage:
    role: Role
    home: int
    kind: str | None = None  # filter kind (eq / gt / notnull), chosen before the data
    shape: tuple[tuple[str, ...], str, str] | None = None  # aggregate (by, column, fn), chosen early
    duty: Any = None


class _Builder:
    def __init__(self, level: Level, key: TaskKey, rng: np.random.Generator) -> None:
        self.level = level
        self.key = key
        self.rng = rng
        self.domain: Domain = DOMAINS[int(rng.integers(len(DOMAINS)))]

    # ------------------------------------------------------------------------------ plan
    def _plan(self) -> tuple[int, list[_Stage]]:
        lv, rng = self.level, self.rng
        if lv.number == 1:
            n_sources, joins = 1, []
        elif lv.number == 2:
            n_sources, joins = 2, [1]
        elif lv.number == 3:
            n_sources = int(rng.integers(2, 4))
            joins = list(range(1, n_sources))
        else:
            n_sources, joins = 3, [1, 2]
        total = int(rng.integers(lv.stages[0], lv.stages[1] + 1))
        pool = [(r, s) for s in range(n_sources) for r in PREP_ROLES] + [(r, POST) for r in POST_ROLES]
        others = total - len(joins)
        options = list(combinations(pool, others))
        if lv.number == 4:  # branching: some table other than the fact table is cleaned before its join
            options = [c for c in options if any(s in (1, 2) for _, s in c)]
        chosen = options[int(rng.integers(len(options)))]
        stages = [_Stage(r, s) for r, s in chosen] + [_Stage(Role.JOIN, b) for b in joins]
        stages.sort(key=lambda st: stage_order(st.role, st.home))
        for st in stages:
            if st.role is Role.FILTER:
                st.kind = str(rng.choice(["eq", "gt", "notnull"], p=[0.45, 0.35, 0.2]))
        for st in stages:
            if st.role is Role.AGGREGATE:
                st.shape = self._aggregate_shape(stages, n_sources)
        return n_sources, stages

    def _aggregate_shape(self, stages: list[_Stage], n_sources: int) -> tuple[tuple[str, ...], str, str]:
        """Group by a category of every joined table (a filtered one would leave one group), maybe
        plus one of the fact table; sum or average the derived measure, else some fact number."""
        d, rng = self.domain, self.rng
        filtered = {
            col
            for st in stages
            if st.role is Role.FILTER and st.kind != "gt"
            for _, col in self._reads(st, set(), n_sources)
        }
        groups = [[c for c in (dim.cat, dim.cat2) if c not in filtered] for dim in d.dims[: n_sources - 1]]
        fact = [c for c in (d.cat, d.status) if c not in filtered]
        _check(all(groups) and (bool(groups) or bool(fact)))
        by = [str(rng.choice(g)) for g in groups]
        if fact and (not by or (len(by) == 1 and rng.random() < 0.3)):
            by.append(str(rng.choice(fact)))
        if any(st.role is Role.DERIVE for st in stages):
            return tuple(by), d.derived, str(rng.choice(["sum", "mean"]))
        options = [(d.n2, "sum"), (d.n2, "mean"), (d.n2, "max"), (d.n1, "sum"), (d.fact_id, "count")]
        column, fn = options[int(rng.integers(len(options)))]
        return tuple(by), column, fn

    # ------------------------------------------------------------------------------ sources
    def _sources(self, n_sources: int, stages: list[_Stage]) -> dict[str, pd.DataFrame]:
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
        n = int(rng.integers(*lv.fact_rows))
        weights = rng.dirichlet(np.ones(len(d.status_values)) * 3)
        n1 = (
            rng.integers(int(d.n1_range[0]), int(d.n1_range[1]) + 1, n)
            if d.n1_integer
            else np.round(rng.uniform(*d.n1_range, n), 1)
        )
        fact = pd.DataFrame(
            {
                d.fact_id: np.arange(1001, 1001 + n, dtype="int64"),
                d.dims[0].key: pd.array(rng.choice(dims[0][d.dims[0].key], n), dtype="str"),
                d.dims[1].key: pd.array(rng.choice(dims[1][d.dims[1].key], n), dtype="str"),
                d.status: pd.array(rng.choice(d.status_values, n, p=weights), dtype="str"),
                d.cat: pd.array(rng.choice(d.cat_values, n), dtype="str"),
                d.n1: n1,
                d.n2: np.round(rng.uniform(*d.n2_range, n), 2),
                "batch": np.ones(n, dtype="int64"),
            }
        )
        if lv.distractors:
            codes = pd.array([f"c-{v}" for v in rng.integers(1000, 9999, n)], dtype="str")
            fact[d.distractors[0]] = codes
            fact.loc[rng.random(n) < 0.5, d.distractors[0]] = None
            words = np.array(["late", "gift", "urgent", "fragile", "repeat", "ok", "check"])
            fact[d.distractors[1]] = pd.array([" ".join(rng.choice(words, 2)) for _ in range(n)], dtype="str")
            fact[d.distractors[2]] = pd.array(rng.choice(["y", "n"], n), dtype="str")
        tables = [fact, *dims][:n_sources]
        for st in stages:
            if st.role is Role.DEDUP:
                tables[st.home] = self._with_duplicates(tables[st.home], st.home)
            if st.role is Role.FILTER and st.kind == "notnull":
                column = d.cat if st.home == 0 else d.dims[st.home - 1].cat2
                t = tables[st.home].copy()
                t.loc[rng.random(len(t)) < 0.2, column] = None
                tables[st.home] = t
        names = [d.fact, d.dims[0].table, d.dims[1].table][:n_sources]
        return {name: t.reset_index(drop=True) for name, t in zip(names, tables, strict=True)}

    def _with_duplicates(self, table: pd.DataFrame, home: int) -> pd.DataFrame:
        rng = self.rng
        if home == 0:
            picks = table.sample(n=max(2, len(table) // 10), random_state=int(rng.integers(2**31)))
            picks = picks.assign(batch=2)
        else:
            picks = table.sample(n=min(3, len(table) - 1), random_state=int(rng.integers(2**31)))
            picks = picks.assign(updated=2025)  # a later copy of the same entity
        both = pd.concat([table, picks], ignore_index=True)
        return both.sample(frac=1.0, random_state=int(rng.integers(2**31))).reset_index(drop=True)

    # ------------------------------------------------------------------------------ duties
    def _prep_duty(self, st: _Stage, frame: pd.DataFrame) -> Any:
        d, rng = self.domain, self.rng
        if st.role is Role.DEDUP:
            return DedupDuty(subset=(d.fact_id,) if st.home == 0 else (d.dims[st.home - 1].key,))
        if st.home == 0:
            text, number, nullable = d.status, d.n2, d.cat
        else:
            dim = d.dims[st.home - 1]
            text, number, nullable = dim.cat2, dim.num, dim.cat2
        if st.kind == "notnull":
            return FilterDuty(column=nullable, op="notnull")
        if st.kind == "gt":
            values = ops.as_numbers(frame[number], "large").dropna()
            threshold = float(np.round(values.quantile(rng.uniform(0.25, 0.6)), 0))
            return FilterDuty(column=number, op="gt", value=threshold)
        shares = ops.as_text(frame[text], "large").value_counts(normalize=True)
        choices = [v for v, share in shares.items() if 0.15 <= share <= 0.75]
        _check(bool(choices))
        return FilterDuty(column=text, op="eq", value=str(choices[int(rng.integers(len(choices)))]))

    def _post_duty(self, st: _Stage, stream: _Stream, roles: set[Role]) -> Any:
        d, rng, role = self.domain, self.rng, st.role
        cols = list(stream.frame.columns)
        if role is Role.DERIVE:
            return DeriveDuty(name=d.derived, op=d.derived_op, left=d.derived_left, right=d.derived_right)
        joined = [dim for dim in d.dims if dim.num in cols]  # every joined table must reach the target
        if role is Role.AGGREGATE:
            assert st.shape is not None
            by, column, fn = st.shape
            return AggregateDuty(by=by, column=column, fn=fn, name=f"{fn}_{column}")
        if role is Role.TOPK:
            if Role.AGGREGATE in roles:
                column = next(c for c in cols if c.startswith(("sum_", "mean_", "max_", "count_")))
            else:
                column = d.derived if Role.DERIVE in roles else d.n2
            rows = len(stream.frame)
            _check(rows >= 4)
            return TopKDuty(column=column, k=int(rng.integers(2, min(8, rows - 1) + 1)))
        # select: after an aggregate only renames; otherwise keeps what earlier stages made plus a few
        if Role.AGGREGATE in roles:
            keep = cols
        else:
            must = {d.derived} if Role.DERIVE in roles else set()
            if Role.TOPK in roles:
                must.add(d.derived if Role.DERIVE in roles else d.n2)
            must |= {str(rng.choice([dim.cat, dim.cat2, dim.num])) for dim in joined}
            rest = [
                c for c in cols if c not in must and c not in ("batch", "updated") and c not in d.distractors
            ]
            extra = set(rng.choice(rest, min(len(rest), int(rng.integers(2, 5))), replace=False))
            keep = [c for c in cols if c in must | extra]
        renamed = str(rng.choice(keep))
        mapping = tuple((c, ALIASES.get(c, f"{c}_out") if c == renamed else c) for c in keep)
        _check(len({new for _, new in mapping}) == len(mapping))
        return SelectDuty(columns=mapping)

    # ------------------------------------------------------------------------------ dirt
    def _reads(self, st: _Stage, roles: set[Role], n_sources: int) -> list[tuple[int, str]]:
        """(source, column) pairs a stage will compare, group or parse, known before its duty."""
        d = self.domain
        dims = d.dims[: n_sources - 1]
        if st.role is Role.FILTER:
            if st.home == 0:
                column = {"eq": d.status, "gt": d.n2, "notnull": d.cat}[str(st.kind)]
            else:
                dim = d.dims[st.home - 1]
                column = {"eq": dim.cat2, "gt": dim.num, "notnull": dim.cat2}[str(st.kind)]
            return [(st.home, column)]
        if st.role is Role.DEDUP:
            return [] if st.home == 0 else [(st.home, d.dims[st.home - 1].key)]
        if st.role is Role.JOIN:
            key = d.dims[st.home - 1].key
            return [(0, key), (st.home, key)]
        if st.role is Role.DERIVE:
            return [(0, d.derived_left), (0, d.derived_right)]
        if st.role is Role.AGGREGATE and st.shape is not None:
            by, column, _ = st.shape
            holders = {d.cat: 0, d.status: 0, d.n1: 0, d.n2: 0}
            holders.update({c: i + 1 for i, dim in enumerate(dims) for c in (dim.cat, dim.cat2)})
            return [(holders[c], c) for c in (*by, column) if c in holders]
        if st.role is Role.TOPK and not roles & {Role.DERIVE, Role.AGGREGATE}:
            return [(0, d.n2)]
        return []

    def _dirty(self, sources: dict[str, pd.DataFrame], stages: list[_Stage]) -> dict[str, pd.DataFrame]:
        """Messes up 1-3 columns the plan will read (plus maybe a free-text one), and turns part of
        the missing values of not-null filter columns blank."""
        rng, names = self.rng, list(sources)
        roles = {st.role for st in stages}
        targets = sorted({t for st in stages for t in self._reads(st, roles, len(names))})
        _check(bool(targets))
        picks = [
            targets[i]
            for i in rng.choice(len(targets), min(len(targets), int(rng.integers(1, 4))), replace=False)
        ]
        if rng.random() < 0.5:
            picks.append((0, self.domain.distractors[1]))
        out = {n: f.copy() for n, f in sources.items()}
        for h, column in picks:
            frame = out[names[h]]
            if pd.api.types.is_numeric_dtype(frame[column]):
                frame[column] = _money(frame[column], rng)
            else:
                frame[column] = _messy_text(frame[column], rng)
        for st in stages:
            if st.role is Role.FILTER and st.kind == "notnull":
                h, column = self._reads(st, roles, len(names))[0]
                out[names[h]][column] = _messy_text(out[names[h]][column], rng, share=0.0)
                picks.append((h, column))
        fact = out[names[0]]
        fact.loc[rng.random(len(fact)) < 0.1, self.domain.distractors[2]] = None
        return out

    # ------------------------------------------------------------------------------ build
    def build(self, attempts: int) -> Task:
        d, lv = self.domain, self.level
        n_sources, stages = self._plan()
        clean = self._sources(n_sources, stages)
        names = list(clean)
        keys = frozenset(dim.key for dim in d.dims[: n_sources - 1])
        roles = {st.role for st in stages}

        def instantiate(stage: _Stage, stream: _Stream) -> None:
            """Duties are chosen on the data as the large capacity sees it (where dirt is gone)."""
            if stage.role in PREP_ROLES:
                stage.duty = self._prep_duty(stage, stream.frame)
            elif stage.role is Role.JOIN:
                key = d.dims[stage.home - 1].key
                stage.duty = JoinDuty(left_on=key, right_on=key)
            else:
                stage.duty = self._post_duty(stage, stream, roles)

        sources = self._dirty(clean, stages) if lv.dirty else clean
        # Pass 1 chooses the duties and gives the true outputs (large capacity sees through dirt).
        first = Capacity.LARGE if lv.dirty else Capacity.SMALL
        heads, final, nodes, work, outputs = self._run(sources, names, stages, keys, first, instantiate)
        _check(len(final.frame) >= 2 and len(final.frame.columns) >= 1)
        goal = Goal(
            columns=tuple(str(c) for c in final.frame.columns),
            rows=len(final.frame),
            lineage=dict(final.lineage),
        )
        infos = []
        for i, n in enumerate(names):
            contributing = frozenset(int(label) for label in heads[i].frame.index)
            infos.append(
                SourceInfo(
                    name=n,
                    rows=len(sources[n]),
                    contributing=contributing,
                    columns=column_stats(sources[n], n, keys, goal, contributing),
                )
            )
        ctx = Context(sources, infos, goal, keys)
        candidates, evidence = self._candidates(stages, ctx, sources, final)
        plan = canonical_plan(evidence)
        _check(len(plan) == len(stages))
        for planned, st in zip(plan, stages, strict=True):
            _check(planned.role is st.role and candidates[st.role][planned.candidate] == st.duty)
            _check(st.role in POST_ROLES or planned.home == st.home)
        if lv.dirty:  # pass 2: the capacities the data analysis calls for must reproduce pass 1
            capacities = [p.capacity for p in plan]
            _check(Capacity.SMALL in capacities and set(capacities) != {Capacity.SMALL})
            heads, final, nodes, work, _ = self._run(sources, names, stages, keys, capacities, expect=outputs)
        reference = OrchestrationSpec(
            task=self.key.ref(), sources=tuple(names), nodes=tuple(nodes), output=nodes[-1]["id"]
        )
        return Task(
            key=self.key,
            level=lv,
            domain=d.name,
            sources=sources,
            keys=keys,
            goal=goal,
            infos=tuple(infos),
            candidates=candidates,
            evidence=evidence,
            reference=reference,
            target=final.frame,
            reference_work=work,
            attempts=attempts,
        )

    def _run(
        self,
        sources: dict[str, pd.DataFrame],
        names: list[str],
        stages: list[_Stage],
        keys: frozenset[str],
        capacity: Capacity | list[Capacity],
        instantiate: Callable[..., None] | None = None,
        expect: list[pd.DataFrame] | None = None,
    ) -> tuple[list[_Stream], _Stream, list[dict[str, Any]], float, list[pd.DataFrame]]:
        """Runs the plan stage by stage (choosing duties first when ``instantiate`` is given); with
        ``expect``, every stage's output must equal the expected one."""
        streams = [
            _Stream(f, {str(c): source_lineage(n, str(c), keys) for c in f.columns}, n)
            for n, f in sources.items()
        ]
        heads = list(streams)
        nodes: list[dict[str, Any]] = []
        outputs: list[pd.DataFrame] = []
        total_work = 0.0
        main = 0
        for i, st in enumerate(stages):
            node_id = f"agent_{i}"
            if st.role in PREP_ROLES:
                inputs = [streams[st.home]]
            elif st.role is Role.JOIN:
                inputs = [streams[main], streams[st.home]]
            else:
                inputs = [streams[main]]
            if instantiate is not None:
                instantiate(st, inputs[0])
            frames = [s.frame for s in inputs]
            cap = capacity[i] if isinstance(capacity, list) else capacity
            frame, work = _apply(st.role, st.duty, frames, cap.value)
            _check(_changes(st.role, st.duty, frames, frame))
            if expect is not None:
                _check(same_table(frame, expect[i]))
            outputs.append(frame)
            total_work += work
            out = _Stream(frame, _propagate(st.role, st.duty, [s.lineage for s in inputs], frame), node_id)
            nodes.append(
                {
                    "id": node_id,
                    "role": st.role.value,
                    "duty": st.duty.model_dump(mode="json"),
                    "capacity": cap.value,
                    "deps": [s.head for s in inputs],
                }
            )
            if st.role in PREP_ROLES:
                streams[st.home] = out
                heads[st.home] = out
            else:
                streams[main] = out
        return heads, streams[main], nodes, total_work, outputs

    # ------------------------------------------------------------------------------ candidates
    def _candidates(
        self, stages: list[_Stage], ctx: Context, sources: dict[str, pd.DataFrame], final: _Stream
    ) -> tuple[dict[Role, tuple[Any, ...]], dict[Role, tuple[Evidence, ...]]]:
        rng, k = self.rng, self.level.duties
        candidates: dict[Role, tuple[Any, ...]] = {}
        evidence: dict[Role, tuple[Evidence, ...]] = {}
        order = [Role.FILTER, Role.DEDUP, Role.JOIN, Role.DERIVE, Role.AGGREGATE, Role.TOPK, Role.SELECT]
        for st in stages:  # names the reference defines are known to the resolver first
            if st.role is Role.DERIVE:
                ctx.define(
                    st.duty.name,
                    derive_lineage(
                        st.duty.op, str(ctx.resolve(st.duty.left)), str(ctx.resolve(st.duty.right))
                    ),
                )
        for st in stages:
            if st.role is Role.AGGREGATE:
                ctx.define(st.duty.name, aggregate_lineage(st.duty.fn, ctx.resolve(st.duty.column)))
        for role in order:
            refs = [st.duty for st in stages if st.role is role]
            for duty in refs:
                _check(evaluate(role, duty, ctx).consistent)
            chosen = list(refs)
            judged = {duty: evaluate(role, duty, ctx) for duty in refs}
            select = next((st.duty for st in stages if st.role is Role.SELECT), None)
            pool = distractor_pool(role, self.domain, sources, select, final.frame, rng)
            for cls, kwargs in pool:
                if len(chosen) >= k - 1:
                    break
                try:
                    duty = cls(**kwargs)
                except ValidationError:
                    continue
                if duty in judged or duty.is_base:
                    continue
                judged[duty] = evaluate(role, duty, ctx)
                if not judged[duty].consistent:
                    chosen.append(duty)
                    _define(ctx, duty)
            _check(len(chosen) == k - 1)
            rng.shuffle(chosen)
            base = base_duty(role)
            candidates[role] = (base, *chosen)
            evidence[role] = (evaluate(role, base, ctx), *(judged[duty] for duty in chosen))
        return candidates, evidence


def _define(ctx: Context, duty: Any) -> None:
    if isinstance(duty, DeriveDuty) and duty.left is not None:
        ctx.define(
            duty.name, derive_lineage(duty.op, str(ctx.resolve(duty.left)), str(ctx.resolve(duty.right)))
        )
    elif isinstance(duty, AggregateDuty):
        ctx.define(duty.name, aggregate_lineage(duty.fn, ctx.resolve(duty.column) if duty.column else None))


def _apply(role: Role, duty: Any, frames: list[pd.DataFrame], capacity: str) -> tuple[pd.DataFrame, float]:
    p = duty.model_dump()
    if role is Role.FILTER:
        return ops.op_filter(frames[0], p["column"], p["op"], p["value"], capacity)
    if role is Role.DEDUP:
        return ops.op_dedup(frames[0], p["subset"], capacity)
    if role is Role.JOIN:
        return ops.op_join(frames[0], frames[1], p["left_on"], p["right_on"], p["how"], capacity)
    if role is Role.DERIVE:
        return ops.op_derive(frames[0], p["name"], p["op"], p["left"], p["right"], capacity)
    if role is Role.AGGREGATE:
        return ops.op_aggregate(frames[0], p["by"], p["column"], p["fn"], p["name"], capacity)
    if role is Role.TOPK:
        return ops.op_topk(frames[0], p["column"], p["k"], p["ascending"], capacity)
    return ops.op_select(frames[0], p["columns"], capacity)


def _changes(role: Role, duty: Any, inputs: list[pd.DataFrame], out: pd.DataFrame) -> bool:
    """A reference stage must do something, and leave something."""
    rows_in = len(inputs[0])
    if role in (Role.FILTER, Role.DEDUP):
        return 2 <= len(out) < rows_in
    if role is Role.JOIN:
        return len(out) >= 3
    if role is Role.AGGREGATE:
        return 2 <= len(out) < rows_in
    if role is Role.TOPK:
        return len(out) < rows_in
    if role is Role.SELECT:
        return list(out.columns) != list(inputs[0].columns)
    return True


def _propagate(role: Role, duty: Any, inputs: list[dict[str, str]], out: pd.DataFrame) -> dict[str, str]:
    """Lineage of every output column, from the inputs' lineage."""
    if role in (Role.FILTER, Role.DEDUP, Role.TOPK):
        return dict(inputs[0])
    if role is Role.JOIN:
        left, right = inputs
        result = {}
        for c in out.columns:
            c = str(c)
            if c in left:
                result[c] = left[c]
            elif c in right:
                result[c] = right[c]
            elif c.endswith("_right") and c[: -len("_right")] in right:
                result[c] = right[c[: -len("_right")]]
        return result
    if role is Role.DERIVE:
        return {**inputs[0], duty.name: derive_lineage(duty.op, inputs[0][duty.left], inputs[0][duty.right])}
    if role is Role.AGGREGATE:
        lineage = {b: inputs[0][b] for b in duty.by}
        lineage[duty.name] = aggregate_lineage(duty.fn, inputs[0][duty.column] if duty.column else None)
        return lineage
    return {new: inputs[0][old] for old, new in duty.columns}


def _messy_text(column: pd.Series, rng: np.random.Generator, share: float = 0.35) -> pd.Series:
    variants: list[Callable[[str], str]] = [
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
    missing = column.isna().to_numpy()
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
