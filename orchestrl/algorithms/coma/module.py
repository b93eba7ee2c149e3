"""COMA's RLModule: PPO's decentralised actor plus a centralised, learner-only Q critic.

Critic input (per row of agent i): ``global_state`` (all observations, one-hot id of i, t/T; the
MAPPO layout) concatenated with ``others_actions`` (every agent's one-hot action, i's own slot
zeroed). Output: one Q value per action of agent i.

MultiDiscrete actions (K components, e.g. LEMON's role/duty/capacity/deps) are treated with a
factorised critic, our choice: the output holds one head per component, and the agent's Q is
additive over its own components,

    Q_i(s, u) = sum_k q_{i,k}(s, u_-i)[u_{i,k}],

so Q(s,u) for the taken action and the whole counterfactual baseline over all of agent i's own
actions (its policy factorises over components too) both come from ONE forward pass, and the
baseline does not depend on any part of u_i (it stays unbiased for the joint log-probability that
PPO's ratio uses). Interactions between one agent's own components are not modelled; interactions
with the state and with the other agents' actions are. With a Discrete action (K = 1) this is
exactly COMA's critic.

``compute_values`` returns Q_i(s, u) for the taken action, so PPO's unchanged value loss regresses
the critic onto the TD(lambda) targets that :class:`~orchestrl.algorithms.coma.advantage.ComaAdvantage`
puts in ``value_targets``.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI

from orchestrl.algorithms.actor_critic import GLOBAL_STATE, ActorCriticModule, mlp
from orchestrl.algorithms.joint_columns import OTHERS_ACTIONS

Q_VALUES = "q_values"


def taken_q(q: torch.Tensor, actions: torch.Tensor, logit_lens: list[int]) -> torch.Tensor:
    """``sum_k q_k[u_k]``: the factorised Q of the taken (possibly multi-component) action."""
    actions = actions.long().reshape(q.shape[0], len(logit_lens))
    total = torch.zeros(q.shape[0], dtype=q.dtype, device=q.device)
    for k, q_k in enumerate(torch.split(q, logit_lens, dim=-1)):
        total = total + q_k.gather(-1, actions[:, k : k + 1]).squeeze(-1)
    return total


class ComaModule(ActorCriticModule, TargetNetworkAPI):
    """``model_config`` adds ``q_input_dim`` (global state + joint one-hot actions)."""

    def setup(self) -> None:
        super().setup()
        if not self.inference_only:
            cfg = self.model_config
            hidden = list(cfg.get("critic_hidden") or cfg.get("hidden", [64, 64]))
            self.critic = mlp(
                [int(cfg["q_input_dim"]), *hidden, sum(self.logit_lens)], cfg.get("activation", "tanh")
            )

    def _critic_input(self, batch: dict[str, Any]) -> torch.Tensor:
        return torch.cat([batch[GLOBAL_STATE].float(), batch[OTHERS_ACTIONS].float()], dim=-1)

    def compute_q(self, batch: dict[str, Any]) -> torch.Tensor:
        """Q for every action (every component's every value) of the row's agent: ``[B, sum(nvec)]``."""
        return self.critic(self._critic_input(batch))

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return taken_q(self.compute_q(batch), batch[Columns.ACTIONS], self.logit_lens)

    # -- TargetNetworkAPI (the learner hard-syncs the pairs) ----------------------------------------
    def make_target_networks(self) -> None:
        self.target_critic = make_target_network(self.critic)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.critic, self.target_critic)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {Q_VALUES: self.target_critic(self._critic_input(batch))}

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic", "target_critic"]
