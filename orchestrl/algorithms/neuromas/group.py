"""NeuroMAS' group baseline: several sampled answers to one task, each scored against the others.

With ``baseline: group`` the team env poses each task ``G`` times running (:mod:`.team_env`), so one
training batch holds ``G`` joint actions the policy sampled for the same task, each executed for
real. Each episode's advantage is its return against the mean of the other ``G - 1`` returns of its
group, the leave-one-out baseline of REINFORCE with ``G`` samples (RLOO; Kool, van Hoof & Welling,
"Buy 4 REINFORCE samples, get a baseline for free!", ICLR 2019 DeepRLStructPred workshop):

    A_g = R_g - 1/(G - 1) sum_{h != g} R_h  =  G/(G - 1) (R_g - mean_h R_h)

then divided by the standard deviation of the batch's group advantages, as PPO's batch
standardisation does (not per group: GRPO's per-group scaling, Shao et al. 2024 "DeepSeekMath", weighs
a group whose answers barely differ as much as one where they differ wholly, the bias Liu et al. 2025
"Understanding R1-Zero-Like Training" (Dr. GRPO) remove).
A group whose answers all score alike (all right or all wrong) contributes no gradient: the
sampled answers, not a critic that has not learnt the task, say which choices mattered.

Two pieces, each doing one thing:

- :func:`leave_one_out_advantages`: the maths above;
- :class:`AddGroupAdvantages` (learner connector): groups the batch's episodes by the env's group
  key, puts each episode's advantage on its final action's row (NaN where its group is not whole in
  the batch, and on RLlib's bootstrap row), and the learner uses it there in place of GAE's
  (:func:`.learner.joint_loss`).

One-step episodes only (``configure_neuromas`` refuses others): a return then belongs to one action.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from orchestrl.algorithms.neuromas.credit import on_final_action
from orchestrl.algorithms.neuromas.team_env import GROUP_INFO

if TYPE_CHECKING:
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

GROUP_ADVANTAGES = "neuromas_group_advantages"
"""Train-batch column: (B,) group-baseline advantages; NaN on rows without."""


def leave_one_out_advantages(returns: np.ndarray, groups: np.ndarray, group_size: int) -> np.ndarray:
    """Per episode, ``R_g`` minus the mean of the other returns of its group, over the batch's
    standard deviation of those advantages (module docstring); NaN for an episode whose group has
    fewer than ``group_size`` episodes in the batch. All zero (no signal) stays zero."""
    returns = np.asarray(returns, dtype=np.float64)
    out = np.full(len(returns), np.nan)
    members: dict[Any, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    for rows in members.values():
        if len(rows) < group_size:
            continue
        r = returns[rows]
        out[rows] = (r - (r.sum() - r) / (len(rows) - 1)) if len(rows) > 1 else 0.0
    whole = np.isfinite(out)
    scale = out[whole].std() if whole.any() else 0.0
    if scale > 1e-8:
        out[whole] /= scale
    return out


class AddGroupAdvantages(ConnectorV2):
    """Learner connector: each one-step episode's group-baseline advantage on its final action's row
    (:func:`~.credit.on_final_action`), NaN on every other row and wherever the group is not whole in
    the batch."""

    def __init__(self, *args: Any, group_size: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_size = group_size

    def __call__(
        self, *, rl_module: Any, batch: dict[str, Any], episodes: list[MultiAgentEpisode], **kwargs: Any
    ) -> Any:
        chunks = list(self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False))
        rows, returns, groups = [], [], []
        for k, sa in enumerate(chunks):
            info = sa.get_infos(0)
            if sa.is_terminated and isinstance(info, dict) and GROUP_INFO in info:
                rows.append(k)
                returns.append(float(np.sum(sa.get_rewards())))
                groups.append(info[GROUP_INFO])
        advantages = dict(zip(rows, leave_one_out_advantages(returns, groups, self.group_size), strict=True))
        for k, sa in enumerate(chunks):
            column = on_final_action(len(sa), advantages.get(k))
            self.add_n_batch_items(
                batch, GROUP_ADVANTAGES, column, num_items=len(sa), single_agent_episode=sa
            )
        return batch


class GroupAdvantageColumns:
    """A picklable learner-connector factory for :class:`AddGroupAdvantages`."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size

    def __call__(
        self, input_observation_space: Any = None, input_action_space: Any = None, **kwargs: Any
    ) -> list:
        return [AddGroupAdvantages(input_observation_space, input_action_space, group_size=self.group_size)]
