"""Planning tasks drawn from one grammar: exports as people bring them, a pipeline the proposer can
write, and the wanted table it makes.

A task (:class:`PlanningTask`) holds public inputs (source tables, the fact table first, the
first rows of the wanted table, and what the user asked for in words when they said) and a hidden
part (the whole wanted table, and the team's actions that write the generator's pipeline), which
only scores and labels. Generation (:func:`generate`), reproducible from ``(split, seed)``:

1. an export of one to three tables from one of the business domains of :mod:`.exports`, clean
   or with the dirt real exports have;
2. the pipeline's decisions drawn among the proposer's own options (:mod:`.choices`, proposed here
   without example rows): each table's cleaning (one row per key mostly where the key is the
   table's row key, a change log's record), the joins, up to two filters on different
   columns among every single filter the proposer writes (keep a value, leave one out, keep a
   set, bound a number, drop missing), each kind about as often as in people's requests;
3. the output's shape drawn on the resulting table: its rows (two to four columns, a product of
   two numbers named as people name it, sorted and cut to the top few or not), or groups by one or
   two categories with one or two aggregates named as people name them (``Total Amount``,
   ``avg_price``, ``n_orders``), means rounded to cents, sorted by the first or not;
4. the wanted table is that pipeline's output and the example rows its first five;
5. for a share of tasks, the request a person would write beside them (:mod:`.requests`): the
   wanted table in a phrase, most of the filters in words, and mostly which rows count where the
   data leaves it open (each record's latest row of a change log; rows a lookup lacks, kept).

A draw is kept only when the public inputs can express it: every decision is among the options
proposed from the public inputs (now with the example rows), and the output's shape deduced from
the example rows (:func:`..synthesis.search.finish`) on the table those decisions give is the wanted
table. Several decisions may give the same table: the label is the generator's, one of them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.planning.choices import (
    AGENTS,
    NONE,
    Choices,
    named_filters,
    propose_choices,
)
from orchestrl.envs.orchestration.planning.exports import generate_sources
from orchestrl.envs.orchestration.planning.requests import describe, words
from orchestrl.envs.orchestration.spec import AggregateDuty, DeriveDuty, Role, SelectDuty, TopKDuty
from orchestrl.envs.orchestration.synthesis.proposer import Step, filters
from orchestrl.envs.orchestration.synthesis.search import finish, run_steps
from orchestrl.envs.orchestration.tables import same_table
from orchestrl.envs.orchestration.task_store import active_store
from orchestrl.envs.orchestration.tasks import pickled_sources

SPLITS = {"train": 0, "heldout": 1}
EXAMPLE_ROWS = 5
MAX_ATTEMPTS = 200
TASK_CACHE = 2048
NO_EXAMPLES = pd.DataFrame({"_": [0]})
"""What the decisions are drawn on before the wanted table exists (no column of it)."""


@dataclass(frozen=True)
class PlanningTask:
    """One planning task: public inputs, and the hidden wanted table and label (None for a user's
    files)."""

    split: str
    seed: int
    domain: str
    sources: Mapping[str, pd.DataFrame]
    examples: pd.DataFrame
    target: pd.DataFrame | None = None
    reference: Mapping[str, int] | None = None
    """The actions that write the generator's pipeline (the cloning label)."""
    description: str | None = None
    """What the user asked for, in their words (public; None when they gave only the examples)."""

    @cached_property
    def choices(self) -> Choices:
        return propose_choices(self.sources, self.examples, self.description)

    @property
    def target_columns(self) -> tuple[str, ...]:
        return tuple(str(c) for c in self.examples.columns)

    @cached_property
    def source_blobs(self) -> dict[str, tuple[str, bytes]]:
        """Pickled sources keyed by content hash (what the sandbox and the node cache read)."""
        return pickled_sources(self.sources)


def files_task(
    sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame, description: str | None = None
) -> PlanningTask:
    """A task of a user's files: public inputs only (nothing scores it)."""
    frames = {str(n): f.reset_index(drop=True) for n, f in sources.items()}
    examples = examples.reset_index(drop=True)
    return PlanningTask("files", 0, "user", frames, examples, description=description)


