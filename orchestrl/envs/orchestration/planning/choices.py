"""What each agent of the planning team chooses among: the synthesiser's own proposals, read off the
public inputs, in a canonical order, each described by public features.

One proposer serves the env's generated tasks and users' files alike: the options are exactly what
:mod:`..synthesis.proposer` proposes for the synthesiser's search, computed the same way
(:func:`propose_choices`). The team has one agent per decision the search enumerates:

- ``clean_0`` .. ``clean_2``: the cleaning of each source table (the fact table first): its fixed
  rewrites (numbers and dates parsed, spaces trimmed) with one of the optional cleanings
  (letter case, exact duplicates, one row per key), the synthesiser's :data:`..search.CLEANINGS`
  likeliest alternatives;
- ``join``: how the other tables merge into the fact stream (:func:`..search.join_plans`, on the
  tables as rewritten);
- ``filter_0``, ``filter_1``: one filter each, or none (a conjunction of two), among the
  :data:`FILTERS` likeliest single filters of the widest joined table, the one that keeps the fact
  rows where joins tie (those the user's request names first, :mod:`..synthesis.request`, when there
  is one; :func:`_filters_over`).

Everything after the filters (the output's shape: rows or groups, order, top-k, rounding and the
select that names the target's columns) is deduced from the example rows by
:func:`..search.finish`, the same deduction the synthesiser runs; so the team's decisions are the
ones the search enumerates by prior.

Each list is cut to its likeliest entries by the proposer's prior (what makes it a list a
person would consider), then put in a **canonical order** (fewest steps first, then by step kind,
column and value), so a slot's position says nothing about the prior. Option 0 of every list is
"no step" where that is a choice (filters), else the list's first entry in canonical order.
Features (:func:`features`) describe what each option does to the public inputs: its steps' kinds,
the rows it keeps, whether it keeps the example rows' values and rows, the columns it touches and
what the examples show of them, whether the user's request names it (whether another filter it
names implies this one, and whether it is this filter agent's: the first named for ``filter_0``, the
second for ``filter_1``), and its place in the list.
No prior and no search over combinations enters an observation: each option is tried alone, with
the other agents on their lists' first options before the first round and on their last choices
after it, and the output's shape deduced from the example rows (:func:`_tried`); whether an output
then holds them, and how likely they are given it, are two of its features. After a round, that is
what one agent changing its choice alone would give: the move a data engineer makes on a pipeline
that almost works.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.spec import Role
from orchestrl.envs.orchestration.synthesis.evidence import (
    TargetFacts,
    column_facts,
    name_similarity,
    target_facts,
)
from orchestrl.envs.orchestration.synthesis.proposer import (
    Option,
    Step,
    cleanings,
    filters,
    kept_rows,
    requested,
    rewrites,
)
from orchestrl.envs.orchestration.synthesis.request import Request
from orchestrl.envs.orchestration.synthesis.search import (
    CLEANINGS,
    finish,
    join_plans,
    log_likelihood,
    row_context,
    run_steps,
)

AGENTS = ("clean_0", "clean_1", "clean_2", "join", "filter_0", "filter_1")
"""The planning team, one agent per decision (module docstring)."""
FILTERING = AGENTS.index("filter_0")
"""Agents before this position decide the table the filters read (cleanings and joins)."""
TABLES = 3
"""Source tables a planning task has at most (one ``clean_i`` agent each)."""
FILTERS = 32
"""Single filters listed (the likeliest by the proposer's prior); with "no filter", a list of 33."""
JOINS = 4
OPTIONS = FILTERS + 1
"""Entries of every agent's list (shorter lists are masked)."""
NONE = Option(0.0, (), "none")

STEP_KINDS = (
    "dedup_rows",
    "dedup_key",
    "case",
    "number",
    "date",
    "trim",
    "join_inner",
    "join_left",
    "eq",
    "ne",
    "in",
    "ge",
    "lt",
    "notnull",
)
FEATURES = len(STEP_KINDS) + 27
"""Features per option (:func:`features`)."""
TRIED = slice(FEATURES - 2, FEATURES)
"""The two features of an option tried on the data (:func:`_tried`)."""


def step_kind(step: Step) -> str:
    """The kind of one step (:data:`STEP_KINDS`)."""
    duty = step.duty
    if step.role is Role.DEDUP:
        return "dedup_key" if duty.subset else "dedup_rows"
    if step.role is Role.JOIN:
        return "join_left" if duty.how == "left" else "join_inner"
    if step.role is Role.FILTER:
        return {"gt": "ge", "le": "lt"}.get(duty.op, duty.op)
    return {"lower": "case", "upper": "case", "title": "case"}.get(duty.op, duty.op)


def step_key(step: Step) -> str:
    """A canonical text of a step: what the canonical order sorts by (kind, then column, value)."""
    duty = step.duty.model_dump(mode="json", exclude_defaults=True)
    return json.dumps([step_kind(step), step.other or "", duty], sort_keys=True, default=str)


def canonical(options: Sequence[Option]) -> tuple[Option, ...]:
    """``options`` without repeats, in canonical order (fewest steps first, then by their texts)."""
    unique = {tuple(step_key(s) for s in o.steps): o for o in options}
    return tuple(unique[k] for k in sorted(unique, key=lambda k: (len(k), k)))


@dataclass(frozen=True)
class Choices:
    """Every agent's options for one task's public inputs, and what they are computed on."""

    sources: Mapping[str, pd.DataFrame]
    examples: pd.DataFrame
    options: Mapping[str, tuple[Option, ...]]
    rewritten: Mapping[str, pd.DataFrame]
    """Each table after its fixed rewrites (what cleanings, joins and filters are proposed on)."""
    base: pd.DataFrame
    """The widest joined table, the one that keeps the fact rows among equally wide ones (what the
    filters are proposed on and their features computed on)."""
    facts: Mapping[str, TargetFacts] = field(repr=False)
    tried: dict[tuple[int, ...], tuple[float, float]] = field(default_factory=dict, repr=False, compare=False)
    """:func:`_tried`'s answers by decisions (the two filters' in either order)."""
    computed: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)
    """Tables computed on the public inputs, by the decisions they depend on (not pickled)."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.sources)

    def mask(self, agent: str) -> np.ndarray:
        out = np.zeros(OPTIONS, dtype=np.float32)
        out[: len(self.options[agent])] = 1.0
        return out

    def index(self, agent: str, steps: Sequence[Step]) -> int | None:
        """The position of the option whose steps are ``steps`` (None when not listed)."""
        want = tuple(step_key(s) for s in steps)
        for i, option in enumerate(self.options[agent]):
            if tuple(step_key(s) for s in option.steps) == want:
                return i
        return None

    def streams(self, actions: Mapping[str, int]) -> tuple[dict[str, tuple[Step, ...]], tuple[Step, ...]]:
        """The program the team's choices write before the output's shape: each table's cleaning
        steps, and the main stream's joins and filters."""
        cleaning = {
            name: self.options[f"clean_{i}"][int(actions.get(f"clean_{i}", 0))].steps
            for i, name in enumerate(self.names)
        }
        main = list(self.options["join"][int(actions.get("join", 0))].steps)
        for agent in ("filter_0", "filter_1"):
            for step in self.options[agent][int(actions.get(agent, 0))].steps:
                if step not in main:
                    main.append(step)
        return cleaning, tuple(main)

    def table(self, actions: Mapping[str, int]) -> pd.DataFrame:
        """The table the choices give, before the output's shape (in this process, on the public
        inputs; raises ``KeyError``/``ValueError`` where a step reads a column its input lacks)."""
        _, main = self.streams(actions)
        joins = len(self.options["join"][int(actions.get("join", 0))].steps)
        return run_steps(self.joined(actions), main[joins:], {})

    def joined(self, actions: Mapping[str, int]) -> pd.DataFrame:
        """The table the cleanings and the joins give, before any filter (computed once per task)."""
        key = ("joined", *(int(actions.get(a, 0)) for a in AGENTS[:FILTERING]))
        if key not in self.computed:
            cleaning, main = self.streams(actions)
            joins = len(self.options["join"][int(actions.get("join", 0))].steps)
            tables = {n: self._cleaned(n, cleaning[n]) for n in self.names}
            self.computed[key] = run_steps(tables[self.names[0]], main[:joins], tables).reset_index(drop=True)
        return self.computed[key]

    def _cleaned(self, name: str, steps: tuple[Step, ...]) -> pd.DataFrame:
        key = ("cleaned", name, *(step_key(s) for s in steps))
        if key not in self.computed:
            self.computed[key] = run_steps(self.sources[name], steps, {})
        return self.computed[key]

    def rows(self, actions: Mapping[str, int]) -> tuple[list[list[tuple[str, Any]]], dict[str, list[str]]]:
        """:func:`..synthesis.search.row_context` of :meth:`joined` (what :func:`..search.finish`
        reuses on its filtered tables)."""
        key = ("rows", *(int(actions.get(a, 0)) for a in AGENTS[:FILTERING]))
        if key not in self.computed:
            self.computed[key] = row_context(self.joined(actions), self.examples, self.facts)
        return self.computed[key]

    def tried_in(self, agent: str, taken: Mapping[str, int]) -> np.ndarray:
        """``[OPTIONS, 2]``: :func:`_tried` of each of ``agent``'s options with the other agents on
        ``taken`` (the features the env shows after a round)."""
        out = np.zeros((OPTIONS, 2), dtype=np.float32)
        for i in range(len(self.options[agent])):
            out[i] = _tried(self, {**taken, agent: i})
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "computed": {}}  # tables are recomputed, not pickled

    @cached_property
    def features(self) -> np.ndarray:
        """``[agents, OPTIONS, FEATURES]``: every option described (:func:`features`)."""
        out = np.zeros((len(AGENTS), OPTIONS, FEATURES), dtype=np.float32)
        for a, agent in enumerate(AGENTS):
            for i in range(len(self.options[agent])):
                out[a, i] = features(self, agent, i)
        return out


