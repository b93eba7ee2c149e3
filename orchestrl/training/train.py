"""``orchestrl train``: one experiment, one RLlib algorithm, one MLflow run.

The loop is deliberately plain: train an iteration, curate its metrics, log them, print one line,
checkpoint every K iterations, stop on the first condition met. ``--resume RUN_ID`` rebuilds the
algorithm from the run's own resolved config, restores its last checkpoint and keeps logging into
the same MLflow run.
"""

from __future__ import annotations

import csv
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrl.experiment.config import ExperimentConfig, load_config
from orchestrl.tracking import runs as tracking
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

log = logging.getLogger(__name__)


class ResumeError(RuntimeError):
    """``--resume`` named a run that cannot be resumed."""


@dataclass
class TrainSummary:
    run_id: str
    experiment: str
    tracking_uri: str
    iterations: int
    env_steps: float
    first: dict[str, float]
    last: dict[str, float]
    evaluation: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    run_path: str = ""

    def steps_per_s(self) -> float:
        return self.last.get("env_steps_per_s", float("nan"))


def run_path(cfg: ExperimentConfig, run_id: str) -> Path:
    return Path(cfg.run_dir).resolve() / "experiments" / cfg.name / run_id


def train(
    cfg: ExperimentConfig,
    *,
    stop_iters: int | None = None,
    resume: str | None = None,
    address: str | None = None,
    tracking_uri: str | None = None,
    verbose: bool = False,
    parent_run_id: str | None = None,
    extra_tags: dict[str, str] | None = None,
    echo: Any = print,
) -> TrainSummary:
    """Trains ``cfg`` (or resumes run ``resume``) and returns what the run achieved."""
    run_dir = Path(cfg.run_dir)
    quiet_environment(run_dir)
    silence_noise(verbose)
    uri = tracking.resolve_tracking_uri(run_dir, tracking_uri or cfg.tracking.uri)
    mlflow = tracking.client(uri)

    start_iter, checkpoint = 0, None
    if resume:
        cfg, start_iter, checkpoint = _resumable(mlflow, resume)
        run_id = resume
        mlflow.update_run(run_id, status="RUNNING")
    else:
        exp_id = tracking.experiment_id(mlflow, cfg.tracking.experiment or cfg.name, run_dir, uri)
        tags = {**tracking.run_tags("train"), **(extra_tags or {})}
        if parent_run_id:
            tags[tracking.TAG_PARENT] = parent_run_id
        run_id = mlflow.create_run(exp_id, run_name=cfg.name, tags=tags).info.run_id
        _log_params(mlflow, run_id, cfg)
    if stop_iters is not None:
        cfg.stop.iterations = stop_iters
    here = run_path(cfg, run_id)
    here.mkdir(parents=True, exist_ok=True)
    (here / "config.yaml").write_text(cfg.to_yaml())
    mlflow.set_tag(run_id, tracking.TAG_CONFIG, str(here / "config.yaml"))

    with tracking.terminated_as(mlflow, run_id) as outcome:
        with ray_session(cfg.resources, run_dir, address=address, verbose=verbose):
            summary = _train_loop(cfg, mlflow, run_id, here, start_iter, checkpoint, echo)
        summary.tracking_uri = uri
        outcome.status = "FINISHED"
        return summary


def _train_loop(
    cfg: ExperimentConfig,
    mlflow: Any,
    run_id: str,
    here: Path,
    start_iter: int,
    checkpoint: str | None,
    echo: Any,
) -> TrainSummary:
    import ray

    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.training.checkpoints import build_algorithm, save_checkpoint

    gpus = ray.cluster_resources().get("GPU", 0.0)
    algo = build_algorithm(build_ppo_config(cfg, gpus_available=gpus), here / "ray_results")
    if checkpoint:
        algo.restore_from_path(checkpoint)
    history_path = here / "metrics.csv"
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    evaluation: dict[str, float] = {}
    started = time.time()
    prev_steps = _last_env_steps(mlflow, run_id) if start_iter else 0.0
    iteration = start_iter
    try:
        while True:
            iteration += 1
            metrics = tracking.curate(algo.train(), prev_env_steps=prev_steps)
            prev_steps = metrics["env_steps"]
            first = first or metrics
            last = metrics
            mlflow.log_batch(run_id, metrics=_metric_entities(metrics, iteration))
            _append_csv(history_path, iteration, metrics)
            evaluation.update({k: v for k, v in metrics.items() if k.startswith("eval/")})
            echo(progress_line(cfg, iteration, start_iter, metrics, time.time() - started))
            done = stop_reason(cfg, iteration, metrics, time.time() - started)
            every = cfg.tracking.checkpoint_every
            if done or (every and iteration % every == 0):
                checkpoint = save_checkpoint(algo, here / "checkpoints", iteration)
                mlflow.set_tag(run_id, tracking.TAG_CHECKPOINT, checkpoint)
                mlflow.set_tag(run_id, tracking.TAG_ITERATION, str(iteration))
            if done:
                echo(f"stopped: {done}")
                break
        write_best_episode(algo, here / "artifacts")
        if cfg.evaluation.episodes and not cfg.evaluation.interval:
            evaluation = tracking.curate({"evaluation": algo.evaluate()})
            evaluation = {k: v for k, v in evaluation.items() if k.startswith("eval/")}
            mlflow.log_batch(run_id, metrics=_metric_entities(evaluation, iteration))
    finally:
        algo.stop()
    _log_artifacts(cfg, mlflow, run_id, here, checkpoint)
    return TrainSummary(
        run_id=run_id,
        experiment=cfg.tracking.experiment or cfg.name,
        tracking_uri="",
        iterations=iteration,
        env_steps=last.get("env_steps", 0.0),
        first=first,
        last=last,
        evaluation=evaluation,
        checkpoint=checkpoint,
        run_path=str(here),
    )


