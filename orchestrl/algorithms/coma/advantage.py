"""COMA's advantage piece: counterfactual-baseline advantages and TD(lambda) critic targets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.coma.module import Q_VALUES, taken_q
from orchestrl.algorithms.credit.advantage import (
    CounterfactualAdvantage,
    numpy,
    standardize,
    team_value_targets,
)
from orchestrl.algorithms.joint_columns import AGENT_INDEX

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule


def coma_advantages(
    q: torch.Tensor, probs: torch.Tensor, actions: torch.Tensor, logit_lens: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """COMA's counterfactual advantage, Foerster et al. 2018, Eq. (4):

        A_i(s, u) = Q(s, u) - sum_{u'_i} pi_i(u'_i | tau_i) Q(s, (u_-i, u'_i))

    ``q``: ``[B, sum(nvec)]`` critic output for the row's agent i (every value of every component
    of i's action, the others' actions u_-i fixed); ``probs``: pi_i over the same slots;
    ``actions``: ``[B]`` or ``[B, K]`` taken actions. With the factorised critic
    Q_i(s,u) = sum_k q_k[u_{i,k}] and pi_i = prod_k pi_{i,k} (see :mod:`.module`) the baseline
    splits per component:

        A_i = sum_k ( q_k[u_{i,k}] - sum_a pi_{i,k}(a) q_k[a] )

    which for a Discrete action (K = 1) is Eq. (4) verbatim. Returns ``(A_i, Q(s,u))``, both ``[B]``.
    """
    q_taken = taken_q(q, actions, logit_lens)
    baseline = (probs * q).sum(dim=-1)  # = sum_k E_{a ~ pi_k} q_k[a]
    return q_taken - baseline, q_taken


def fitted_baseline_scale(
    q: np.ndarray, baseline: np.ndarray, agent_index: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """Per agent, the variance-minimising coefficient of the counterfactual baseline used as a
    control variate (Glasserman 2004, Monte Carlo Methods in Financial Engineering, sec. 4.1):

        c_i = Cov(Q, b_i) / Var(b_i),  clipped to [0, 1],   A_i = Q(s, u) - c_i b_i(s, u_-i)

    Our choice, not in Foerster et al. b_i depends only on s and u_-i, so any constant c_i leaves
    the policy gradient unbiased; c_i = 1 is COMA's baseline, c_i = 0 none (beyond centring). A
    learned critic's baseline is partly noise, and subtracting all of it adds that noise to A_i;
    c_i subtracts only the part that tracks Q. Returns c per row (0 where b_i does not vary)."""
    scale = np.zeros(len(q), dtype=np.float32)
    for i in np.unique(agent_index[mask]):
        rows = mask & (agent_index == i)
        b = baseline[rows] - baseline[rows].mean()
        variance = float(np.mean(b * b))
        if variance > 1e-8:
            scale[agent_index == i] = np.clip(float(np.mean(q[rows] * b)) / variance, 0.0, 1.0)
    return scale


def center_per_agent(advantages: np.ndarray, agent_index: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Subtracts each agent's batch mean. The baseline should leave E[A_i] = 0 for every agent, but
    a learned critic's error differs from agent to agent (the untried actions in its baseline are
    never trained), and a shared offset pushes all of that agent's sampled actions the same way."""
    out = advantages.astype(np.float32).copy()
    for i in np.unique(agent_index[mask]):
        rows = mask & (agent_index == i)
        out[rows] -= out[rows].mean()
    return out


def policy_probs(dist_inputs: torch.Tensor, logit_lens: list[int]) -> torch.Tensor:
    """pi_i per component (softmax of each component's logits; masked logits get probability 0)."""
    return torch.cat([torch.softmax(x, dim=-1) for x in torch.split(dist_inputs, logit_lens, dim=-1)], dim=-1)


class ComaAdvantage(CounterfactualAdvantage):
    """Replaces GAE: A_i from the live critic, critic targets = TD(lambda) returns of the TEAM reward
    bootstrapped with the TARGET critic's Q(s_t, u_t). Actors see zero advantages for the first
    ``critic_warmup`` updates (the critic learns alone). ``q_source``, ``center`` and
    ``fit_baseline_scale`` are our options, not Foerster et al.'s; their defaults give Eq. (4)."""

    def __init__(
        self,
        *args: Any,
        td_lambda: float = 0.8,
        critic_warmup: int = 0,
        normalize: bool = True,
        center: bool = False,
        q_source: str = "critic",
        fit_baseline_scale: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.q_source = q_source
        self.td_lambda = td_lambda
        self.critic_warmup = critic_warmup
        self.normalize = normalize
        self.center = center
        self.fit_baseline_scale = fit_baseline_scale

    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        lens = module.logit_lens
        actions = module_batch[Columns.ACTIONS]
        probs = policy_probs(module_batch[Columns.ACTION_DIST_INPUTS].float(), lens)
        advantages, q_taken = coma_advantages(module.compute_q(module_batch), probs, actions, lens)
        target_q = taken_q(module.forward_target(module_batch)[Q_VALUES], actions, lens)
        targets = team_value_targets(numpy(target_q), module_batch, self.gamma, self.td_lambda)
        q_taken = numpy(q_taken)
        baseline = q_taken - numpy(advantages)
        # Q(s,u): the critic's (Eq. 4 verbatim) or the sampled G^lambda_t (the same baseline)
        q = targets if self.q_source == "lambda_return" else q_taken
        agent_index = numpy(module_batch[AGENT_INDEX])
        stats = {"credit/q_taken_mean": float(q_taken[mask].mean())}
        if self.fit_baseline_scale:
            scale = fitted_baseline_scale(q, baseline, agent_index, mask)
            baseline = scale * baseline
            stats["credit/baseline_scale"] = float(scale[mask].mean())
        advantages = (q - baseline).astype(np.float32)
        warming_up = self.updates < self.critic_warmup
        stats["credit/critic_warmup"] = float(warming_up)
        if warming_up:
            return np.zeros_like(advantages), targets, stats
        if self.center:
            advantages = center_per_agent(advantages, agent_index, mask)
        if self.normalize:
            advantages = standardize(advantages, mask, center=False)
        return advantages, targets, stats
