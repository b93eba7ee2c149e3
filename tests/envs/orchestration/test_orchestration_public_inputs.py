"""Honest observations: what an agent observes is a function of the task's public inputs (the source
tables, the target's column names and its example rows) and of nothing hidden.

For every level, the observations are rebuilt three ways and must be identical arrays:
- from a task rebuilt out of copies of the public inputs alone (candidates proposed anew);
- with the hidden reference pipeline and the hidden target deleted;
- with the reference replaced by another plan that yields the same example rows.

And over whole episodes: the hidden pair (reference and target) is swapped for another pair that
fits the same public inputs (another plan whose output holds every example row but differs on the
hidden ones, with the target recomputed as its output). The same joint actions must then give the
same observations in every round, feedback included (the row-count ratio), on a fresh env and on a
warm one whose node cache holds a first episode, and the same reward shaping ``r_process``. The same
episode played again on one env is observed identically: nothing depends on what ran before. The
row-count ratio is measured against a ``target_rows`` the caller gives, never against the hidden
target's size."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import numpy as np
import pytest

from orchestrl.envs.orchestration.candidates import propose
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.plans import plan_signature, run_spec
from orchestrl.envs.orchestration.solver import plan_space, spec_actions, successful_plans
from orchestrl.envs.orchestration.spec import OrchestrationSpec, base_duty
from orchestrl.envs.orchestration.tables import TargetIndex, row_hashes
from orchestrl.envs.orchestration.tasks import LEVELS, PublicInputs, Task, generate_task
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

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
    assert_equal_observations(observe(a), observe(b))


def assert_equal_observations(left: dict[str, np.ndarray], right: dict[str, np.ndarray]) -> None:
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


# ---------------------------------------------------------------- nothing of the solver's conclusions
@pytest.mark.parametrize("level", [2, 4])
def test_the_solver_s_prior_and_context_check_reach_no_observation(
    level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The solver ranks cleaning stages by a prior that runs each inside the plan it ranks first;
    that is its inference, which the team must make itself. Scrambling both changes no array."""
    from orchestrl.envs.orchestration.analysis import PublicView

    task = generate_task(level, "train", 4)
    before = first_round(level, rebuilt_from_public_inputs(task))
    rng = np.random.default_rng(0)
    monkeypatch.setattr(PublicView, "prep_score", lambda self, role, duty, home: float(rng.normal()))
    monkeypatch.setattr(PublicView, "context_agree", lambda self, stage: float(rng.uniform()))
    assert_equal_observations(before, first_round(level, rebuilt_from_public_inputs(task)))


