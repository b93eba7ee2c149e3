"""The bridge from a registered PettingZoo env to RLlib's ``MultiAgentEnv``.

RLlib builds envs from ``config.environment(env=RegisteredEnv, env_config={...})`` on every env
runner, local or remote; the class is imported from the installed package there, so remote nodes
need nothing from the driver's working directory.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

from orchestrl.envs.registry import make_env
from orchestrl.envs.spaces import OBS_KEY


def env_config(name: str, kwargs: dict[str, Any], agent_id_in_obs: bool = False) -> dict[str, Any]:
    """The ``env_config`` dict RLlib hands to :class:`RegisteredEnv`."""
    return {"name": name, "kwargs": dict(kwargs), "agent_id_in_obs": agent_id_in_obs}


class RegisteredEnv(ParallelPettingZooEnv):
    """A registered env, optionally with a one-hot agent id appended to each observation."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.raw_env = make_env(config["name"], **config.get("kwargs", {}))
        super().__init__(self.raw_env)
        self._with_id = bool(config.get("agent_id_in_obs", False))
        if self._with_id:
            self._order = sorted(self.possible_agents)
            self._ids = {a: np.eye(len(self._order), dtype=np.float32)[i] for i, a in enumerate(self._order)}
            self.observation_space = gym.spaces.Dict(
                {a: _with_id_space(sp, len(self._order)) for a, sp in self.observation_space.spaces.items()}
            )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, infos = super().reset(seed=seed, options=options)
        return self._add_ids(obs), infos

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        return self._add_ids(obs), rewards, terminateds, truncateds, infos

    def _add_ids(self, obs: dict[str, Any]) -> dict[str, Any]:
        if not self._with_id:
            return obs
        return {a: _with_id(o, self._ids[a]) for a, o in obs.items()}


def _with_id_space(space: gym.Space, n: int) -> gym.Space:
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({**space.spaces, OBS_KEY: _with_id_space(space[OBS_KEY], n)})
    low = np.concatenate([space.low.reshape(-1), np.zeros(n)]).astype(np.float32)
    high = np.concatenate([space.high.reshape(-1), np.ones(n)]).astype(np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def _with_id(obs: Any, one_hot: np.ndarray) -> Any:
    if isinstance(obs, dict):
        return {**obs, OBS_KEY: _with_id(obs[OBS_KEY], one_hot)}
    return np.concatenate([np.asarray(obs, dtype=np.float32).reshape(-1), one_hot])
