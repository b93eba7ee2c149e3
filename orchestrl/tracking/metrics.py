"""What of RLlib's result is worth a curve, and the files a run folder keeps besides MLflow.

RLlib's result dict has hundreds of keys; users read a handful. :func:`curate` picks them, under the
names of :mod:`orchestrl.tracking.names`, for ``orchestrl train``, Tune trials and MLflow alike.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrl.tracking import names


def curate(result: Mapping[str, Any], prev_env_steps: float = 0.0) -> dict[str, float]:
    """The handful of metrics users read, from RLlib's result dict.

    ``episode_return_*`` in RLlib's multi-agent result is the team return SUMMED over agents; the
    names say so.
    """
    runners = result.get("env_runners", {}) or {}
    out: dict[str, float] = {}
    for stat in ("mean", "min", "max"):
        _put(out, f"team_return_sum_{stat}", runners.get(f"episode_return_{stat}"))
    _put(out, "episode_len_mean", runners.get("episode_len_mean"))
    for key, value in runners.items():
        if key.startswith(names.ENV_PREFIX):
            _put(out, key, value)
    for module_id, stats in (result.get("learners", {}) or {}).items():
        if module_id.startswith("__") or not isinstance(stats, Mapping):
            continue
        for stat in names.MODULE_STATS:
            _put(out, f"{module_id}/{stat}", stats.get(stat))
        for key, value in stats.items():
            if key.startswith(names.CREDIT_PREFIX):
                _put(out, f"{module_id}/{key}", value)
    env_steps = float(result.get("num_env_steps_sampled_lifetime", 0.0) or 0.0)
    iter_s = float(result.get("time_this_iter_s", 0.0) or 0.0)
    out[names.ENV_STEPS] = env_steps
    if iter_s > 0:
        out[names.ENV_STEPS_PER_S] = (env_steps - prev_env_steps) / iter_s
    _put(out, "learner_time_s", (result.get("timers", {}) or {}).get("learner_update_timer"))
    _put(out, "sample_time_s", (result.get("timers", {}) or {}).get("env_runner_sampling_timer"))
    evaluation = (result.get("evaluation", {}) or {}).get("env_runners", {}) or {}
    _put(out, names.EVAL_PREFIX + names.TEAM_RETURN, evaluation.get("episode_return_mean"))
    _put(out, names.EVAL_PREFIX + "episode_len_mean", evaluation.get("episode_len_mean"))
    for key, value in evaluation.items():
        if key.startswith(names.ENV_PREFIX):
            _put(out, names.EVAL_PREFIX + key, value)
    return out


FIXED_METRICS = {f"team_return_sum_{stat}" for stat in ("mean", "min", "max")} | {
    "episode_len_mean",
    names.ENV_STEPS,
    names.ENV_STEPS_PER_S,
    "learner_time_s",
    "sample_time_s",
    names.EVAL_PREFIX + names.TEAM_RETURN,
}
"""The curated names that do not depend on the env or the modules."""
MODULE_METRIC = re.compile(rf"^[^/]+/({'|'.join(names.MODULE_STATS)}|{names.CREDIT_PREFIX}.+)$")


def is_curated_metric(name: str) -> bool:
    """Whether ``name`` is one of the metrics :func:`curate` produces (what runs log)."""
    env_metric = name.startswith((names.ENV_PREFIX, names.EVAL_PREFIX + names.ENV_PREFIX))
    return name in FIXED_METRICS or env_metric or bool(MODULE_METRIC.match(name))


def evaluation_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The held-out evaluation part of curated metrics."""
    return {k: v for k, v in metrics.items() if k.startswith(names.EVAL_PREFIX)}


def _put(out: dict[str, float], key: str, value: Any) -> None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return
    if math.isfinite(value):
        out[key] = value


def append_metrics_csv(path: Path, iteration: int, metrics: Mapping[str, float]) -> None:
    """One iteration's curated metrics appended to the run folder's long-format CSV."""
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(["iteration", "metric", "value"])
        writer.writerows([iteration, k, v] for k, v in metrics.items())


def read_metrics_csv(path: Path) -> dict[str, list[tuple[int, float]]]:
    """A run folder's metrics.csv as ``name -> [(iteration, value), ...]`` (empty if absent)."""
    history: dict[str, list[tuple[int, float]]] = {}
    if path.is_file():
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                history.setdefault(row["metric"], []).append((int(row["iteration"]), float(row["value"])))
    return history


def write_credit_table(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Writes a credit table (``orchestrl.algorithms.credit.table``) as CSV: columns module, agent,
    then every stat seen, sorted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = sorted({k for row in rows for k in row} - {"module", "agent"})
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["module", "agent", *stats], restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def plot_learning_curve(
    history: Mapping[str, list[tuple[int, float]]], path: Path, title: str
) -> Path | None:
    """A PNG of the team return (and env success, if reported) against iterations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        k
        for k in (
            names.TEAM_RETURN,
            names.ENV_PREFIX + "success",
            names.EVAL_PREFIX + names.ENV_PREFIX + "success",
        )
        if history.get(k)
    ]
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
