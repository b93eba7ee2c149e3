"""``orchestrl curriculum``: stages of one experiment run in order, each a Tune trial, each
starting from the previous stage's modules, recorded as one MLflow tree.

A stage is a separate run, not a change inside a running one. This is the design the team's
RLlib notes recommend when the agents or spaces change between stages (more agents, another
level). A change inside a run leaves RLlib's connector pipelines holding the old per-agent spaces.
Each stage names:

- ``overrides``: dotted experiment keys (env level, number of agents, reward schedule, algorithm
  knobs). Values may reference the previous stage as ``${previous.checkpoint}`` (its final
  algorithm checkpoint) or ``${previous.run_id}`` (its MLflow run), e.g. for NeuroMAS's own
  ``algorithm.grow_from`` knob.
- ``promote``: the stage ends when ``metric`` is at or above ``threshold`` for ``consecutive``
  iterations, or when its budget (``iterations`` / ``env_steps`` / ``time_s``; default: the base
  experiment's ``stop``) runs out. With ``on_budget: stop`` a stage that spends its budget without
  meeting the rule ends the curriculum there.
- ``carry``: which weights the stage takes from the previous stage's checkpoint (see
  :mod:`orchestrl.training.weight_carry`). ``auto`` carries the actor, and every other part whose
  shapes still fit. A part that no longer fits, such as a centralised critic whose input grows with
  the number of agents, is re-initialised, and the stage says so. ``actor``, ``all`` and ``none``
  also exist.

MLflow: a parent run (kind ``curriculum``) with one child run per stage. Stage transitions are
logged on the parent as metrics at step = iterations so far: ``curriculum/stage``,
``curriculum/stage_iterations``, ``curriculum/promoted_by_metric`` and the promotion metric's
final value. Stage checkpoints are parent tags, so ``--resume`` skips finished stages.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from orchestrl.experiment.config import ConfigError, ExperimentConfig, validate_config
from orchestrl.tracking import names
from orchestrl.tracking.journal import TrackingUnavailable
from orchestrl.tracking.store import RunInfo, RunStore
from orchestrl.training.weight_carry import CarryError
from orchestrl.tune.lifecycle import DEFAULT_LAUNCH, Echo, Launch, ParentRun, TuneCommand, parent_run
from orchestrl.tune.search_space import check_metric, check_override
from orchestrl.tune.spec import SpecModel, TuneRun, TuneRunSpec, load_spec

if TYPE_CHECKING:
    from ray.tune import Callback

PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
PREVIOUS_KEYS = ("checkpoint", "run_id")
REFERENCE_METRICS = ("random_team_success", "solver_k_success", "solver_success")
"""Env metrics a stage's summary line shows next to its held-out value, when the env reports them."""


class CurriculumError(RuntimeError):
    """A curriculum that cannot go on (a stage failed, or nothing to resume)."""


class PromoteSection(SpecModel):
    """When a stage ends: a metric rule, a budget, or both (whichever comes first)."""

    metric: str | None = None
    threshold: float | None = None
    consecutive: int = Field(1, ge=1)
    iterations: int | None = Field(None, ge=1)
    env_steps: int | None = Field(None, ge=1)
    time_s: float | None = Field(None, gt=0)
    on_budget: Literal["promote", "stop"] = "promote"
    """What a spent budget without the metric rule met means: go on anyway, or end here."""

    @model_validator(mode="after")
    def _metric_needs_threshold(self) -> PromoteSection:
        if (self.metric is None) != (self.threshold is None):
            raise ValueError("promote.metric and promote.threshold go together")
        return self

    def budget(self) -> dict[str, Any] | None:
        """``stop.*`` for the stage, or None to keep the base experiment's."""
        if self.iterations is None and self.env_steps is None and self.time_s is None:
            return None
        return {"iterations": self.iterations, "env_steps": self.env_steps, "time_s": self.time_s}


class CarrySection(SpecModel):
    parts: Literal["auto", "actor", "all", "none"] = "auto"
    modules: dict[str, str] = Field(default_factory=dict)
    """New module id -> the previous stage's module id (default: the same id)."""


class StageSpec(SpecModel):
    name: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    promote: PromoteSection = Field(default_factory=PromoteSection)
    carry: CarrySection = Field(default_factory=CarrySection)