def stop_reason(
    cfg: ExperimentConfig, iteration: int, metrics: dict[str, float], elapsed: float
) -> str | None:
    stop = cfg.stop
    if stop.iterations is not None and iteration >= stop.iterations:
        return f"{iteration} iterations"
    if stop.env_steps is not None and metrics.get("env_steps", 0) >= stop.env_steps:
        return f"{int(metrics['env_steps']):,} env steps"
    if stop.time_s is not None and elapsed >= stop.time_s:
        return f"{elapsed:.0f} s"
    if stop.metric is not None and metrics.get(stop.metric, -math.inf) >= stop.threshold:
        return f"{stop.metric} = {metrics[stop.metric]:.3f} >= {stop.threshold}"
    return None


def progress_line(
    cfg: ExperimentConfig, iteration: int, start_iter: int, metrics: dict[str, float], elapsed: float
) -> str:
    total = cfg.stop.iterations
    done_here = iteration - start_iter
    eta = ""
    if total:
        remaining = max(total - iteration, 0) * elapsed / max(done_here, 1)
        eta = f" | ETA {int(remaining // 60)}:{int(remaining % 60):02d}"
    ret = metrics.get("team_return_sum_mean", float("nan"))
    extra = "".join(
        f" | {k.removeprefix('env/')} {v:.3f}"
        for k, v in metrics.items()
        if k in ("env/success", "eval/env/success")
    )
    of_total = f"/{total}" if total else ""
    return (
        f"iter {iteration:>4}{of_total} | steps {int(metrics.get('env_steps', 0)):>9,}"
        f" | return {ret:9.2f}{extra} | {metrics.get('env_steps_per_s', 0):6.0f} steps/s{eta}"
    )


def write_best_episode(algo: Any, folder: Path) -> None:
    """Writes the files of the best episode any env runner saw (see platform.callbacks)."""
    from orchestrl.training.callbacks import best_episode_artifacts

    found = algo.env_runner_group.foreach_env_runner(
        lambda _runner: best_episode_artifacts(), local_env_runner=True
    )
    best = max(found, key=lambda b: b["score"], default=None)
    if not best or not best["files"]:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in best["files"].items():
        (folder / name).write_text(text)
    (folder / "best_episode_score.txt").write_text(f"{best['score']:.6f}\n")


def _resumable(mlflow: Any, run_id: str) -> tuple[ExperimentConfig, int, str]:
    from mlflow.exceptions import MlflowException

    try:
        run = mlflow.get_run(run_id)
    except MlflowException:
        raise ResumeError(f"--resume {run_id}: no such run in the tracking store") from None
    tags = run.data.tags
    config_path = tags.get(tracking.TAG_CONFIG)
    checkpoint = tags.get(tracking.TAG_CHECKPOINT)
    if not config_path or not Path(config_path).is_file():
        raise ResumeError(f"--resume {run_id}: the run's config ({config_path}) is not on this machine")
    if not checkpoint or not Path(checkpoint).is_dir():
        raise ResumeError(f"--resume {run_id}: the run has no checkpoint on this machine yet")
    return load_config(config_path), int(tags.get(tracking.TAG_ITERATION, "0")), checkpoint


def _last_env_steps(mlflow: Any, run_id: str) -> float:
    return float(mlflow.get_run(run_id).data.metrics.get("env_steps", 0.0))


def _log_params(mlflow: Any, run_id: str, cfg: ExperimentConfig) -> None:
    from mlflow.entities import Param

    params = [Param(k, v[:6000]) for k, v in cfg.flat_params().items()]
    for i in range(0, len(params), 100):
        mlflow.log_batch(run_id, params=params[i : i + 100])


def _metric_entities(metrics: dict[str, float], step: int) -> list:
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(k, v, now, step) for k, v in metrics.items()]


def _append_csv(path: Path, iteration: int, metrics: dict[str, float]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(["iteration", "metric", "value"])
        writer.writerows([iteration, k, v] for k, v in metrics.items())


def _log_artifacts(
    cfg: ExperimentConfig, mlflow: Any, run_id: str, here: Path, checkpoint: str | None
) -> None:
    if not cfg.tracking.log_artifacts:
        return
    history = tracking.metric_history(mlflow, run_id)
    tracking.plot_learning_curve(
        history, here / "learning_curve.png", title=f"{cfg.name} ({cfg.algorithm.name})"
    )
    for name in ("config.yaml", "learning_curve.png", "metrics.csv"):
        if (here / name).exists():
            mlflow.log_artifact(run_id, str(here / name))
    if checkpoint:
        mlflow.log_artifacts(run_id, checkpoint, artifact_path="checkpoint")
    extra = here / "artifacts"
    if extra.is_dir():
        mlflow.log_artifacts(run_id, str(extra), artifact_path="env")
