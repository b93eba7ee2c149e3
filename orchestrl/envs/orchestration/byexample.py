"""Programming by example on a user's own tables: a task from public inputs only, solved, checked
and compiled, with no hidden reference or target anywhere.

This is the entry point for tools outside the env (``orchestrl plan``):

- :func:`public_task`: a :class:`.tasks.Task` from source tables and a handful of rows of the
  wanted output (their columns are the target's schema); ``reference`` and ``target`` stay None;
- :func:`infer_domain`: the few names the candidate proposer needs (the fact table's id, each
  dimension's join key, a derived measure the examples show), read off the tables;
- :func:`sandbox_executor`: a sandboxed :class:`.executor.Executor` for the duration of a block;
- :func:`solve` (re-exported from :mod:`.solver`): the search over the public inputs;
- :func:`check_examples`: runs a spec in the sandbox and compares its output with the example
  rows (what can be checked without a hidden target);
- :func:`compile_spec` (re-exported from :mod:`.compiler`): the stand-alone ``pipeline.py``.

Scoring against a whole hidden target (``OrchestrationEnv.evaluate``) needs a generated task; a
user task can only be checked against its examples, which several plans may pass.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.compiler import compile_spec
from orchestrl.envs.orchestration.domains import Dimension, Domain
from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.profiles import profile
from orchestrl.envs.orchestration.sandbox.pool import acquire_shared_pool, release_shared_pool
from orchestrl.envs.orchestration.solver import Solution, solve
from orchestrl.envs.orchestration.spec import OrchestrationSpec, parse_spec
from orchestrl.envs.orchestration.tables import held_share
from orchestrl.envs.orchestration.tasks import HELDOUT_OFFSET, LEVELS, PublicInputs, Task, TaskKey

__all__ = [
    "NOTHING_RAN",
    "ExampleCheck",
    "Solution",
    "check_examples",
    "compile_spec",
    "infer_domain",
    "public_task",
    "sandbox_executor",
    "solve",
]

DERIVE_OPS = {"mul": np.multiply, "add": np.add, "sub": np.subtract, "div": np.divide}


def public_task(
    sources: Mapping[str, pd.DataFrame],
    examples: pd.DataFrame,
    *,
    level: int | None = None,
    domain: str | Domain | None = None,
    seed: int = 0,
    duties: int | None = None,
) -> Task:
    """A task made of public inputs only. ``sources``: name -> table, the fact table first (the
    one every other table joins to); ``examples``: a few rows of the wanted output, whose columns
    are the target's. ``level`` sets the team (agents, skeleton, candidates per role; default: the
    smallest level that takes this many sources); ``domain``: a generated domain's name or a
    :class:`.domains.Domain` (default :func:`infer_domain`). ``seed`` orders the candidate lists;
    ``duties``: candidates per role (default the level's; a policy needs the level's, the solver
    finds more plans with more, since only the salient candidates are sure to be listed).
    Raises ``ValueError`` naming the culprit for inputs no level can take."""
    if not sources:
        raise ValueError("sources: at least one table is needed")
    for name, frame in sources.items():
        if not isinstance(frame, pd.DataFrame) or frame.empty:
            raise ValueError(f"sources[{name!r}]: a non-empty DataFrame is needed")
    if not isinstance(examples, pd.DataFrame) or examples.empty or len(examples.columns) == 0:
        raise ValueError("examples: at least one row with the target's columns is needed")
    fits = [n for n, lv in sorted(LEVELS.items()) if lv.max_sources >= len(sources)]
    if not fits:
        raise ValueError(f"sources: {len(sources)} tables; a level takes at most 3")
    number = fits[0] if level is None else int(level)
    if number not in LEVELS or LEVELS[number].max_sources < len(sources):
        raise ValueError(f"level {level!r} cannot take {len(sources)} source tables (levels: {fits})")
    frames = {str(n): f.reset_index(drop=True) for n, f in sources.items()}
    target = tuple(str(c) for c in examples.columns)
    if duties is not None and int(duties) < 2:
        raise ValueError(f"duties: {duties!r}; at least 2 (the base duty and one more)")
    config = LEVELS[number] if duties is None else dataclasses.replace(LEVELS[number], duties=int(duties))
    public = PublicInputs(
        level=config,
        domain=domain if domain is not None else infer_domain(frames, examples),
        sources=frames,
        target_columns=target,
        examples=examples.reset_index(drop=True),
        candidate_seed=(number, int(seed)),
    )
    return Task(key=TaskKey(number, "heldout", _content_seed(frames, examples, seed)), public=public)


def infer_domain(sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame) -> Domain:
    """The names the candidate proposer reads off a domain, taken from the tables: the fact
    table's id (its first column whose values are distinct), each dimension's join key (its
    first column the fact table also has), and the derived measure (a target column no source
    holds whose example values are ``left <op> right`` of two fact number columns)."""
    names = list(sources)
    fact = sources[names[0]]
    columns = profile(fact)
    fact_id = next((c for c, p in columns.items() if p.key and p.distinct_frac >= 1.0), str(fact.columns[0]))
    dims = []
    for name in names[1:3]:
        frame = sources[name]
        key = next((str(c) for c in frame.columns if c in fact.columns), str(frame.columns[0]))
        dims.append(_dimension(name, key))
    while len(dims) < 2:
        dims.append(_dimension(f"_none{len(dims)}", f"_none{len(dims)}"))
    derived, op, left, right = _derived(fact, examples, {str(c) for f in sources.values() for c in f.columns})
    return Domain(
        name=f"user:{names[0]}",
        fact=names[0],
        fact_id=fact_id,
        status="",
        status_values=(),
        cat="",
        cat_values=(),
        n1=left,
        n1_range=(0.0, 0.0),
        n1_integer=False,
        n2=right,
        n2_range=(0.0, 0.0),
        derived=derived,
        derived_op=op,
        derived_left=left,
        derived_right=right,
        dims=(dims[0], dims[1]),
        distractors=("", "", ""),
    )


@contextmanager
def sandbox_executor(workers: int = 1, isolation: str = "auto") -> Iterator[Executor]:
    """An :class:`.executor.Executor` on the process-wide sandbox pool, released on exit."""
    pool = acquire_shared_pool(workers, isolation)  # type: ignore[arg-type]
    try:
        yield Executor(pool, NodeCache())
    finally:
        release_shared_pool(pool)


@dataclass(frozen=True)
class ExampleCheck:
    """How a spec's output compares with the example rows."""

    ok: bool
    """The spec ran and its output has the target's columns and holds every example row (and,
    when ``rows_expected`` is given, has that many rows)."""
    ran: bool
    columns_match: bool
    examples_held: float
    """Share of the example rows the output holds."""
    rows: int
    errors: tuple[str, ...] = ()
    rows_expected: int | None = None
    """The wanted table's row count, when the user knows it."""


