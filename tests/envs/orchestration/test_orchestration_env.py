"""The PettingZoo interface: API, spaces, rewards, infos, artifacts and robustness to bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.features import CLIP
from orchestrl.envs.orchestration.solver import spec_actions
from orchestrl.envs.orchestration.spec import ROLES, parse_spec
from orchestrl.envs.orchestration.tasks import LEVELS
from orchestrl.envs.registry import EnvKwargError, make_env
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

NVEC = {
    1: [8, 4, 4, 3, 4],
    2: [8, 4, 4, 5, 6],
    3: [8, 6, 4, 8, 9],
    4: [8, 6, 4, 11, 12],
    5: [8, 8, 4, 13, 14],
}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_parallel_api_test_passes(level: int) -> None:
    parallel_api_test(OrchestrationEnv(level=level), num_cycles=5)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_spaces_are_fixed_per_level_and_masks_are_factorised(level: int) -> None:
    env = OrchestrationEnv(level=level)
    assert env.possible_agents == [f"agent_{i}" for i in range(LEVELS[level].agents)]
    spaces = {env.observation_space(a)[OBS_KEY].shape for a in env.possible_agents}
    assert len(spaces) == 1
    obs, _ = env.reset(seed=1)
    for slot, agent in enumerate(env.agents):
        nvec = env.action_space(agent).nvec
        assert nvec.tolist() == NVEC[level]
        assert obs[agent][OBS_KEY].shape == next(iter(spaces))
        assert env.observation_space(agent).contains(obs[agent])
        parts = np.split(obs[agent][MASK_KEY], np.cumsum(nvec)[:-1])
        assert [len(p) for p in parts] == nvec.tolist() and all(p.max() == 1.0 for p in parts)
        assert parts[3][LEVELS[level].max_sources : -1].sum() == slot  # only earlier agents as inputs
        assert parts[3][-1] == parts[2][-1] == 1.0  # auto input, auto capacity


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_option_rows_point_at_each_role_s_candidate_duties(level: int) -> None:
    """``option_rows`` (what ``model.option_rows`` scores) is where each role's candidates sit:
    the row of the duty an agent writes (role value - 1 major, duty minor) is a listed candidate
    of that role, its base flag the duty's, and rows past a role's list are empty."""
    env = OrchestrationEnv(level=level)
    rows = env.option_rows
    obs, _ = env.reset(seed=2)
    k = env.layout.duties
    assert rows["given"] == 0 and rows["component"] == 1 and rows["first"] == 1
    written = 0
    for agent, action in reference_actions(env).items():
        vector = obs[agent][OBS_KEY]
        table = vector[rows["start"] : rows["start"] + len(ROLES) * k * rows["width"]]
        table = table.reshape(len(ROLES), k, rows["width"])
        role, duty = int(action[0]), int(action[1])
        if role == 0:
            continue
        listed = env.task.candidates[ROLES[role - 1]]
        assert table[role - 1, duty, 0] == 1.0, agent  # present
        assert table[role - 1, duty, 1] == float(listed[duty].is_base), agent
        assert not table[role - 1, len(listed) :].any(), agent
        written += 1
    assert written >= 1


@pytest.mark.parametrize("level", [1, 4])
def test_candidate_number_columns_hold_each_listed_candidate_s_numbers(level: int) -> None:
    """``candidate_number_columns`` (what the probe's ablations drop) finds the named numbers of
    every listed candidate of the agent's skeleton family (zeros for the other families' rows), in
    the numbers' own order."""
    from orchestrl.envs.orchestration.analysis import CANDIDATE_NUMBERS
    from orchestrl.envs.orchestration.plans import family_of

    env = OrchestrationEnv(level=level)
    obs, _ = env.reset(seed=3)
    view, k = env.task.public.view, env.layout.duties
    names = ("agree", "evidence", "keep")
    columns = env.builder.candidate_number_columns(names)
    block = env.builder.offsets()["candidates"]
    assert len(columns) == len(ROLES) * k * len(names) and all(block.start <= c < block.stop for c in columns)
    wanted = sorted(CANDIDATE_NUMBERS.index(n) for n in names)
    family = env.builder.skeleton[0]
    got = obs["agent_0"][OBS_KEY][columns].reshape(len(ROLES), k, len(names))
    checked = 0
    for r, role in enumerate(ROLES):
        for j, duty in enumerate(env.task.candidates[role][:k]):
            numbers = view.numbers(role, duty, view.home(role, duty))[wanted]
            expected = numbers if family_of(role) is family else np.zeros(len(names))
            np.testing.assert_allclose(
                got[r, j], np.clip(expected, -CLIP, CLIP), atol=1e-6, err_msg=str(duty)
            )
            checked += int(family_of(role) is family)
    assert checked >= 2
    with pytest.raises(ValueError, match="unknown candidate numbers"):
        env.builder.candidate_number_columns(["agree", "prior"])