def propose_choices(
    sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame, description: str | None = None
) -> Choices:
    """Every agent's options for ``sources`` (the fact table first), ``examples`` and the user's
    ``description`` of what they want, when given (module docstring). Deterministic; reads nothing
    but these."""
    names = list(sources)[:TABLES]
    facts = target_facts(examples)
    request = Request.read(description)
    rewritten: dict[str, pd.DataFrame] = {}
    options: dict[str, tuple[Option, ...]] = {}
    for i, name in enumerate(names):
        frame = sources[name]
        variants = []
        fixed = rewrites(column_facts(frame), facts)
        for rewrite in fixed:
            clean = run_steps(frame, rewrite.steps, {})
            fact = None if i == 0 else sources[names[0]]
            for option in cleanings(clean, facts, fact, request)[:CLEANINGS]:
                steps = rewrite.steps + option.steps
                variants.append(Option(rewrite.log_prior + option.log_prior, steps, option.label))
        rewritten[name] = run_steps(frame, fixed[0].steps, {})
        options[f"clean_{i}"] = canonical(sorted(variants, key=lambda o: -o.log_prior)[:CLEANINGS])
    for i in range(len(names), TABLES):
        options[f"clean_{i}"] = (NONE,)
    target = [str(c) for c in examples.columns]
    plans = join_plans(rewritten[names[0]], rewritten, names, target, request)[:JOINS]
    options["join"] = canonical(plans)
    joined = _joined(rewritten, names, options["join"])
    base = max(joined, key=lambda t: (len(t.columns), -abs(len(t) - len(joined[0]))))
    listed = (NONE, *canonical(_filters_over(base, joined, examples, request)))
    options["filter_0"] = options["filter_1"] = listed
    frames = {n: sources[n] for n in names}
    return Choices(frames, examples.reset_index(drop=True), options, rewritten, base, facts)


