"""MLflow tracking: where runs go, what of RLlib's result is worth a curve, and run bookkeeping.

The embedded default is a SQLite store with artifacts beside it, both under the run dir, so a
laptop needs no server; ``--tracking-uri`` / ``MLFLOW_TRACKING_URI`` point at a shared one.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrl.training.callbacks import ENV_METRIC_PREFIX

# MLflow tags that orchestrl sets on every run, so a run can be found and resumed.
TAG_KIND = "orchestrl.kind"
TAG_CHECKPOINT = "orchestrl.checkpoint"
TAG_ITERATION = "orchestrl.iteration"
TAG_CONFIG = "orchestrl.config_path"
TAG_PARENT = "mlflow.parentRunId"


def default_tracking_uri(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir.resolve() / 'mlflow.db').as_posix()}"


def resolve_tracking_uri(run_dir: Path, explicit: str | None = None) -> str:
    """``--tracking-uri`` > ``tracking.uri`` > ``MLFLOW_TRACKING_URI`` > the embedded store."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(run_dir)


def artifact_root(run_dir: Path) -> str:
    return (run_dir.resolve() / "mlartifacts").as_uri()


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def experiment_id(mlflow_client: Any, name: str, run_dir: Path, uri: str) -> str:
    """Gets or creates an experiment; embedded stores keep artifacts under the run dir."""
    found = mlflow_client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    location = artifact_root(run_dir) if uri.startswith("sqlite:") else None
    return mlflow_client.create_experiment(name, artifact_location=location)


@dataclass
class RunOutcome:
    """How a run ends; the body of :func:`terminated_as` sets ``status`` once it knows."""

    status: str = "FAILED"


@contextlib.contextmanager
def terminated_as(mlflow_client: Any, run_id: str) -> Iterator[RunOutcome]:
    """Marks ``run_id`` terminated when the block ends: with the status the block set
    (``FINISHED``, ``KILLED``), ``KILLED`` on Ctrl-C, ``FAILED`` on any other exception."""
    outcome = RunOutcome()
    try:
        yield outcome
    except KeyboardInterrupt:
        outcome.status = "KILLED"
        raise
    finally:
        mlflow_client.set_terminated(run_id, status=outcome.status)


def run_tags(kind: str) -> dict[str, str]:
    import ray
    import torch

    return {
        TAG_KIND: kind,
        "git_commit": git_commit(),
        "ray_version": ray.__version__,
        "torch_version": torch.__version__,
    }


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# -- curated metrics ---------------------------------------------------------------------------
_MODULE_STATS = ("policy_loss", "vf_loss", "entropy", "vf_explained_var", "mean_kl_loss")


def curate(result: Mapping[str, Any], prev_env_steps: float = 0.0) -> dict[str, float]:
    """The handful of metrics users read, from RLlib's ~300-key result dict.

    ``episode_return_*`` in RLlib's multi-agent result is the team return SUMMED over agents; the
    names say so.
    """
    runners = result.get("env_runners", {}) or {}
    out: dict[str, float] = {}
    for stat in ("mean", "min", "max"):
        _put(out, f"team_return_sum_{stat}", runners.get(f"episode_return_{stat}"))
    _put(out, "episode_len_mean", runners.get("episode_len_mean"))
    for key, value in runners.items():
        if key.startswith(ENV_METRIC_PREFIX):
            _put(out, key, value)
    for module_id, stats in (result.get("learners", {}) or {}).items():
        if module_id.startswith("__") or not isinstance(stats, Mapping):
            continue
        for stat in _MODULE_STATS:
            _put(out, f"{module_id}/{stat}", stats.get(stat))
        for key, value in stats.items():
            if key.startswith("credit/"):
                _put(out, f"{module_id}/{key}", value)
    env_steps = float(result.get("num_env_steps_sampled_lifetime", 0.0) or 0.0)
    iter_s = float(result.get("time_this_iter_s", 0.0) or 0.0)
    out["env_steps"] = env_steps
    if iter_s > 0:
        out["env_steps_per_s"] = (env_steps - prev_env_steps) / iter_s
    _put(out, "learner_time_s", (result.get("timers", {}) or {}).get("learner_update_timer"))
    _put(out, "sample_time_s", (result.get("timers", {}) or {}).get("env_runner_sampling_timer"))
    evaluation = (result.get("evaluation", {}) or {}).get("env_runners", {}) or {}
    _put(out, "eval/team_return_sum_mean", evaluation.get("episode_return_mean"))
    _put(out, "eval/episode_len_mean", evaluation.get("episode_len_mean"))
    for key, value in evaluation.items():
        if key.startswith(ENV_METRIC_PREFIX):
            _put(out, "eval/" + key, value)
    return out


def _put(out: dict[str, float], key: str, value: Any) -> None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return
    if math.isfinite(value):
        out[key] = value


def metric_history(mlflow_client: Any, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Every logged metric of a run as ``name -> [(step, value), ...]``."""
    run = mlflow_client.get_run(run_id)
    return {
        name: [(m.step, m.value) for m in mlflow_client.get_metric_history(run_id, name)]
        for name in run.data.metrics
    }


def plot_learning_curve(
    history: Mapping[str, list[tuple[int, float]]], path: Path, title: str
) -> Path | None:
    """A PNG of the team return (and env success, if reported) against iterations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [k for k in ("team_return_sum_mean", "env/success", "eval/env/success") if history.get(k)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.5), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        steps, values = zip(*sorted(history[key]), strict=True)
        ax.plot(steps, values)
        ax.set_xlabel("training iteration")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
