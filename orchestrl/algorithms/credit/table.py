"""The per-agent credit table: one row per (module, agent) with every ``credit/<agent>_<stat>``.

An RLlib callback puts the rows into each training iteration's result (``result["credit_table"]``);
``orchestrl.tracking`` writes them next to the run's other artifacts. Nothing here touches files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback

from orchestrl.algorithms.callbacks import CREDIT_TABLE_KEY
from orchestrl.algorithms.credit.advantage import CREDIT_PREFIX, numpy
from orchestrl.algorithms.credit.learner import credit_spec

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm


def credit_table(learner_results: Mapping[str, Any], agents: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (module, agent): every ``credit/<agent>_<stat>`` learner metric as a column."""
    rows = []
    for module_id, stats in learner_results.items():
        if not isinstance(stats, Mapping):
            continue
        for agent in agents:
            prefix = f"{CREDIT_PREFIX}{agent}_"
            values = {k.removeprefix(prefix): _scalar(v) for k, v in stats.items() if k.startswith(prefix)}
            values = {k: v for k, v in values.items() if np.isfinite(v)}  # stats not seen this iteration
            if values:
                rows.append({"module": module_id, "agent": agent, **values})
    return rows


def _scalar(value: Any) -> float:
    value = value.peek() if hasattr(value, "peek") else value
    return float(numpy(value))


class CreditTableCallbacks(RLlibCallback):
    """Puts the credit table of the latest learner metrics into each iteration's result."""

    def on_train_result(self, *, algorithm: Algorithm, result: dict, **kwargs: Any) -> None:
        rows = credit_table(result.get("learners", {}) or {}, credit_spec(algorithm.config).agents)
        if rows:
            for row in rows:
                row["iteration"] = result.get("training_iteration")
            result[CREDIT_TABLE_KEY] = rows
