"""Env-reported episode metrics, logged generically.

An env may put ``infos[agent]["metrics"] = {name: float}`` at an episode's last step (LEMON's
success and reward terms, Text2SQL's execution match...). They are the same for every agent of a
team, so the first agent's are logged, under ``env/<name>``, as episode means.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

ENV_METRIC_PREFIX = "env/"


def episode_metrics(last_infos: dict[str, Any]) -> dict[str, float]:
    for info in last_infos.values():
        if isinstance(info, dict) and isinstance(info.get("metrics"), dict):
            return {k: float(v) for k, v in info["metrics"].items()}
    return {}


class OrchestrlCallbacks(RLlibCallback):
    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        if metrics_logger is None:
            return
        for name, value in episode_metrics(episode.get_infos(-1)).items():
            metrics_logger.log_value(ENV_METRIC_PREFIX + name, value, reduce="mean", window=100)
