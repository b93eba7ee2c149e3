"""``orchestrl sweep``: a hyperparameter sweep over any experiment key, run by Ray Tune and recorded
as one MLflow tree.

The sweep YAML (``configs/sweeps/*.yaml``) names a base experiment, dotted overrides, a
search space (see :mod:`orchestrl.tune.search_space`), a search algorithm (``random`` or
Optuna's TPE), a scheduler (``none``, ``asha`` or ``pbt``), ``num_samples``, the curated
``metric`` with its ``mode``, and the resources each trial gets. Everything is validated before
Ray starts: a bad file is one ``ConfigError`` line naming the file and the key.

MLflow: a parent run per sweep (params: the search space and settings; at the end the best
trial's config and checkpoint), and a child run per trial (params: the trial's experiment keys;
metrics per iteration; artifacts), logged from the driver by
:class:`~orchestrl.tracking.trials.TrialRunLogger`.

Storage: ``<run_dir>/tune/<sweep>-<parent run id[:8]>``; ``--resume`` restores that Tune
experiment. Finished trials are not re-run. Unfinished ones continue from their last checkpoint,
into their own child runs under the same parent. On a multi-node cluster (``--address``) the run
dir must be on a filesystem every node sees, so Tune can gather the trials' checkpoints there.

Resources: by default a trial samples in its own process (``env_runners: 0``) with vectorised
envs. It then asks for one CPU, so a 2-core laptop runs two trials at a time and queues the rest.
A trial that could never fit the cluster is refused before anything starts. Left to Tune, it would
stay PENDING forever.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from orchestrl.experiment.config import ConfigError, ExperimentConfig
from orchestrl.tracking import names
from orchestrl.tracking.journal import TrackingUnavailable
from orchestrl.tracking.store import RunInfo, RunStore
from orchestrl.tune.lifecycle import DEFAULT_LAUNCH, Echo, Launch, TuneCommand, parent_run
from orchestrl.tune.search_space import Dimension, check_metric, parse_space
from orchestrl.tune.spec import SpecModel, TuneRun, TuneRunSpec, load_spec

if TYPE_CHECKING:
    from ray.tune import Callback, ResultGrid


class SweepError(RuntimeError):
    """A sweep that cannot start or resume (the CLI prints it and exits 2)."""


class SearchSection(SpecModel):
    algorithm: Literal["random", "optuna"] = "random"
    """``random``: Tune's random/grid sampling; ``optuna``: Optuna's TPE sampler."""
    seed: int | None = None


class SchedulerSection(SpecModel):
    name: Literal["none", "asha", "pbt"] = "none"
    grace_period: int = Field(2, ge=1)
    """ASHA: iterations every trial runs before it can be stopped."""
    reduction_factor: float = Field(2.0, gt=1)
    """ASHA: keep the top 1/reduction_factor at each rung."""
    perturbation_interval: int = Field(2, ge=1)
    """PBT: iterations between exploit/explore steps."""
    quantile_fraction: float = Field(0.25, gt=0, le=0.5)
    resample_probability: float = Field(0.25, ge=0, le=1)


class SweepSpec(TuneRunSpec):
    """A sweep YAML, as validated."""

    space: dict[str, Any]
    search: SearchSection = Field(default_factory=SearchSection)
    scheduler: SchedulerSection = Field(default_factory=SchedulerSection)
    num_samples: int = Field(1, ge=1)
    """Samples of the space (with grid dimensions: repeats of the whole grid)."""
    metric: str = "team_return_sum_mean"
    mode: Literal["max", "min"] = "max"
    max_concurrent: int | None = Field(None, ge=1)
    """Trials at a time (default: as many as the cluster's CPUs hold)."""


@dataclass
class Sweep(TuneRun):
    """A validated sweep, ready to run."""

    spec: SweepSpec
    dims: dict[str, Dimension]


def load_sweep(path: str | Path, run_dir: str | None = None) -> Sweep:
    """Reads and validates a sweep YAML, its base experiment and its search space."""
    path, spec, base_path, base, cfg = load_spec(SweepSpec, path, run_dir)
    dims = parse_space(spec.space, base, str(path))
    check_metric(spec.metric, str(path), "metric")
    grid = [d.key for d in dims.values() if d.kind == "grid"]
    if spec.search.algorithm == "optuna" and grid:
        raise ConfigError(
            f"{path}: space.{grid[0]}: grid needs search.algorithm: random (Optuna samples, it does not "
            "enumerate)"
        )
    if spec.scheduler.name == "pbt":
        if spec.search.algorithm != "random":
            raise ConfigError(f"{path}: scheduler.name: pbt runs with search.algorithm: random")
        if all(d.kind == "grid" for d in dims.values()):
            raise ConfigError(f"{path}: scheduler.name: pbt needs a choice/uniform/loguniform key to perturb")
    if spec.scheduler.name in ("asha", "pbt") and cfg.stop.iterations is None:
        raise ConfigError(f"{path}: scheduler.name: {spec.scheduler.name} needs stop.iterations in the base")
    return Sweep(path, spec, base_path, base, cfg, dims)


# -- running ---------------------------------------------------------------------------------------
@dataclass
class TrialSummary:
    trial_id: str
    run_id: str | None
    status: str
    iterations: int
    value: float
    params: dict[str, Any]


@dataclass
class SweepSummary:
    name: str
    parent_run_id: str
    experiment: str
    tracking_uri: str
    tune_path: str
    metric: str
    mode: str
    interrupted: bool
    trials: list[TrialSummary] = field(default_factory=list)
    best: TrialSummary | None = None
    best_checkpoint: str | None = None


def run_sweep(
    sweep: Sweep, launch: Launch = DEFAULT_LAUNCH, callbacks: tuple[Callback, ...] = ()
) -> SweepSummary:
    """Runs (or, with ``launch.resume``, continues) a sweep; returns its trials and the best one.

    ``callbacks`` are extra Tune callbacks (tests use one to interrupt a sweep).
    """
    with parent_run(
        sweep,
        launch,
        kind=names.KIND_SWEEP,
        params=_parent_params(sweep),
        error=SweepError,
        resumable=_unrestorable,
    ) as parent:
        summary = _fit(
            sweep, parent.store, parent.experiment_id, parent.run_id, parent.tune_path, launch, callbacks
        )
        parent.outcome.status = "KILLED" if summary.interrupted else "FINISHED"
        return summary


def _parent_params(sweep: Sweep) -> dict[str, Any]:
    spec = sweep.spec
    return {
        "sweep.base": str(sweep.base_path),
        "sweep.num_samples": spec.num_samples,
        "sweep.search": spec.search.algorithm,
        "sweep.scheduler": spec.scheduler.name,
        "sweep.metric": spec.metric,
        "sweep.mode": spec.mode,
        "sweep.max_concurrent": spec.max_concurrent,
        **{f"space.{k}": d.describe() for k, d in sweep.dims.items()},
        **{f"overrides.{k}": v for k, v in spec.overrides.items()},
    }


def _unrestorable(parent: RunInfo) -> str | None:
    """Why the parent's Tune experiment cannot be restored, or None."""
    from ray import tune

    tune_path = parent.tags.get(names.TAG_TUNE_PATH, "")
    if not tune_path or not tune.Tuner.can_restore(tune_path):
        return f"no Tune experiment to restore at '{tune_path}'"
    return None


def max_concurrent(sweep: Sweep, cluster_cpus: float, per_trial: float) -> int:
    if sweep.spec.max_concurrent:
        return sweep.spec.max_concurrent
    return max(1, int(cluster_cpus // per_trial)) if per_trial > 0 else 4


def _fit(
    sweep: Sweep,
    store: RunStore,
    exp_id: str,
    parent_run_id: str,
    tune_path: str,
    launch: Launch,
    callbacks: tuple[Callback, ...],
) -> SweepSummary:
    import ray
    from ray import tune

    from orchestrl.tracking.trials import TrialRunLogger
    from orchestrl.tune.progress import SweepReporter, classic_tune_output
    from orchestrl.tune.search_space import resolve_trial_config
    from orchestrl.tune.trainable import ExperimentTrainable, trial_cpus, trial_dirname

    spec = sweep.spec
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    need = max(trial_cpus(_probe_config(sweep, d)) for d in _resource_probes(sweep))
    if need > cpus:
        raise ConfigError(
            f"{sweep.path}: trial_resources: a trial needs {need:g} CPUs but the cluster has {cpus:g}; "
            "use env_runners: 0 (vectorised envs in the trial) or cpus_per_env_runner: 0"
        )
    logger = None
    with classic_tune_output():
        if launch.resume:
            tuner = tune.Tuner.restore(
                tune_path, trainable=ExperimentTrainable, resume_unfinished=True, resume_errored=True
            )
        else:
            logger = TrialRunLogger(
                store.uri,
                exp_id,
                parent_run_id,
                resolve_trial_config,
                kind=names.KIND_SWEEP_TRIAL,
                run_name=f"{spec.name}-{{trial_id}}",
                tags={names.TAG_SPEC_NAME: spec.name},
                hparams=tuple(sweep.dims) if spec.scheduler.name == "pbt" else (),
                metric=spec.metric,
                mode=spec.mode,
                run_dir=str(sweep.run_dir),
            )
            tuner = tune.Tuner(
                ExperimentTrainable,
                param_space={"experiment": sweep.base, **{k: d.to_tune() for k, d in sweep.dims.items()}},
                tune_config=tune.TuneConfig(
                    metric=spec.metric,
                    mode=spec.mode,
                    num_samples=spec.num_samples,
                    search_alg=_search_alg(sweep, max_concurrent(sweep, cpus, need)),
                    scheduler=_scheduler(sweep),
                    # a finished trial's process runs the next trial (no new torch/RLlib import),
                    # unless trials differ in resources
                    reuse_actors=not any(k.startswith("resources.") for k in sweep.dims),
                    trial_dirname_creator=trial_dirname,
                ),
                run_config=tune.RunConfig(
                    name=Path(tune_path).name,
                    storage_path=str(Path(tune_path).parent),
                    callbacks=[logger, *callbacks],
                    progress_reporter=SweepReporter(spec.name, spec.metric, spec.mode, list(sweep.dims)),
                    verbose=1 if not launch.verbose else 2,
                    checkpoint_config=tune.CheckpointConfig(
                        # PBT trials restore each other's checkpoints: keep enough of them around
                        num_to_keep=max(spec.keep_checkpoints, 4 if spec.scheduler.name == "pbt" else 1),
                        checkpoint_frequency=spec.checkpoint_every,
                        checkpoint_at_end=True,
                    ),
                    failure_config=tune.FailureConfig(max_failures=1),
                    log_to_file=True,
                ),
            )
        grid = tuner.fit()
    known = logger.run_ids if logger else {}
    return _summarise(sweep, store, exp_id, parent_run_id, tune_path, grid, known, launch.echo)


def _resource_probes(sweep: Sweep) -> list[dict[str, Any]]:
    """Sampled values that change a trial's resources (searching resources.* keys is allowed)."""
    probes: list[dict[str, Any]] = [{}]
    for dim in sweep.dims.values():
        if dim.key.startswith("resources."):
            probes += [{dim.key: v} for v in dim.probes()]
    return probes


def _probe_config(sweep: Sweep, overrides: dict[str, Any]) -> ExperimentConfig:
    from orchestrl.tune.search_space import resolve_trial_config

    return resolve_trial_config({"experiment": sweep.base, **overrides})


def _search_alg(sweep: Sweep, concurrent: int) -> Any:
    """Optuna's TPE behind a ``ConcurrencyLimiter``, or Tune's random/grid generator."""
    if sweep.spec.search.algorithm == "optuna":
        import optuna
        from ray.tune.search import ConcurrencyLimiter
        from ray.tune.search.optuna import OptunaSearch

        sampler = optuna.samplers.TPESampler(seed=sweep.spec.search.seed)
        return ConcurrencyLimiter(OptunaSearch(sampler=sampler), max_concurrent=concurrent)
    from ray.tune.search.basic_variant import BasicVariantGenerator

    return BasicVariantGenerator(random_state=sweep.spec.search.seed, max_concurrent=concurrent)


def _scheduler(sweep: Sweep) -> Any:
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, PopulationBasedTraining

    sch, cfg = sweep.spec.scheduler, sweep.cfg
    if sch.name == "asha":
        return ASHAScheduler(
            time_attr="training_iteration",
            max_t=cfg.stop.iterations,
            grace_period=sch.grace_period,
            reduction_factor=sch.reduction_factor,
        )
    if sch.name == "pbt":
        return PopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=sch.perturbation_interval,
            hyperparam_mutations={k: d.mutation() for k, d in sweep.dims.items() if d.kind != "grid"},
            quantile_fraction=sch.quantile_fraction,
            resample_probability=sch.resample_probability,
            synch=False,
        )
    return FIFOScheduler()


def _summarise(
    sweep: Sweep,
    store: RunStore,
    exp_id: str,
    parent_run_id: str,
    tune_path: str,
    grid: ResultGrid,
    known: dict[str, str],
    echo: Echo,
) -> SweepSummary:
    """The trials as the tracking store records them, or, while it cannot answer, as Tune does
    (``known``: the child run ids this driver made)."""
    spec = sweep.spec
    try:
        runs = store.find_runs(exp_id, {names.TAG_PARENT: parent_run_id})
        children: dict[str | None, RunInfo] | None = {r.tags.get(names.TAG_TRIAL): r for r in runs}
    except TrackingUnavailable:
        echo("warning: tracking server unreachable: trial statuses are Tune's")
        children = None
    trials = []
    checkpoints: dict[str, str] = {}
    for result in grid:
        metrics = result.metrics or {}
        tid = str(metrics.get("trial_id") or Path(result.path).name)
        run = children.get(tid) if children is not None else None
        value = metrics.get(spec.metric)
        if run is not None:
            status = run.status
        elif children is None:  # Tune's view; an unfinished trial's run is marked KILLED below
            status = "FINISHED" if metrics.get("done") else "ERROR" if result.error else "RUNNING"
        else:
            status = "ERROR" if result.error else "UNKNOWN"
        if result.checkpoint is not None:
            checkpoints[tid] = str(Path(result.checkpoint.path) / "algorithm")
        trials.append(
            TrialSummary(
                trial_id=tid,
                run_id=run.run_id if run else known.get(tid),
                status=status,
                iterations=int(metrics.get("training_iteration", 0)),
                value=float(value) if isinstance(value, int | float) else math.nan,
                params={k: result.config.get(k) for k in sweep.dims} if result.config else {},
            )
        )
    finished = len([t for t in trials if t.status == "FINISHED"])
    interrupted = finished + grid.num_errors < len(trials)
    for t in trials:  # trials an interruption left behind; a resume reopens their runs
        if t.run_id and t.status == "RUNNING":
            store.set_terminated(t.run_id, "KILLED")
            t.status = "KILLED"
    summary = SweepSummary(
        name=spec.name,
        parent_run_id=parent_run_id,
        experiment=sweep.experiment,
        tracking_uri=store.uri,
        tune_path=tune_path,
        metric=spec.metric,
        mode=spec.mode,
        interrupted=interrupted,
        trials=trials,
    )
    scored = [t for t in trials if t.status == "FINISHED" and math.isfinite(t.value)]
    if scored and not interrupted:
        best = (max if spec.mode == "max" else min)(scored, key=lambda t: t.value)
        summary.best = best
        run = children.get(best.trial_id) if children is not None else None
        if run is not None:
            tags = run.tags
        else:  # the tracking store cannot say: Tune's checkpoint
            tags = {names.TAG_CHECKPOINT: checkpoints.get(best.trial_id, "")}
        _record_best(store, parent_run_id, best, tags, summary, spec.metric)
    return summary


def _record_best(
    store: RunStore,
    parent_run_id: str,
    best: TrialSummary,
    tags: Mapping[str, str],
    summary: SweepSummary,
    metric: str,
) -> None:
    """The best trial's run, config and checkpoint (``tags``: its child run's), on the parent run."""
    store.set_tags(parent_run_id, {names.TAG_BEST_TRIAL: best.trial_id})
    store.log_metrics(parent_run_id, {f"best/{metric}": best.value}, len(summary.trials))
    if best.run_id:
        store.set_tags(parent_run_id, {names.TAG_BEST_RUN: best.run_id})
    checkpoint = tags.get(names.TAG_CHECKPOINT)
    config_path = tags.get(names.TAG_CONFIG)
    if checkpoint and Path(checkpoint).is_dir():
        summary.best_checkpoint = checkpoint
        store.set_tags(parent_run_id, {names.TAG_CHECKPOINT: checkpoint})
        store.log_artifacts(parent_run_id, checkpoint, artifact_path="best/checkpoint")
    if config_path and Path(config_path).is_file():
        store.log_artifact(parent_run_id, config_path, artifact_path="best")


def summary_text(summary: SweepSummary, max_rows: int = 20) -> str:
    """A markdown table of the trials (best first) and where to look next."""
    sign = -1.0 if summary.mode == "max" else 1.0
    rows = sorted(summary.trials, key=lambda t: sign * t.value if math.isfinite(t.value) else math.inf)
    keys = list(rows[0].params) if rows else []
    lines = [
        "",
        f"sweep {summary.name}: {len(summary.trials)} trials"
        + (" (interrupted: resume with --resume)" if summary.interrupted else ""),
        "",
        "| trial | status | iters | " + " | ".join(keys) + f" | {summary.metric} |",
        "|---" * (4 + len(keys)) + "|",
    ]
    from orchestrl.tune.progress import fmt_value

    for t in rows[:max_rows]:
        cells = [t.trial_id, t.status, str(t.iterations), *(fmt_value(t.params.get(k)) for k in keys)]
        lines.append("| " + " | ".join([*cells, fmt_value(t.value)]) + " |")
    if summary.best:
        lines.append("")
        lines.append(f"best: {summary.best.trial_id} ({summary.metric} = {summary.best.value:.4g})")
        if summary.best_checkpoint:
            lines.append(f"best checkpoint: {summary.best_checkpoint}")
    lines += [
        f"MLflow parent run: {summary.parent_run_id} (experiment '{summary.experiment}')",
        f"tracking URI: {summary.tracking_uri}",
        f"Tune storage: {summary.tune_path}",
        f"report: orchestrl report {summary.parent_run_id}",
    ]
    return "\n".join(lines)


COMMAND = TuneCommand(load_sweep, run_sweep, summary_text, errors=(SweepError, TrackingUnavailable))
"""What ``orchestrl sweep`` runs."""