def _joined(
    tables: Mapping[str, pd.DataFrame], names: Sequence[str], plans: Sequence[Option]
) -> list[pd.DataFrame]:
    """The fact table alone, then each join plan's table that runs (canonical order)."""
    out = [tables[names[0]]]
    for plan in plans:
        try:
            out.append(run_steps(tables[names[0]], plan.steps, tables))
        except (KeyError, ValueError, TypeError):
            continue
    return [table.reset_index(drop=True) for table in out]


def _filters_over(
    base: pd.DataFrame, joined: Sequence[pd.DataFrame], examples: pd.DataFrame, request: Request
) -> list[Option]:
    """The :data:`FILTERS` likeliest single filters that keep the example rows' values on ``base``
    or on another join's table of the same columns (an inner join where ``base`` is the left one, or
    a join on another key): which rows a filter must keep depends on the join the team takes, and
    the two filter agents' list is one for every join. Narrower tables are not asked: fewer of the
    example rows' columns bind a filter there."""
    out = {step_key(o.steps[0]): o for o in filters(base, examples, request)}
    for table in joined:
        if table is not base and list(table.columns) == list(base.columns):
            for option in filters(table, examples, request):
                out.setdefault(step_key(option.steps[0]), option)
    return sorted(out.values(), key=lambda o: -o.log_prior)[:FILTERS]


