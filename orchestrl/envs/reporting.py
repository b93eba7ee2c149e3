"""What an env reports at an episode's end, and the RLlib callback that collects it for every algorithm.

An env may put, at an episode's last step:
- ``infos[agent]["metrics"] = {name: float}`` (LEMON's success and reward terms, Text2SQL's
  execution match...). They are the same for every agent of a team, so the first agent's are
  logged, under ``env/<name>``, as episode means.
- ``infos[agent]["artifacts"] = {filename: text}`` (LEMON's spec YAML and generated pipeline).
  Each env-runner process keeps the files of its best episode (by ``metrics["score"]``, else the
  episode return); the trainer collects them at the end and logs the best as MLflow artifacts.

The experiment builder adds :class:`EnvReportCallbacks` to every algorithm's callbacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray.rllib.callbacks.callbacks import RLlibCallback

if TYPE_CHECKING:
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

ENV_METRIC_PREFIX = "env/"

_best_episode: dict[str, Any] = {"score": float("-inf"), "files": {}}


def best_episode_artifacts() -> dict[str, Any]:
    """This process's best episode so far: ``{"score": float, "files": {name: text}}``."""
    return {"score": _best_episode["score"], "files": dict(_best_episode["files"])}


def _keep_if_best(last_infos: dict[str, Any], episode_return: float) -> None:
    for info in last_infos.values():
        if isinstance(info, dict) and isinstance(info.get("artifacts"), dict):
            score = float((info.get("metrics") or {}).get("score", episode_return))
            if score > _best_episode["score"]:
                _best_episode.update(score=score, files=dict(info["artifacts"]))


def episode_metrics(last_infos: dict[str, Any]) -> dict[str, float]:
    for info in last_infos.values():
        if isinstance(info, dict) and isinstance(info.get("metrics"), dict):
            return {k: float(v) for k, v in info["metrics"].items()}
    return {}


class EnvReportCallbacks(RLlibCallback):
    """Logs each finished episode's env metrics under ``env/<name>`` and keeps the files of this
    process's best episode (see the module docstring)."""

    def on_episode_end(
        self, *, episode: MultiAgentEpisode, metrics_logger: MetricsLogger | None = None, **kwargs: Any
    ) -> None:
        last_infos = episode.get_infos(-1)
        _keep_if_best(last_infos, float(episode.get_return()))
        if metrics_logger is None:
            return
        for name, value in episode_metrics(last_infos).items():
            metrics_logger.log_value(ENV_METRIC_PREFIX + name, value, reduce="mean", window=100)