@pytest.mark.parametrize("level", [1, 3, 4])
def test_candidates_are_listed_in_canonical_order_whatever_order_proposed_them(
    level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index names a duty, not its rank: the proposer's order (salient first, then drawn)
    reversed gives the same lists and the same observations."""
    from orchestrl.envs.orchestration import tasks as tasks_module

    task = generate_task(level, "heldout", 1)
    before, lists = first_round(level, rebuilt_from_public_inputs(task)), task.candidates
    for role, duties in lists.items():
        assert duties[0] == base_duty(role) and len(duties) == len(task.public.proposed[role])

    def reversed_proposal(public: PublicInputs, sourced: object = None) -> dict:
        return {role: (d[0], *reversed(d[1:])) for role, d in propose(public).items()}

    monkeypatch.setattr(tasks_module, "propose", reversed_proposal)
    again = dataclasses.replace(task, public=rebuilt_from_public_inputs(task).public)
    assert again.public.proposed != task.public.proposed and again.candidates == lists
    assert_equal_observations(before, first_round(level, again))


def test_a_task_from_another_level_is_refused() -> None:
    env = OrchestrationEnv(level=1)
    with pytest.raises(ValueError, match="level-2 task"):
        env.reset(options={"task": generate_task(2, "train", 0)})


# ---------------------------------------------------------------- another hidden pair, all rounds
Actions = dict[str, np.ndarray]


def another_pair(level: int) -> tuple[Task, Task]:
    """The first train task of ``level`` that has another plan whose output holds every example
    row but is not the target and has another row count; returns the task and the task with its
    hidden pair swapped: that plan as the reference and its output as the target."""
    for seed in range(12):
        task = generate_task(level, "train", seed)
        index = TargetIndex(task.target)
        for spec in itertools.islice(plan_space(task), 300):
            if not holds_examples(task, spec):
                continue
            run = run_spec(task.sources, spec)
            if index.compare(run.output).exact or len(run.output) == len(task.target):
                continue
            target = run.output.reset_index(drop=True)
            return task, dataclasses.replace(task, reference=spec, target=target, reference_work=run.work)
    raise AssertionError(f"no level-{level} task with a second consistent hidden pair")


def schedule(task: Task, other: Task) -> list[Actions]:
    """Joint actions, one per round: the other plan, the reference, a masked random team, the
    solver's plan. Computed on a scratch env, so the played envs see only what their agents run."""
    env = OrchestrationEnv(level=task.key.level)
    try:
        obs, _ = env.reset(options={"task": task})
        randoms = {}
        for i, agent in enumerate(env.possible_agents):
            space = env.action_space(agent)
            space.seed(i)
            randoms[agent] = space.sample(mask=obs[agent][MASK_KEY])
        return [
            spec_actions(other.reference, task, env.layout),
            spec_actions(task.reference, task, env.layout),
            randoms,
            env.expert_actions(),
        ]
    finally:
        env.close()


def play(env: OrchestrationEnv, task: Task, rounds: list[Actions]) -> list[tuple[Actions, float]]:
    """One episode of ``rounds``: every observation (reset's, then each round's, arrays of the
    observation and the mask per agent) with that round's ``r_process`` (0 after reset)."""
    obs, _ = env.reset(options={"task": task})
    seen = [(_arrays(obs), 0.0)]
    for actions in rounds:
        obs, *_ = env.step(actions)
        assert env.last_score is not None
        seen.append((_arrays(obs), env.last_score.r_process))
    return seen


def _arrays(obs: dict) -> Actions:
    return {f"{a}/{k}": np.asarray(o[k]).copy() for a, o in obs.items() for k in (OBS_KEY, MASK_KEY)}


def assert_same_rounds(left: list[tuple[Actions, float]], right: list[tuple[Actions, float]]) -> None:
    assert len(left) == len(right)
    for rnd, ((obs_l, shaping_l), (obs_r, shaping_r)) in enumerate(zip(left, right, strict=True)):
        assert obs_l.keys() == obs_r.keys()
        for key in obs_l:
            np.testing.assert_array_equal(obs_l[key], obs_r[key], err_msg=f"round {rnd}: {key}")
        assert shaping_l == pytest.approx(shaping_r), f"round {rnd}: r_process"


def played(level: int, episodes: list[list[int]]) -> tuple[list, list]:
    """Both hidden pairs played on one env each, episode after episode (``episodes``: indices
    into :func:`schedule`, one list of the same length per episode)."""
    task, swapped = another_pair(level)
    rounds = schedule(task, swapped)
    out = []
    for t in (task, swapped):
        env = OrchestrationEnv(level=level, rounds=len(episodes[0]))
        try:
            seen = []
            for episode in episodes:
                seen += play(env, t, [rounds[i] for i in episode])
            out.append(seen)
        finally:
            env.close()
    return out[0], out[1]


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_another_hidden_pair_for_the_same_public_inputs_changes_no_observation_in_any_round(
    level: int,
) -> None:
    task, swapped = another_pair(level)
    assert task.public is swapped.public and len(swapped.target) != len(task.target)
    left, right = played(level, [[0, 1, 2, 3]])
    assert_same_rounds(left, right)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_a_warm_env_carries_nothing_hidden_from_one_episode_into_the_next(level: int) -> None:
    """The second episode first writes the first pair's reference, which no agent ran before: what
    its agents observe must not depend on what the first episode scored against."""
    left, right = played(level, [[0, 2], [1, 3]])
    assert_same_rounds(left, right)


@pytest.mark.parametrize("level", [1, 3])
def test_the_same_episode_again_on_one_env_is_observed_identically(level: int) -> None:
    """A served team plans request after request on one env: an episode's observations (the node
    cache warm from the first time or not) must be the same every time, or the same request would
    get another plan."""
    task, swapped = another_pair(level)
    rounds = schedule(task, swapped)
    env = OrchestrationEnv(level=level, rounds=3)
    try:
        first = play(env, task, rounds[:3])
        assert_same_rounds(first, play(env, task, rounds[:3]))
    finally:
        env.close()


def test_the_row_count_ratio_follows_only_a_target_rows_the_caller_gives() -> None:
    """Training and ``orchestrl plan`` alike: without ``target_rows`` the ratio is 1 whatever the
    hidden target's size; with it, the output's rows against that count."""
    task, swapped = another_pair(1)
    rows = len(swapped.target)  # the other plan's output: not the target's row count
    env = OrchestrationEnv(level=1, rounds=2)
    try:
        actions = spec_actions(swapped.reference, task, env.layout)

        def round_two(**options: int) -> np.ndarray:
            env.reset(options={"task": task, **options})
            obs, *_ = env.step(actions)
            return obs["agent_0"][OBS_KEY]

        round_two()  # every later run finds the nodes cached
        unknown = round_two()
        np.testing.assert_array_equal(unknown, round_two(target_rows=rows))  # a ratio of 1
        assert not np.array_equal(unknown, round_two(target_rows=len(task.target)))
    finally:
        env.close()