# ------------------------------------------------------------------------------ features
def features(choices: Choices, agent: str, index: int) -> np.ndarray:
    """Public features of one option (:data:`FEATURES` floats in [-1, 1] or counts scaled):

    - ``[0, len(STEP_KINDS))``: how many steps of each kind it adds (halved);
    - then: listed, no step, steps (quartered), rows kept (share of its table's rows), the share of
      the example rows still found among the kept rows (on the columns they share with the
      table), whether it keeps every value the example rows show, the columns it touches: shown in
      the example rows, best name similarity to a target column, share missing, distinct values
      (log-scaled), key-like; for a threshold: at or below, strictly inside, or at or above the
      example rows' range (a bound an example row sits on is on the rows' side: "3 or more bedrooms"
      with a 3-bedroom row shown reads as a bound below the rows, as one under them does), and how
      round it is; for a set: equal to the values shown; for a join: key overlap, key name
      similarity; whether the example rows are the first rows it keeps (on the columns they share),
      how many rows it keeps per example row (inverted), and the share of the kept rows' values of
      a text column the example rows show that they do show (a whole small output shows them all),
      whether the user's request names it (a filter; one row per key when it says only each
      record's latest row counts; a left join when it keeps rows a lookup lacks:
      :func:`..synthesis.proposer.requested`), its place in the list (canonical order: what
      lets two agents with the same list agree to take different entries, as the two filter agents
      must for a conjunction); of a filter the request names: whether another one it names keeps
      fewer of the same rows (implies it: "only Posted, not Pending"), and whether it is this
      agent's among those none implies (1: the first for ``filter_0``, the second for
      ``filter_1``; 0.5: another's; :func:`named_filters`): what each option's score alone cannot
      see, and how two filter agents split a request that names two, as their labels do
      (:func:`.grammar._label`); tried with the other agents on their lists'
      first options (:func:`_tried`; after a round the env shows it with the others on their
      choices, :meth:`Choices.tried_in`): an output holding the example rows exists, and their
      likelihood."""
    option = choices.options[agent][index]
    out = np.zeros(FEATURES, dtype=np.float32)
    for step in option.steps:
        out[STEP_KINDS.index(step_kind(step))] += 0.5
    k = len(STEP_KINDS)
    out[k] = 1.0
    out[k + 1] = float(not option.steps)
    out[k + 2] = len(option.steps) / 4
    table = _applied_to(choices, agent)
    try:
        kept = _run(choices, agent, option, table)
    except (KeyError, ValueError, TypeError):
        out[k + 3] = -1.0
        return out
    out[k + 3] = len(kept) / max(len(table), 1)
    out[k + 4] = _rows_found(kept, choices.examples)
    out[k + 5] = float(_values_kept(table, kept, choices.examples))
    out[k + 18] = float(_heads(kept, choices.examples))
    out[k + 19] = min(len(choices.examples) / max(len(kept), 1), 1.0)
    out[k + 20] = _shown_cover(kept, choices.examples)
    out[k + 21] = float(requested(option))
    out[k + 22] = index / OPTIONS
    implied, place = named_filters(choices, agent).get(index, (False, -1))
    out[k + 23] = float(implied)
    if place >= 0:
        out[k + 24] = 1.0 if place == AGENTS.index(agent) - FILTERING else 0.5
    columns = _columns_touched(option)
    target = [str(c) for c in choices.examples.columns]
    if columns:
        present = [c for c in columns if c in table.columns]
        out[k + 6] = float(any(c in target for c in columns))
        out[k + 7] = max((name_similarity(c, t) for c in columns for t in target), default=0.0)
        if present:
            column = table[present[0]]
            out[k + 8] = float(column.isna().mean())
            out[k + 9] = math.log1p(column.nunique()) / math.log1p(max(len(column), 2))
            out[k + 10] = float(column.notna().all() and column.nunique() == len(column))
    out[TRIED] = _tried(choices, {agent: index})
    last = option.steps[-1] if option.steps else None
    if last is not None and last.role is Role.FILTER:
        duty = last.duty
        shown = choices.examples.get(duty.column)
        if duty.op in ("ge", "gt", "lt", "le") and shown is not None:
            values = pd.to_numeric(shown, errors="coerce").dropna()
            if len(values):
                value = float(duty.value)
                out[k + 11] = float(value <= values.min())
                out[k + 12] = float(values.min() < value < values.max())
                out[k + 13] = float(value >= values.max())
        if duty.op in ("ge", "gt", "lt", "le"):
            out[k + 14] = _roundness(float(duty.value))
        if duty.op == "in" and shown is not None:
            out[k + 15] = float(set(map(str, duty.value)) == {str(v) for v in shown.dropna()})
    if last is not None and last.role is Role.JOIN:
        other = choices.rewritten[last.other]
        left, right = last.duty.left_on, last.duty.right_on
        fact = choices.rewritten[choices.names[0]]
        if left in fact.columns and right in other.columns:
            have = set(other[right].dropna().astype(str))
            out[k + 16] = float(fact[left].dropna().astype(str).isin(have).mean())
            out[k + 17] = name_similarity(str(left), str(right))
    return out