class CurriculumSpec(TuneRunSpec):
    """A curriculum YAML, as validated."""

    stages: list[StageSpec] = Field(min_length=1)
    checkpoint_every: int = Field(5, ge=1)
    """Stage checkpoint frequency in iterations (a stage also checkpoints when it ends)."""


@dataclass
class Curriculum(TuneRun):
    spec: CurriculumSpec
    stages: list[tuple[StageSpec, ExperimentConfig]]
    """Each stage with its experiment as validated (placeholders filled with stand-ins)."""


def fill_placeholders(value: Any, previous: dict[str, str] | None, where: str) -> Any:
    """Replaces ``${previous.checkpoint}`` / ``${previous.run_id}`` in strings, lists and dicts."""
    if isinstance(value, dict):
        return {k: fill_placeholders(v, previous, where) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, previous, where) for v in value]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        scope, _, key = match.group(1).partition(".")
        if scope != "previous" or key not in PREVIOUS_KEYS:
            raise ConfigError(
                f"{where}: unknown placeholder '${{{match.group(1)}}}' "
                f"(known: {', '.join('${previous.' + k + '}' for k in PREVIOUS_KEYS)})"
            )
        if previous is None:
            raise ConfigError(f"{where}: '${{{match.group(1)}}}' in the first stage (no previous stage)")
        return previous[key]

    return PLACEHOLDER.sub(sub, value)


def stage_experiment(
    base: dict[str, Any], stage: StageSpec, previous: dict[str, str] | None, where: str
) -> dict[str, Any]:
    """The experiment dict a stage runs: base + the stage's overrides (+ its budget as ``stop``)."""
    from orchestrl.experiment.config import apply_overrides

    overrides = fill_placeholders(dict(stage.overrides), previous, where)
    data = apply_overrides(base, overrides)
    budget = stage.promote.budget()
    if budget is not None:
        data = apply_overrides(data, {f"stop.{k}": v for k, v in budget.items()})
    data["name"] = f"{base['name']}-{stage.name}"
    return data


def load_curriculum(path: str | Path, run_dir: str | None = None) -> Curriculum:
    """Reads and validates a curriculum YAML: the base, every stage's experiment, every rule."""
    path, spec, base_path, base, cfg = load_spec(CurriculumSpec, path, run_dir)
    names = [s.name for s in spec.stages]
    if len(set(names)) != len(names):
        raise ConfigError(f"{path}: stages: stage names must be unique (got {names})")
    stand_in = {"checkpoint": "<previous.checkpoint>", "run_id": "<previous.run_id>"}
    stages = []
    for i, stage in enumerate(spec.stages):
        where = f"{path}: stages[{i}] ({stage.name})"
        previous = stand_in if i else None
        for key, value in stage.overrides.items():
            check_override(base, key, fill_placeholders(value, previous, where), f"{where}: overrides.{key}")
        data = stage_experiment(base, stage, previous, where)
        stage_cfg = validate_config(data, source=where)
        if stage.promote.metric:
            check_metric(stage.promote.metric, where, "promote.metric")
        if stage.promote.budget() is None and not (
            stage_cfg.stop.iterations or stage_cfg.stop.env_steps or stage_cfg.stop.time_s
        ):
            raise ConfigError(f"{where}: promote: needs a budget (iterations, env_steps or time_s)")
        stages.append((stage, stage_cfg))
    return Curriculum(path, spec, base_path, base, cfg, stages)


# -- running ---------------------------------------------------------------------------------------
@dataclass
class StageSummary:
    index: int
    name: str
    run_id: str | None
    iterations: int
    promoted_by: str
    """``metric``, ``budget`` or ``stopped`` (budget spent with ``on_budget: stop``)."""
    value: float
    checkpoint: str
    carry: list[str] = field(default_factory=list)
    references: dict[str, float] = field(default_factory=dict)
    """Reference figures the env reported on the same held-out episodes (``eval/env/<name>`` for
    :data:`REFERENCE_METRICS`), printed next to the stage's value."""


@dataclass
class CurriculumSummary:
    name: str
    parent_run_id: str
    experiment: str
    tracking_uri: str
    tune_path: str
    stages: list[StageSummary] = field(default_factory=list)
    interrupted: bool = False
    stopped_early: bool = False

    @property
    def checkpoint(self) -> str | None:
        return self.stages[-1].checkpoint if self.stages else None


