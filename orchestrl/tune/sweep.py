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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    _first_error,
    apply_overrides,
    read_yaml,
    validate_config,
)
from orchestrl.tracking import runs as tracking
from orchestrl.tune.search_space import Dimension, check_metric, check_override, load_base, parse_space

TAG_SPEC_NAME = "orchestrl.spec_name"
TAG_TUNE_PATH = "orchestrl.tune_path"
TAG_BEST_TRIAL = "orchestrl.best_trial"
TAG_BEST_RUN = "orchestrl.best_run_id"


class SweepError(RuntimeError):
    """A sweep that cannot start or resume (the CLI prints it and exits 2)."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchSection(_Spec):
    algorithm: Literal["random", "optuna"] = "random"
    """``random``: Tune's random/grid sampling; ``optuna``: Optuna's TPE sampler."""
    seed: int | None = None


class SchedulerSection(_Spec):
    name: Literal["none", "asha", "pbt"] = "none"
    grace_period: int = Field(2, ge=1)
    """ASHA: iterations every trial runs before it can be stopped."""
    reduction_factor: float = Field(2.0, gt=1)
    """ASHA: keep the top 1/reduction_factor at each rung."""
    perturbation_interval: int = Field(2, ge=1)
    """PBT: iterations between exploit/explore steps."""
    quantile_fraction: float = Field(0.25, gt=0, le=0.5)
    resample_probability: float = Field(0.25, ge=0, le=1)


class TuneRunSpec(_Spec):
    """What a sweep YAML and a curriculum YAML share: the base experiment and how trials run."""

    name: str
    base: str
    """The base experiment YAML (relative to this file, or to the working directory)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Dotted experiment keys set on the base for every trial."""
    trial_resources: dict[str, Any] = Field(default_factory=lambda: {"env_runners": 0})
    """``resources.*`` keys set for trials (default: sample in the trial's own process)."""
    checkpoint_every: int = Field(1, ge=1)
    """Trial checkpoint frequency in iterations (what a resume or PBT continues from)."""
    keep_checkpoints: int = Field(2, ge=1)
    experiment: str | None = None
    """MLflow experiment (default: the YAML's name)."""


class TuneRun:
    """What a loaded sweep and a loaded curriculum share (both are dataclasses with these fields)."""

    spec: TuneRunSpec
    cfg: ExperimentConfig

    @property
    def experiment(self) -> str:
        return self.spec.experiment or self.spec.name

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.run_dir)


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

    path: Path
    spec: SweepSpec
    base_path: Path
    base: dict[str, Any]
    """The base experiment dict (overrides and trial resources applied, run_dir absolute)."""
    cfg: ExperimentConfig
    dims: dict[str, Dimension]


def validate_spec(model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_first_error(err)}") from None


def load_sweep(path: str | Path, run_dir: str | None = None) -> Sweep:
    """Reads and validates a sweep YAML, its base experiment and its search space."""
    path = Path(path)
    spec: SweepSpec = validate_spec(SweepSpec, read_yaml(path), str(path))
    base_path, base, cfg = load_base(path, spec.base, spec.overrides, run_dir)
    base, cfg = apply_trial_resources(path, base, spec.trial_resources)
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