def _tried(choices: Choices, actions: Mapping[str, int]) -> tuple[float, float]:
    """The decisions ``actions`` (the agents it leaves out on their lists' first options) run on the
    public inputs, the output's shape deduced from the example rows (:func:`..search.finish`):
    whether an output holding them exists, and how likely the example rows are given it
    (:func:`..search.log_likelihood`: high when they are its first rows and few rows are left
    besides them). What a data engineer sees by running one step on the data."""
    decisions = [int(actions.get(a, 0)) for a in AGENTS]
    key = (*decisions[:FILTERING], *sorted(decisions[FILTERING:]))
    if key not in choices.tried:
        choices.tried[key] = _try(choices, actions)
    return choices.tried[key]


def _try(choices: Choices, actions: Mapping[str, int]) -> tuple[float, float]:
    try:  # the filters keep rows of the joined table: what finish found on it still applies
        table = choices.table(actions).reset_index(drop=True)
        rows, held = choices.rows(actions)
    except (KeyError, ValueError, TypeError):
        return 0.0, 0.0
    if table.empty:
        return 0.0, 0.0
    done = finish(table, choices.examples, choices.facts, None, rows, held)
    if done is None:
        return 0.0, 0.0
    return 1.0, math.exp(log_likelihood(done[2], choices.examples))


def _applied_to(choices: Choices, agent: str) -> pd.DataFrame:
    if agent.startswith("clean_"):
        index = int(agent.rsplit("_", 1)[1])
        if index >= len(choices.names):
            return choices.base.iloc[:0]
        return choices.sources[choices.names[index]]
    if agent == "join":
        return choices.rewritten[choices.names[0]]
    return choices.base


