"""The actor-critic RLModule behind every PPO-based algorithm here (ippo, mappo, coma, lemon).

One class, two switches (in the spirit of TorchRL's ``MultiAgentMLP(centralised=...)``):

- ``critic="local"`` reads the agent's own observation (IPPO);
  ``critic="central"`` reads the ``global_state`` column that a learner connector adds (MAPPO's
  centralised value function, Yu et al. 2022). Either way the critic is learner-only: env runners
  build the module with ``inference_only=True`` and carry no critic weights.
- Observations are a flat ``Box``, or a ``Dict`` with ``observations`` and a factorised 0/1
  ``action_mask`` (one slice per ``MultiDiscrete`` component): masked logits are pushed to a large
  negative number so invalid choices are never sampled and get no gradient.
"""

from __future__ import annotations

import itertools
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchMultiCategorical
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

GLOBAL_STATE = "global_state"
"""The batch column holding the centralised critic's input (added by a learner connector)."""

MASKED_LOGIT = -1e9

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU}


def mlp(sizes: list[int], activation: str, out_gain: float = 1.0) -> nn.Sequential:
    """An MLP with orthogonal init (the PPO implementation detail that matters most)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        linear = nn.Linear(n_in, n_out)
        nn.init.orthogonal_(linear.weight, gain=out_gain if last else np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def flat_obs_dim(space: gym.Space) -> int:
    """Size of the policy-visible part of an observation space."""
    if isinstance(space, gym.spaces.Dict):
        space = space[OBS_KEY]
    return int(np.prod(space.shape))


def action_logit_lens(space: gym.Space) -> list[int]:
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in space.nvec.reshape(-1)]
    raise ValueError(f"actor-critic modules need Discrete or MultiDiscrete actions, got {space}")


class ActorCriticModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """Decentralised actor + local or centralised critic.

    ``model_config`` keys: ``hidden`` (list[int]), ``critic_hidden`` (list[int] | None),
    ``activation``, ``critic`` ("local" | "central"), ``state_dim`` (int, central only),
    ``candidate_features`` (int | None: the observation ends with one row of that many features
    per choice of a one-component action; the actor scores each row, with the part before the
    rows, by one shared MLP).
    """

    def setup(self) -> None:
        cfg = self.model_config
        hidden = list(cfg.get("hidden", [64, 64]))
        activation = cfg.get("activation", "tanh")
        self.logit_lens = action_logit_lens(self.action_space)
        obs_dim = flat_obs_dim(self.observation_space)
        self.row_features = cfg.get("candidate_features")
        if self.row_features:
            self.context_dim = obs_dim - self.logit_lens[0] * int(self.row_features)
            if len(self.logit_lens) != 1 or self.context_dim < 0:
                raise ValueError(
                    f"model.candidate_features: {self.row_features} features per choice need a "
                    f"one-component action and an observation of at least {self.logit_lens[0]} rows of "
                    f"them ({obs_dim} values)"
                )
            rows_in = self.context_dim + int(self.row_features)
            self.actor = mlp([rows_in, *hidden, 1], activation, out_gain=0.01)
        else:
            self.actor = mlp([obs_dim, *hidden, sum(self.logit_lens)], activation, out_gain=0.01)
        self.critic_kind = cfg.get("critic", "local")
        if not self.inference_only:
            critic_in = int(cfg["state_dim"]) if self.critic_kind == "central" else obs_dim
            self.critic = mlp([critic_in, *(cfg.get("critic_hidden") or hidden), 1], activation)

    # -- actor ------------------------------------------------------------------------------------
    def _logits(self, batch: dict[str, Any]) -> torch.Tensor:
        obs = batch[Columns.OBS]
        if isinstance(obs, dict):
            logits = self._actor(obs[OBS_KEY].float())
            return logits.masked_fill(obs[MASK_KEY] < 0.5, MASKED_LOGIT)
        return self._actor(obs.float())

    def _actor(self, x: torch.Tensor) -> torch.Tensor:
        if not self.row_features:
            return self.actor(x)
        context, rows = x[..., : self.context_dim], x[..., self.context_dim :]
        rows = rows.reshape(*x.shape[:-1], self.logit_lens[0], int(self.row_features))
        context = context.unsqueeze(-2).expand(*rows.shape[:-1], self.context_dim)
        return self.actor(torch.cat([context, rows], dim=-1)).squeeze(-1)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._logits(batch)}

    def _dist_cls(self):
        if len(self.logit_lens) == 1 and isinstance(self.action_space, gym.spaces.Discrete):
            return TorchCategorical
        return TorchMultiCategorical.get_partial_dist_cls(input_lens=self.logit_lens)

    def get_inference_action_dist_cls(self):
        return self._dist_cls()

    def get_exploration_action_dist_cls(self):
        return self._dist_cls()

    def get_train_action_dist_cls(self):
        return self._dist_cls()

    # -- critic -----------------------------------------------------------------------------------
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if self.critic_kind == "central":
            critic_in = batch[GLOBAL_STATE]
        else:
            obs = batch[Columns.OBS]
            critic_in = obs[OBS_KEY] if isinstance(obs, dict) else obs
        return self.critic(critic_in.float()).squeeze(-1)

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic"]