def apply_trial_resources(
    path: Path, base: dict[str, Any], trial_resources: dict[str, Any]
) -> tuple[dict[str, Any], ExperimentConfig]:
    """``base`` with ``resources.<key>`` set for each trial resource, each checked on its own."""
    overrides = {f"resources.{k}": v for k, v in trial_resources.items()}
    for key, value in overrides.items():
        check_override(base, key, value, f"{path}: trial_{key}")
    base = apply_overrides(base, overrides)
    return base, validate_config(base, source=str(path))


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
    sweep: Sweep,
    *,
    resume: bool = False,
    parent_run_id: str | None = None,
    tracking_uri: str | None = None,
    address: str | None = None,
    verbose: bool = False,
    echo: Any = print,
    callbacks: tuple[Any, ...] = (),
) -> SweepSummary:
    """Runs (or, with ``resume``, continues) a sweep; returns its trials and the best one.

    ``callbacks`` are extra Tune callbacks (tests use one to interrupt a sweep).
    """
    from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

    run_dir = sweep.run_dir
    quiet_environment(run_dir)
    silence_noise(verbose)
    uri = tracking.resolve_tracking_uri(run_dir, tracking_uri or sweep.cfg.tracking.uri)
    client = tracking.client(uri)
    exp_id = tracking.experiment_id(client, sweep.experiment, run_dir, uri)
    if resume:
        parent_run_id, tune_path = _resumable(client, exp_id, sweep, parent_run_id)
        client.update_run(parent_run_id, status="RUNNING")
        echo(f"resuming sweep {sweep.spec.name}: parent run {parent_run_id}, {tune_path}")
    else:
        parent_run_id = _create_parent(client, exp_id, sweep)
        tune_path = str(run_dir / "tune" / f"{sweep.spec.name}-{parent_run_id[:8]}")
        client.set_tag(parent_run_id, TAG_TUNE_PATH, tune_path)
        echo(f"sweep {sweep.spec.name}: parent run {parent_run_id}, Tune storage {tune_path}")
    with tracking.terminated_as(client, parent_run_id) as outcome:
        with ray_session(sweep.cfg.resources, run_dir, address=address, verbose=verbose):
            summary = _fit(sweep, client, exp_id, parent_run_id, tune_path, uri, resume, verbose, callbacks)
        outcome.status = "KILLED" if summary.interrupted else "FINISHED"
        return summary