def run_curriculum(
    curriculum: Curriculum, launch: Launch = DEFAULT_LAUNCH, callbacks: tuple[Callback, ...] = ()
) -> CurriculumSummary:
    """Runs the stages in order (with ``launch.resume``: skipping those an earlier run finished).

    ``callbacks`` are extra Tune callbacks for every stage (tests use one to stop the tracking
    server mid-stage).
    """
    params = _parent_params(curriculum)
    with parent_run(
        curriculum, launch, kind=names.KIND_CURRICULUM, params=params, error=CurriculumError
    ) as parent:
        summary = CurriculumSummary(
            curriculum.spec.name, parent.run_id, curriculum.experiment, parent.store.uri, parent.tune_path
        )
        _run_stages(curriculum, parent, summary, launch.echo, callbacks)
        parent.outcome.status = "KILLED" if summary.interrupted else "FINISHED"
        if summary.checkpoint and not summary.interrupted:
            parent.store.set_tags(parent.run_id, {names.TAG_CHECKPOINT: summary.checkpoint})
        return summary


def _parent_params(curriculum: Curriculum) -> dict[str, Any]:
    spec = curriculum.spec
    params: dict[str, Any] = {
        "curriculum.base": str(curriculum.base_path),
        "curriculum.stages": len(spec.stages),
    }
    params.update({f"overrides.{k}": v for k, v in spec.overrides.items()})
    for i, stage in enumerate(spec.stages):
        params[f"stage.{i}.name"] = stage.name
        params.update({f"stage.{i}.{k}": v for k, v in stage.overrides.items()})
        rule = stage.promote.model_dump(exclude_none=True, exclude_defaults=True)
        params[f"stage.{i}.promote"] = json.dumps(rule, sort_keys=True)
        if i:
            params[f"stage.{i}.carry"] = stage.carry.parts
    return params


def _run_stages(
    curriculum: Curriculum,
    parent: ParentRun,
    summary: CurriculumSummary,
    echo: Echo,
    callbacks: tuple[Callback, ...],
) -> None:
    stage_tag = names.stage_tag
    parent_tags = parent.info.tags if parent.info else {}
    previous: dict[str, str] | None = None
    done_iters = int(float(parent_tags.get(names.TAG_CURRICULUM_ITERATIONS, "0")))
    total = len(curriculum.stages)
    for i, (stage, _) in enumerate(curriculum.stages):
        finished = parent_tags.get(stage_tag(i, "checkpoint"))
        if finished:  # an earlier run of this curriculum finished this stage
            previous = {"checkpoint": finished, "run_id": parent_tags.get(stage_tag(i, "run_id"), "")}
            summary.stages.append(
                StageSummary(
                    index=i,
                    name=stage.name,
                    run_id=previous["run_id"] or None,
                    iterations=int(parent_tags.get(stage_tag(i, "iterations"), "0")),
                    promoted_by=parent_tags.get(stage_tag(i, "promoted_by"), "budget"),
                    value=float(parent_tags.get(stage_tag(i, "value"), "nan")),
                    checkpoint=finished,
                )
            )
            echo(f"stage {i + 1}/{total} {stage.name}: done in the earlier run ({finished})")
            continue
        result = _run_stage(curriculum, parent, summary, i, stage, previous, done_iters, echo, callbacks)
        if result is None:
            summary.interrupted = True
            return
        summary.stages.append(result)
        done_iters += result.iterations
        previous = {"checkpoint": result.checkpoint, "run_id": result.run_id or ""}
        _log_transition(parent.store, summary.parent_run_id, i, stage, result, done_iters)
        echo(_transition_line(i, total, stage, result))
        if result.promoted_by == "stopped":
            summary.stopped_early = True
            echo(f"curriculum ends at stage {stage.name}: budget spent without meeting the rule")
            return