def reference_actions(env: OrchestrationEnv) -> dict[str, np.ndarray]:
    """The actions that write the task's hidden reference (tests only: agents never see it)."""
    return spec_actions(env.task.reference, env.task, env.layout)


def _play(env: OrchestrationEnv, seed: int, policy) -> tuple[float, dict]:
    obs, _ = env.reset(seed=seed)
    total, infos = 0.0, {}
    while env.agents:
        obs, rewards, _, _, infos = env.step(policy(env, obs))
        total += rewards["agent_0"]
        assert len(set(rewards.values())) == 1
    return total, infos


def _random(env, obs):
    return {a: env.action_space(a).sample(mask=obs[a][MASK_KEY]) for a in env.agents}


def test_episode_return_equals_the_final_score() -> None:
    env = OrchestrationEnv(level=2, rounds=3)
    rounds = iter([_random, lambda e, o: e.expert_actions(), _random])
    total, infos = _play(env, 5, lambda e, o: next(rounds)(e, o))
    assert total == pytest.approx(infos["agent_0"]["metrics"]["score"])


def test_episode_end_infos_carry_float_metrics_for_every_agent() -> None:
    env = OrchestrationEnv(level=3)
    _, infos = _play(env, 2, lambda e, o: reference_actions(e))
    expected = {
        "success",
        "score",
        "r_success",
        "r_efficiency",
        "r_graph",
        "r_process",
        "r_penalty",
        "cache_hit_rate",
    }
    for agent in env.possible_agents:
        metrics = infos[agent]["metrics"]
        assert expected <= set(metrics) and all(isinstance(v, float) for v in metrics.values())
        assert metrics["success"] == 1.0 and metrics["cache_hit_rate"] == 0.5  # round 2 is all hits
        assert infos[agent]["episode"]["seed"] == 2


def test_last_spec_its_yaml_and_its_source_are_kept() -> None:
    env = OrchestrationEnv(level=2, rounds=1)
    _play(env, 8, lambda e, o: e.expert_actions())
    assert parse_spec(env.last_yaml) == env.last_spec == env.solution().spec
    compile(env.last_source, "pipeline.py", "exec")
    assert "def node_0(" in env.last_source and "__main__" in env.last_source


def test_plan_of_is_the_spec_a_round_would_run_and_runs_nothing() -> None:
    env = OrchestrationEnv(level=2, rounds=2)
    env.reset(seed=8)
    expert = env.expert_actions()
    assert env.plan_of(expert) == env.solution().spec
    assert env.last_spec is None  # nothing ran
    env.step(expert)
    assert env.plan_of(expert) == env.last_spec
    idle = {a: np.zeros_like(v) for a, v in expert.items()}  # every agent idle: no pipeline
    assert env.plan_of(idle) is None