def _create_parent(client: Any, exp_id: str, sweep: Sweep) -> str:
    from mlflow.entities import Param

    spec = sweep.spec
    tags = {**tracking.run_tags("sweep"), TAG_SPEC_NAME: spec.name}
    run_id = client.create_run(exp_id, run_name=spec.name, tags=tags).info.run_id
    params = {
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
    client.log_batch(run_id, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
    client.log_artifact(run_id, str(sweep.path))
    return run_id


def _resumable(client: Any, exp_id: str, sweep: Sweep, parent_run_id: str | None) -> tuple[str, str]:
    from ray import tune

    if parent_run_id is None:
        runs = client.search_runs(
            [exp_id],
            filter_string=(
                f"tags.`{TAG_SPEC_NAME}` = '{sweep.spec.name}' and tags.`{tracking.TAG_KIND}` = 'sweep'"
            ),
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        if not runs:
            raise SweepError(
                f"--resume: no earlier run of sweep '{sweep.spec.name}' in experiment '{sweep.experiment}'"
            )
        parent = runs[0]
    else:
        from mlflow.exceptions import MlflowException

        try:
            parent = client.get_run(parent_run_id)
        except MlflowException:
            raise SweepError(f"--resume {parent_run_id}: no such run in the tracking store") from None
    tune_path = parent.data.tags.get(TAG_TUNE_PATH, "")
    if parent.info.status == "FINISHED":
        raise SweepError(f"--resume: sweep run {parent.info.run_id} already finished")
    if not tune_path or not tune.Tuner.can_restore(tune_path):
        raise SweepError(f"--resume: no Tune experiment to restore at '{tune_path}'")
    return parent.info.run_id, tune_path


def max_concurrent(sweep: Sweep, cluster_cpus: float, per_trial: float) -> int:
    if sweep.spec.max_concurrent:
        return sweep.spec.max_concurrent
    return max(1, int(cluster_cpus // per_trial)) if per_trial > 0 else 4


def _fit(
    sweep: Sweep,
    client: Any,
    exp_id: str,
    parent_run_id: str,
    tune_path: str,
    uri: str,
    resume: bool,
    verbose: bool,
    callbacks: tuple[Any, ...],
) -> SweepSummary:
    import ray
    from ray import tune

    from orchestrl.tracking.trials import TrialRunLogger
    from orchestrl.tune.progress import SweepReporter, classic_tune_output
    from orchestrl.tune.trainable import ExperimentTrainable, trial_cpus, trial_dirname

    spec = sweep.spec
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    need = max(trial_cpus(_probe_config(sweep, d)) for d in _resource_probes(sweep))
    if need > cpus:
        raise ConfigError(
            f"{sweep.path}: trial_resources: a trial needs {need:g} CPUs but the cluster has {cpus:g}; "
            "use env_runners: 0 (vectorised envs in the trial) or cpus_per_env_runner: 0"
        )
    with classic_tune_output():
        if resume:
            tuner = tune.Tuner.restore(
                tune_path, trainable=ExperimentTrainable, resume_unfinished=True, resume_errored=True
            )
        else:
            logger = TrialRunLogger(
                uri,
                exp_id,
                parent_run_id,
                kind="sweep_trial",
                run_name=f"{spec.name}-{{trial_id}}",
                tags={TAG_SPEC_NAME: spec.name},
                hparams=tuple(sweep.dims) if spec.scheduler.name == "pbt" else (),
                metric=spec.metric,
                mode=spec.mode,
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
                    verbose=1 if not verbose else 2,
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
    return _summarise(sweep, client, exp_id, parent_run_id, tune_path, uri, grid)


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
    sweep: Sweep, client: Any, exp_id: str, parent_run_id: str, tune_path: str, uri: str, grid: Any
) -> SweepSummary:
    spec = sweep.spec
    children = {
        r.data.tags.get("orchestrl.trial_id"): r
        for r in client.search_runs(
            [exp_id], filter_string=f"tags.`{tracking.TAG_PARENT}` = '{parent_run_id}'"
        )
    }
    trials = []
    for result in grid:
        metrics = result.metrics or {}
        tid = str(metrics.get("trial_id") or Path(result.path).name)
        run = children.get(tid)
        value = metrics.get(spec.metric)
        trials.append(
            TrialSummary(
                trial_id=tid,
                run_id=run.info.run_id if run else None,
                status=run.info.status if run else ("ERROR" if result.error else "UNKNOWN"),
                iterations=int(metrics.get("training_iteration", 0)),
                value=float(value) if isinstance(value, int | float) else math.nan,
                params={k: result.config.get(k) for k in sweep.dims} if result.config else {},
            )
        )
    finished = len([t for t in trials if t.status == "FINISHED"])
    interrupted = finished + grid.num_errors < len(trials)
    for t in trials:  # trials an interruption left behind; a resume reopens their runs
        if t.run_id and t.status == "RUNNING":
            client.set_terminated(t.run_id, status="KILLED")
            t.status = "KILLED"
    summary = SweepSummary(
        name=spec.name,
        parent_run_id=parent_run_id,
        experiment=sweep.experiment,
        tracking_uri=uri,
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
        _record_best(client, parent_run_id, best, children.get(best.trial_id), summary, spec.metric)
    return summary


def _record_best(
    client: Any, parent_run_id: str, best: TrialSummary, run: Any, summary: SweepSummary, metric: str
) -> None:
    """The best trial's config and checkpoint, on the parent run."""
    from mlflow.entities import Metric

    client.set_tag(parent_run_id, TAG_BEST_TRIAL, best.trial_id)
    client.log_batch(parent_run_id, metrics=[Metric(f"best/{metric}", best.value, 0, len(summary.trials))])
    if run is None:
        return
    client.set_tag(parent_run_id, TAG_BEST_RUN, run.info.run_id)
    checkpoint = run.data.tags.get(tracking.TAG_CHECKPOINT)
    config_path = run.data.tags.get(tracking.TAG_CONFIG)
    if checkpoint and Path(checkpoint).is_dir():
        summary.best_checkpoint = checkpoint
        client.set_tag(parent_run_id, tracking.TAG_CHECKPOINT, checkpoint)
        client.log_artifacts(parent_run_id, checkpoint, artifact_path="best/checkpoint")
    if config_path and Path(config_path).is_file():
        client.log_artifact(parent_run_id, config_path, artifact_path="best")


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
