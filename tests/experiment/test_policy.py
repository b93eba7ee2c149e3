"""TrainedPolicy: a checkpoint's modules acting as RLlib's own env runner acts with explore=False,
for every algorithm, and observations checked field by field (in-process, no Ray)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from deploy_helpers import tiny, write_run

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import ObservationError, PolicyError, TrainedPolicy
from orchestrl.training.inprocess import InProcessTrainer


@pytest.mark.parametrize(
    ("algo", "env"),
    [
        ("ippo", "simple_spread"),
        ("mappo", "simple_spread"),
        ("coma", "simple_spread"),
        ("lemon", "matrix_game"),
        ("neuromas", "simple_spread"),
    ],
)
def test_act_matches_the_env_runners_greedy_actions(algo: str, env: str, make_run, tmp_path: Path) -> None:
    ppo = build_ppo_config(validate_config(tiny(algo, env)))
    trainer = InProcessTrainer(ppo)
    try:
        trainer.step()  # weights that are not the initial ones
        policy = TrainedPolicy.from_checkpoint(make_run(tiny(algo, env), trainer), ppo)
        (episode,) = trainer.runner.sample(num_episodes=1, explore=False)
        steps = 0
        for t in range(len(episode)):
            observations = episode.get_observations(t)
            expected = episode.get_actions(t)
            got = policy.act(observations)
            assert set(got) == set(expected)
            for agent, action in got.items():
                np.testing.assert_array_equal(np.asarray(action), np.asarray(expected[agent]), err_msg=agent)
            steps += 1
        assert steps == (1 if env == "matrix_game" else 5)
        # the policy folder (what the MLflow model holds) acts the same
        reloaded = TrainedPolicy.load(policy.save(tmp_path / "policy"))
        first = episode.get_observations(0)
        assert reloaded.act(first).keys() == policy.act(first).keys()
        for agent, action in reloaded.act(first).items():
            np.testing.assert_array_equal(np.asarray(action), np.asarray(policy.act(first)[agent]))
    finally:
        trainer.stop()


@pytest.fixture(scope="module")
def matrix_policy(tmp_path_factory: pytest.TempPathFactory) -> TrainedPolicy:
    data = tiny("ippo", "matrix_game")
    checkpoint = write_run(tmp_path_factory.mktemp("runs"), data)
    return TrainedPolicy.from_checkpoint(checkpoint, build_ppo_config(validate_config(data)))


@pytest.mark.parametrize(
    ("observations", "field", "message"),
    [
        ([0.5], "observations", "expected an object of agent -> observation"),
        ({}, "observations", "expected an object of agent -> observation"),
        ({"agent_9": [0.5]}, "observations.agent_9", "unknown agent (agents: agent_0, agent_1)"),
        ({"agent_0": [0.5, 0.5]}, "observations.agent_0", "expected shape [1], got [2]"),
        ({"agent_0": ["a"]}, "observations.agent_0", "expected numbers for Box(0.0, 1.0, (1,), float32)"),
        ({"agent_0": "0.5"}, "observations.agent_0", "got a string"),
        ({"agent_0": [float("nan")]}, "observations.agent_0", "holds NaN or infinite values"),
        ({"agent_0": [2.0]}, "observations.agent_0", "outside Box(0.0, 1.0, (1,), float32)"),
    ],
)
def test_a_bad_observation_names_its_field(
    matrix_policy: TrainedPolicy, observations: object, field: str, message: str
) -> None:
    with pytest.raises(ObservationError) as err:
        matrix_policy.observations(observations)
    assert err.value.field == field
    assert message in err.value.message


def test_a_good_observation_is_checked_and_acted_on(matrix_policy: TrainedPolicy) -> None:
    checked = matrix_policy.observations({"agent_0": [0.0], "agent_1": [1]})
    assert checked["agent_1"].dtype == np.float32
    actions = matrix_policy.act(checked)
    assert set(actions) == {"agent_0", "agent_1"}
    assert all(isinstance(a, int) and 0 <= a < 3 for a in actions.values())


def test_a_checkpoint_of_another_env_shape_is_refused(make_run) -> None:
    checkpoint = make_run(tiny("ippo"))  # simple_spread N=2: 12 observations per agent
    data = tiny("ippo")
    data["env"]["kwargs"]["N"] = 3
    wider = build_ppo_config(validate_config(data))
    with pytest.raises(PolicyError, match=r"module 'shared' was trained on observations Box\(.*\(12,\)"):
        TrainedPolicy.from_checkpoint(checkpoint, wider)


def test_act_fresh_plays_the_team_s_next_most_likely_joint_action_when_the_greedy_one_ran(
    matrix_policy: TrainedPolicy,
) -> None:
    import torch
    from ray.rllib.core.columns import Columns

    obs = matrix_policy.observations({"agent_0": [0.0], "agent_1": [1]})
    greedy = matrix_policy.act(obs)
    assert matrix_policy.act_fresh(obs, lambda joint: True) == greedy
    assert matrix_policy.act_fresh(obs, lambda joint: False) == greedy  # nothing fresh: greedy
    drops = {}  # (agent, action) -> log pi(action) - log pi(greedy action)
    for agent, o in obs.items():
        module = matrix_policy.module[matrix_policy.agents[agent]]
        with torch.no_grad():
            logits = module.forward_inference({Columns.OBS: torch.as_tensor(o[None])})
        logp = torch.log_softmax(logits[Columns.ACTION_DIST_INPUTS][0], -1)
        drops |= {(agent, a): float(logp[a] - logp[greedy[agent]]) for a in range(3) if a != greedy[agent]}
    ranked = sorted(drops, key=lambda k: -drops[k])
    tried = [dict(greedy)]
    for agent, action in ranked[:2]:  # one agent's next guess at a time, most likely first
        chosen = matrix_policy.act_fresh(obs, lambda joint: joint not in tried)
        assert chosen == {**greedy, agent: action}
        tried.append(chosen)


def test_act_fresh_refuses_a_module_that_cannot_rank_alternatives() -> None:
    ppo = build_ppo_config(validate_config(tiny("neuromas", "simple_spread")))
    trainer = InProcessTrainer(ppo)
    try:
        policy = TrainedPolicy(module=trainer.learner.module, agents=dict(ppo.policy_mapping_fn.table))
        (episode,) = trainer.runner.sample(num_episodes=1, explore=False)
        with pytest.raises(PolicyError, match="cannot rank alternative actions"):
            policy.act_fresh(episode.get_observations(0), lambda joint: False)
    finally:
        trainer.stop()
