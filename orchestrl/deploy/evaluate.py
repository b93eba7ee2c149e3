"""``orchestrl evaluate``: a checkpoint's greedy team on its env (or another), with 95% CIs.

In this process, without Ray: the modules come from the checkpoint
(:class:`~orchestrl.experiment.policy.TrainedPolicy`), the env is the one the experiment trains
on (its RLlib env, built from the run's YAML with ``--set`` overrides, on the held-out split by
default), and each step every agent takes its greedy action. Each seed seeds the env's first
reset, and that seed's episodes follow from the env's own random stream (as an RLlib env runner
does).

Per episode it records the team return (summed over agents), the episode length and every metric
the env reports at the episode's end (``env/<name>``: LEMON's success, Text2SQL's execution
match...). The table gives each one's mean and IQM with 95% stratified-bootstrap CIs
(``orchestrl.tracking.stats``; the seeds are the strata, episodes resampled within each). The
evaluation is logged as an MLflow run of kind ``evaluate``, nested under the training run, with
the per-episode values as ``episodes.csv``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from orchestrl.deploy.team import Split, TeamError, TrainedTeam, one_line
from orchestrl.envs.reporting import episode_metrics
from orchestrl.experiment.policy import TrainedPolicy
from orchestrl.tracking import names
from orchestrl.tracking.stats import Aggregate, aggregate
from orchestrl.tracking.store import run_tags
from orchestrl.training.train import run_path

RETURN = "team_return_sum"
LENGTH = "episode_len"
LOGGED = {RETURN: names.TEAM_RETURN, LENGTH: "episode_len_mean"}
"""Per-episode names -> the names training logs their means under (so the UI lines them up)."""


@dataclass
class Evaluation:
    """What ``orchestrl evaluate`` measured."""

    checkpoint: str
    description: str
    seeds: list[int]
    episodes: int
    rows: list[dict[str, float]]
    """One per episode: ``seed``, ``episode``, then each measured value."""
    metrics: dict[str, Aggregate] = field(default_factory=dict)
    run_id: str | None = None
    parent_run_id: str | None = None

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metrics: each mean under training's name, its CI and IQM beside it."""
        out = {}
        for key, agg in self.metrics.items():
            name = LOGGED.get(key, key)
            out[name] = agg.mean.value
            out[f"{name}_ci95_low"], out[f"{name}_ci95_high"] = agg.mean.low, agg.mean.high
            out[f"{name}_iqm"] = agg.iqm.value
        return out

    def table(self) -> str:
        width = max(len(k) for k in [*self.metrics, "metric"])
        lines = [
            "",
            f"evaluation of {self.checkpoint}",
            f"  {self.description}",
            f"  greedy actions, seeds {self.seeds} x {self.episodes} episodes",
            "",
            f"{'metric':<{width}}  {'mean [95% CI]':<28}  IQM [95% CI]",
            "-" * (width + 60),
        ]
        for key, agg in self.metrics.items():
            digits = 3 if key.startswith(names.ENV_PREFIX) else 2
            lines.append(f"{key:<{width}}  {agg.mean.fmt(digits):<28}  {agg.iqm.fmt(digits)}")
        if self.run_id:
            nested = (
                f", nested under {self.parent_run_id}" if self.parent_run_id else " (no training run found)"
            )
            lines += ["", f"MLflow run {self.run_id}{nested}"]
        return "\n".join(lines)


def rollout(policy: TrainedPolicy, env: Any, seed: int, episodes: int) -> list[dict[str, float]]:
    """``episodes`` greedy episodes on ``env`` (a ``MultiAgentEnv``), the first reset seeded."""
    out = []
    obs, _ = env.reset(seed=seed)
    for episode in range(episodes):
        if episode:
            obs, _ = env.reset()
        total, steps, infos = 0.0, 0, {}
        while True:
            obs, rewards, terminateds, truncateds, infos = env.step(policy.act(obs))
            total += float(sum(rewards.values()))
            steps += 1
            if terminateds.get("__all__") or truncateds.get("__all__"):
                break
        metrics = {names.ENV_PREFIX + k: v for k, v in episode_metrics(infos).items()}
        out.append({RETURN: total, LENGTH: float(steps), **metrics})
    return out


