"""Every registered env passes PettingZoo's parallel API test and builds through the RLlib bridge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from orchestrl.envs.registry import ENVS, make_env
from orchestrl.envs.rllib_env import RegisteredEnv, env_config


def small_kwargs(name: str, tmp_path: Path) -> dict[str, Any]:
    """Cheap settings per family, so the API test stays fast."""
    family = ENVS[name].family
    if family == "mpe":
        return {"max_cycles": 10}
    if name == "orchestration_planning":
        return {"task_pool": 3}
    if family == "orchestration":
        return {"level": 1}
    if family == "text2sql":
        return {"data_dir": str(tmp_path / "t2s")}
    return {}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_registered_env_passes_parallel_api_test(name: str, tmp_path: Path) -> None:
    env = make_env(name, **small_kwargs(name, tmp_path))
    try:
        parallel_api_test(env, num_cycles=20)
    finally:
        env.close()


@pytest.mark.parametrize("name", sorted(n for n, e in ENVS.items() if e.family == "mpe"))
def test_agent_id_is_appended_to_each_observation(name: str) -> None:
    plain = RegisteredEnv(env_config(name, {"max_cycles": 5}))
    tagged = RegisteredEnv(env_config(name, {"max_cycles": 5}, agent_id_in_obs=True))
    obs_plain, _ = plain.reset(seed=3)
    obs_tagged, _ = tagged.reset(seed=3)
    order = sorted(tagged.possible_agents)
    for i, agent in enumerate(order):
        expected_id = np.eye(len(order))[i]
        np.testing.assert_array_equal(obs_tagged[agent][-len(order) :], expected_id)
        np.testing.assert_allclose(obs_tagged[agent][: -len(order)], obs_plain[agent])
        assert tagged.observation_space[agent].contains(obs_tagged[agent])
    plain.close()
    tagged.close()
