"""``orchestrl runs show RUN_ID``: a run's checkpoint, config and key metrics, read from MLflow."""

from __future__ import annotations

import tempfile
from pathlib import Path

from orchestrl.tracking import names
from orchestrl.tracking.store import RunInfo, RunStore

KEY_METRICS = (names.TEAM_RETURN, "episode_len_mean", names.ENV_STEPS)
"""Shown first; then every env-reported (``env/``) and held-out (``eval/``) metric."""


def key_metrics(run: RunInfo) -> dict[str, float]:
    """The run's latest values of the metrics users read (see :data:`KEY_METRICS`)."""
    first = [m for k in KEY_METRICS for m in sorted(run.metrics) if m == k or m.startswith(f"{k}_")]
    rest = [m for m in sorted(run.metrics) if m.startswith((names.ENV_PREFIX, names.EVAL_PREFIX))]
    return {m: run.metrics[m] for m in [*first, *rest]}


def config_text(store: RunStore, run: RunInfo) -> str | None:
    """The run's experiment YAML: its file when on this machine, else its logged artifact."""
    path = run.tags.get(names.TAG_CONFIG)
    if path and Path(path).is_file():
        return Path(path).read_text()
    if names.CONFIG_FILE not in {a.path for a in store.client.list_artifacts(run.run_id)}:
        return None  # a parent run, an evaluation
    with tempfile.TemporaryDirectory() as tmp:
        return Path(store.client.download_artifacts(run.run_id, names.CONFIG_FILE, tmp)).read_text()


def describe_run(store: RunStore, run_id: str) -> str:
    """What ``orchestrl runs show`` prints; raises ``UnknownRunError`` for an unknown id."""
    run = store.run(run_id)
    tags = run.tags
    rows = [
        ("run", f"{run.run_id} ({run.name}, {run.status})"),
        ("kind", tags.get(names.TAG_KIND, "?")),
        ("parent run", tags.get(names.TAG_PARENT, "")),
        ("checkpoint", tags.get(names.TAG_CHECKPOINT) or tags.get(names.TAG_EVALUATED) or "none"),
        ("iterations", tags.get(names.TAG_ITERATION, "")),
        ("MLflow model", tags.get(names.TAG_MODEL, "")),
        ("config", tags.get(names.TAG_CONFIG, "")),
    ]
    width = 16
    lines = [f"{k:<{width}}  {v}" for k, v in rows if v]
    metrics = key_metrics(run)
    if metrics:
        lines += ["", "key metrics (latest values)"]
        mwidth = max(len(k) for k in metrics)
        lines += [f"  {k:<{mwidth}}  {v:.4g}" for k, v in metrics.items()]
    text = config_text(store, run)
    if text:
        lines += ["", f"config ({names.CONFIG_FILE})", *(f"  {line}" for line in text.rstrip().splitlines())]
    if tags.get(names.TAG_CHECKPOINT):
        lines += ["", f"use it: orchestrl evaluate {run.run_id}   |   orchestrl serve {run.run_id}"]
    return "\n".join(lines)
