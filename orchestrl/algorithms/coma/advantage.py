"""COMA's advantage piece: counterfactual-baseline advantages (:func:`coma_advantages`) and
TD(lambda) critic targets (:func:`coma_critic_targets`).

Two algorithms share it: ``coma`` (Foerster et al. 2018, Eq. 4, with the whole baseline) and
``coma_cv`` (each agent's baseline scaled by a control-variate coefficient fitted on the previous
batch, :func:`control_variate_scale`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.coma.module import Q_VALUES, ConditionalComponent, QHead
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
    q: torch.Tensor,
    probs: torch.Tensor,
    actions: torch.Tensor,
    head: QHead,
    conditional: ConditionalComponent | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """COMA's counterfactual advantage, Foerster et al. 2018, Eq. (4):

        A_i(s, u) = Q(s, u) - sum_{u'_i} pi_i(u'_i | tau_i) Q(s, (u_-i, u'_i))

    ``q``: ``[B, head.size]`` critic output for the row's agent i (the others' actions u_-i fixed,
    see :class:`~orchestrl.algorithms.coma.module.QHead`); ``probs``: pi_i per action component,
    concatenated; ``actions``: ``[B]`` or ``[B, K]`` taken actions; ``conditional``: for an actor
    that draws one component given another, that component's probabilities given every value of
    the other (``probs`` then holds the given one's marginal; its entry for the drawn component is
    not read). With the head's Q_i(s, u) = sum_g q_g[u_g], the sum over every joint u'_i is
    sum_g E_{pi}[q_g[u'_g]] under the joint of each group's components (:meth:`QHead.expected`),
    exact; for a Discrete action this is Eq. (4) verbatim. The baseline marginalises all of u'_i,
    so it does not depend on any component of the action taken.
    Returns ``(A_i, Q(s, u))``, both ``[B]``.
    """
    q_taken = head.taken(q, actions)
    return q_taken - head.expected(q, probs, conditional), q_taken


def coma_critic_targets(
    target_q: torch.Tensor,
    next_probs: torch.Tensor,
    actions: torch.Tensor,
    module_batch: Mapping[str, Any],
    head: QHead,
    gamma: float,
    lambda_: float,
    next_conditional: ConditionalComponent | None = None,
) -> np.ndarray:
    """COMA's critic targets (Foerster et al. 2018, the TD(lambda) critic with a target network):
    TD(lambda) returns of the team reward bootstrapped with the target critic Q',

        G_t = r_t + gamma ((1 - lambda) Q'(s_{t+1}, u_{t+1}) + lambda G_{t+1}),   G_t = r_t if t is terminal.

    A chunk that ends before its episode does (``truncateds[t]``) holds no u_{t+1}: the row after
    t is RLlib's artificial step, s_{t+1} with u_t repeated. There the bootstrap is the policy's
    expectation of Q' at the next step, as Eq. (4)'s baseline marginalises agent i's action,

        G_t = r_t + gamma sum_u pi_i(u | o_{t+1}) Q'(s_{t+1}, (u_-i, u)),

    so a split episode's target is, in expectation over u_{t+1} ~ pi_i, the whole episode's (for an
    exact Q'). The others' actions u_-i at s_{t+1} are not in the chunk either: the critic's input
    keeps those of step t.

    ``target_q``: ``[B, head.size]`` Q' heads; ``next_probs`` (and ``next_conditional``, as in
    :func:`coma_advantages`): pi_i per component from each row's own observation (read only on the
    artificial rows after a cut); ``actions``: the rows' actions.
    """
    values = numpy(head.taken(target_q, actions))
    cut = after_cut(module_batch)
    if cut.any():
        expected = head.expected(target_q, next_probs, next_conditional)
        values = np.where(cut, numpy(expected), values)
    return team_value_targets(values, module_batch, gamma, lambda_)


def after_cut(module_batch: Mapping[str, Any]) -> np.ndarray:
    """The artificial rows that bootstrap a chunk cut before its episode ended: each row after a
    truncated, non-terminal one."""
    terminated = numpy(module_batch[Columns.TERMINATEDS]).astype(bool)
    truncated = numpy(module_batch[Columns.TRUNCATEDS]).astype(bool)
    out = np.zeros(len(truncated), dtype=bool)
    out[1:] = truncated[:-1] & ~terminated[:-1]
    return out


def control_variate_scale(
    q: np.ndarray, baseline: np.ndarray, agent_index: np.ndarray, mask: np.ndarray
) -> dict[int, float]:
    """Per agent, the coefficient of the counterfactual baseline used as a control variate
    (Glasserman 2004, Monte Carlo Methods in Financial Engineering, sec. 4.1; baselines as control
    variates of the policy gradient: Greensmith, Bartlett & Baxter 2004, JMLR 5):

        c_i = Cov(Q, b_i) / Var(b_i),  clipped to [0, 1]

    the c minimising Var(Q - c b_i) over agent i's rows: the variance of the advantage, a proxy for
    the policy gradient's (which would weight each row by |grad log pi|^2). c_i = 1 is COMA's
    baseline, c_i = 0 none. Agents whose b_i does not vary get no entry."""
    out: dict[int, float] = {}
    for i in np.unique(agent_index[mask]):
        rows = mask & (agent_index == i)
        b = baseline[rows] - baseline[rows].mean()
        variance = float(np.mean(b * b))
        if variance > 1e-8:
            out[int(i)] = float(np.clip(float(np.mean(q[rows] * b)) / variance, 0.0, 1.0))
    return out


def center_per_agent(advantages: np.ndarray, agent_index: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Subtracts each agent's batch mean. The baseline should leave E[A_i] = 0 for every agent, but
    a learned critic's error differs from agent to agent (the untried actions in its baseline are
    never trained), and a shared offset pushes all of that agent's sampled actions the same way.
    The batch mean includes each row's own value: an O(1/n) bias, as in any batch standardisation."""
    out = advantages.astype(np.float32).copy()
    for i in np.unique(agent_index[mask]):
        rows = mask & (agent_index == i)
        out[rows] -= out[rows].mean()
    return out


def policy_probs(dist_inputs: torch.Tensor, logit_lens: list[int]) -> torch.Tensor:
    """pi_i per component (softmax of each component's logits; masked logits get probability 0)."""
    return torch.cat([torch.softmax(x, dim=-1) for x in torch.split(dist_inputs, logit_lens, dim=-1)], dim=-1)


def option_conditional(module: RLModule, batch: Mapping[str, Any]) -> ConditionalComponent | None:
    """The actor's component drawn given another (``model.option_rows``), for every value of the
    other; None for an actor whose components are independent. The batch's distribution inputs hold
    that component's probabilities given the value TAKEN only: a baseline read from them would
    depend on the agent's own action."""
    rows = getattr(module, "option_rows", None)
    if not rows:
        return None
    return ConditionalComponent(rows.given, rows.component, module.option_probs(batch).float())


class ComaAdvantage(CounterfactualAdvantage):
    """Replaces GAE: A_i from the live critic, critic targets = TD(lambda) returns of the TEAM reward
    bootstrapped with the TARGET critic (:func:`coma_critic_targets`). Actors see zero advantages
    for the first ``critic_warmup`` updates (the critic learns alone). ``q_source``, ``center`` and
    ``cross_fit_scale`` are our options, not Foerster et al.'s; their defaults give Eq. (4).

    ``cross_fit_scale`` (``coma_cv``): A_i = Q - c_i b_i with c_i from :func:`control_variate_scale`
    fitted on the PREVIOUS batch (cross-fitting; 1 before the first fit). c_i is then fixed given
    everything before this batch, and b_i depends only on s and u_-i, so
    E[grad log pi_i(u_i) c_i b_i] = 0: the gradient stays unbiased. Fitted on the batch it scales
    (as this piece did before), c_i depends on the very actions it weighs: an O(1/n) bias.
    """

    def __init__(
        self,
        *args: Any,
        td_lambda: float = 0.8,
        critic_warmup: int = 0,
        normalize: bool = True,
        center: bool = False,
        q_source: str = "critic",
        cross_fit_scale: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.q_source = q_source
        self.td_lambda = td_lambda
        self.critic_warmup = critic_warmup
        self.normalize = normalize
        self.center = center
        self.cross_fit_scale = cross_fit_scale
        self.scale: dict[int, float] = {}
        """c_i fitted on the previous batch, per agent index (coma_cv)."""

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        state = super().get_state(components, not_components=not_components)
        return {**state, "baseline_scale": [[i, c] for i, c in sorted(self.scale.items())]}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.scale = {int(i): float(c) for i, c in state.get("baseline_scale", [])}

    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        head = module.q_head
        actions = module_batch[Columns.ACTIONS]
        probs = policy_probs(module_batch[Columns.ACTION_DIST_INPUTS].float(), list(head.logit_lens))
        conditional = option_conditional(module, module_batch)  # from each row's own observation
        q_values = module.compute_q(module_batch)
        advantages, q_taken = coma_advantages(q_values, probs, actions, head, conditional)
        next_probs = probs  # an artificial row stores step t's: pi(. | o_{t+1}) needs the live actor
        if after_cut(module_batch).any():
            logits = module.forward_train(module_batch)[Columns.ACTION_DIST_INPUTS].float()
            next_probs = policy_probs(logits, list(head.logit_lens))
        target_q = module.forward_target(module_batch)[Q_VALUES]
        targets = coma_critic_targets(
            target_q, next_probs, actions, module_batch, head, self.gamma, self.td_lambda, conditional
        )
        q_taken = numpy(q_taken)
        baseline = q_taken - numpy(advantages)
        # Q(s,u): the critic's (Eq. 4 verbatim) or the sampled G^lambda_t (the same baseline)
        q = targets if self.q_source == "lambda_return" else q_taken
        agent_index = numpy(module_batch[AGENT_INDEX])
        stats = {"credit/q_taken_mean": float(q_taken[mask].mean())}
        if self.cross_fit_scale:
            scale = scale_rows(self.scale, agent_index)  # fitted on the previous batch
            stats["credit/baseline_scale"] = float(scale[mask].mean()) if mask.any() else 1.0
            self.scale.update(control_variate_scale(q, baseline, agent_index, mask))  # for the next one
            baseline = scale * baseline
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


def scale_rows(scale: Mapping[int, float], agent_index: np.ndarray) -> np.ndarray:
    """c per row from per-agent coefficients (1, COMA's whole baseline, for an agent not fitted yet)."""
    return np.array([scale.get(int(i), 1.0) for i in agent_index], dtype=np.float32)
