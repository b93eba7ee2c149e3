"""``orchestrl train``: one experiment, one RLlib algorithm, one MLflow run.

The loop is deliberately plain: train an iteration, curate its metrics, log them, print one line,
checkpoint every K iterations, stop on the first condition met. ``--resume RUN_ID`` rebuilds the
algorithm from the run's own resolved config, restores its last checkpoint and keeps logging into
the same MLflow run.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrl.algorithms.callbacks import CREDIT_TABLE_KEY
from orchestrl.experiment.config import ExperimentConfig, load_config
from orchestrl.tracking import names
from orchestrl.tracking.journal import TrackingUnavailable
from orchestrl.tracking.metrics import (
    append_metrics_csv,
    curate,
    evaluation_metrics,
    plot_learning_curve,
    read_metrics_csv,
    write_credit_table,
)
from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri, run_tags
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm
    from ray.rllib.algorithms.ppo import PPOConfig

Echo = Callable[[str], Any]

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
    echo: Echo = print,
) -> TrainSummary:
    """Trains ``cfg`` (or resumes run ``resume``) and returns what the run achieved."""
    run_dir = Path(cfg.run_dir)
    quiet_environment(run_dir)
    silence_noise(verbose)
    uri = resolve_tracking_uri(run_dir, tracking_uri or cfg.tracking.uri)
    # closing the store says where writes wait if the tracking server never came back
    with RunStore(uri, run_dir, journal_mb=cfg.tracking.journal_mb, echo=echo) as store:
        start_iter, checkpoint = 0, None
        if resume:
            cfg, start_iter, checkpoint = _resumable(store, resume)
            run_id = resume
            store.reopen(run_id)
        else:
            exp_id = store.experiment(cfg.tracking.experiment or cfg.name, run_dir)
            tags = {**run_tags(names.KIND_TRAIN), **(extra_tags or {})}
            run_id = store.create_run(exp_id, cfg.name, tags, cfg.flat_params(), parent_run_id=parent_run_id)
        if stop_iters is not None:
            cfg.stop.iterations = stop_iters
        here = run_path(cfg, run_id)
        here.mkdir(parents=True, exist_ok=True)
        (here / names.CONFIG_FILE).write_text(cfg.to_yaml())
        store.set_tags(run_id, {names.TAG_CONFIG: str(here / names.CONFIG_FILE)})

        with store.terminated_as(run_id) as outcome:
            with ray_session(cfg.resources, run_dir, address=address, verbose=verbose):
                summary = _train_loop(cfg, store, run_id, here, start_iter, checkpoint, echo)
            summary.tracking_uri = store.uri
            outcome.status = "FINISHED"
            return summary


def _train_loop(
    cfg: ExperimentConfig,
    store: RunStore,
    run_id: str,
    here: Path,
    start_iter: int,
    checkpoint: str | None,
    echo: Echo,
) -> TrainSummary:
    import ray

    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.training.checkpoints import build_algorithm, save_checkpoint

    gpus = ray.cluster_resources().get("GPU", 0.0)
    ppo = build_ppo_config(cfg, gpus_available=gpus)
    algo = build_algorithm(ppo, here / "ray_results")
    if checkpoint:
        algo.restore_from_path(checkpoint)
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    evaluation: dict[str, float] = {}
    started = time.time()
    prev_steps = store.run(run_id).metrics.get(names.ENV_STEPS, 0.0) if start_iter else 0.0
    iteration = start_iter
    try:
        while True:
            iteration += 1
            result = algo.train()
            metrics = curate(result, prev_env_steps=prev_steps)
            prev_steps = metrics[names.ENV_STEPS]
            first = first or metrics
            last = metrics
            store.log_metrics(run_id, metrics, iteration)
            append_metrics_csv(here / names.METRICS_CSV, iteration, metrics)
            if result.get(CREDIT_TABLE_KEY):
                write_credit_table(result[CREDIT_TABLE_KEY], here / names.ARTIFACTS_DIR / names.CREDIT_TABLE)
            evaluation.update(evaluation_metrics(metrics))
            echo(progress_line(cfg, iteration, start_iter, metrics, time.time() - started))
            done = stop_reason(cfg, iteration, metrics, time.time() - started)
            every = cfg.tracking.checkpoint_every
            if done or (every and iteration % every == 0):
                checkpoint = save_checkpoint(algo, here / "checkpoints", iteration)
                store.set_tags(
                    run_id, {names.TAG_CHECKPOINT: checkpoint, names.TAG_ITERATION: str(iteration)}
                )
            if done:
                echo(f"stopped: {done}")
                break
        write_best_episode(algo, here / names.ARTIFACTS_DIR)
        if cfg.evaluation.episodes and not cfg.evaluation.interval:
            evaluation = evaluation_metrics(curate({"evaluation": algo.evaluate()}))
            store.log_metrics(run_id, evaluation, iteration)
    finally:
        algo.stop()
    _log_artifacts(cfg, store, run_id, here, checkpoint, ppo, echo)
    return TrainSummary(
        run_id=run_id,
        experiment=cfg.tracking.experiment or cfg.name,
        tracking_uri="",
        iterations=iteration,
        env_steps=last.get(names.ENV_STEPS, 0.0),
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


def write_best_episode(algo: Algorithm, folder: Path) -> None:
    """Writes the files of the best episode any env runner saw (see ``orchestrl.envs.reporting``)."""
    from orchestrl.envs.reporting import best_episode_artifacts

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


def _resumable(store: RunStore, run_id: str) -> tuple[ExperimentConfig, int, str]:
    try:
        run = store.run(run_id)
    except UnknownRunError:
        raise ResumeError(f"--resume {run_id}: no such run in the tracking store") from None
    config_path = run.tags.get(names.TAG_CONFIG)
    checkpoint = run.tags.get(names.TAG_CHECKPOINT)
    if not config_path or not Path(config_path).is_file():
        raise ResumeError(f"--resume {run_id}: the run's config ({config_path}) is not on this machine")
    if not checkpoint or not Path(checkpoint).is_dir():
        raise ResumeError(f"--resume {run_id}: the run has no checkpoint on this machine yet")
    return load_config(config_path), int(run.tags.get(names.TAG_ITERATION, "0")), checkpoint


def _log_artifacts(
    cfg: ExperimentConfig,
    store: RunStore,
    run_id: str,
    here: Path,
    checkpoint: str | None,
    ppo: PPOConfig,
    echo: Echo,
) -> None:
    if not cfg.tracking.log_artifacts:
        return
    try:
        history = store.metric_history(run_id)
    except TrackingUnavailable:
        echo(f"warning: tracking server unreachable: the learning curve is drawn from {names.METRICS_CSV}")
        history = read_metrics_csv(here / names.METRICS_CSV)
    plot_learning_curve(history, here / names.LEARNING_CURVE, title=f"{cfg.name} ({cfg.algorithm.name})")
    for name in (names.CONFIG_FILE, names.LEARNING_CURVE, names.METRICS_CSV):
        if (here / name).exists():
            store.log_artifact(run_id, here / name)
    if checkpoint:
        store.log_artifacts(run_id, checkpoint, artifact_path="checkpoint")
        log_policy(cfg, store, run_id, here, checkpoint, ppo, echo)
    extra = here / names.ARTIFACTS_DIR
    if extra.is_dir():
        store.log_artifacts(run_id, extra, artifact_path="env")


def log_policy(
    cfg: ExperimentConfig,
    store: RunStore,
    run_id: str,
    here: Path,
    checkpoint: str,
    ppo: PPOConfig,
    echo: Echo,
) -> None:
    """The final policy as the run's MLflow model (``orchestrl.tracking.models``), from a policy
    folder in the run folder: the checkpoint's modules and the agent -> module table."""
    from orchestrl.experiment.policy import PolicyError, TrainedPolicy
    from orchestrl.tracking.models import log_policy_model

    info = {"env": cfg.env.name, "algorithm": cfg.algorithm.name}
    try:
        folder = TrainedPolicy.from_checkpoint(checkpoint, ppo, info).save(here / names.POLICY_DIR)
    except PolicyError as err:
        log.warning("the final policy is not logged as an MLflow model: %s", err)
        return
    try:
        log_policy_model(store, run_id, folder)
    except TrackingUnavailable:
        echo(f"warning: tracking server unreachable: the final policy is not logged as a model ({folder})")
