"""The clear errors: replay without a counterfactual env, agents that skip steps, bad knobs."""

from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
from credit_helpers import tiny
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

from orchestrl.algorithms.joint_columns import AddJointColumns
from orchestrl.algorithms.lemon.replay import ReplayCallbacks
from orchestrl.envs.spaces import NotSimultaneousError
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import ConfigError, validate_config


def test_replay_on_an_env_without_counterfactual_api_fails_at_build_in_one_line() -> None:
    cfg = validate_config(tiny("lemon", "simple_spread", kwargs={"max_cycles": 5}))
    with pytest.raises(ConfigError) as err:
        build_ppo_config(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert "algorithm.advantage" in message and "simple_spread" in message and "counterfactual" in message


def test_gae_ablation_of_lemon_runs_on_any_env() -> None:
    cfg = validate_config(
        tiny("lemon", "simple_spread", kwargs={"max_cycles": 5}, algorithm={"advantage": "gae"})
    )
    callbacks = [make() for make in build_ppo_config(cfg).callbacks_class]  # as RLlib makes them
    assert not any(isinstance(c, ReplayCallbacks) for c in callbacks)  # no replay


def test_agents_that_skip_steps_are_rejected_with_a_clear_error() -> None:
    obs = np.zeros(1, np.float32)
    episode = MultiAgentEpisode(agent_module_ids={"agent_0": "shared", "agent_1": "shared"})
    episode.add_env_reset(observations={"agent_0": obs})
    episode.add_env_step(
        observations={"agent_0": obs, "agent_1": obs}, actions={"agent_0": 0}, rewards={"agent_0": 1.0}
    )
    episode.add_env_step(
        observations={"agent_0": obs, "agent_1": obs},
        actions={"agent_0": 1, "agent_1": 0},
        rewards={"agent_0": 1.0, "agent_1": 1.0},
        terminateds={"__all__": True},
    )
    piece = AddJointColumns(
        agents=["agent_0", "agent_1"],
        horizon=2,
        action_spaces=dict.fromkeys(["agent_0", "agent_1"], gym.spaces.Discrete(2)),
        with_team=True,
    )
    with pytest.raises(NotSimultaneousError, match="every agent to act at every env step"):
        piece(rl_module=None, batch={}, episodes=[episode], shared_data={})


def test_runner_refuses_an_env_without_the_protocol() -> None:
    runner = SimpleNamespace(config=SimpleNamespace(in_evaluation=False))
    vector_env = SimpleNamespace(envs=[SimpleNamespace(unwrapped=object())])
    with pytest.raises(ValueError, match="no counterfactual API"):
        ReplayCallbacks().on_episode_end(episode=MultiAgentEpisode(), env_runner=runner, env=vector_env)


@pytest.mark.parametrize(
    ("algorithm", "culprit"),
    [
        ({"name": "coma", "td_lamda": 0.5}, "algorithm.td_lamda: unknown key"),
        ({"name": "coma", "advantage": "replay"}, "algorithm.advantage"),
        ({"name": "coma", "q_head": "tree"}, "algorithm.q_head"),
        ({"name": "coma", "fit_baseline_scale": True}, "algorithm.fit_baseline_scale: unknown key"),
        ({"name": "coma_cv", "cross_fit_scale": False}, "algorithm.cross_fit_scale: unknown key"),
        ({"name": "lemon", "mix": 1.5}, "algorithm.mix"),
        ({"name": "lemon", "edit_families": ["swap_everything"]}, "algorithm.edit_families.0"),
        ({"name": "lemon", "family_floor": 0.5}, "algorithm.family_floor"),
        ({"name": "lemon", "family_decay": 1.0}, "algorithm.family_decay"),
        ({"name": "lemon", "replay_agents": 0}, "algorithm.replay_agents"),
        ({"name": "lemon", "family_flor": 0.1}, "algorithm.family_flor: unknown key"),
    ],
)
def test_bad_knobs_name_the_key(algorithm: dict, culprit: str) -> None:
    with pytest.raises(ConfigError, match=culprit.replace(".", r"\.")):
        validate_config(tiny(algorithm["name"], algorithm=algorithm), source="x.yaml")
