"""Honest observations: what an agent observes is a function of the task's public inputs (the
source tables, the target's column names and its example rows) and of nothing hidden.

For every level, the observations are rebuilt three ways and must be identical arrays:
- from a task rebuilt out of copies of the public inputs alone (candidates proposed anew);
- with the hidden reference pipeline and the hidden target deleted;
- with the reference replaced by another plan that yields the same example rows.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pytest

from orchestrl.envs.orchestration.candidates import propose
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.plans import plan_signature, run_spec
from orchestrl.envs.orchestration.solver import plan_space, successful_plans
from orchestrl.envs.orchestration.spec import OrchestrationSpec
from orchestrl.envs.orchestration.tables import row_hashes
from orchestrl.envs.orchestration.tasks import LEVELS, PublicInputs, Task, generate_task
from orchestrl.envs.spaces import OBS_KEY

SEEDS = (0, 1)


def rebuilt_from_public_inputs(task: Task) -> Task:
    """A task made of fresh copies of the public inputs only: no reference, no target, and the
    candidates proposed again from those copies."""
    public = PublicInputs(
        level=task.public.level,
        domain=task.public.domain,
        sources={name: frame.copy(deep=True) for name, frame in task.public.sources.items()},
        target_columns=tuple(task.public.target_columns),
        examples=task.public.examples.copy(deep=True),
        candidate_seed=tuple(task.public.candidate_seed),
    )
    assert propose(public) == task.public.proposed
    return Task(key=task.key, public=public)


def another_plan(task: Task) -> OrchestrationSpec:
    """A plan other than the reference whose output holds every example row (it may or may not
    produce the rest of the target)."""
    reference = plan_signature(task.reference)
    for spec in itertools.islice(plan_space(task), 300):
        if plan_signature(spec) != reference and holds_examples(task, spec):
            return spec
    raise AssertionError(f"no second plan found for {task.key}")


def holds_examples(task: Task, spec: OrchestrationSpec) -> bool:
    output = run_spec(task.sources, spec).output
    columns = sorted(task.public.target_columns)
    if output is None or sorted(map(str, output.columns)) != columns:
        return False
    have = set(row_hashes(output, columns).tolist())
    return all(h in have for h in row_hashes(task.public.examples, columns).tolist())


def first_round(level: int, task: Task) -> dict[str, np.ndarray]:
    env = OrchestrationEnv(level=level, rounds=2)
    obs, _ = env.reset(options={"task": task})
    return {agent: o[OBS_KEY] for agent, o in obs.items()}


def assert_same(observe: Callable[[Task], dict[str, np.ndarray]], a: Task, b: Task) -> None:
    left, right = observe(a), observe(b)
    assert left.keys() == right.keys()
    for agent in left:
        np.testing.assert_array_equal(left[agent], right[agent], err_msg=agent)


@pytest.mark.parametrize("level", sorted(LEVELS))
@pytest.mark.parametrize("seed", SEEDS)
def test_observations_are_rebuilt_from_copies_of_the_public_inputs(level: int, seed: int) -> None:
    task = generate_task(level, "train", seed)
    rebuilt = rebuilt_from_public_inputs(task)
    assert rebuilt.candidates == task.candidates
    assert_same(lambda t: first_round(level, t), task, rebuilt)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_deleting_the_hidden_reference_and_target_changes_no_observation(level: int) -> None:
    task = generate_task(level, "heldout", 2)
    blind = dataclasses.replace(task, reference=None, target=None, reference_work=0.0)
    assert_same(lambda t: first_round(level, t), task, blind)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_another_plan_with_the_same_example_rows_gives_the_same_observations(level: int) -> None:
    task = generate_task(level, "train", 3)
    other = another_plan(task)
    assert plan_signature(other) != plan_signature(task.reference) and holds_examples(task, other)
    output = run_spec(task.sources, other).output
    swapped = dataclasses.replace(task, reference=other, target=output.reset_index(drop=True))
    assert_same(lambda t: first_round(level, t), task, swapped)


def test_round_two_feedback_is_computed_from_the_execution_not_the_reference() -> None:
    """With the same target, the same actions give the same second-round observations whichever
    plan is called the reference."""
    task = generate_task(2, "train", 5)
    reference = plan_signature(task.reference)
    other = next(s for s in successful_plans(task) if plan_signature(s) != reference)
    swapped = dataclasses.replace(task, reference=other)

    def second_round(t: Task) -> dict[str, np.ndarray]:
        env = OrchestrationEnv(level=2, rounds=2)
        env.reset(options={"task": t})
        obs, *_ = env.step(env.expert_actions())
        return {agent: o[OBS_KEY] for agent, o in obs.items()}

    assert_same(second_round, task, swapped)


def test_a_task_from_another_level_is_refused() -> None:
    env = OrchestrationEnv(level=1)
    with pytest.raises(ValueError, match="level-2 task"):
        env.reset(options={"task": generate_task(2, "train", 0)})
