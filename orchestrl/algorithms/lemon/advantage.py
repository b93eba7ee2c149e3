"""LEMON's advantage piece: the team GAE advantage mixed with each agent's replay delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrl.algorithms.credit.advantage import CREDIT_PREFIX, TeamGaeAdvantage, numpy
from orchestrl.algorithms.joint_columns import AGENT_INDEX, CF_DELTA, CF_FAMILY
from orchestrl.envs.counterfactual import EDIT_FAMILIES

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule


def lemon_advantages(
    gae_advantages: np.ndarray, delta: np.ndarray, has_delta: np.ndarray, mix: float, eps: float = 1e-8
) -> np.ndarray:
    """Agent i's advantage from its counterfactual contrast (LEMON, arXiv 2605.14483, Sec. 3):

        delta_i = R(spec) - R(spec with one edit to agent i's part)
        c_i     = sign(delta_i) * |delta_i| / mean_j |delta_j|      (signed, weighted by |delta|)
        A_i     = (1 - mix) * A_team + mix * c_i                    (rows with a replay)
        A_i     = A_team                                            (rows without one)

    ``A_team`` is the standardised team-reward GAE advantage; the batch mean of |delta| puts c_i
    on the same unit scale, so ``mix`` is a plain convex weight. A delta of 0 (the edit did not
    change the outcome) pulls that agent's advantage towards 0: its choice did not matter.
    """
    out = np.asarray(gae_advantages, dtype=np.float32).copy()
    if not has_delta.any():
        return out
    scale = float(np.abs(delta[has_delta]).mean())
    credit = delta[has_delta] / max(scale, eps)
    out[has_delta] = (1.0 - mix) * out[has_delta] + mix * credit
    return out


class ReplayAdvantage(TeamGaeAdvantage):
    """Replaces GAE with :func:`lemon_advantages`; deltas come from the ``cf_delta`` column."""

    def __init__(self, *args: Any, mix: float = 0.5, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mix = mix

    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        gae, targets = self.team_gae(module, module_batch, mask)
        delta = numpy(module_batch[CF_DELTA]).astype(np.float32)
        has_delta = mask & np.isfinite(delta)
        advantages = lemon_advantages(gae, np.nan_to_num(delta), has_delta, self.mix)
        return advantages, targets, self.delta_stats(module_batch, delta, has_delta)

    def delta_stats(
        self, module_batch: dict[str, Any], delta: np.ndarray, has: np.ndarray
    ) -> dict[str, float]:
        """Per agent (and per edit family): how much its edited choice moved the team reward."""
        agent_index = numpy(module_batch[AGENT_INDEX])
        family = numpy(module_batch[CF_FAMILY])
        stats: dict[str, float] = {"credit/replay_rows": float(has.sum())}
        for i, agent in enumerate(self.agents):
            rows = has & (agent_index == i)
            if not rows.any():
                continue
            stats[f"{CREDIT_PREFIX}{agent}_mean_delta"] = float(delta[rows].mean())
            stats[f"{CREDIT_PREFIX}{agent}_mean_abs_delta"] = float(np.abs(delta[rows]).mean())
            for f, name in enumerate(EDIT_FAMILIES):
                in_family = rows & (family == f)
                if in_family.any():
                    stats[f"{CREDIT_PREFIX}{agent}_{name.value}_mean_delta"] = float(delta[in_family].mean())
        return stats
