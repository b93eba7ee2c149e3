"""COMA's RLModule: PPO's decentralised actor plus a centralised, learner-only Q critic.

Critic input (per row of agent i): ``global_state`` (all observations, one-hot id of i, t/T; the
MAPPO layout) concatenated with ``others_actions`` (every agent's one-hot action, i's own slot
zeroed). Output: Q for every action of agent i, in the layout of a :class:`QHead`.

A ``Discrete`` action gets one Q per action: exactly COMA's critic. A ``MultiDiscrete`` action
(K components) has too many joint values for one output each (LEMON level 4: 8*6*3*10*11 =
15,840), so Q is a sum over groups of the agent's own components, each group with one output per
joint value of its components (our choice, not in Foerster et al.):

    Q_i(s, u) = sum_g q_{i,g}(s, u_-i)[u_{i,g}]

- ``factorised`` (the default): one group per component, ``sum_k q_k[u_k]``. It cannot represent
  an action
  whose components mean different things together: in the orchestration env
  (:mod:`orchestrl.envs.orchestration.actions`) a duty index names a different duty for each
  role, ``input_b`` matters only to joins, and an idle role makes every other component moot;
- ``paired``: the factorised terms plus the first component paired with each other
  one, ``sum_k q_k[u_k] + sum_{k>=1} q_{0k}[u_0, u_k]``; for the orchestration action, whose first
  component is the role: (role, duty), (role, capacity), (role, input_a), (role, input_b), so Q can
  price duty k of role r, a join's second input and an idle agent. The pair blocks start at zero
  (the head starts as the factorised one) and learn what the main effects cannot; the main effects
  are shared by every pair, so they learn from every sample. Interactions among the other
  components (e.g. which input a duty is applied to) are not modelled;
- ``joint``: one group of all components, one output per joint action: exact, and as large as
  the product of the component sizes.

Why ``factorised`` stays the default: ``benchmarks/coma_heads.py`` fits each head, on the
warm-started team's episodes at level 3, to the team return of the taken action. The richer heads
fit the fitted episodes as well or better and predict other episodes no better (held-out explained
variance), and in RL (coma at level 3) the paired head explained the returns worse than the
factorised one. What the critic misses is mostly how the return varies across tasks and states,
not the action's interactions.

With one component all three are the same head. Because the policy is a product over components,
the counterfactual baseline over ALL of agent i's own actions still comes from the same single
forward pass (``sum_g E_{pi}[q_g[u_g]]``, each group's expectation under the product of its
components' marginals) and does not depend on any part of u_i: unbiased for the joint
log-probability that PPO's ratio uses. Interactions with the state and with the other agents'
actions are modelled through the input.

``compute_values`` returns Q_i(s, u) for the taken action, so PPO's unchanged value loss regresses
the critic onto the TD(lambda) targets that :class:`~orchestrl.algorithms.coma.advantage.ComaAdvantage`
puts in ``value_targets``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import make_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI

from orchestrl.algorithms.actor_critic import GLOBAL_STATE, ActorCriticModule, mlp
from orchestrl.algorithms.joint_columns import OTHERS_ACTIONS

Q_VALUES = "q_values"
QHeadKind = Literal["factorised", "paired", "joint"]


def q_groups(kind: QHeadKind, n_components: int) -> tuple[tuple[int, ...], ...]:
    """The groups of own-action components of a Q head (module docstring)."""
    if kind == "factorised" or n_components == 1:
        return tuple((k,) for k in range(n_components))
    if kind == "paired":
        return tuple((k,) for k in range(n_components)) + tuple((0, k) for k in range(1, n_components))
    if kind == "joint":
        return (tuple(range(n_components)),)
    raise ValueError(f"unknown Q head {kind!r} (factorised, paired, joint)")


@dataclass(frozen=True)
class QHead:
    """The layout of a critic's output: one block per group, one Q per joint value of the group's
    components (row-major, the group's first component outermost)."""

    logit_lens: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, logit_lens: Sequence[int], kind: QHeadKind) -> QHead:
        lens = tuple(int(n) for n in logit_lens)
        return cls(lens, q_groups(kind, len(lens)))

    @property
    def sizes(self) -> list[int]:
        return [math.prod(self.logit_lens[k] for k in g) for g in self.groups]

    @property
    def size(self) -> int:
        return sum(self.sizes)

    @property
    def interaction_slots(self) -> slice:
        """The outputs of the blocks over several components that follow single-component blocks
        (``paired``'s pairs); empty for a head without single-component blocks (``joint``)."""
        singles = sum(n for g, n in zip(self.groups, self.sizes, strict=True) if len(g) == 1)
        return slice(singles, self.size) if singles else slice(0, 0)

    def taken(self, q: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``sum_g q_g[u_g]``: Q of the taken (possibly multi-component) action, ``[B]``."""
        actions = actions.long().reshape(q.shape[0], len(self.logit_lens))
        total = torch.zeros(q.shape[0], dtype=q.dtype, device=q.device)
        for group, q_g in zip(self.groups, torch.split(q, self.sizes, dim=-1), strict=True):
            index = torch.zeros(q.shape[0], dtype=torch.long, device=q.device)
            for k in group:
                index = index * self.logit_lens[k] + actions[:, k]
            total = total + q_g.gather(-1, index[:, None]).squeeze(-1)
        return total

    def expected(self, q: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """``sum_u pi(u) Q(s, u)`` over every joint own action, ``[B]``: per group, the product of
        its components' probabilities (``probs``: per component, concatenated) against its block."""
        parts = torch.split(probs, list(self.logit_lens), dim=-1)
        total = torch.zeros(q.shape[0], dtype=q.dtype, device=q.device)
        for group, q_g in zip(self.groups, torch.split(q, self.sizes, dim=-1), strict=True):
            joint = parts[group[0]]
            for k in group[1:]:
                joint = (joint[:, :, None] * parts[k][:, None, :]).reshape(q.shape[0], -1)
            total = total + (joint * q_g).sum(dim=-1)
        return total


def q_critic(
    input_dim: int, hidden: Sequence[int], head: QHead, activation: str = "tanh"
) -> torch.nn.Sequential:
    """The critic MLP: ``input_dim`` -> ``hidden`` -> one output per slot of ``head``, with the
    interaction slots' weights at 0 (a ``paired`` head starts as the factorised one)."""
    net = mlp([int(input_dim), *hidden, head.size], activation)
    with torch.no_grad():
        net[-1].weight[head.interaction_slots] = 0.0
    return net


class ComaModule(ActorCriticModule, TargetNetworkAPI):
    """``model_config`` adds ``q_input_dim`` (global state + joint one-hot actions) and ``q_head``
    (``factorised`` / ``paired`` / ``joint``, see :class:`QHead`)."""

    def setup(self) -> None:
        super().setup()
        self.q_head = QHead.of(self.logit_lens, self.model_config.get("q_head", "factorised"))
        if not self.inference_only:
            cfg = self.model_config
            hidden = list(cfg.get("critic_hidden") or cfg.get("hidden", [64, 64]))
            self.critic = q_critic(cfg["q_input_dim"], hidden, self.q_head, cfg.get("activation", "tanh"))

    def _critic_input(self, batch: dict[str, Any]) -> torch.Tensor:
        return torch.cat([batch[GLOBAL_STATE].float(), batch[OTHERS_ACTIONS].float()], dim=-1)

    def compute_q(self, batch: dict[str, Any]) -> torch.Tensor:
        """The row's agent's Q head (every group's every joint value): ``[B, q_head.size]``."""
        return self.critic(self._critic_input(batch))

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.q_head.taken(self.compute_q(batch), batch[Columns.ACTIONS])

    # -- TargetNetworkAPI (the learner hard-syncs the pairs) ----------------------------------------
    def make_target_networks(self) -> None:
        self.target_critic = make_target_network(self.critic)

    def get_target_network_pairs(self) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
        return [(self.critic, self.target_critic)]

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        return {Q_VALUES: self.target_critic(self._critic_input(batch))}

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic", "target_critic"]
