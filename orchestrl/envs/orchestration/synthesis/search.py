"""The synthesiser: a pipeline for a user's tables, found from the tables and a few wanted rows.

Programming by example in the manner of Scythe and AutoPandas, deductive where it can be: the
steps before the output's shape (cleaning, joins, filters: :mod:`.proposer`) are enumerated by
prior; the rest is deduced from the example rows on each resulting table (:func:`finish`):

- **rows** (the output is rows of the table): each target column is a column of the table (same
  name up to spelling, or the one whose values hold the example's), or ``left <op> right`` of two
  number columns that reproduces the example's values, named after the target column;
- **groups** (otherwise, or first when a target column's name can only be a per-group value, such
  as ``max_cost``): the target's text columns are the group keys, and each other column is the
  one aggregate (sum, mean, row count, count, distinct count, max, min, of a column or of a
  product/sum/difference/ratio of two) that reproduces every example row's value, those its name
  says (``avg``, ``total``, ``unique``...) tried first;
- then **order** (a sort, and top-k, when the example rows are the head of the output sorted by
  one of its number, name, date or time columns; ``k`` is ``target_rows`` when given, else the number
  of example rows when they are fewer than :data:`EXAMPLE_ROWS`), **rounding** (where the example
  rows show fewer decimals than the values have and only the rounded values hold them), and a
  **select** that names and orders the target's columns.

A candidate *holds* the examples when its output has the target's columns and every example row
(and ``target_rows`` rows when given). Among the candidates that hold them the posterior decides:
the prior of the steps plus the log-likelihood of the example rows. A user is asked for the first
rows of the wanted table but may give any few: with probability :data:`HEAD` the examples are the
output's first ``n`` rows in order, otherwise ``n`` of its ``N`` rows drawn at random
(``1 / C(N, n)``); fewer rows than asked for are the whole table with probability :data:`WHOLE`.
So a filter (or sort) that makes the examples the head of the output, or leaves few rows besides
them, is believed as far as the evidence outweighs its prior. A filter keeping the values the
example rows show pays for being one of the column's many sets of that size. Up to three filters
are combined.

Every step is a node of the orchestration spec (:mod:`..spec`), run by the same :mod:`..ops`
code as the sandbox (in this process while searching, reading only the public inputs).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.ops import binary
from orchestrl.envs.orchestration.plans import apply_node
from orchestrl.envs.orchestration.spec import (
    BINARY_OPS,
    AggregateDuty,
    DeriveDuty,
    OrchestrationSpec,
    Role,
    SelectDuty,
    TopKDuty,
    parse_spec,
)
from orchestrl.envs.orchestration.synthesis.evidence import (
    TargetFacts,
    column_facts,
    name_similarity,
    target_facts,
    values_occur,
)
from orchestrl.envs.orchestration.synthesis.proposer import (
    REQUESTED,
    Option,
    Step,
    cleanings,
    filters,
    joins,
    requested,
    rewrites,
)
from orchestrl.envs.orchestration.synthesis.request import Request
from orchestrl.envs.orchestration.tables import canonical_column, held_share

EXAMPLE_ROWS = 5
"""How many example rows a user is asked for: fewer, in a sorted output, means the whole table."""
AGGREGATES = ("sum", "mean", "size", "count", "nunique", "max", "min")
"""Aggregates tried for a measure, in order (the first that reproduces the examples is taken)."""
MAX_CANDIDATES = 1000
"""Tables (cleaning x joins x filters) tried at most per search."""
CLEANINGS = 8
"""Cleaning alternatives kept per table, likeliest first."""
MAX_BASES = 16
"""Cleaned and joined tables (before filters) searched at most."""
PER_COLUMN = 4
"""Filters of one column among those combined into pairs and triples."""
HEAD = 0.5
"""Probability that the example rows are the first rows of the wanted table, in order."""
WHOLE = 0.9
"""Probability that fewer example rows than asked for are the whole wanted table (the README asks
for the first 5 rows, all of them when the table has fewer)."""


@dataclass(frozen=True)
class Program:
    """A pipeline: each source's cleaning chain, then the main stream from the fact table."""

    sources: tuple[str, ...]
    cleaning: Mapping[str, tuple[Step, ...]]
    main: tuple[Step, ...]
    score: float
    grouped: bool

    def spec(self) -> OrchestrationSpec:
        """The program as an orchestration spec, one node per step (small capacity)."""
        nodes: list[dict[str, Any]] = []
        heads = {name: name for name in self.sources}

        def add(step: Step, deps: Sequence[str]) -> str:
            node_id = f"n{len(nodes) + 1}_{step.role.value}"
            nodes.append(
                {
                    "id": node_id,
                    "role": step.role.value,
                    "duty": step.duty.model_dump(mode="json"),
                    "deps": list(deps),
                }
            )
            return node_id

        for name in self.sources:
            for step in self.cleaning.get(name, ()):
                heads[name] = add(step, [heads[name]])
        head = heads[self.sources[0]]
        for step in self.main:
            head = add(step, [head, heads[step.other]] if step.role is Role.JOIN else [head])
        if head in self.sources:  # the fact table as it is (other tables cleaned or not): a select keeps it
            head = add(Step(Role.SELECT, SelectDuty()), [head])
        return parse_spec({"version": 1, "sources": list(self.sources), "nodes": nodes, "output": head})