def named_filters(choices: Choices, agent: str) -> dict[int, tuple[bool, int]]:
    """The options of ``agent``'s list that the user's request names, each with whether another
    named option keeps a strict subset of its rows (implies it), and its place among the named
    options none implies (-1 when implied)."""
    key = ("named", agent)
    if key not in choices.computed:
        table = _applied_to(choices, agent)
        kept: dict[int, frozenset[int]] = {}
        for i, option in enumerate(choices.options[agent]):
            if requested(option) and option.steps[0].role is Role.FILTER:  # one filter step
                try:
                    kept[i] = frozenset(kept_rows(table, option.steps[0].duty).tolist())
                except (KeyError, ValueError, TypeError):
                    continue
        implied = {i: any(other < rows for j, other in kept.items() if j != i) for i, rows in kept.items()}
        free = [i for i in sorted(kept) if not implied[i]]
        choices.computed[key] = {i: (implied[i], free.index(i) if i in free else -1) for i in kept}
    return choices.computed[key]


def _run(choices: Choices, agent: str, option: Option, table: pd.DataFrame) -> pd.DataFrame:
    if agent == "join":
        return run_steps(table, option.steps, choices.rewritten)
    return run_steps(table, option.steps, {})


def _rows_found(table: pd.DataFrame, examples: pd.DataFrame) -> float:
    """Share of the example rows found among ``table``'s rows, on the columns both have (text
    compared as text, numbers at two decimals); 0 when they share none."""
    shared = [c for c in examples.columns if c in table.columns]
    if not shared or table.empty:
        return 0.0
    have = {_row_key(r) for r in table[shared].itertuples(index=False)}
    return float(np.mean([_row_key(r) in have for r in examples[shared].itertuples(index=False)]))


def _heads(table: pd.DataFrame, examples: pd.DataFrame) -> bool:
    """The example rows are ``table``'s first rows, in order, on the columns both have."""
    shared = [c for c in examples.columns if c in table.columns]
    if not shared or len(table) < len(examples):
        return False
    head = table[shared].head(len(examples)).itertuples(index=False)
    return [_row_key(r) for r in head] == [_row_key(r) for r in examples[shared].itertuples(index=False)]


def _shown_cover(table: pd.DataFrame, examples: pd.DataFrame) -> float:
    """Mean over the text columns both have of the share of ``table``'s values the examples show."""
    shares = []
    for name in examples.columns:
        if name in table.columns and not pd.api.types.is_numeric_dtype(examples[name]):
            have = set(table[name].dropna().astype(str))
            if have:
                shares.append(len(have & {str(v) for v in examples[name].dropna()}) / len(have))
    return float(np.mean(shares)) if shares else 0.0


def _row_key(row: Sequence[Any]) -> tuple[str, ...]:
    out = []
    for value in row:
        if isinstance(value, (int, float, np.integer, np.floating)) and not pd.isna(value):
            out.append(f"{float(value):.2f}")
        else:
            out.append(str(value).strip())
    return tuple(out)


def _values_kept(before: pd.DataFrame, after: pd.DataFrame, examples: pd.DataFrame) -> bool:
    """Every value the example rows show of a column ``before`` has that is still in ``after``."""
    for name in examples.columns:
        if name not in before.columns or name not in after.columns:
            continue
        had = set(before[name].dropna().astype(str))
        shown = {str(v) for v in examples[name].dropna()} & had
        if not shown <= set(after[name].dropna().astype(str)):
            return False
    return True


def _columns_touched(option: Option) -> list[str]:
    out: list[str] = []
    for step in option.steps:
        duty = step.duty
        for name in ("column", "left", "left_on", "right_on"):
            value = getattr(duty, name, None)
            if isinstance(value, str):
                out.append(value)
        out += list(getattr(duty, "subset", None) or ())
    return list(dict.fromkeys(out))


def _roundness(value: float) -> float:
    """1 for a power of ten, less for 5s, 2s, 25s and for numbers with more significant digits."""
    if value == 0:
        return 1.0
    digits = f"{abs(value):.6g}".replace(".", "").strip("0")
    return 1.0 / len(digits) if digits else 1.0
