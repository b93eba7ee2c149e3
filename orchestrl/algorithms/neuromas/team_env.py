"""The team as one joint actor: the RLlib-facing env of NeuroMAS.

A registered simultaneous-move env with agents ``a_1..a_n`` becomes a ``MultiAgentEnv`` with one
agent, ``team``:

- observation: ``Dict({a_i: a_i's observation, "__time__": t / T})``;
- action: ``MultiDiscrete`` = the concatenation of every agent's components (sorted agent order),
  followed by ``message_slots`` components of ``message_vocab`` choices each: the discrete message
  tokens the team's nodes sampled. They are part of the joint action so the policy gradient trains
  them and PPO's ratio covers them; the env ignores them;
- reward: the sum of the agents' rewards (so ``team_return_sum_*`` keeps its meaning);
- infos: ``{"team": {"metrics": <the env's episode metrics>, "agents": <every agent's info>}}``,
  so env-reported metrics still reach ``env/<name>`` (:mod:`orchestrl.envs.reporting`).

It takes the same ``env_config`` as :class:`~orchestrl.envs.rllib_env.RegisteredEnv`, plus the
message keys and the group size below, so evaluation env overrides work unchanged. With a group size
``G > 1`` (NeuroMAS' group baseline, :mod:`.group`) the env poses each task ``G`` times running: every
``G``-th reset draws a task seed from the env's own generator and the ``G`` resets of the group reseed
the wrapped env with it, so they start the same episode; the reset info names the group
(``{"team": {"group": <task seed>}}``). An env with the counterfactual API
(:mod:`orchestrl.envs.counterfactual`) keeps it through the wrapper, per env agent: what NeuroMAS'
counterfactual credit re-executes (:mod:`.credit`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from orchestrl.envs.counterfactual import (
    CounterfactualOutcome,
    Edit,
    NoCounterfactualAPIError,
    supports_counterfactual,
)
from orchestrl.envs.registry import get_env
from orchestrl.envs.rllib_env import RegisteredEnv
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY, NotSimultaneousError

TEAM = "team"
TIME_KEY = "__time__"
MESSAGE_SLOTS_KEY = "neuromas_message_slots"
MESSAGE_VOCAB_KEY = "neuromas_message_vocab"
GROUP_SIZE_KEY = "neuromas_group_size"
GROUP_INFO = "group"
"""The team's reset-info key naming the episode's group (only with a group size above 1)."""


def ungrouped(env_config: dict[str, Any]) -> dict[str, Any]:
    """``env_config`` posing every task once (demonstrations and evaluation draw distinct tasks)."""
    return {k: v for k, v in env_config.items() if k != GROUP_SIZE_KEY}


def agent_nvec(space: gym.Space, agent: str) -> tuple[int, ...]:
    if isinstance(space, gym.spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
    raise ValueError(f"neuromas needs Discrete or MultiDiscrete actions; agent '{agent}' has {space}")


def team_spaces(
    observation_spaces: dict[str, gym.Space],
    action_spaces: dict[str, gym.Space],
    message_slots: int = 0,
    message_vocab: int = 1,
) -> tuple[gym.spaces.Dict, gym.spaces.MultiDiscrete]:
    """The team agent's observation and action spaces (agents in sorted order)."""
    agents = sorted(observation_spaces)
    obs = gym.spaces.Dict(
        {**{a: observation_spaces[a] for a in agents}, TIME_KEY: gym.spaces.Box(0.0, 1.0, (1,), np.float32)}
    )
    nvec = [n for a in agents for n in agent_nvec(action_spaces[a], a)] + [message_vocab] * message_slots
    return obs, gym.spaces.MultiDiscrete(np.array(nvec, dtype=np.int64))


