"""MLflow for Tune trials: one nested child run per trial, logged from the driver.

Tune's own ``MLflowLoggerCallback`` logs RLlib's whole flattened config (hundreds of params) and slash
paths of the raw result. This callback logs what ``orchestrl train`` logs instead: the trial's
experiment config as dotted params (our keys), the curated metrics per iteration (step = training
iteration), and at the end config.yaml, learning_curve.png and the final checkpoint as artifacts.

It runs in the driver, so only one process writes to the tracking store, and trials need no
access to it. The sweep or curriculum that installs it hands it the function that turns a trial's
config into its experiment (``orchestrl.tune.search_space.resolve_trial_config``). A trial's child
run is found again by its Tune trial id (tag ``orchestrl.trial_id`` under the same parent), so a
resumed sweep keeps one MLflow tree: a trial that restarts from its checkpoint appends to its own run.

With ``run_dir`` and a remote server, its writes join the driver's journal (see
:mod:`orchestrl.tracking.journal`), so trials go on through a server outage: a trial that starts
during one gets a provisional run id. A trial this driver has not seen before is looked up by
its id first; during an outage that lookup cannot be made, so a trial of a sweep resumed while the
server is down gets a second child run. Reads that the server must answer degrade with a one-line
warning: a trial that ends during an outage gets no learning_curve.png, and the parent's
``trials_done`` / ``best/<metric>`` are counted from the trials this driver saw finish.

A trial's results are held back until Tune has saved the checkpoint that covers them (with the
sweep's default ``checkpoint_every: 1`` that is one save later), then logged. An interrupted
trial resumes from its last checkpoint and trains the iterations after it again. Those
iterations were never logged, so each step appears once in MLflow. Should a hard kill lose
Tune's record of a checkpoint whose results were already logged, the replayed steps are skipped
(the run's ``orchestrl.iteration`` tag is the last step logged).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ray.tune import Callback
from ray.tune.experiment import Trial
from ray.tune.result import AUTO_RESULT_KEYS, DONE

from orchestrl.experiment.config import ExperimentConfig
from orchestrl.tracking import names
from orchestrl.tracking.journal import TrackingUnavailable
from orchestrl.tracking.metrics import plot_learning_curve
from orchestrl.tracking.store import RunStore, run_tags

SKIPPED_KEYS = {*AUTO_RESULT_KEYS, DONE, "trial_id", "experiment_tag", "should_checkpoint"}
"""Tune's bookkeeping keys in a result: not the trial's own metrics."""
TrialResolver = Callable[[dict[str, Any]], ExperimentConfig]


def numeric_metrics(result: dict[str, Any]) -> dict[str, float]:
    """The trial's own metrics in a Tune result (Tune's bookkeeping keys dropped)."""
    out = {}
    for key, value in result.items():
        if key in SKIPPED_KEYS or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[key] = float(value)
    return out


class TrialRunLogger(Callback):
    """Creates or reopens each trial's child run and logs its params, metrics and artifacts.

    ``run_name`` formats the child run's name from the trial (``{trial_id}`` and any top-level
    config key); ``tags`` are added to every child run; ``hparams`` are config keys also logged as
    metrics each iteration (PBT changes them during a trial, and MLflow params are immutable).
    With ``metric``, each finished trial also updates the parent run: ``trials_done`` and
    ``best/<metric>`` (the best final value so far), both with step = trials done.
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment_id: str,
        parent_run_id: str,
        resolve: TrialResolver,
        *,
        kind: str,
        run_name: str = "{trial_id}",
        tags: dict[str, str] | None = None,
        hparams: tuple[str, ...] = (),
        metric: str | None = None,
        mode: str = "max",
        run_dir: str | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        self.run_dir = run_dir
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.resolve = resolve
        self.kind = kind
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.hparams = tuple(hparams)
        self.metric = metric
        self.mode = mode
        self._runs: dict[str, str] = {}
        self._logged: dict[str, int] = {}
        self._pending: dict[str, list[tuple[int, dict[str, float], dict[str, str]]]] = {}
        self._store: RunStore | None = None
        self._done: list[float | None] = []
        """The parent's finished trials as last counted (their final metric values)."""

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles its run config (with this callback) into the experiment folder, to be
        # restored on resume: keep ids and settings, not the client.
        state = dict(self.__dict__)
        state.update(_store=None, _runs={}, _logged={}, _pending={}, _done=[])
        return state

    @property
    def store(self) -> RunStore:
        if self._store is None:
            run_dir = Path(self.run_dir) if self.run_dir else None
            self._store = RunStore(self.tracking_uri, run_dir)
        return self._store

    @property
    def run_ids(self) -> dict[str, str]:
        """Trial id -> its child run id (provisional while the server has not taken it)."""
        return dict(self._runs)

    # -- runs ------------------------------------------------------------------------------------
    def run_id(self, trial: Trial) -> str:
        """The trial's child run: remembered, found by tag (after a resume), or created."""
        tid = trial.trial_id
        if tid in self._runs:
            return self._runs[tid]
        try:
            found = self.store.find_runs(
                self.experiment_id,
                {names.TAG_TRIAL: tid, names.TAG_PARENT: self.parent_run_id},
                max_results=1,
            )
        except TrackingUnavailable:
            found = []  # a trial first seen during an outage gets a new run (module docstring)
        if found:
            run_id = found[0].run_id
            self._logged[tid] = int(found[0].tags.get(names.TAG_ITERATION, "0"))
        else:
            run_id = self._create_run(trial)
            self._logged[tid] = 0
        self._runs[tid] = run_id
        return run_id

    def _create_run(self, trial: Trial) -> str:
        cfg = self.resolve(trial.config)
        tags = {**run_tags(self.kind), **self.tags, names.TAG_TRIAL: trial.trial_id}
        name = self.run_name.format(trial_id=trial.trial_id, **_format_keys(trial.config))
        return self.store.create_run(
            self.experiment_id, name, tags, cfg.flat_params(), parent_run_id=self.parent_run_id
        )

    # -- Tune hooks ------------------------------------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        self.store.reopen(self.run_id(trial))

    def on_trial_result(
        self, iteration: int, trials: list, trial: Trial, result: dict[str, Any], **info: Any
    ) -> None:
        self.run_id(trial)
        step = int(result.get("training_iteration", 0))
        metrics = numeric_metrics(result)
        for key in self.hparams:
            value = trial.config.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                metrics[f"hparam/{key}"] = float(value)
        tags = {}
        if names.CARRY in result:
            tags[names.TAG_CARRY] = str(result[names.CARRY])[:5000]
        if names.STOP_REASON in result:
            tags[names.TAG_STOP] = str(result[names.STOP_REASON])
        self._pending.setdefault(trial.trial_id, []).append((step, metrics, tags))

    def on_checkpoint(self, iteration: int, trials: list, trial: Trial, checkpoint: Any, **info: Any) -> None:
        self.flush(trial)

    def flush(self, trial: Trial) -> None:
        """Logs the trial's held-back results (each step once, in order)."""
        run_id = self.run_id(trial)
        tid = trial.trial_id
        for step, metrics, tags in self._pending.pop(tid, []):
            if step <= self._logged.get(tid, 0):
                continue
            self.store.log_metrics(run_id, metrics, step, tags={**tags, names.TAG_ITERATION: str(step)})
            self._logged[tid] = step

    def on_trial_complete(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        run_id = self.run_id(trial)
        self.flush(trial)
        try:
            self._log_artifacts(trial, run_id)
        finally:
            self.store.set_terminated(run_id, "FINISHED")
        if self.metric:
            self._update_parent(trial)

    def _update_parent(self, trial: Trial) -> None:
        """``trials_done`` and ``best/<metric>`` on the parent, from the finished child runs (so
        the count stays right across a resume), or, while the server cannot answer, from the
        last count and this trial."""
        assert self.metric is not None
        try:
            children = self.store.find_runs(
                self.experiment_id, {names.TAG_PARENT: self.parent_run_id}, status="FINISHED"
            )
            self._done = [r.metrics.get(self.metric) for r in children]
        except TrackingUnavailable:
            self.store.say("warning: tracking server unreachable: trials_done counts this driver's trials")
            value = (trial.last_result or {}).get(self.metric)
            self._done.append(float(value) if isinstance(value, int | float) else None)
        values = [v for v in self._done if v is not None]
        done = len(self._done)
        metrics = {"trials_done": float(done)}
        if values:
            metrics[f"best/{self.metric}"] = float(max(values) if self.mode == "max" else min(values))
        self.store.log_metrics(self.parent_run_id, metrics, done)

    def on_trial_recover(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        # The trial restarts from its last checkpoint: results after it will come again.
        self._pending.pop(trial.trial_id, None)

    def on_trial_error(self, iteration: int, trials: list, trial: Trial, **info: Any) -> None:
        run_id = self.run_id(trial)
        self.flush(trial)  # no retry is left: keep what it reported
        if trial.error_file:
            self.store.set_tags(run_id, {names.TAG_ERROR_FILE: str(trial.error_file)})
        self.store.set_terminated(run_id, "FAILED")

    def _log_artifacts(self, trial: Trial, run_id: str) -> None:
        cfg = self.resolve(trial.config)
        checkpoint = trial.checkpoint.path if trial.checkpoint else None
        if checkpoint:
            self.store.set_tags(run_id, {names.TAG_CHECKPOINT: str(Path(checkpoint) / "algorithm")})
        if not cfg.tracking.log_artifacts:
            return
        here = Path(trial.path) / "orchestrl"  # the trial's folder in Tune storage (under run_dir)
        here.mkdir(parents=True, exist_ok=True)
        (here / names.CONFIG_FILE).write_text(cfg.to_yaml())
        self.store.set_tags(run_id, {names.TAG_CONFIG: str(here / names.CONFIG_FILE)})
        try:
            plot_learning_curve(
                self.store.metric_history(run_id),
                here / names.LEARNING_CURVE,
                title=f"{cfg.name} ({cfg.algorithm.name}) {trial.trial_id}",
            )
        except TrackingUnavailable:
            self.store.say(f"warning: tracking server unreachable: no learning curve for {trial.trial_id}")
        for name in (names.CONFIG_FILE, names.LEARNING_CURVE):
            if (here / name).exists():
                self.store.log_artifact(run_id, here / name)
        if checkpoint:
            self.store.log_artifacts(run_id, Path(checkpoint) / "algorithm", artifact_path="checkpoint")
            best = Path(checkpoint) / names.BEST_EPISODE_DIR
            if best.is_dir():
                self.store.log_artifacts(run_id, best, artifact_path="env")


def _format_keys(config: dict[str, Any]) -> dict[str, Any]:
    return {k.replace(".", "_"): v for k, v in config.items() if k != "experiment"}
