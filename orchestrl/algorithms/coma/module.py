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

With one component all three are the same head. The counterfactual baseline over ALL of agent i's
own actions still comes from the same single forward pass (``sum_g E_{pi}[q_g[u_g]]``, each group's
expectation under its components' joint probability) and does not depend on any part of u_i:
unbiased for the joint log-probability that PPO's ratio uses. For a policy that is a product over
components, a group's joint is the product of its components' marginals. An ``option_rows`` actor
draws its duty given its role, pi(r) pi(d | r): there the duty's distribution given every role
enters (:class:`ConditionalComponent`), not the one given the role taken, which the batch's
distribution inputs hold and which would make the baseline depend on the agent's own role.
Interactions with the state and with the other agents' actions are modelled through the input.

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

    def expected(
        self, q: torch.Tensor, probs: torch.Tensor, conditional: ConditionalComponent | None = None
    ) -> torch.Tensor:
        """``sum_u pi(u) Q(s, u)`` over every joint own action, ``[B]``: per group, its components'
        joint probability against its block. ``probs``: per component, concatenated. Without
        ``conditional`` the policy is their product. With it, one component is drawn given another
        (an ``option_rows`` actor): their joint is pi(a_g) pi(a_c | a_g), a group holding a_c alone
        takes its marginal sum_g pi(a_g) pi(a_c | a_g), and the other components stay independent.
        Either way the expectation is over the agent's whole own action, so it does not depend on
        the action taken."""
        rows = q.shape[0]
        parts = list(torch.split(probs, list(self.logit_lens), dim=-1))
        pair = None
        if conditional is not None:
            g, c = conditional.given, conditional.component
            pair = parts[g][:, :, None] * conditional.probs  # [B, n_g, n_c]
            parts[c] = pair.sum(dim=1)
        total = torch.zeros(rows, dtype=q.dtype, device=q.device)
        for group, q_g in zip(self.groups, torch.split(q, self.sizes, dim=-1), strict=True):
            joint = torch.ones(rows, *(1 for _ in group), dtype=q.dtype, device=q.device)
            paired = pair is not None and g in group and c in group
            for axis, k in enumerate(group, start=1):
                shape = [rows] + [1] * len(group)
                if paired and k == c:
                    continue  # in the pair's table, placed with a_g
                if paired and k == g:
                    at = group.index(c) + 1
                    table = pair if axis < at else pair.transpose(1, 2)
                    shape[axis], shape[at] = self.logit_lens[g], self.logit_lens[c]
                    joint = joint * table.reshape(shape)
                    continue
                shape[axis] = self.logit_lens[k]
                joint = joint * parts[k].reshape(shape)
            total = total + (joint.reshape(rows, -1) * q_g).sum(dim=-1)
        return total


@dataclass(frozen=True)
class ConditionalComponent:
    """An actor that draws component ``component`` given the value of component ``given``:
    ``probs[b, v, :]`` is pi(a_component | o_b, a_given = v) (``ActorCriticModule.option_probs``)."""

    given: int
    component: int
    probs: torch.Tensor


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