def generate(split: str, seed: int) -> PlanningTask:
    """The task ``(split, seed)`` (module docstring); deterministic, cached per process."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {sorted(SPLITS)}, not {split!r}")
    return _generate(split, int(seed))


@functools.lru_cache(maxsize=TASK_CACHE)
def _generate(split: str, seed: int) -> PlanningTask:
    """The task, from the on-disk task store when one is set (:mod:`..task_store`), its options'
    features computed before it is stored."""
    store = active_store()
    if store is None:
        return _build(split, seed)
    path = store.root / f"planning-{split}-{seed}.pkl"
    task = store.load_file(path)
    if task is None:
        task = _build(split, seed)
        task.choices.features  # noqa: B018 (computed once, stored with the task)
        store.save_file(path, task)
    return task


def _build(split: str, seed: int) -> PlanningTask:
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.default_rng([SPLITS[split], seed, attempt])
        task = _draw(rng, split, seed)
        if task is not None:
            return task
    raise RuntimeError(f"no planning task for {split} seed {seed} after {MAX_ATTEMPTS} draws")


def _draw(rng: np.random.Generator, split: str, seed: int) -> PlanningTask | None:
    tables = int(rng.choice([1, 2, 3], p=[0.3, 0.4, 0.3]))
    export = generate_sources(rng, tables, dirty=bool(rng.random() < 0.7))
    sources = export.sources
    draft = _every_filter(propose_choices(sources, NO_EXAMPLES))
    actions = _decisions(draft, rng, export.row_keys)
    try:
        table = draft.table(actions).reset_index(drop=True)
    except (KeyError, ValueError, TypeError):
        return None
    if len(table) < 6:
        return None
    kinds = {c: k for frame in export.kinds.values() for c, k in frame.items()}
    post = _shape(table, next(iter(sources)), kinds, rng)
    if post is None:
        return None
    try:
        target = run_steps(table, post, {}).reset_index(drop=True)
    except (KeyError, ValueError, TypeError):
        return None
    if len(target) < 3 or target.isna().any().any():
        return None
    examples = target.head(EXAMPLE_ROWS).reset_index(drop=True)
    cleaning, main = draft.streams(actions)
    latest = next(
        (k for name, steps in cleaning.items() if (k := _key_of(steps)) == export.row_keys[name]), None
    )
    kept = [s.other for s in main if s.role is Role.JOIN and s.duty.how == "left"]
    filtered = [s for s in main if s.role is Role.FILTER]
    description = describe(filtered, post, rng, draft.joined(actions), latest, next(iter(kept), None))
    choices = propose_choices(sources, examples, description)
    reference = _label(draft, choices, actions)
    if reference is None:
        return None
    task = PlanningTask(split, seed, export.domain, sources, examples, target, reference, description)
    task.__dict__["choices"] = choices  # what the cached property would compute again
    return task if _deducible(task, reference) else None


FILTER_KINDS = {"eq": 0.8, "ne": 0.035, "in": 0.065, "ge": 0.035, "lt": 0.015, "notnull": 0.05}
"""How likely each kind of filter is, shared among that kind's filters and times the rows each
keeps (which favours wide ones, such as leaving one value out): set so that the labels' kinds come
out near the mix of the programs that solve the hand-made corpus (mostly equalities, the other
kinds each far less often)."""


def _every_filter(draft: Choices) -> Choices:
    """``draft`` with every single filter its table allows as the filter agents' list: the
    proposer's, uncut (a team's list is cut to its likeliest entries, which on a table with no
    example rows are all equalities, and a pipeline must be able to leave a value out or keep a
    set)."""
    listed = (NONE, *filters(draft.base, NO_EXAMPLES))
    return dataclasses.replace(draft, options={**draft.options, "filter_0": listed, "filter_1": listed})


LATEST_WANTED = 0.85
"""Probability that a table deduplicated on its row key is wanted so: a change log's key repeats
only in its versions of one record, and a person counts each record once, at its latest row."""
ONE_PER_VALUE = 0.1
"""Probability that a table deduplicated on another column is wanted so: a customer, a pupil or a
day repeats because rows are different records, and a person wants them all."""


def _decisions(choices: Choices, rng: np.random.Generator, row_keys: Mapping[str, str]) -> dict[str, int]:
    """Each agent's option drawn: any join, a cleaning (one row per key as often as a person wants
    it: :data:`LATEST_WANTED` on a table's row key, :data:`ONE_PER_VALUE` on another column), and up
    to two filters on two columns, a filter as likely as its kind (:data:`FILTER_KINDS`, shared among
    that kind's filters) times the rows it keeps (two narrow filters leave no table)."""
    actions = {a: int(rng.integers(len(choices.options[a]))) for a in AGENTS if not a.startswith("filter")}
    for i, name in enumerate(choices.names):
        listed = choices.options[f"clean_{i}"]
        keys = {j: key for j, option in enumerate(listed) if (key := _key_of(option.steps)) is not None}
        if keys and len(keys) < len(listed):
            wanted = LATEST_WANTED if next(iter(keys.values())) == row_keys[name] else ONE_PER_VALUE
            pool = list(keys) if rng.random() < wanted else [j for j in range(len(listed)) if j not in keys]
            actions[f"clean_{i}"] = pool[int(rng.integers(len(pool)))]
    listed = choices.options["filter_0"]
    kinds = [o.steps[0].duty.op for o in listed[1:]]
    share = {kind: FILTER_KINDS.get(kind, 0.0) / kinds.count(kind) for kind in set(kinds)}
    kept = np.array(
        [len(run_steps(choices.base, o.steps, {})) * share[k] for o, k in zip(listed[1:], kinds, strict=True)]
    )
    count = int(rng.choice([0, 1, 2], p=[0.15, 0.45, 0.4])) if kept.sum() else 0
    picked: list[int] = []
    for _ in range(count):  # the second on another column
        columns = {listed[i].steps[0].duty.column for i in picked}
        weights = np.array(
            [w * (o.steps[0].duty.column not in columns) for w, o in zip(kept, listed[1:], strict=True)]
        )
        if weights.sum():
            picked.append(int(rng.choice(len(kept), p=weights / weights.sum())) + 1)
    picked.sort()
    actions["filter_0"] = picked[0] if picked else 0
    actions["filter_1"] = picked[1] if len(picked) > 1 else 0
    return actions


def _key_of(steps: Sequence[Step]) -> str | None:
    """The column a cleaning stream deduplicates on alone (one row per key), if any."""
    return next(
        (
            step.duty.subset[0]
            for step in steps
            if step.role is Role.DEDUP and step.duty.subset is not None and len(step.duty.subset) == 1
        ),
        None,
    )


def _label(draft: Choices, final: Choices, actions: Mapping[str, int]) -> dict[str, int] | None:
    """The drawn decisions as positions in the lists proposed from the public inputs (None when one
    is not listed there). The two filters are a set, labelled in one order, so that the two agents,
    who share one list, can learn to split it: the ones the request names (none implying them) first,
    in list order, then the others in list order. ``filter_0`` takes the first, ``filter_1`` the
    second or none; a request that names two gives the first named to ``filter_0`` and the second
    to ``filter_1``, as their features say (:func:`.choices.features`)."""
    out = {}
    for agent in AGENTS:
        index = final.index(agent, draft.options[agent][int(actions[agent])].steps)
        if index is None:
            return None
        out[agent] = index
    named = {i for i, (_, place) in named_filters(final, "filter_0").items() if place >= 0}
    picked = sorted((out[a] for a in ("filter_0", "filter_1") if out[a]), key=lambda i: (i not in named, i))
    out["filter_0"], out["filter_1"] = (*picked, 0, 0)[:2]
    return out


def _deducible(task: PlanningTask, reference: Mapping[str, int]) -> bool:
    """The label's table, finished as the examples say, is the wanted table."""
    try:
        table = task.choices.table(reference).reset_index(drop=True)
    except (KeyError, ValueError, TypeError):
        return False
    facts = task.choices.facts
    done = finish(table, task.examples, facts, None)
    return (
        done is not None
        and task.target is not None
        and same_table(done[2].reset_index(drop=True), task.target)
    )


# ------------------------------------------------------------------------------ the output's shape
def _shape(
    table: pd.DataFrame, fact: str, kinds: Mapping[str, str], rng: np.random.Generator
) -> tuple[Step, ...] | None:
    """The output's shape on ``table`` (module docstring, step 3); None when it has no measure."""
    numbers = [str(c) for c in table.columns if _numeric(table[c]) and kinds.get(str(c)) == "number"]
    categories = [
        str(c)
        for c in table.columns
        if kinds.get(str(c)) == "category" and not _numeric(table[c]) and 2 <= table[c].nunique() <= 12
    ]
    style = str(rng.choice(STYLES))
    if categories and numbers and rng.random() < 0.55:
        distinct = [str(c) for c in table.columns if kinds.get(str(c)) in ("id", "key", "text")]
        return _groups(table, fact, categories, numbers, distinct, style, rng)
    texts = [str(c) for c in table.columns if kinds.get(str(c)) in ("id", "text", "category", "key", "date")]
    if not texts or not numbers:
        return None
    return _rows(table, texts, numbers, style, rng)


def _rows(
    table: pd.DataFrame, texts: list[str], numbers: list[str], style: str, rng: np.random.Generator
) -> tuple[Step, ...]:
    steps: list[Step] = []
    keep = [texts[int(i)] for i in sorted(rng.choice(len(texts), size=min(len(texts), 2), replace=False))]
    measures = [numbers[int(i)] for i in sorted(rng.choice(len(numbers), size=1))]
    columns = [*keep[: int(rng.integers(1, len(keep) + 1))], *measures]
    if len(numbers) >= 2 and rng.random() < 0.4:
        left, right = (numbers[int(i)] for i in rng.choice(len(numbers), size=2, replace=False))
        name = styled([*words(left)[-1:], "total"], style)
        steps.append(Step(Role.DERIVE, DeriveDuty(name=name, op="mul", left=left, right=right)))
        steps.append(Step(Role.DERIVE, DeriveDuty(name=name, op="round", left=name, digits=2)))
        columns.append(name)
    by = columns[-1]
    if rng.random() < 0.7:
        k = int(rng.integers(3, 5)) if rng.random() < 0.4 else None  # fewer rows than examples asked
        steps.append(Step(Role.TOPK, TopKDuty(column=by, k=k, ascending=bool(rng.random() < 0.2))))
    steps.append(Step(Role.SELECT, SelectDuty(columns=tuple((c, c) for c in dict.fromkeys(columns)))))
    return tuple(steps)


def _groups(
    table: pd.DataFrame,
    fact: str,
    categories: list[str],
    numbers: list[str],
    distinct: list[str],
    style: str,
    rng: np.random.Generator,
) -> tuple[Step, ...]:
    size = 2 if len(categories) > 1 and rng.random() < 0.25 else 1
    by = tuple(categories[int(i)] for i in sorted(rng.choice(len(categories), size=size, replace=False)))
    count = int(rng.integers(1, 3))
    measures: list[tuple[str, str, str | None]] = []
    for _ in range(count):
        fn = str(
            rng.choice(["sum", "mean", "size", "max", "min", "nunique"], p=[0.35, 0.2, 0.2, 0.1, 0.05, 0.1])
        )
        if fn == "size":
            measures.append((styled(["n", *words(fact)], style), "size", None))
            continue
        pool = numbers if fn != "nunique" else [c for c in distinct if c not in by] or numbers
        column = pool[int(rng.integers(len(pool)))]
        word = {"sum": "total", "mean": "avg", "max": "max", "min": "min", "nunique": "unique"}[fn]
        measures.append((styled([word, *words(column)], style), fn, column))
    names = list(dict.fromkeys(m[0] for m in measures))
    measures = [next(m for m in measures if m[0] == n) for n in names]
    (name, fn, column), *more = measures
    steps = [Step(Role.AGGREGATE, AggregateDuty(by=by, column=column, fn=fn, name=name, more=tuple(more)))]
    for label, f, _ in measures:
        if f == "mean":
            steps.append(Step(Role.DERIVE, DeriveDuty(name=label, op="round", left=label, digits=2)))
    if rng.random() < 0.6:
        steps.append(Step(Role.TOPK, TopKDuty(column=name, k=None, ascending=bool(rng.random() < 0.2))))
    return tuple(steps)


STYLES = ("snake", "title", "lower", "camel")


def styled(parts: list[str], style: str) -> str:
    """Words joined as people write column names: ``total_amount``, ``Total Amount``,
    ``total amount``, ``totalAmount``."""
    flat = [w for p in parts for w in words(p)] or ["value"]
    if style == "title":
        return " ".join(w.capitalize() for w in flat)
    if style == "lower":
        return " ".join(flat)
    if style == "camel":
        return flat[0] + "".join(w.capitalize() for w in flat[1:])
    return "_".join(flat)


def _numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