def _run_stage(
    curriculum: Curriculum,
    parent: ParentRun,
    summary: CurriculumSummary,
    i: int,
    stage: StageSpec,
    previous: dict[str, str] | None,
    done_iters: int,
    echo: Echo,
    callbacks: tuple[Callback, ...],
) -> StageSummary | None:
    """One stage as a one-trial Tune experiment; None when it was interrupted."""
    from ray import tune

    from orchestrl.tracking.trials import TrialRunLogger
    from orchestrl.tune.progress import StageReporter, classic_tune_output
    from orchestrl.tune.search_space import resolve_trial_config
    from orchestrl.tune.trainable import ExperimentTrainable, trial_dirname

    spec = curriculum.spec
    where = f"{curriculum.path}: stages[{i}] ({stage.name})"
    experiment = stage_experiment(curriculum.base, stage, previous, where)
    stage_cfg = validate_config(experiment, source=where)
    rule = stage.promote.model_dump(include={"metric", "threshold", "consecutive"})
    config: dict[str, Any] = {"experiment": experiment, "promotion": rule if stage.promote.metric else None}
    if previous and stage.carry.parts != "none":
        config["init_from"] = {
            "checkpoint": previous["checkpoint"],
            "parts": stage.carry.parts,
            "modules": dict(stage.carry.modules) or None,
        }
    name = f"stage{i}_{stage.name}"
    stage_path = Path(summary.tune_path) / name
    restoring = tune.Tuner.can_restore(str(stage_path))
    if not restoring:  # a resumed stage logged its start the first time
        parent.store.log_metrics(
            summary.parent_run_id, {names.CURRICULUM_PREFIX + "stage": float(i)}, done_iters
        )
    reporter = StageReporter(
        spec.name, stage.name, i, len(spec.stages), config["promotion"], _budget(stage_cfg)
    )
    logger = None
    with classic_tune_output():
        if restoring:
            echo(f"stage {i + 1}/{len(spec.stages)} {stage.name}: resuming its Tune experiment")
            tuner = tune.Tuner.restore(
                str(stage_path), trainable=ExperimentTrainable, resume_unfinished=True, resume_errored=True
            )
        else:
            logger = TrialRunLogger(
                parent.store.uri,
                parent.experiment_id,
                summary.parent_run_id,
                resolve_trial_config,
                kind=names.KIND_CURRICULUM_STAGE,
                run_name=f"{spec.name}/{i}:{stage.name}",
                tags={
                    names.TAG_SPEC_NAME: spec.name,
                    names.TAG_STAGE: stage.name,
                    names.TAG_STAGE_INDEX: str(i),
                },
                run_dir=str(curriculum.run_dir),
            )
            tuner = tune.Tuner(
                ExperimentTrainable,
                param_space=config,
                tune_config=tune.TuneConfig(num_samples=1, trial_dirname_creator=trial_dirname),
                run_config=tune.RunConfig(
                    name=name,
                    storage_path=summary.tune_path,
                    callbacks=[logger, *callbacks],
                    progress_reporter=reporter,
                    verbose=1,
                    checkpoint_config=tune.CheckpointConfig(
                        num_to_keep=spec.keep_checkpoints,
                        checkpoint_frequency=spec.checkpoint_every,
                        checkpoint_at_end=True,
                    ),
                    failure_config=tune.FailureConfig(max_failures=1),
                ),
            )
        grid = tuner.fit()
    result = grid[0]
    if result.error:
        raise CurriculumError(f"stage {stage.name} failed: {result.error}")
    metrics = result.metrics or {}
    if not metrics.get("done") or result.checkpoint is None:
        return None
    trial_id = str(metrics.get("trial_id", ""))
    try:
        run = _stage_run(parent.store, parent.experiment_id, summary.parent_run_id, trial_id)
        run_id = run.run_id if run else None
    except TrackingUnavailable:
        echo(f"warning: tracking server unreachable: stage {stage.name}'s carry report is in its run's tags")
        run, run_id = None, logger.run_ids.get(trial_id) if logger else None
    carry = []
    if run is not None and names.TAG_CARRY in run.tags:
        from orchestrl.training.weight_carry import CarryReport

        carry = CarryReport(**json.loads(run.tags[names.TAG_CARRY])).lines()
    promoted = bool(metrics.get(names.PROMOTED))
    if promoted:
        how = "metric"
    elif stage.promote.metric and stage.promote.on_budget == "stop":
        how = "stopped"
    else:
        how = "budget"
    value = metrics.get(stage.promote.metric or names.TEAM_RETURN, math.nan)
    return StageSummary(
        index=i,
        name=stage.name,
        run_id=run_id,
        iterations=int(metrics.get("training_iteration", 0)),
        promoted_by=how,
        value=float(value),
        checkpoint=str(Path(result.checkpoint.path) / "algorithm"),
        carry=carry,
        references={
            k: float(metrics[f"eval/env/{k}"]) for k in REFERENCE_METRICS if f"eval/env/{k}" in metrics
        },
    )


def _stage_run(store: RunStore, exp_id: str, parent_run_id: str, trial_id: str) -> RunInfo | None:
    found = store.find_runs(
        exp_id, {names.TAG_PARENT: parent_run_id, names.TAG_TRIAL: trial_id}, max_results=1
    )
    return found[0] if found else None


