"""A one-step cooperative matrix game for two agents, with the counterfactual protocol.

``agent_0`` picks a row, ``agent_1`` a column; both receive ``payoff[row][col]`` and the episode
ends. Because the reward is a table lookup, every counterfactual question has an exact answer:
editing one agent's action just reads another cell, which is what the credit tests rely on.

Edits (see :mod:`orchestrl.envs.counterfactual`), with actions read as ordered levels:

- ``base_duty``: the agent plays ``base_action`` (its default);
- ``downgrade_capacity``: the agent plays one level lower (``action - 1``);
- ``alternative``: the agent plays the given alternative action;
- ``drop_edge``: not applicable (the game has no dependency graph).

The default payoff is the climbing game (Claus & Boutilier 1998), a classic coordination trap:
the best joint action (0, 0) is surrounded by heavy penalties, so independent learners drift to
the safe (2, 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from orchestrl.envs.counterfactual import CounterfactualOutcome, Edit, EditFamily, EditNotApplicable

CLIMBING_GAME: tuple[tuple[float, ...], ...] = ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0))
AGENTS = ("agent_0", "agent_1")


class MatrixGameEnv(ParallelEnv):
    """Two agents, one simultaneous move, a shared payoff ``payoff[a_0][a_1]``."""

    metadata: ClassVar[dict[str, Any]] = {"name": "matrix_game_v0", "render_modes": []}

    def __init__(
        self, payoff: Sequence[Sequence[float]] | None = None, base_action: int = 0, scale: float = 1.0
    ) -> None:
        table = np.asarray(CLIMBING_GAME if payoff is None else payoff, dtype=np.float64)
        if table.ndim != 2 or min(table.shape) < 1:
            raise ValueError(f"payoff must be a non-empty 2-D table, got shape {table.shape}")
        if not 0 <= base_action < min(table.shape):
            raise ValueError(f"base_action {base_action} is not an action of both agents")
        self.payoff = table * float(scale)
        self.base_action = int(base_action)
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self._n = {AGENTS[0]: table.shape[0], AGENTS[1]: table.shape[1]}
        self._obs_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self._last_joint: dict[str, int] | None = None

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs_space

    def action_space(self, agent: str) -> gym.Space:
        return gym.spaces.Discrete(self._n[agent])

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        obs = {a: np.ones(1, dtype=np.float32) for a in self.agents}
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]):
        joint = {a: int(actions[a]) for a in self.possible_agents}
        reward = self.reward(joint)
        self._last_joint = joint
        success = float(reward >= self.payoff.max() - 1e-9)
        agents, self.agents = self.agents, []
        obs = {a: np.ones(1, dtype=np.float32) for a in agents}
        infos = {a: {"metrics": {"success": success, "payoff": reward}} for a in agents}
        return (
            obs,
            dict.fromkeys(agents, reward),
            dict.fromkeys(agents, True),
            dict.fromkeys(agents, False),
            infos,
        )

    def reward(self, joint: dict[str, int]) -> float:
        return float(self.payoff[joint[AGENTS[0]], joint[AGENTS[1]]])

    # -- the counterfactual protocol ---------------------------------------------------------------
    def counterfactual_spec(self) -> dict[str, int] | None:
        return None if self._last_joint is None else dict(self._last_joint)

    def counterfactual_edits(self, spec: dict[str, int], agent: str) -> list[EditFamily]:
        families = []
        if spec[agent] != self.base_action:
            families.append(EditFamily.BASE_DUTY)
        if spec[agent] > 0:
            families.append(EditFamily.DOWNGRADE_CAPACITY)
        if self._n[agent] > 1:
            families.append(EditFamily.ALTERNATIVE)
        return families

    def counterfactual(self, spec: dict[str, int], agent: str, edit: Edit) -> CounterfactualOutcome:
        if edit.family not in self.counterfactual_edits(spec, agent):
            raise EditNotApplicable(f"{edit.family} changes nothing for {agent} at {spec}")
        if edit.family is EditFamily.BASE_DUTY:
            action = self.base_action
        elif edit.family is EditFamily.DOWNGRADE_CAPACITY:
            action = spec[agent] - 1
        else:
            action = int(edit.action)
            if not 0 <= action < self._n[agent]:
                raise EditNotApplicable(f"alternative {action} is not an action of {agent}")
        reward = self.reward({**spec, agent: action})
        return CounterfactualOutcome(reward=reward, base_reward=self.reward(spec), terms={"payoff": reward})