NOTHING_RAN = ExampleCheck(ok=False, ran=False, columns_match=False, examples_held=0.0, rows=0)
"""The check of a spec that never ran (there was none)."""


def check_examples(
    task: Any, spec: OrchestrationSpec | str, executor: Executor, target_rows: int | None = None
) -> ExampleCheck:
    """Runs ``spec`` on the task's sources in the sandbox (a :class:`.tasks.Task` or a
    :class:`.planning.grammar.PlanningTask`) and checks it against the examples (and against
    ``target_rows``, the wanted row count, when given)."""
    spec = parse_spec(spec)
    execution = executor.execute(task, spec)
    output = execution.output if execution.ok else None
    public = getattr(task, "public", task)  # a level task's public inputs, or a planning task
    target = sorted(public.target_columns)
    columns = output is not None and sorted(str(c) for c in output.columns) == target
    held = held_share(public.examples, output)
    rows = 0 if output is None else len(output)
    return ExampleCheck(
        ok=bool(columns and held >= 1.0) and (target_rows is None or rows == target_rows),
        ran=execution.ok,
        columns_match=bool(columns),
        examples_held=float(held),
        rows=rows,
        errors=tuple(execution.error_kinds),
        rows_expected=target_rows,
    )


def _dimension(table: str, key: str) -> Dimension:
    return Dimension(table, key, (), (), "", (), "", (), "", (0.0, 0.0))


def _derived(fact: pd.DataFrame, examples: pd.DataFrame, held: set[str]) -> tuple[str, str, str, str]:
    """(name, op, left, right) of the first target column no source holds whose example values
    all occur among ``left <op> right`` over the fact rows; a placeholder name otherwise."""
    numbers = [c for c, p in profile(fact).items() if p.number]
    wanted = [c for c in examples.columns if str(c) not in held]
    for column in wanted:
        values = pd.to_numeric(examples[column], errors="coerce")
        if values.isna().any():
            continue
        want = set(np.round(values.to_numpy(dtype=float), 4).tolist())
        for (a, b), (op, fn) in itertools.product(itertools.permutations(numbers, 2), DERIVE_OPS.items()):
            left = ops.as_numbers(fact[a], "large").to_numpy(dtype=float)
            right = ops.as_numbers(fact[b], "large").to_numpy(dtype=float)
            with np.errstate(all="ignore"):
                have = set(np.round(fn(left, right), 4).tolist())
            if want <= have:
                return str(column), op, str(a), str(b)
    return "_derived", "mul", "", ""


def _content_seed(sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame, seed: int) -> int:
    """A task seed from the inputs' content (the env memoises solutions and scorers by key)."""
    digest = hashlib.blake2b(digest_size=8)
    for name, frame in sources.items():
        digest.update(name.encode())
        digest.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    digest.update(pd.util.hash_pandas_object(examples, index=False).to_numpy().tobytes())
    digest.update(str(seed).encode())
    return int.from_bytes(digest.digest(), "big") % HELDOUT_OFFSET
