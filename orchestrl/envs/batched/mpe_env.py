"""N copies of an MPE scenario stepped as tensors, behind the interfaces orchestrl and RLlib use.

- :class:`BatchedMpe`: the copies themselves (state, step, reset of any subset, seeding), built on
  the maths of :mod:`orchestrl.envs.batched.mpe`.
- :class:`BatchedMpeParallelEnv`: one copy as a PettingZoo ``ParallelEnv`` (what the registry's
  factory returns, so a batched env works wherever a registered env does).
- :class:`BatchedMpeVectorEnv`: all copies as RLlib's ``VectorMultiAgentEnv``. It has RLlib's list
  interface (one dict per copy, the next-step auto-reset of ``SyncVectorMultiAgentEnv``), so RLlib's
  own ``MultiAgentEnvRunner._sample`` can step it, and the tensor interface
  (:class:`~orchestrl.envs.batched.runner.TensorVectorEnv`) that
  :class:`~orchestrl.envs.batched.runner.BatchedEnvRunner` steps without a Python loop over copies.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pettingzoo import ParallelEnv
from ray.rllib.env.multi_agent_env import MultiAgentEnv
from ray.rllib.env.vector.vector_multi_agent_env import VectorMultiAgentEnv

from orchestrl.envs.batched import mpe
from orchestrl.envs.batched.runner import TensorStep


class BatchedMpe:
    """``num_envs`` copies of one scenario (see :mod:`orchestrl.envs.batched.mpe` for the maths).

    ``world`` and ``steps`` are plain tensors: a test may write a state into them (e.g. mpe2's).
    Observations may end with a one-hot agent id (``agent_id_in_obs``), like
    :class:`~orchestrl.envs.rllib_env.RegisteredEnv` appends it.
    """

    def __init__(self, scenario: mpe.Scenario, num_envs: int = 1, agent_id_in_obs: bool = False) -> None:
        self.scenario = scenario
        self.num_envs = int(num_envs)
        self.agents = list(scenario.agents)
        self.agent_id_in_obs = agent_id_in_obs
        self.generator = torch.Generator()
        self.generator.seed()
        self.world = scenario.initial(self.num_envs, self.generator)
        self.steps = torch.zeros(self.num_envs, dtype=torch.int64)
        n_agents = len(self.agents)
        self._ids = [
            torch.eye(n_agents, dtype=torch.float32)[i].expand(self.num_envs, n_agents)
            for i in range(n_agents)
        ]
        dims = [int(o.shape[1]) for o in self.observe()]
        self.observation_spaces = {
            a: gym.spaces.Box(-np.inf, np.inf, (d,), np.float32)
            for a, d in zip(self.agents, dims, strict=True)
        }
        self.action_spaces = {
            a: gym.spaces.Discrete(n) for a, n in zip(self.agents, scenario.action_sizes(), strict=True)
        }

    def seed(self, seed: int | None) -> None:
        """Reseeds the copies' random stream (None: from the OS)."""
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    def reset(self, seed: int | None = None, mask: torch.Tensor | None = None) -> None:
        """Fresh copies: all of them, or those in ``mask`` (``[N]`` bool); seeding first if given."""
        if seed is not None:
            self.seed(seed)
        fresh = self.scenario.initial(self.num_envs, self.generator)
        if mask is None:
            self.world, self.steps = fresh, torch.zeros_like(self.steps)
        else:
            self.world = self.world.where(mask, fresh)
            self.steps = torch.where(mask, 0, self.steps)

    def observe(self) -> list[torch.Tensor]:
        """Each agent's ``[N, D]`` float32 observation, in ``agents`` order."""
        obs = [o.to(torch.float32) for o in self.scenario.observe(self.world)]
        if self.agent_id_in_obs:
            obs = [torch.cat([o, one_hot], dim=1) for o, one_hot in zip(obs, self._ids, strict=True)]
        return obs

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Steps every copy under ``actions`` (``[N, A]`` int64); returns rewards ``[N, A]`` (float32),
        terminated and truncated (``[N]`` bool), as mpe2 decides them (truncation first)."""
        self.world = mpe.step_world(self.scenario, self.world, actions)
        self.steps = self.steps + 1
        rewards = self.scenario.rewards(self.world).to(torch.float32)
        truncated = self.steps >= self.scenario.max_cycles
        terminal = self.scenario.terminal(self.world)
        terminated = torch.zeros_like(truncated) if terminal is None else terminal & ~truncated
        return rewards, terminated, truncated


class BatchedMpeParallelEnv(ParallelEnv):
    """One copy of a batched MPE scenario as a PettingZoo ``ParallelEnv``."""

    def __init__(self, scenario: mpe.Scenario) -> None:
        self.sim = BatchedMpe(scenario, num_envs=1)
        self.possible_agents = list(self.sim.agents)
        self.agents: list[str] = []
        self.observation_spaces = self.sim.observation_spaces
        self.action_spaces = self.sim.action_spaces
        self.metadata = {"name": f"{scenario.name}_batched", "is_parallelizable": True, "render_modes": []}

    def observation_space(self, agent: str) -> gym.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self.sim.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        acts = torch.tensor([[int(actions[a]) for a in self.possible_agents]], dtype=torch.int64)
        rewards, terminated, truncated = self.sim.step(acts)
        obs = self._obs()
        term, trunc = bool(terminated[0]), bool(truncated[0])
        rew = {a: float(r) for a, r in zip(self.possible_agents, rewards[0].tolist(), strict=True)}
        out = (
            obs,
            rew,
            {a: term for a in self.agents},
            {a: trunc for a in self.agents},
            {a: {} for a in self.agents},
        )
        if term or trunc:
            self.agents = []
        return out

    def state(self) -> np.ndarray:
        return np.concatenate(list(self._obs().values()))

    def _obs(self) -> dict[str, np.ndarray]:
        return {a: o[0].numpy() for a, o in zip(self.possible_agents, self.sim.observe(), strict=True)}


class _CopySpaces(MultiAgentEnv):
    """What RLlib asks of one sub-env of a vector env: its agents and spaces (no stepping)."""

    def __init__(self, sim: BatchedMpe) -> None:
        super().__init__()
        self.agents = self.possible_agents = list(sim.agents)
        self.observation_spaces = dict(sim.observation_spaces)
        self.action_spaces = dict(sim.action_spaces)


class BatchedMpeVectorEnv(VectorMultiAgentEnv):
    """All copies of a batched MPE scenario as RLlib's ``VectorMultiAgentEnv`` (module docstring)."""

    def __init__(self, scenario: mpe.Scenario, num_envs: int, agent_id_in_obs: bool = False) -> None:
        self.sim = BatchedMpe(scenario, num_envs=num_envs, agent_id_in_obs=agent_id_in_obs)
        self.num_envs = self.sim.num_envs
        self.possible_agents = list(self.sim.agents)
        self.envs = [_CopySpaces(self.sim)] * self.num_envs
        self.single_observation_spaces = dict(self.sim.observation_spaces)
        self.single_action_spaces = dict(self.sim.action_spaces)
        self.single_observation_space = gym.spaces.Dict(self.single_observation_spaces)
        self.single_action_space = gym.spaces.Dict(self.single_action_spaces)
        self.observation_space = self.single_observation_space
        self.action_space = self.single_action_space
        self.metadata = {"autoreset_mode": "next_step"}
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool)

    # The tensor interface (BatchedEnvRunner).

    def reset_tensors(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        """Resets every copy; each agent's ``[N, D]`` observations."""
        self.sim.reset(seed=seed)
        self._autoreset[:] = False
        return dict(zip(self.possible_agents, self.sim.observe(), strict=True))

    def step_tensors(self, actions: dict[str, torch.Tensor]) -> TensorStep:
        """Steps every copy; copies that end are reset at once (their first observation is in
        ``next_obs``, their last in ``obs``)."""
        acts = torch.stack([actions[a] for a in self.possible_agents], dim=1)
        rewards, terminated, truncated = self.sim.step(acts)
        obs = dict(zip(self.possible_agents, self.sim.observe(), strict=True))
        done = terminated | truncated
        next_obs = obs
        if bool(done.any()):
            self.sim.reset(mask=done)
            next_obs = dict(zip(self.possible_agents, self.sim.observe(), strict=True))
        return TensorStep(obs, rewards, terminated, truncated, next_obs)

    # RLlib's list interface (MultiAgentEnvRunner._sample).

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[list, list]:
        obs = self.reset_tensors(seed=seed)
        return self._per_copy(obs), [{} for _ in range(self.num_envs)]

    def step(self, actions: list[dict[str, Any]]) -> tuple[list, list, list, list, list]:
        agents = self.possible_agents
        acts = torch.tensor(
            [[int(a.get(aid, 0)) for aid in agents] for a in actions], dtype=torch.int64
        ).view(self.num_envs, len(agents))
        restart = self._autoreset
        rewards, terminated, truncated = self.sim.step(acts)
        if bool(restart.any()):
            self.sim.reset(mask=restart)
            rewards = torch.where(restart[:, None], 0.0, rewards)
            terminated, truncated = terminated & ~restart, truncated & ~restart
        obs = self._per_copy(dict(zip(agents, self.sim.observe(), strict=True)))
        self._autoreset = terminated | truncated
        rew, term, trunc = rewards.tolist(), terminated.tolist(), truncated.tolist()
        return (
            obs,
            [dict(zip(agents, r, strict=True)) for r in rew],
            [{**dict.fromkeys(agents, t), "__all__": t} for t in term],
            [{**dict.fromkeys(agents, t), "__all__": t} for t in trunc],
            [{} for _ in range(self.num_envs)],
        )

    def _per_copy(self, obs: dict[str, torch.Tensor]) -> list[dict[str, np.ndarray]]:
        arrays = {a: o.numpy() for a, o in obs.items()}
        return [{a: arrays[a][i] for a in self.possible_agents} for i in range(self.num_envs)]


SCENARIOS = {
    "simple_spread": mpe.simple_spread,
    "simple_speaker_listener": mpe.simple_speaker_listener,
    "simple_reference": mpe.simple_reference,
}


def simple_spread(**kwargs: Any) -> BatchedMpeParallelEnv:
    """One copy of the batched simple_spread (kwargs: :func:`orchestrl.envs.batched.mpe.simple_spread`)."""
    return BatchedMpeParallelEnv(mpe.simple_spread(**kwargs))


def simple_speaker_listener(**kwargs: Any) -> BatchedMpeParallelEnv:
    """One copy of the batched simple_speaker_listener."""
    return BatchedMpeParallelEnv(mpe.simple_speaker_listener(**kwargs))


def simple_reference(**kwargs: Any) -> BatchedMpeParallelEnv:
    """One copy of the batched simple_reference."""
    return BatchedMpeParallelEnv(mpe.simple_reference(**kwargs))


def vector_env(
    scenario: str, num_envs: int, agent_id_in_obs: bool = False, **kwargs: Any
) -> BatchedMpeVectorEnv:
    """``num_envs`` copies of ``scenario`` (a key of ``SCENARIOS``) with mpe2's kwargs."""
    return BatchedMpeVectorEnv(SCENARIOS[scenario](**kwargs), num_envs, agent_id_in_obs)


def simple_spread_vector(num_envs: int, agent_id_in_obs: bool = False, **kwargs: Any) -> BatchedMpeVectorEnv:
    """``num_envs`` copies of simple_spread (the registry's ``vector_factory``)."""
    return vector_env("simple_spread", num_envs, agent_id_in_obs, **kwargs)


def simple_speaker_listener_vector(
    num_envs: int, agent_id_in_obs: bool = False, **kwargs: Any
) -> BatchedMpeVectorEnv:
    """``num_envs`` copies of simple_speaker_listener (the registry's ``vector_factory``)."""
    return vector_env("simple_speaker_listener", num_envs, agent_id_in_obs, **kwargs)


def simple_reference_vector(
    num_envs: int, agent_id_in_obs: bool = False, **kwargs: Any
) -> BatchedMpeVectorEnv:
    """``num_envs`` copies of simple_reference (the registry's ``vector_factory``)."""
    return vector_env("simple_reference", num_envs, agent_id_in_obs, **kwargs)
