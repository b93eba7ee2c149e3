"""Programming by example on tables handed over as plain DataFrames (orchestrl plan's path): a task
with no hidden part, the solver, the check against the examples and the compiled pipeline.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from orchestrl.envs.orchestration.byexample import (
    check_examples,
    compile_spec,
    infer_domain,
    public_task,
    sandbox_executor,
    solve,
)
from orchestrl.envs.orchestration.executor import Executor
from orchestrl.envs.orchestration.tables import row_hashes
from orchestrl.envs.orchestration.tasks import generate_task, write_task_data


@pytest.fixture(scope="module")
def executor() -> Iterator[Executor]:
    with sandbox_executor() as ex:
        yield ex


def user_tables(level: int, seed: int) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """A generated task's public inputs as a user would hand them over: plain copies."""
    task = generate_task(level, "heldout", seed)
    return {n: f.copy() for n, f in task.sources.items()}, task.public.examples.copy()


@pytest.mark.parametrize(("level", "seed"), [(1, 0), (2, 0)])
def test_a_user_task_is_solved_checked_and_compiled(
    level: int, seed: int, executor: Executor, tmp_path: Path
) -> None:
    sources, examples = user_tables(level, seed)
    task = public_task(sources, examples, duties=16)
    assert task.reference is None and task.target is None and task.level.number == level
    solution = solve(task, executor)
    assert solution.consistent and solution.spec is not None
    check = check_examples(task, solution.spec, executor)
    assert check.ok and check.examples_held == 1.0 and check.columns_match
    # a row count the user gives must hold too
    assert check_examples(task, solution.spec, executor, target_rows=check.rows).ok
    off = check_examples(task, solution.spec, executor, target_rows=check.rows + 1)
    assert not off.ok and off.rows_expected == check.rows + 1 and off.examples_held == 1.0

    # the stand-alone pipeline.py reproduces an output holding every example row
    compile_spec(solution.spec).write(tmp_path / "pipeline.py")
    data = write_task_data(task, tmp_path / "data")
    subprocess.run(
        [sys.executable, "pipeline.py", "--data", str(data), "--out", "out.parquet"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=60,
    )
    output = pd.read_parquet(tmp_path / "out.parquet")
    columns = sorted(examples.columns)
    assert set(row_hashes(examples, columns).tolist()) <= set(row_hashes(output, columns).tolist())


def test_a_spec_that_misses_the_examples_is_reported(executor: Executor) -> None:
    sources, examples = user_tables(1, 0)
    task = public_task(sources, examples.iloc[:, :-1].assign(not_there=1))
    solution = solve(task, executor)
    assert not solution.consistent
    if solution.spec is not None:
        check = check_examples(task, solution.spec, executor)
        assert not check.ok and not check.columns_match


def test_the_domain_is_read_off_the_tables() -> None:
    sources, examples = user_tables(1, 2)  # shop: the examples show revenue = qty * unit_price
    assert "revenue" in examples.columns and "revenue" not in sources["orders"].columns
    domain = infer_domain(sources, examples)
    assert domain.fact == "orders" and sources["orders"][domain.fact_id].is_unique
    assert (domain.derived, domain.derived_op, {domain.derived_left, domain.derived_right}) == (
        "revenue",
        "mul",
        {"qty", "unit_price"},
    )
    doubled = examples.assign(revenue=examples["qty"] * 1000.5)  # no two columns give this
    assert infer_domain(sources, doubled).derived != "revenue"


def test_bad_inputs_are_refused_by_name() -> None:
    sources, examples = user_tables(3, 0)
    with pytest.raises(ValueError, match="sources: at least one"):
        public_task({}, examples)
    with pytest.raises(ValueError, match=r"sources\['x'\]"):
        public_task({"x": pd.DataFrame()}, examples)
    with pytest.raises(ValueError, match="examples"):
        public_task(sources, examples.iloc[0:0])
    with pytest.raises(ValueError, match="level 1 cannot take"):
        public_task(sources, examples, level=1)
    with pytest.raises(ValueError, match="4 tables"):
        public_task({**sources, "extra": next(iter(sources.values()))}, examples)
    with pytest.raises(ValueError, match="duties"):
        public_task(sources, examples, duties=1)
