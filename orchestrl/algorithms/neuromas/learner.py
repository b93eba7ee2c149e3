"""NeuroMAS' joint loss: the whole team's graph trained on one shared reward.

All of the maths is in :func:`joint_loss`; the learner class only feeds it RLlib's batch.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance

from orchestrl.algorithms.neuromas.credit import AGENT_ADVANTAGES
from orchestrl.algorithms.neuromas.group import GROUP_ADVANTAGES
from orchestrl.algorithms.neuromas.module import AUX_PREDICTION
from orchestrl.algorithms.ppo_learner import FastStepPPOLearner

KNOBS_KEY = "neuromas"
"""``learner_config_dict[KNOBS_KEY]`` = {"objective": "ppo" | "reinforce", "aux_coeff": float}."""


def surrogate(
    objective: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, clip: float
) -> torch.Tensor:
    """The per-row policy-gradient surrogate (to maximise) of REINFORCE or PPO's clipped ratio."""
    if objective == "reinforce":
        return logp * advantages
    if objective == "ppo":
        ratio = torch.exp(logp - old_logp)
        return torch.min(advantages * ratio, advantages * torch.clamp(ratio, 1 - clip, 1 + clip))
    raise ValueError(f"unknown objective {objective!r} (ppo or reinforce)")


def joint_loss(
    *,
    objective: str,
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    entropy: torch.Tensor,
    values: torch.Tensor,
    value_targets: torch.Tensor,
    reward_prediction: torch.Tensor | None,
    rewards: torch.Tensor,
    clip: float,
    vf_clip: float,
    vf_coeff: float,
    entropy_coeff: float,
    aux_coeff: float,
    mean: Any = torch.mean,
    agent_logp: torch.Tensor | None = None,
    agent_old_logp: torch.Tensor | None = None,
    agent_advantages: torch.Tensor | None = None,
    anchor_kl: torch.Tensor | None = None,
    anchor_coeff: float = 0.0,
    group_advantages: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The one loss of the team network (NeuroMAS, arXiv 2605.16757: joint RL on a shared reward).

    ``logp`` is the log-probability of the JOINT action (every agent's components and, with
    discrete messages, every node's message tokens), so every node's log-probability gets the same
    advantage, as in the paper::

        A_t      = G_t - V(s_t)                       (GAE with lambda; lambda = 1 for REINFORCE),
                                                      standardised over the batch by RLlib's GAE
        L_pi     = -E[ log pi(a_t|s_t) * A_t ]                            objective = reinforce
                   (REINFORCE with the global critic as baseline b(s_t) = V(s_t), the paper's
                   estimator, Williams 1992)
                 = -E[ min(rho_t A_t, clip(rho_t, 1-eps, 1+eps) A_t) ],    objective = ppo
                   rho_t = pi(a_t|s_t) / pi_old(a_t|s_t)                  (Schulman et al. 2017)
        L_V      = E[ min((V(s_t) - G_t^lambda)^2, vf_clip) ]              global critic
        L_aux    = E[ (r_hat(s_t) - r_t)^2 ]                               auxiliary team-reward head
        L        = L_pi + vf_coeff * L_V - entropy_coeff * E[H(pi(.|s_t))] + aux_coeff * L_aux

    Continuous messages are inside the graph, so this loss backpropagates through every edge to
    every node; discrete message tokens get their gradient from ``L_pi`` alone.

    With per-agent counterfactual advantages (``credit: counterfactual``, :mod:`.credit`; ``agent_*``
    are (B, agents): each agent's components' log-probabilities under the current and the acting
    policy, and ``A_i``, NaN on rows without), a row that has them is scored agent by agent,

        L_pi     = -E[ sum_i min(rho_i A_i, clip(rho_i, 1-eps, 1+eps) A_i) ],   rho_i = pi_i / pi_i,old

    and the others as above. With the group baseline (``baseline: group``, :mod:`.group`;
    ``group_advantages`` (B,), NaN on rows without), a row that has one uses it as ``A_t`` in place
    of the critic's. ``anchor_kl`` (per row, KL(pi || pi_clone) to the policy cloning left)
    adds ``anchor_coeff * E[KL]``: RL may move the policy where the reward says, not drift from it.
    """
    if group_advantages is not None:
        advantages = torch.where(torch.isfinite(group_advantages), group_advantages, advantages)
    per_row = surrogate(objective, logp, old_logp, advantages, clip)
    if agent_advantages is not None:
        credited = torch.isfinite(agent_advantages).all(-1)
        per_agent = surrogate(
            objective, agent_logp, agent_old_logp, torch.nan_to_num(agent_advantages), clip
        ).sum(-1)
        per_row = torch.where(credited, per_agent, per_row)
    policy_loss = -mean(per_row)
    vf_loss = mean(torch.clamp((values - value_targets) ** 2, 0, vf_clip))
    entropy_mean = mean(entropy)
    total = policy_loss + vf_coeff * vf_loss - entropy_coeff * entropy_mean
    stats = {POLICY_LOSS_KEY: policy_loss, VF_LOSS_KEY: vf_loss, ENTROPY_KEY: entropy_mean}
    if anchor_kl is not None:
        kl = mean(anchor_kl)
        total = total + anchor_coeff * kl
        stats["neuromas/anchor_kl"] = kl
    if reward_prediction is not None:
        aux_loss = mean((reward_prediction - rewards) ** 2)
        total = total + aux_coeff * aux_loss
        stats["credit/aux_reward_loss"] = aux_loss
    return total, stats


class NeuromasLearner(FastStepPPOLearner):
    """PPO's torch learner with :func:`joint_loss` (REINFORCE option, auxiliary reward head)."""

    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        module = self.module[module_id].unwrapped()
        knobs = config.learner_config_dict.get(KNOBS_KEY, {})
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            n_valid = mask.sum()

            def mean(x: torch.Tensor) -> torch.Tensor:
                return x[mask].sum() / n_valid
        else:
            mean = torch.mean
        logits = fwd_out[Columns.ACTION_DIST_INPUTS]
        dist = module.get_train_action_dist_cls().from_logits(logits)
        values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        credit: dict[str, torch.Tensor] = {}
        if AGENT_ADVANTAGES in batch:
            old_logits = batch[Columns.ACTION_DIST_INPUTS]
            credit = {
                "agent_logp": module.agent_logp(logits, batch[Columns.ACTIONS]),
                "agent_old_logp": module.agent_logp(old_logits, batch[Columns.ACTIONS]),
                "agent_advantages": batch[AGENT_ADVANTAGES],
            }
        if GROUP_ADVANTAGES in batch:
            credit["group_advantages"] = batch[GROUP_ADVANTAGES]
        anchor_coeff = float(knobs.get("anchor_coeff", 0.0))
        if anchor_coeff > 0:
            credit["anchor_kl"] = self._anchor_kl(module, batch, logits)
        total, stats = joint_loss(
            objective=knobs.get("objective", "ppo"),
            logp=dist.logp(batch[Columns.ACTIONS]),
            old_logp=batch[Columns.ACTION_LOGP],
            advantages=batch[Postprocessing.ADVANTAGES],
            entropy=dist.entropy(),
            values=values,
            value_targets=batch[Postprocessing.VALUE_TARGETS],
            reward_prediction=fwd_out.get(AUX_PREDICTION),
            rewards=batch[Columns.REWARDS].float(),
            clip=config.clip_param,
            vf_clip=config.vf_clip_param,
            vf_coeff=config.vf_loss_coeff,
            entropy_coeff=self.entropy_coeff_schedulers_per_module[module_id].get_current_value(),
            aux_coeff=float(knobs.get("aux_coeff", 0.0)),
            mean=mean,
            anchor_coeff=anchor_coeff,
            **credit,
        )
        stats["vf_explained_var"] = explained_variance(batch[Postprocessing.VALUE_TARGETS], values)
        self.metrics.log_dict(stats, key=module_id, window=1)
        return total

    def _anchor_kl(self, module: Any, batch: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        """Per row, KL(pi || pi_clone) over the env components. ``pi_clone`` is a frozen copy of the
        module as the first loss found it: after the warm start (a restored run anchors to the
        policy it restored)."""
        if getattr(self, "_anchor", None) is None:
            self._anchor = copy.deepcopy(module).eval().requires_grad_(False)
        with torch.no_grad():
            anchored = self._anchor.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
        n = sum(module.env_lens)
        dist_cls = module.env_action_dist_cls()
        return dist_cls.from_logits(logits[:, :n]).kl(dist_cls.from_logits(anchored[:, :n]))