def evaluate(
    team: TrainedTeam,
    *,
    split: Split = "heldout",
    episodes: int = 20,
    seeds: Sequence[int] = (0,),
    log: bool = True,
    echo: Callable[[str], Any] = print,
) -> Evaluation:
    """Scores ``team`` greedily (module docstring); logs the evaluation run when ``log``."""
    ppo = team.rllib_config(split)
    policy = team.policy(ppo)
    cfg = team.split_config(split)
    overrides = cfg.evaluation.env_overrides if split == "heldout" else {}
    source = f"evaluation.env_overrides {overrides}" if overrides else "the training env"
    description = f"{cfg.algorithm.name} on {cfg.env.name} {cfg.env.kwargs}: split {split} ({source})"
    rows: list[dict[str, float]] = []
    try:
        env = ppo.env(ppo.env_config)
    except Exception as err:
        raise TeamError(
            f"{team.checkpoint}: cannot build its env '{cfg.env.name}': {one_line(err)}"
        ) from None
    try:
        for seed in seeds:
            echo(f"seed {seed}: {episodes} episodes")
            for i, values in enumerate(rollout(policy, env, seed, episodes)):
                rows.append({"seed": float(seed), "episode": float(i), **values})
    finally:
        env.close()
    result = Evaluation(str(team.checkpoint), description, list(seeds), episodes, rows)
    result.metrics = summarise(rows, list(seeds), episodes)
    if log:
        log_evaluation(team, result, split)
    return result


def summarise(rows: list[dict[str, float]], seeds: list[int], episodes: int) -> dict[str, Aggregate]:
    """Mean and IQM of each value with 95% CIs, the seeds as strata (module docstring)."""
    keys = [k for k in rows[0] if k not in ("seed", "episode")] if rows else []
    out = {}
    for key in keys:
        values = [row.get(key, float("nan")) for row in rows]
        scores = np.asarray(values, dtype=np.float64).reshape(len(seeds), episodes).T
        if np.isfinite(scores).all():
            out[key] = aggregate(scores)
    return out


def log_evaluation(team: TrainedTeam, result: Evaluation, split: Split) -> None:
    """The evaluation as an MLflow run nested under the training run (when the store holds it)."""
    cfg = team.config
    store = team.store()
    experiment_id = store.experiment(cfg.tracking.experiment or cfg.name, Path(cfg.run_dir))
    parent = team.run_id
    if parent is None:
        tagged = store.find_runs(experiment_id, {names.TAG_CONFIG: str(team.config_path)})
        parent = tagged[0].run_id if tagged else None
    params = {
        "checkpoint": result.checkpoint,
        "split": split,
        "episodes": result.episodes,
        "seeds": result.seeds,
        **{f"env.kwargs.{k}": v for k, v in team.split_config(split).env.kwargs.items()},
        "env.name": cfg.env.name,
        "algorithm.name": cfg.algorithm.name,
    }
    tags = {**run_tags(names.KIND_EVALUATE), names.TAG_EVALUATED: result.checkpoint}
    run_id = store.create_run(experiment_id, f"{cfg.name} evaluate", tags, params, parent_run_id=parent)
    with store.terminated_as(run_id) as outcome:
        store.log_metrics(run_id, result.flat_metrics(), step=0)
        here = run_path(cfg, run_id)
        here.mkdir(parents=True, exist_ok=True)
        write_rows(result.rows, here / "episodes.csv")
        summary = {
            k: {"mean": [a.mean.value, a.mean.low, a.mean.high], "iqm": [a.iqm.value, a.iqm.low, a.iqm.high]}
            for k, a in result.metrics.items()
        }
        (here / "evaluation.json").write_text(json.dumps(summary, indent=1))
        store.log_artifact(run_id, here / "episodes.csv")
        store.log_artifact(run_id, here / "evaluation.json")
        outcome.status = "FINISHED"
    result.run_id, result.parent_run_id = run_id, parent


def write_rows(rows: list[dict[str, float]], path: Path) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys, restval="")
        writer.writeheader()
        writer.writerows(rows)
