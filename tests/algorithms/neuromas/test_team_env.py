"""The team env: one joint actor in front of a registered simultaneous-move env."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrl.algorithms.neuromas.team_env import (
    MESSAGE_SLOTS_KEY,
    MESSAGE_VOCAB_KEY,
    TEAM,
    TIME_KEY,
    NeuromasTeamEnv,
)
from orchestrl.envs.reporting import episode_metrics
from orchestrl.envs.rllib_env import env_config
from orchestrl.envs.spaces import NotSimultaneousError
from orchestrl.envs.text2sql.actions import COMPOSER, EXTRACTOR, NVEC


@pytest.fixture
def text2sql(t2s_data_dir) -> NeuromasTeamEnv:
    config = env_config("text2sql", {"data_dir": str(t2s_data_dir)})
    env = NeuromasTeamEnv({**config, MESSAGE_SLOTS_KEY: 3, MESSAGE_VOCAB_KEY: 8})
    yield env
    env.inner.close()


def test_the_team_observes_every_agent_and_acts_for_all(text2sql: NeuromasTeamEnv) -> None:
    obs, _ = text2sql.reset(seed=0)
    assert list(obs) == [TEAM]
    assert set(obs[TEAM]) == {EXTRACTOR, COMPOSER, TIME_KEY}
    assert text2sql.observation_space[TEAM].contains(obs[TEAM])
    nvec = text2sql.action_space[TEAM].nvec.tolist()
    assert nvec == [*NVEC[EXTRACTOR], *NVEC[COMPOSER], 8, 8, 8]  # sorted agents, then message tokens


def test_the_expert_scores_and_its_metrics_reach_the_team_info(text2sql: NeuromasTeamEnv) -> None:
    text2sql.reset(seed=1)
    expert = text2sql.expert_actions()
    action = np.concatenate([expert, [5, 0, 7]])  # message tokens are ignored by the env
    _, rewards, terminated, _, infos = text2sql.step({TEAM: action})
    assert rewards[TEAM] == pytest.approx(2.0)  # both agents' reward of 1, summed
    assert terminated["__all__"]
    assert episode_metrics(infos)["success"] == 1.0  # what the platform logs as env/success
    assert set(infos[TEAM]["agents"]) == {EXTRACTOR, COMPOSER}


def test_split_and_join_are_inverse(text2sql: NeuromasTeamEnv) -> None:
    text2sql.reset(seed=2)
    expert = text2sql.expert_actions()
    split = text2sql.split_action(np.concatenate([expert, [0, 0, 0]]))
    np.testing.assert_array_equal(text2sql.join_actions(split), expert)


def test_mpe_discrete_agents_get_plain_ints_and_time_advances() -> None:
    env = NeuromasTeamEnv(env_config("simple_speaker_listener", {"max_cycles": 5}))
    obs, _ = env.reset(seed=0)
    assert obs[TEAM][TIME_KEY][0] == 0.0
    split = env.split_action(np.array([2, 1]))
    assert split == {"listener_0": 2, "speaker_0": 1}
    obs, *_ = env.step({TEAM: np.array([2, 1])})
    assert obs[TEAM][TIME_KEY][0] == pytest.approx(0.2)


def test_an_env_that_skips_agents_is_refused(text2sql: NeuromasTeamEnv) -> None:
    with pytest.raises(NotSimultaneousError, match="every agent at every step"):
        text2sql._team_obs({EXTRACTOR: {}})
