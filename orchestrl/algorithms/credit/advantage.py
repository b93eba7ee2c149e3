"""The pieces that replace GAE: per module, ``advantages`` and ``value_targets`` from joint columns.

Subclasses implement :meth:`CounterfactualAdvantage.module_advantages`; the maths of each estimator
lives in one function (``orchestrl.algorithms.coma.advantage.coma_advantages``,
``orchestrl.algorithms.lemon.advantage.lemon_advantages``). Per-agent credit statistics are logged
as learner metrics ``credit/<agent>_<stat>`` (curated as ``<module>/credit/<agent>_<stat>``).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

from orchestrl.algorithms.joint_columns import AGENT_INDEX, TEAM_REWARD

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
    from ray.rllib.core.rl_module.rl_module import RLModule
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

CREDIT_PREFIX = "credit/"


def numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def team_value_targets(
    values: np.ndarray, module_batch: Mapping[str, Any], gamma: float, lambda_: float
) -> np.ndarray:
    """TD(lambda) / GAE value targets on the TEAM reward column (RLlib's ``compute_value_targets``)."""
    return compute_value_targets(
        values=values.astype(np.float32),
        rewards=numpy(module_batch[TEAM_REWARD]).astype(np.float32),
        terminateds=numpy(module_batch[Columns.TERMINATEDS]).astype(np.float32),
        truncateds=numpy(module_batch[Columns.TRUNCATEDS]).astype(np.float32),
        gamma=gamma,
        lambda_=lambda_,
    )


def real_rows(module_batch: Mapping[str, Any]) -> np.ndarray:
    """Rows that count (not the artificial bootstrap step)."""
    if Columns.LOSS_MASK in module_batch:
        return numpy(module_batch[Columns.LOSS_MASK]).astype(bool)
    return np.ones(len(numpy(module_batch[TEAM_REWARD])), dtype=bool)


def credit_stats(
    advantages: np.ndarray, agent_index: np.ndarray, mask: np.ndarray, agents: Sequence[str]
) -> dict[str, float]:
    """Per agent of these rows: its mean advantage and mean |advantage|."""
    out: dict[str, float] = {}
    for i, agent in enumerate(agents):
        rows = mask & (agent_index == i)
        if rows.any():
            out[f"{CREDIT_PREFIX}{agent}_mean_adv"] = float(advantages[rows].mean())
            out[f"{CREDIT_PREFIX}{agent}_mean_abs_adv"] = float(np.abs(advantages[rows]).mean())
    return out


def credit_shares(mean_abs: Mapping[str, float]) -> dict[str, float]:
    """Each agent's share of the credit: its mean |A_i| over the sum of all agents' (any module)."""
    total = sum(mean_abs.values())
    return {a: (v / total if total > 0 else 1.0 / len(mean_abs)) for a, v in mean_abs.items()}


class CounterfactualAdvantage(ConnectorV2):
    """Base of the pieces that replace GAE: per module, ``advantages`` and ``value_targets``.

    Subclasses implement :meth:`module_advantages` (the maths lives in one function each, see
    :func:`orchestrl.algorithms.coma.advantage.coma_advantages` and
    :func:`orchestrl.algorithms.lemon.advantage.lemon_advantages`).
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        gamma: float,
        lambda_: float,
        agents: Sequence[str],
    ) -> None:
        super().__init__(input_observation_space, input_action_space)
        self.gamma = gamma
        self.lambda_ = lambda_
        self.agents = list(agents)
        self.updates = 0
        """How many batches this piece has turned into advantages (one per learner update)."""

    @abc.abstractmethod
    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """Returns (advantages [B], value targets [B], extra credit stats) for one module's rows."""

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        return {"updates": self.updates}  # checkpointed with the learner: a resumed run keeps its warm-up

    def set_state(self, state: dict) -> None:
        self.updates = int(state.get("updates", self.updates))

    def __call__(
        self,
        *,
        rl_module: MultiRLModule,
        batch: dict[str, Any],
        metrics: MetricsLogger | None = None,
        **kwargs: Any,
    ) -> Any:
        owner: dict[str, str] = {}
        mean_abs: dict[str, float] = {}
        for module_id, module_batch in batch.items():
            module = rl_module[module_id] if module_id in rl_module else None
            if module is None or not isinstance(module.unwrapped(), ValueFunctionAPI):
                continue
            if module.is_stateful():
                raise ValueError("counterfactual advantages do not support recurrent modules")
            mask = real_rows(module_batch)
            device = module_batch[TEAM_REWARD].device
            with torch.no_grad():
                advantages, targets, stats = self.module_advantages(module.unwrapped(), module_batch, mask)
            module_batch[Postprocessing.ADVANTAGES] = torch.as_tensor(
                advantages, dtype=torch.float32, device=device
            )
            module_batch[Postprocessing.VALUE_TARGETS] = torch.as_tensor(
                targets, dtype=torch.float32, device=device
            )
            stats.update(credit_stats(advantages, numpy(module_batch[AGENT_INDEX]), mask, self.agents))
            for agent in self.agents:
                key = f"{CREDIT_PREFIX}{agent}_mean_abs_adv"
                if key in stats:
                    owner[agent], mean_abs[agent] = module_id, stats[key]
            if metrics is not None:
                for key, value in stats.items():
                    metrics.log_value((module_id, key), value, window=1)
        if metrics is not None:
            for agent, share in credit_shares(mean_abs).items():
                metrics.log_value((owner[agent], f"{CREDIT_PREFIX}{agent}_share"), share, window=1)
        self.updates += 1
        return batch


def standardize(x: np.ndarray, mask: np.ndarray, center: bool = True) -> np.ndarray:
    """(x - mean) / std over the real rows (RLlib's GAE convention); ``center=False`` only scales."""
    if not mask.any():
        return x
    mean = float(x[mask].mean()) if center else 0.0
    return ((x - mean) / max(1e-4, float(x[mask].std()))).astype(np.float32)


class TeamGaeAdvantage(CounterfactualAdvantage):
    """GAE on the TEAM reward, standardised (RLlib's GAE, with team instead of per-agent rewards).

    The ``advantage: gae`` ablation of both estimators, and the team-level term LEMON mixes with.
    """

    def team_gae(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Returns (standardised GAE advantages, value targets)."""
        values = numpy(module.compute_values(module_batch)).astype(np.float32)
        targets = team_value_targets(values, module_batch, self.gamma, self.lambda_)
        return standardize(targets - values, mask), targets

    def module_advantages(
        self, module: RLModule, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        advantages, targets = self.team_gae(module, module_batch, mask)
        return advantages, targets, {}