def test_feedback_reaches_each_agent_after_a_round() -> None:
    env = OrchestrationEnv(level=2, rounds=2)
    obs, _ = env.reset(seed=4)
    feedback = env.builder.offsets()["feedback"]
    assert not obs["agent_0"][OBS_KEY][feedback].any()
    actions = env.expert_actions()
    actions["agent_2"] = np.zeros(5, dtype=np.int64)  # idle: the output moves to agent_1
    obs, *_ = env.step(actions)
    mine = obs["agent_0"][OBS_KEY][feedback]
    assert mine[0] == 1.0 and mine[-1] == 1.0  # node ran ok, feedback present
    assert obs["agent_2"][OBS_KEY][feedback][1] == 1.0  # idle


@pytest.mark.parametrize("level", [2, 3, 4])
def test_random_specs_rarely_succeed_from_level_two(level: int) -> None:
    env = OrchestrationEnv(level=level, rounds=1)
    wins = sum(_play(env, seed % 10, _random)[1]["agent_0"]["metrics"]["success"] for seed in range(60))
    assert wins / 60 <= 0.05


@pytest.mark.parametrize(
    "bad",
    [
        {"agent_0": np.array([1, 0, 0])},
        {"agent_0": np.array([np.nan, 0, 0, 0, 0])},
        {"agent_0": np.array([99, 0, 0, 0, 0])},
        {"agent_0": np.array([-1, 0, 0, 0, 0])},
        {"agent_0": "filter"},
        {},
    ],
)
def test_malformed_actions_are_penalised_not_raised(bad: dict) -> None:
    env = OrchestrationEnv(level=1, rounds=1)
    env.reset(seed=0)
    _, rewards, terminations, _, infos = env.step(bad)
    assert rewards["agent_0"] < 0 and all(terminations.values())
    assert infos["agent_0"]["metrics"]["valid"] == 0.0 and infos["agent_0"]["spec_errors"]


def test_code_that_raises_is_an_exception_failure_with_a_penalty() -> None:
    env = OrchestrationEnv(level=2, rounds=1)
    env.reset(seed=0)
    fact = set(next(iter(env.task.sources.values())).columns)
    role, index = next(
        (r, j)
        for r in ROLES
        for j, d in enumerate(env.task.candidates[r])
        if r.value != "join" and set(d.columns_read()) - fact
    )  # a column the fact lacks
    idle = np.zeros(5, dtype=np.int64)
    action = np.array([1 + ROLES.index(role), index, 0, 0, 0])  # ... applied to the fact table
    _, rewards, _, _, infos = env.step({"agent_0": action, "agent_1": idle, "agent_2": idle})
    metrics = infos["agent_0"]["metrics"]
    assert metrics["valid"] == 1.0 and metrics["failed"] == 1.0 and metrics["r_penalty"] < 0
    assert rewards["agent_0"] == pytest.approx(metrics["score"])
    assert env._last_execution.nodes["agent_0"].kind == "exception"


def test_non_finite_source_values_keep_observations_finite() -> None:
    env = OrchestrationEnv(level=2, rounds=1)
    env.reset(seed=3)
    task = env.task
    poisoned = {}
    for name, frame in task.sources.items():
        frame = frame.copy()
        for column in frame.select_dtypes("float").columns:
            frame.loc[frame.index[:3], column] = [np.inf, -np.inf, np.nan]
        poisoned[name] = frame
    env._task = dataclasses.replace(task, public=dataclasses.replace(task.public, sources=poisoned))
    part = env.builder.task_features(env._task.public, env._task.candidates)  # and poisoned features
    part[::5], part[1::5], part[2::5] = np.inf, -np.inf, np.nan
    env._task_part = part
    _, _, _, _, infos = env.step(env.expert_actions())
    obs = env._observe("agent_0", None)[OBS_KEY]
    assert np.isfinite(obs).all() and np.abs(obs).max() <= CLIP
    assert np.isfinite(infos["agent_0"]["metrics"]["score"])


def test_reset_seed_picks_the_task_deterministically() -> None:
    a, b = OrchestrationEnv(level=3), OrchestrationEnv(level=3)
    np.testing.assert_array_equal(
        a.reset(seed=9)[0]["agent_1"][OBS_KEY], b.reset(seed=9)[0]["agent_1"][OBS_KEY]
    )
    assert a.task.key.seed == 9 and a.reset(seed=10)[0] is not None and a.task.key.seed == 10