class NeuromasTeamEnv(MultiAgentEnv):
    """One ``team`` agent acting for every agent of a registered env (see the module docstring)."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = dict(config or {})
        self.inner = RegisteredEnv(config)
        self.env_agents = sorted(self.inner.possible_agents)
        self.nvecs = {a: agent_nvec(self.inner.action_space[a], a) for a in self.env_agents}
        self.horizon = max(1, get_env(config["name"]).horizon(config.get("kwargs", {})))
        slots, vocab = int(config.get(MESSAGE_SLOTS_KEY, 0)), int(config.get(MESSAGE_VOCAB_KEY, 1))
        obs_space, act_space = team_spaces(
            {a: self.inner.observation_space[a] for a in self.env_agents},
            {a: self.inner.action_space[a] for a in self.env_agents},
            slots,
            vocab,
        )
        self.possible_agents = [TEAM]
        self.agents = [TEAM]
        self.observation_space = gym.spaces.Dict({TEAM: obs_space})
        self.action_space = gym.spaces.Dict({TEAM: act_space})
        self._t = 0
        self._last_obs: dict[str, Any] = {}
        self.group_size = int(config.get(GROUP_SIZE_KEY, 1))
        if self.group_size < 1:
            raise ValueError(f"{GROUP_SIZE_KEY}: a group poses a task at least once, got {self.group_size}")
        self._group_rng = np.random.default_rng()
        self._posed = 0
        self._task_seed = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        group: dict[str, int] = {}
        if self.group_size > 1:  # the wrapped env starts the group's task again
            if seed is not None:
                self._group_rng, self._posed = np.random.default_rng(seed), 0
            if self._posed % self.group_size == 0:
                self._task_seed = int(self._group_rng.integers(2**62))
            self._posed += 1
            seed, group = self._task_seed, {GROUP_INFO: self._task_seed}
        obs, infos = self.inner.reset(seed=seed, options=options)
        self._t = 0
        return {TEAM: self._team_obs(obs)}, {TEAM: {"agents": infos, **group}}

    def step(self, action_dict: dict[str, Any]):
        actions = self.split_action(action_dict[TEAM])
        obs, rewards, terminateds, truncateds, infos = self.inner.step(actions)
        self._t += 1
        done = bool(terminateds.get("__all__", False))
        cut = bool(truncateds.get("__all__", False))
        team_info: dict[str, Any] = {"agents": {a: i for a, i in infos.items() if a != "__common__"}}
        for info in team_info["agents"].values():
            if isinstance(info, dict) and isinstance(info.get("metrics"), dict):
                team_info["metrics"] = dict(info["metrics"])
                break
        reward = float(sum(float(r) for r in rewards.values()))
        if (done or cut) and not all(a in obs for a in self.env_agents):
            team_obs = {**self._last_obs, TIME_KEY: self._time()}  # some envs send no final obs
        else:
            team_obs = self._team_obs(obs)
        return (
            {TEAM: team_obs},
            {TEAM: reward},
            {TEAM: done, "__all__": done},
            {TEAM: cut, "__all__": cut},
            {TEAM: team_info},
        )

    # -- counterfactuals: the env's own, per env agent ---------------------------------------------
    def counterfactual_spec(self) -> Any:
        return self._counterfactual_env().counterfactual_spec()

    def counterfactual_edits(self, spec: Any, agent: str) -> Any:
        return self._counterfactual_env().counterfactual_edits(spec, agent)

    def counterfactual(self, spec: Any, agent: str, edit: Edit) -> CounterfactualOutcome:
        return self._counterfactual_env().counterfactual(spec, agent, edit)

    def _counterfactual_env(self) -> Any:
        raw = self.inner.raw_env
        if not supports_counterfactual(raw):
            raise NoCounterfactualAPIError(f"env '{type(raw).__name__}' has no counterfactual API")
        return raw

    # -- joint actions -------------------------------------------------------------------------
    def split_action(self, action: Any) -> dict[str, np.ndarray]:
        """The team's flat action -> one action per env agent (message tokens dropped)."""
        flat = np.asarray(action, dtype=np.int64).reshape(-1)
        out, offset = {}, 0
        for a in self.env_agents:
            n = len(self.nvecs[a])
            part = flat[offset : offset + n]
            space = self.inner.action_space[a]
            out[a] = int(part[0]) if isinstance(space, gym.spaces.Discrete) else part.copy()
            offset += n
        return out

    def join_actions(self, actions: dict[str, Any]) -> np.ndarray:
        """One action per env agent -> the env part of the team's flat action."""
        return np.concatenate([np.asarray(actions[a], dtype=np.int64).reshape(-1) for a in self.env_agents])

    def expert_actions(self) -> np.ndarray:
        """The env expert's joint action (env part only), for behaviour cloning."""
        expert = getattr(self.inner.raw_env, "expert_actions", None)
        if expert is None:
            raise AttributeError(f"env '{type(self.inner.raw_env).__name__}' has no expert_actions()")
        return self.join_actions(expert())

    def team_expert(self) -> dict[str, np.ndarray]:
        """The expert's joint action as the team agent's action (message slots left at token 0)."""
        slots = int(np.asarray(self.action_space[TEAM].nvec).size) - sum(len(v) for v in self.nvecs.values())
        return {TEAM: np.concatenate([self.expert_actions(), np.zeros(slots, dtype=np.int64)])}

    def close(self) -> None:
        self.inner.close()

    # -- internals -----------------------------------------------------------------------------
    def _team_obs(self, obs: dict[str, Any]) -> dict[str, Any]:
        missing = [a for a in self.env_agents if a not in obs]
        if missing:
            raise NotSimultaneousError(
                f"agents {missing} did not observe this step: neuromas needs every agent at every step"
            )
        team = {a: obs[a] for a in self.env_agents}
        team[TIME_KEY] = self._time()
        self._last_obs = team
        return team

    def _time(self) -> np.ndarray:
        return np.array([min(self._t / self.horizon, 1.0)], dtype=np.float32)


def split_observation(obs: Any) -> tuple[Any, Any]:
    """One agent's observation -> (flat features, action mask or None)."""
    if isinstance(obs, dict):
        return obs[OBS_KEY], obs.get(MASK_KEY)
    return obs, None