def _budget(cfg: ExperimentConfig) -> str:
    stop = cfg.stop
    parts = []
    if stop.iterations:
        parts.append(f"{stop.iterations} iters")
    if stop.env_steps:
        parts.append(f"{stop.env_steps:,} env steps")
    if stop.time_s:
        parts.append(f"{stop.time_s:g} s")
    return " / ".join(parts)


def _log_transition(
    store: RunStore, parent_run_id: str, i: int, stage: StageSpec, result: StageSummary, done_iters: int
) -> None:
    """The stage's end on the parent: metrics at step = iterations so far, and resume tags."""
    metrics = {
        names.CURRICULUM_PREFIX + "stage_iterations": float(result.iterations),
        names.CURRICULUM_PREFIX + "promoted_by_metric": float(result.promoted_by == "metric"),
    }
    if math.isfinite(result.value):
        metrics[names.CURRICULUM_PREFIX + (stage.promote.metric or names.TEAM_RETURN)] = result.value
    tags = {
        names.stage_tag(i, "checkpoint"): result.checkpoint,
        names.stage_tag(i, "run_id"): result.run_id or "",
        names.stage_tag(i, "promoted_by"): result.promoted_by,
        names.stage_tag(i, "iterations"): str(result.iterations),
        names.stage_tag(i, "value"): repr(result.value),
        names.TAG_CURRICULUM_ITERATIONS: str(done_iters),
    }
    store.log_metrics(parent_run_id, metrics, done_iters, tags=tags)


def _transition_line(i: int, total: int, stage: StageSpec, result: StageSummary) -> str:
    rule = stage.promote
    if result.promoted_by == "metric":
        why = (
            f"promoted: {rule.metric} {result.value:.4g} >= {rule.threshold:g} "
            f"for {rule.consecutive} iterations"
        )
    else:
        why = f"budget spent ({result.iterations} iterations)"
    lines = [f"stage {i + 1}/{total} {stage.name} done after {result.iterations} iterations: {why}"]
    lines += [f"  {line}" for line in result.carry]
    return "\n".join(lines)


def summary_text(summary: CurriculumSummary) -> str:
    lines = [
        "",
        f"curriculum {summary.name}"
        + (" (interrupted: resume with --resume)" if summary.interrupted else "")
        + (" (ended early: a stage spent its budget)" if summary.stopped_early else ""),
        "",
        "| stage | iterations | ended by | final value | MLflow run |",
        "|---|---|---|---|---|",
    ]
    for s in summary.stages:
        refs = "".join(f", {k} {v:.2f}" for k, v in s.references.items())
        lines.append(
            f"| {s.index}: {s.name} | {s.iterations} | {s.promoted_by} | {s.value:.4g}{refs} | {s.run_id} |"
        )
    lines += [
        "",
        f"final checkpoint: {summary.checkpoint}",
        f"MLflow parent run: {summary.parent_run_id} (experiment '{summary.experiment}')",
        f"tracking URI: {summary.tracking_uri}",
        f"report: orchestrl report {summary.parent_run_id}",
    ]
    best = _best_episode_text(summary.checkpoint)
    if best:
        lines += ["", best]
    return "\n".join(lines)


def _best_episode_text(checkpoint: str | None) -> str | None:
    """The last stage's best episode (what its env handed over: LEMON's spec.yaml), if any."""
    # the trainable saves <checkpoint dir>/algorithm (the summary's checkpoint) and, next to it,
    # <checkpoint dir>/best_episode
    folder = Path(checkpoint).parent / names.BEST_EPISODE_DIR if checkpoint else None
    spec = folder / "spec.yaml" if folder else None
    if spec is None or not spec.is_file():
        return None
    score_file = folder / "best_episode_score.txt"
    score = f" (score {float(score_file.read_text()):.3f})" if score_file.is_file() else ""
    text = f"best spec of the last stage{score}, {spec}:\n{spec.read_text().rstrip()}"
    pipeline = folder / "pipeline.py"
    if pipeline.is_file():
        text += f"\n\nits generated pipeline, {pipeline}:\n{pipeline.read_text().rstrip()}"
    return text


COMMAND = TuneCommand(
    load_curriculum, run_curriculum, summary_text, errors=(CurriculumError, CarryError, TrackingUnavailable)
)
"""What ``orchestrl curriculum`` runs."""