def test_a_task_pool_bounds_the_training_tasks_and_is_validated() -> None:
    env = OrchestrationEnv(level=1, task_pool=3)
    env.reset(seed=0)
    seen = set()
    for _ in range(30):
        env.reset()
        seen.add(env.task.key.seed)
    assert seen <= {0, 1, 2} and len(seen) > 1
    with pytest.raises(ValueError, match="task_pool"):
        OrchestrationEnv(level=1, task_pool=-1)


def test_process_shaping_pays_for_the_public_facts_of_the_output_not_for_the_reference() -> None:
    """``r_process`` = weight * (schema + held) / 2: the output's columns against the target's and
    the share of example rows it holds, what the round-2 feedback shows (never which hidden
    reference stages it reproduces)."""
    env = OrchestrationEnv(level=2, rounds=1)
    weight = env.reward_config.process_weight
    env.reset(seed=3)
    expert = reference_actions(env)
    env.step(expert)
    full = env.last_score
    assert full.success == 1.0 and full.r_process == pytest.approx(weight)
    env.reset(seed=3)
    env.step({**expert, env.possible_agents[-1]: np.zeros(5, dtype=np.int64)})  # output node idle
    partial, output = env.last_score, env._last_execution.output
    target = set(env.task.public.target_columns)
    columns = {str(c) for c in output.columns}
    schema = len(columns & target) / len(columns | target)
    assert columns != target and 0 < schema < 1  # the wrong columns: no example row can be held
    assert partial.success == 0.0 and partial.r_process == pytest.approx(weight * schema / 2)


def test_the_registry_builds_the_env_and_names_unknown_kwargs() -> None:
    env = make_env("orchestration", level=2, rounds=1, reward_schedule=0.5)
    assert isinstance(env, OrchestrationEnv) and env.rounds == 1 and env.reward_config.schedule == 0.5
    with pytest.raises(EnvKwargError, match="colour"):
        make_env("orchestration", colour="red")


@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_padded_layout_shares_level_four_spaces_and_keeps_the_expert_exact(level: int) -> None:
    padded = OrchestrationEnv(level=level, rounds=1, layout_level=4)
    widest = OrchestrationEnv(level=4, rounds=1)
    agent = padded.possible_agents[0]
    assert len(padded.possible_agents) == LEVELS[level].agents
    assert padded.observation_space(agent) == widest.observation_space(agent)
    assert padded.action_space(agent) == widest.action_space(agent)
    total, infos = _play(padded, 4, lambda e, o: reference_actions(e))
    assert infos[agent]["metrics"]["success"] == 1.0 and total >= 0.99
    _, plain = _play(OrchestrationEnv(level=level, rounds=1), 4, lambda e, o: e.expert_actions())
    _, wide = _play(padded, 4, lambda e, o: e.expert_actions())
    assert set(padded.expert_actions()) == set(padded.possible_agents)  # no action for a padded slot
    assert wide[agent]["metrics"]["success"] == plain[agent]["metrics"]["success"]
    parallel_api_test(OrchestrationEnv(level=level, layout_level=4), num_cycles=10)


def test_a_layout_smaller_than_the_level_is_refused() -> None:
    with pytest.raises(ValueError, match="layout_level must be a level >= level"):
        OrchestrationEnv(level=3, layout_level=2)


def test_a_new_best_episode_hands_over_its_spec_and_pipeline() -> None:
    env = OrchestrationEnv(level=1, rounds=1)
    _, infos = _play(env, 3, lambda e, o: e.expert_actions())
    files = infos["agent_0"]["artifacts"]
    assert parse_spec(files["spec.yaml"]) == env.last_spec
    assert "def node_0(" in files["pipeline.py"]
    _, again = _play(env, 3, lambda e, o: e.expert_actions())  # not better: nothing new to hand over
    assert "artifacts" not in again["agent_0"]
