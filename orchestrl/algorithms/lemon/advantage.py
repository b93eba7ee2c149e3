"""LEMON's advantage piece: the team GAE advantage mixed with each agent's centred replay delta."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrl.algorithms.credit.advantage import CREDIT_PREFIX, TeamGaeAdvantage, numpy
from orchestrl.algorithms.joint_columns import AGENT_INDEX, CF_DELTA, CF_FAMILY
from orchestrl.envs.counterfactual import EDIT_FAMILIES

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule


def lemon_advantages(
    gae_advantages: np.ndarray,
    delta: np.ndarray,
    has_delta: np.ndarray,
    baseline: np.ndarray,
    mix: float,
    eps: float = 1e-8,
) -> np.ndarray:
    """Agent i's advantage from its replayed counterfactual contrast (LEMON, arXiv 2605.14483):

        delta_i = R(u) - R(u with agent i's part edited by one edit of family f)
        d_i     = delta_i - b_{i,f}                               (centred)
        c_i     = d_i / mean_j |d_j|                              (unit scale over the batch)
        A_i     = (1 - mix) * A_team + mix * c_i                  (the row of i's edited action)
        A_i     = A_team                                          (rows without a replay)

    ``A_team`` is the standardised team-reward GAE advantage; ``b_{i,f}`` (``baseline``, per row)
    the running mean of agent i's deltas of family f over EARLIER batches (:class:`DeltaBaseline`).

    What the estimator is: ``delta_i`` is a difference reward (Wolpert & Tumer 2002, "Optimal payoff
    functions for members of collectives"), ``D_i = G(u) - G(u_-i, c_i)``, with LEMON's edits in
    place of the fixed default action ``c_i``, computed by re-execution rather than estimated.
    With a fixed ``c_i`` the second term does not depend on agent i's action, so it is a baseline:
    the policy gradient of ``D_i`` is that of the team reward G, with less variance. LEMON's edits
    are not fixed, and the estimator is biased where the edit depends on the agent's own action:

    - ``base_duty``, ``downgrade_capacity``, ``drop_edge`` edit u_i itself (its duty, its capacity,
      one of its edges), so ``R(edited)`` moves with u_i: delta_i prices one feature of the choice,
      not the choice against what else the agent could have done;
    - ``alternative`` draws u'_i from pi_i(. | u'_i != u_i): with Q_i(a) = E[R | u_-i, u_i = a] and
      A_i = Q_i(u_i) - sum_a pi_i(a) Q_i(a) (COMA's advantage with the exact Q),
      ``E[delta_i | u_i] = A_i / (1 - pi_i(u_i))``: the direction is right, but likely actions get
      their advantage inflated;
    - ``b_{i,f}`` comes from earlier batches, so it does not depend on this batch's actions, but
      which families can edit an action depends on that action (``base_duty`` needs a customised
      duty), so b is not independent of u_i either. Centring removes each family's systematic
      offset (e.g. dropping an edge usually breaks the pipeline, so that delta is positive
      whatever the agent did), which would otherwise push every edited action up alike.

    A centred delta of 0 pulls that agent's advantage towards 0 (with ``mix`` 1: to 0).
    """
    out = np.asarray(gae_advantages, dtype=np.float32).copy()
    if not has_delta.any():
        return out
    centred = delta[has_delta] - baseline[has_delta]
    scale = float(np.abs(centred).mean())
    out[has_delta] = (1.0 - mix) * out[has_delta] + mix * centred / max(scale, eps)
    return out


class DeltaBaseline:
    """``b_{i,f}``: per agent i and edit family f, an exponential moving average of the batch means
    of delta, ``b <- decay * b + (1 - decay) * mean(delta)`` (the first batch seen sets it). A batch
    is centred with the means of the batches before it (0 before any), then updates them."""

    def __init__(self, decay: float) -> None:
        self.decay = float(decay)
        self.means: dict[tuple[int, int], float] = {}

    def rows(self, agent_index: np.ndarray, family: np.ndarray) -> np.ndarray:
        """b per row (0 for a pair not seen yet)."""
        return np.array(
            [self.means.get((int(i), int(f)), 0.0) for i, f in zip(agent_index, family, strict=True)],
            dtype=np.float32,
        )

    def update(self, delta: np.ndarray, agent_index: np.ndarray, family: np.ndarray, has: np.ndarray) -> None:
        for i, f in {(int(i), int(f)) for i, f in zip(agent_index[has], family[has], strict=True)}:
            batch_mean = float(delta[has & (agent_index == i) & (family == f)].mean())
            old = self.means.get((i, f))
            self.means[(i, f)] = (
                batch_mean if old is None else self.decay * old + (1 - self.decay) * batch_mean
            )

    def get_state(self) -> list[list[float]]:
        return [[i, f, m] for (i, f), m in sorted(self.means.items())]

    def set_state(self, state: list[list[float]]) -> None:
        self.means = {(int(i), int(f)): float(m) for i, f, m in state}


class ReplayAdvantage(TeamGaeAdvantage):
    """Replaces GAE with :func:`lemon_advantages`; deltas come from the ``cf_delta`` column, each
    centred by :class:`DeltaBaseline` (``center=False``: b = 0, the means are still tracked)."""

    def __init__(
        self, *args: Any, mix: float = 0.5, baseline_decay: float = 0.9, center: bool = True, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.mix = mix
        self.center = center
        self.baseline = DeltaBaseline(baseline_decay)

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        return {
            **super().get_state(components, not_components=not_components),
            "delta_baseline": self.baseline.get_state(),
        }

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.baseline.set_state(state.get("delta_baseline", []))

    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        gae, targets = self.team_gae(module, module_batch, mask)
        delta = numpy(module_batch[CF_DELTA]).astype(np.float32)
        has_delta = mask & np.isfinite(delta)
        agent_index = numpy(module_batch[AGENT_INDEX])
        family = numpy(module_batch[CF_FAMILY])
        baseline = self.baseline.rows(agent_index, family)
        centre = baseline if self.center else np.zeros_like(baseline)
        advantages = lemon_advantages(gae, np.nan_to_num(delta), has_delta, centre, self.mix)
        stats = self.delta_stats(agent_index, family, delta, baseline, has_delta)
        self.baseline.update(delta, agent_index, family, has_delta)
        return advantages, targets, stats

    def delta_stats(
        self,
        agent_index: np.ndarray,
        family: np.ndarray,
        delta: np.ndarray,
        baseline: np.ndarray,
        has: np.ndarray,
    ) -> dict[str, float]:
        """Per agent (and per edit family): how much its edited choice moved the team reward, and
        the running mean it was centred with."""
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
                    stats[f"{CREDIT_PREFIX}{agent}_{name.value}_delta_baseline"] = float(
                        baseline[in_family][0]
                    )
        return stats