@dataclass
class Synthesis:
    """What the search found: the best program (None when nothing held the examples)."""

    program: Program | None
    candidates: int
    seconds: float
    holding: int = 0
    """Candidates that held the examples."""
    notes: list[str] = field(default_factory=list)

    @property
    def spec(self) -> OrchestrationSpec | None:
        return None if self.program is None else self.program.spec()


def run_steps(frame: pd.DataFrame, steps: Sequence[Step], tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``steps`` applied to ``frame`` in this process (a join merges in ``tables[step.other]``)."""
    for step in steps:
        inputs = [frame, tables[step.other]] if step.role is Role.JOIN else [frame]
        frame, _ = apply_node(step.role, step.duty, inputs, "small")
    return frame


def synthesise(
    sources: Mapping[str, pd.DataFrame],
    examples: pd.DataFrame,
    target_rows: int | None = None,
    deadline: float | None = None,
    max_candidates: int = MAX_CANDIDATES,
    description: str | None = None,
) -> Synthesis:
    """The most likely program whose output holds ``examples`` (module docstring). ``sources``:
    the fact table first; ``deadline``: a ``time.monotonic()`` at which the search stops with the
    best found so far; ``description``: what the user asked for, in their words (:mod:`.request`)."""
    started = time.perf_counter()
    names = tuple(sources)
    facts = target_facts(examples)
    target = [str(c) for c in examples.columns]
    asked = Request.read(description)
    rewritten, table_options = {}, {}
    for name, frame in sources.items():
        fixed = rewrites(column_facts(frame), facts)
        variants = []
        for rewrite in fixed:
            clean_frame = run_steps(frame, rewrite.steps, {})
            fact = None if name == names[0] else sources[names[0]]
            for option in cleanings(clean_frame, facts, fact, asked)[:CLEANINGS]:
                variants.append(Option(rewrite.log_prior + option.log_prior, rewrite.steps + option.steps))
        rewritten[name] = variants
    for name, variants in rewritten.items():
        table_options[name] = sorted(variants, key=lambda o: -o.log_prior)[:CLEANINGS]
    best: tuple[float, Program] | None = None
    tried = holding = 0
    bases = []
    for log_prior, cleaning, tables in _cleaned(sources, table_options):
        fact = tables[names[0]]
        for join_plan in join_plans(fact, tables, names, target, asked):
            try:
                base = run_steps(fact, join_plan.steps, tables)
            except (KeyError, ValueError, TypeError):
                continue
            bases.append((log_prior + join_plan.log_prior, cleaning, join_plan, tables, base))
    bases = _distinct(sorted(bases, key=lambda b: -b[0]))[:MAX_BASES]
    plans = [_filter_plans(filters(base, examples, asked)) for *_, base in bases]
    ranked = sorted(
        (-(prior + f.log_prior), i, k) for i, (prior, *_) in enumerate(bases) for k, f in enumerate(plans[i])
    )
    options: dict[int, list[list[tuple[str, Step | None]]]] = {}
    held: dict[int, dict[str, list[str]]] = {}
    seen: set[tuple[tuple[str, ...], bytes]] = set()
    for negative, i, k in ranked:
        prior = -negative
        if best is not None and prior <= best[0]:
            break  # the likelihood is at most 1: no later candidate can do better
        if tried >= max_candidates or (deadline is not None and time.monotonic() >= deadline):
            break
        _, cleaning, join_plan, tables, base = bases[i]
        if i not in options:
            options[i], held[i] = row_context(base, examples, facts)
        filter_plan = plans[i][k]
        tried += 1
        try:
            table = run_steps(base, filter_plan.steps, tables)
        except (KeyError, ValueError, TypeError):
            continue
        digest = _digest(table)
        if table.empty or digest in seen:
            continue  # a likelier candidate gave this table: it can only score lower
        seen.add(digest)
        finished = finish(table, examples, facts, target_rows, options[i], held[i])
        if finished is None:
            continue
        post, grouped, output = finished
        holding += 1
        score = prior + log_likelihood(output, examples)
        if best is None or score > best[0]:
            program = Program(names, cleaning, (*join_plan.steps, *filter_plan.steps, *post), score, grouped)
            best = (score, program)
    return _done(best, tried, holding, started)


def _distinct(bases: list[Any]) -> list[Any]:
    """Bases (likeliest first) without those whose table equals a likelier one's: cleaning that
    changes nothing here is not searched twice."""
    seen, out = set(), []
    for base in bases:
        digest = _digest(base[-1])
        if digest not in seen:
            seen.add(digest)
            out.append(base)
    return out


def _digest(table: pd.DataFrame) -> tuple[tuple[str, ...], bytes]:
    """A table's content, rows in order: equal digests, equal tables."""
    rows = pd.util.hash_pandas_object(table, index=False).to_numpy()
    return tuple(map(str, table.columns)), hashlib.blake2b(rows.tobytes(), digest_size=16).digest()


def _done(best: tuple[float, Program] | None, tried: int, holding: int, started: float) -> Synthesis:
    return Synthesis(None if best is None else best[1], tried, time.perf_counter() - started, holding)


def _cleaned(
    sources: Mapping[str, pd.DataFrame], options: Mapping[str, list[Option]]
) -> Iterator[tuple[float, dict[str, tuple[Step, ...]], dict[str, pd.DataFrame]]]:
    """Every table's cleaning alternatives crossed, most likely first, with the cleaned tables."""
    names = list(sources)
    cache: dict[tuple[str, int], pd.DataFrame] = {}
    combos = sorted(
        itertools.product(*(range(len(options[n])) for n in names)),
        key=lambda idx: -sum(options[n][i].log_prior for n, i in zip(names, idx, strict=True)),
    )
    for idx in combos[:24]:
        tables = {}
        for n, i in zip(names, idx, strict=True):
            if (n, i) not in cache:
                cache[(n, i)] = run_steps(sources[n], options[n][i].steps, {})
            tables[n] = cache[(n, i)]
        prior = sum(options[n][i].log_prior for n, i in zip(names, idx, strict=True))
        yield prior, {n: options[n][i].steps for n, i in zip(names, idx, strict=True)}, tables


def join_plans(
    fact: pd.DataFrame,
    tables: Mapping[str, pd.DataFrame],
    names: Sequence[str],
    target: Sequence[str],
    request: Request | None = None,
) -> list[Option]:
    """Ways to merge the other tables into the fact stream, in order, most likely first; a plan
    with a join the ``request`` asks for is marked requested (:func:`.proposer.joins`)."""
    plans = [Option(0.0, ())]
    listed = any(f.key and name in target for name, f in column_facts(fact).items())
    for name in names[1:]:
        other = tables[name]
        needed = any(t in other.columns and t not in fact.columns for t in target)
        plans = [
            Option(
                p.log_prior + o.log_prior,
                p.steps + o.steps,
                REQUESTED if requested(p) or requested(o) else "",
            )
            for p in plans
            for o in joins(_joined(fact, p.steps, tables), other, name, needed, listed, request)
        ]
    return sorted(plans, key=lambda o: -o.log_prior)[:4]


def _joined(fact: pd.DataFrame, steps: tuple[Step, ...], tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    try:
        return run_steps(fact, steps, tables)
    except (KeyError, ValueError):
        return fact


def _filter_plans(singles: list[Option]) -> list[Option]:
    """No filter, each single filter, pairs of the likeliest on different columns, and triples
    of the likeliest of all (at most :data:`PER_COLUMN` filters of one column among them, so that
    one column's many values do not crowd out the others)."""
    plans = [Option(0.0, ()), *singles]
    per_column: dict[str, int] = {}
    likeliest = []
    for option in singles:
        column = option.steps[0].duty.column
        per_column[column] = per_column.get(column, 0) + 1
        if per_column[column] <= PER_COLUMN:
            likeliest.append(option)
    for size, top in ((2, likeliest[:24]), (3, likeliest[:10])):
        for combo in itertools.combinations(top, size):
            if len({o.steps[0].duty.column for o in combo}) == size:
                steps = tuple(step for o in combo for step in o.steps)
                plans.append(Option(sum(o.log_prior for o in combo), steps))
    return sorted(plans, key=lambda o: -o.log_prior)


# ------------------------------------------------------------------------------ deduction
def finish(
    table: pd.DataFrame,
    examples: pd.DataFrame,
    facts: Mapping[str, TargetFacts],
    target_rows: int | None,
    row_options: list[list[tuple[str, Step | None]]] | None = None,
    held: Mapping[str, list[str]] | None = None,
) -> tuple[tuple[Step, ...], bool, pd.DataFrame] | None:
    """The steps that turn ``table`` into an output holding ``examples`` (rows first, then groups),
    whether the output is grouped, and the output; None when neither explains them. ``row_options``
    and ``held``: what :func:`_row_options` gave, and for each target column the columns whose values
    held it, on a table ``table``'s rows are a subset of (only these are checked again here)."""
    if row_options is None:
        row_options = _row_options(table, examples, facts)
    else:
        row_options = [
            [o for o in found if _still_holds(table, str(name), o, examples, facts[str(name)])]
            for name, found in zip(examples.columns, row_options, strict=False)
        ]
    rows = _row_shapes(row_options, examples) if all(row_options) else iter(())
    order = ((False, rows), (True, _groups(table, examples, facts, held)))
    if any(facts[str(c)].per_group and str(c) not in table.columns for c in examples.columns):
        order = order[::-1]  # a name like max_cost says the output is grouped
    for grouped, shapes in order:
        for shaped in shapes:
            done = _finish_output(shaped, table, examples, facts, target_rows)
            if done is not None:
                return done[0], grouped, done[1]
    return None


def row_context(
    base: pd.DataFrame, examples: pd.DataFrame, facts: Mapping[str, TargetFacts]
) -> tuple[list[list[tuple[str, Step | None]]], dict[str, list[str]]]:
    """What :func:`finish` may reuse on every table whose rows are a subset of ``base``'s (``base``
    filtered): the row options and, per target column, the columns whose values hold it."""
    held = {str(n): _matches(base, str(n), examples, facts[str(n)]) for n in examples.columns}
    return _row_options(base, examples, facts, held), held


def log_likelihood(output: pd.DataFrame, examples: pd.DataFrame) -> float:
    """Log-probability of the example rows given a program's output that holds them: the first
    rows of the output with probability :data:`HEAD`, else ``n`` of its rows at random. Fewer rows
    than a user is asked for (:data:`EXAMPLE_ROWS`) are the whole table with probability
    :data:`WHOLE`."""
    n, rows = len(examples), max(len(output), len(examples))
    given = (HEAD if _heads(output, examples) else 0.0) + (1 - HEAD) / math.comb(rows, n)
    if n < EXAMPLE_ROWS:
        given = (WHOLE if rows == n else 0.0) + (1 - WHOLE) * given
    return math.log(given)


@dataclass(frozen=True)
class _Shaped:
    """The steps that give the output its columns: steps on ``table`` and the select mapping."""

    steps: tuple[Step, ...]
    columns: tuple[tuple[str, str], ...]


def _matches(
    table: pd.DataFrame,
    name: str,
    examples: pd.DataFrame,
    facts: TargetFacts,
    among: Sequence[str] | None = None,
) -> list[str]:
    """Columns of ``table`` (or of ``among``) whose values hold the example's values for target
    column ``name``: the same name first, then by name similarity."""
    wanted = examples[name]
    found = []
    for column in table.columns if among is None else among:
        if _holds_values(table[column], wanted, facts):
            found.append((str(column) != name, -name_similarity(str(column), name), str(column)))
    return [c for *_, c in sorted(found)]


def _holds_values(column: pd.Series, wanted: pd.Series, facts: TargetFacts) -> bool:
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    if numeric != facts.numeric:
        return False
    if wanted.isna().any() and not column.isna().any():
        return False
    return values_occur(wanted, column, facts.decimals)


def _rounded(column: pd.Series, facts: TargetFacts) -> pd.Series:
    if not pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
        return column
    return column.astype("float64").round(facts.decimals)


def _derivations(table: pd.DataFrame, name: str, examples: pd.DataFrame, facts: TargetFacts) -> list[Step]:
    """``name = left op right`` over two number columns of ``table`` whose values hold the
    example's values for ``name``."""
    numbers = [str(c) for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
    found = []
    for left, right in itertools.permutations(numbers, 2):
        for op in BINARY_OPS:
            if op in ("mul", "add") and left > right:
                continue
            step = Step(Role.DERIVE, DeriveDuty(name=name, op=op, left=left, right=right))
            values, _ = apply_node(step.role, step.duty, [table[[left, right]]], "small")
            if _holds_values(values[name], examples[name], facts):
                found.append(step)
    return found


def _row_options(
    table: pd.DataFrame,
    examples: pd.DataFrame,
    facts: Mapping[str, TargetFacts],
    held: Mapping[str, list[str]] | None = None,
) -> list[list[tuple[str, Step | None]]]:
    """For each target column, the columns of ``table`` (or derivations of two) that could be it in
    a row output; an empty list where none could. ``held``: the columns already found to hold each
    target column's values on ``table`` (:func:`_matches`), when known."""
    options: list[list[tuple[str, Step | None]]] = []
    for name in examples.columns:
        name = str(name)
        columns = held[name] if held is not None else _matches(table, name, examples, facts[name])
        found: list[tuple[str, Step | None]] = [(c, None) for c in columns[:4]]
        if not found and facts[name].numeric:
            found = [(name, step) for step in _derivations(table, name, examples, facts[name])[:4]]
        options.append(found)
        if not found:
            break
    return options


def _still_holds(
    table: pd.DataFrame,
    name: str,
    option: tuple[str, Step | None],
    examples: pd.DataFrame,
    facts: TargetFacts,
) -> bool:
    """Whether a row option found on a larger table still holds the examples' ``name`` values."""
    column, step = option
    if step is None:
        return _holds_values(table[column], examples[name], facts)
    derived, _ = apply_node(step.role, step.duty, [table[[step.duty.left, step.duty.right]]], "small")
    return _holds_values(derived[name], examples[name], facts)


def _row_shapes(options: list[list[tuple[str, Step | None]]], examples: pd.DataFrame) -> Iterator[_Shaped]:
    """Row outputs: each target column a column of the table or a derivation of two."""
    for combo in itertools.islice(itertools.product(*options), 24):
        sources = [c for c, _ in combo]
        if len(set(sources)) != len(sources):
            continue
        steps = tuple(step for _, step in combo if step is not None)
        yield _Shaped(steps, tuple(zip(sources, (str(c) for c in examples.columns), strict=True)))


def _groups(
    table: pd.DataFrame,
    examples: pd.DataFrame,
    facts: Mapping[str, TargetFacts],
    held: Mapping[str, list[str]] | None = None,
) -> Iterator[_Shaped]:
    """Grouped outputs: text (or whole-number) target columns as keys, the rest as aggregates. A
    target column shown under its own name with that column's values is always a key; a column
    matched under another name may be a key or a measure."""
    fixed, free = [], []
    for name in examples.columns:
        name = str(name)
        f = facts[name]
        among = None if held is None else held[name]
        found = _matches(table, name, examples, f, among) if not f.numeric or f.decimals == 0 else []
        found = [c for c in found if not pd.api.types.is_float_dtype(table[c]) or not f.numeric]
        if found and found[0] == name:
            fixed.append((name, name))
        elif found and not f.numeric:
            free.append((name, found[0]))
    for size in range(len(free), -1, -1):
        for chosen in itertools.combinations(free, size):
            keys = fixed + list(chosen)
            rest = [m for m in examples.columns if str(m) not in {k for k, _ in keys}]
            if not keys or not rest or len(rest) > 3:
                continue
            shaped = _aggregate(table, examples, facts, keys, [str(m) for m in rest])
            if shaped is not None:
                yield shaped


def _aggregate(
    table: pd.DataFrame,
    examples: pd.DataFrame,
    facts: Mapping[str, TargetFacts],
    keys: list[tuple[str, str]],
    measures: list[str],
) -> _Shaped | None:
    by = [c for _, c in keys]
    groups = _Groups.of(table, by, examples[[k for k, _ in keys]])
    if groups is None:
        return None
    chosen: list[tuple[str, str, str | None]] = []
    derives: list[Step] = []
    work = table
    for measure in measures:
        f = facts[measure]
        if not f.numeric:
            return None
        found = _measure(work, groups, examples[measure], f, by, measure)
        if found is None:
            extra = _derived_measure(work, groups, examples[measure], f, by, measure)
            if extra is None:
                return None
            step, found = extra
            derives.append(step)
            work, _ = apply_node(step.role, step.duty, [work], "small")
        chosen.append((measure, *found))
    (name, fn, column), *more = chosen
    duty = AggregateDuty(by=tuple(by), column=column, fn=fn, name=name, more=tuple(more))
    select = [(c, k) for k, c in keys] + [(m, m) for m in measures]
    order = {str(c): i for i, c in enumerate(examples.columns)}
    select.sort(key=lambda pair: order[pair[1]])
    return _Shaped((*derives, Step(Role.AGGREGATE, duty)), tuple(select))


def _measure(
    table: pd.DataFrame,
    groups: _Groups,
    wanted: pd.Series,
    facts: TargetFacts,
    by: list[str],
    name: str,
) -> tuple[str, str | None] | None:
    """The first ``(fn, column)`` whose per-group values reproduce ``wanted`` on the examples' keys:
    the functions the measure's name says first, then the columns the measure is named after
    (``Transects``: the distinct transects; ``Birds``: the sum of ``birds``), the row count, and
    the other columns by name similarity."""
    columns = sorted(
        (c for c in table.columns if str(c) not in by), key=lambda c: -name_similarity(str(c), name)
    )
    named: list[tuple[str, str | None]] = []
    tried: list[tuple[str, str | None]] = [("size", None)]
    for column in columns:
        numeric = pd.api.types.is_numeric_dtype(table[column]) and not pd.api.types.is_bool_dtype(
            table[column]
        )
        fns = AGGREGATES if numeric else ("nunique", "count")
        pairs = [(fn, str(column)) for fn in fns if fn != "size"]
        if name_similarity(str(column), name) >= 0.5:
            named += pairs
        else:
            tried += pairs
    tried = named + tried
    tried.sort(key=lambda pair: pair[0] not in facts.aggregates)  # stable: what the name says first
    want = wanted.to_numpy(dtype=float)
    series = {str(c): table[c] for c in columns}
    for fn, column in tried:
        if groups.reproduce(None if column is None else series[column], fn, want, facts):
            return fn, column
    return None


def _key_rows(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Rows as tuples of plain values, a missing value as None (so keys compare across dtypes)."""
    plain = frame.astype(object).where(frame.notna(), None)
    return list(plain.itertuples(index=False, name=None))


@dataclass(frozen=True)
class _Groups:
    """A table's rows grouped by ``by``, kept only for the example rows' keys: the row numbers of
    each example key's group (every example's key is a group of the table). Only these groups'
    values are ever compared, so only they are aggregated."""

    rows: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, table: pd.DataFrame, by: list[str], wanted: pd.DataFrame) -> _Groups | None:
        """None when two example rows share a key or one's key is not in ``table``."""
        wanted_keys = _key_rows(wanted)
        if len(set(wanted_keys)) < len(wanted_keys):
            return None
        codes = table.groupby(by, dropna=False, sort=False).ngroup().to_numpy()
        code_of = dict(zip(_key_rows(table[by]), codes, strict=True))
        at = [code_of.get(key) for key in wanted_keys]
        if any(code is None for code in at):
            return None
        return cls(tuple(np.flatnonzero(codes == code) for code in at))

    def reproduce(self, column: pd.Series | None, fn: str, want: np.ndarray, facts: TargetFacts) -> bool:
        """Whether ``fn`` of ``column`` per group (``None``: the group's size), at the examples'
        keys and rounded as they show them, equals ``want``. Missing values are skipped, as
        pandas' grouped aggregates skip them (a sum of none is 0; a mean, min or max of none is
        missing)."""
        if column is None or fn == "size":
            values = [float(len(rows)) for rows in self.rows]
        elif fn in ("count", "nunique"):
            raw, missing = column.to_numpy(), column.isna().to_numpy()
            kept = [raw[rows[~missing[rows]]] for rows in self.rows]
            values = [float(len(v) if fn == "count" else len(pd.unique(v))) for v in kept]
        else:
            try:
                numbers = column.to_numpy(dtype=float, na_value=np.nan)
            except (TypeError, ValueError):
                return False
            kept = [v[~np.isnan(v)] for v in (numbers[rows] for rows in self.rows)]
            values = [_reduce(v, fn) for v in kept]
        got = np.round(np.asarray(values, dtype=float), facts.decimals)
        return bool(np.allclose(got, want, rtol=0, atol=0.5 * 10.0**-facts.decimals + 1e-9, equal_nan=True))


def _reduce(values: np.ndarray, fn: str) -> float:
    """``fn`` of a group's non-missing numbers, as pandas' grouped aggregate gives it."""
    if fn == "sum":
        return float(values.sum())
    if not len(values):
        return float("nan")
    return float({"mean": np.mean, "max": np.max, "min": np.min}[fn](values))


def _derived_measure(
    table: pd.DataFrame,
    groups: _Groups,
    wanted: pd.Series,
    facts: TargetFacts,
    by: list[str],
    name: str,
) -> tuple[Step, tuple[str, str | None]] | None:
    """An aggregate of ``left op right`` (named after the measure) that reproduces ``wanted``.

    Each candidate is screened first on the columns' plain numbers (index and dtype dropped, the
    node's arithmetic, :func:`.ops.binary`); only one that passes is computed by the node itself
    (``apply_node``) and checked again, so what is returned is what the node computes."""
    numbers = [str(c) for c in table.columns if pd.api.types.is_numeric_dtype(table[c]) and str(c) not in by]
    plain = {
        c: pd.Series(table[c].to_numpy(dtype=float, na_value=np.nan))
        for c in numbers
        if not pd.api.types.is_bool_dtype(table[c])  # the node's arithmetic on booleans is logical
    }
    want = wanted.to_numpy(dtype=float)
    fns = ("sum", "mean", "max", "min")
    for left, right in itertools.permutations(numbers, 2):
        for op in BINARY_OPS:
            if op in ("mul", "add") and left > right:
                continue
            if left in plain and right in plain:
                screened = binary(plain[left], plain[right], op)
                if not any(groups.reproduce(screened, fn, want, facts) for fn in fns):
                    continue
            step = Step(Role.DERIVE, DeriveDuty(name=name, op=op, left=left, right=right))
            derived, _ = apply_node(step.role, step.duty, [table[[left, right]]], "small")
            for fn in fns:
                if groups.reproduce(derived[name], fn, want, facts):
                    return step, (fn, name)
    return None


def _finish_output(
    shaped: _Shaped,
    table: pd.DataFrame,
    examples: pd.DataFrame,
    facts: Mapping[str, TargetFacts],
    target_rows: int | None,
) -> tuple[tuple[Step, ...], pd.DataFrame] | None:
    """The shaping steps plus rounding, select and order, and their output, when it holds the
    examples."""
    frame = run_steps(table, shaped.steps, {})
    select = Step(Role.SELECT, SelectDuty(columns=shaped.columns))
    output, _ = apply_node(select.role, select.duty, [frame], "small")
    rounds: list[Step] = []
    if held_share(examples, output) < 1.0:
        for source, name in shaped.columns:
            f = facts[name]
            column = output[name]
            if (
                f.numeric
                and pd.api.types.is_float_dtype(column)
                and not column.round(f.decimals).equals(column)
            ):
                rounds.append(
                    Step(Role.DERIVE, DeriveDuty(name=source, op="round", left=source, digits=f.decimals))
                )
        if not rounds:
            return None
        frame = run_steps(frame, rounds, {})
        output, _ = apply_node(select.role, select.duty, [frame], "small")
        if held_share(examples, output) < 1.0:
            return None
    order = _order(output, examples, facts, target_rows)
    if order is None:
        return None
    if order:
        output, _ = apply_node(order[0].role, order[0].duty, [output], "small")
    return (*shaped.steps, *rounds, select, *order), output


def _order(
    output: pd.DataFrame, examples: pd.DataFrame, facts: Mapping[str, TargetFacts], target_rows: int | None
) -> tuple[Step, ...] | None:
    """A sort (and top-k) by a number column, or names, dates or times (:func:`..ops.sorts_as_text`),
    that puts the example rows first, when one does; () when the output needs none; None when
    ``target_rows`` cannot be met."""
    n = len(examples)
    if _heads(output, examples) and (target_rows is None or len(output) == target_rows):
        return ()
    for name in examples.columns:
        values = examples[name].dropna()
        sortable = facts[str(name)].numeric or ops.sorts_as_text(values)
        if len(values) < 2 or values.nunique() < 2 or not sortable:
            continue
        for ascending in (False, True):
            ordered = values.is_monotonic_increasing if ascending else values.is_monotonic_decreasing
            if not ordered:
                continue
            k = target_rows if target_rows is not None and target_rows < len(output) else None
            if k is None and target_rows is None and n < EXAMPLE_ROWS and len(output) > n:
                k = n
            step = Step(Role.TOPK, TopKDuty(column=str(name), k=k, ascending=ascending))
            sorted_output, _ = apply_node(step.role, step.duty, [output], "small")
            if _heads(sorted_output, examples) and (target_rows is None or len(sorted_output) == target_rows):
                return (step,)
    if target_rows is not None and len(output) != target_rows:
        return None
    return ()


def _heads(output: pd.DataFrame, examples: pd.DataFrame) -> bool:
    """The example rows are the output's first rows, in order (rows tied on every column compared
    as a multiset)."""
    head = output.head(len(examples))
    if len(head) < len(examples) or held_share(examples, head) < 1.0:
        return False
    return all(
        np.array_equal(canonical_column(head[c].reset_index(drop=True)), canonical_column(examples[c]))
        for c in examples.columns
        if pd.api.types.is_numeric_dtype(examples[c])
    )
