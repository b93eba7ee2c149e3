"""Where runs go and the one MLflow client every other layer goes through.

The embedded default is a SQLite store with artifacts beside it, both under the run dir, so a
laptop needs no server; ``--tracking-uri`` / ``MLFLOW_TRACKING_URI`` point at a shared one.
:class:`RunStore` holds the handful of operations orchestrl performs on runs (create, log, tag,
find, finish), so no module outside ``orchestrl.tracking`` imports MLflow.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrl.tracking import names

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

PARAM_LIMIT = 6000
"""MLflow's longest param value (longer values are cut)."""
BATCH = 100
"""Params per ``log_batch`` call (MLflow's limit)."""


class UnknownRunError(LookupError):
    """A run id that the tracking store does not hold."""


def default_tracking_uri(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir.resolve() / 'mlflow.db').as_posix()}"


def resolve_tracking_uri(run_dir: Path, explicit: str | None = None) -> str:
    """``--tracking-uri`` > ``tracking.uri`` > ``MLFLOW_TRACKING_URI`` > the embedded store."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(run_dir)


def artifact_root(run_dir: Path) -> str:
    return (run_dir.resolve() / "mlartifacts").as_uri()


def client(uri: str) -> MlflowClient:
    """A raw MLflow client on ``uri`` (reports and tests read runs through it)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def metric_history(mlflow_client: MlflowClient, run_id: str) -> dict[str, list[tuple[int, float]]]:
    """Every logged metric of a run as ``name -> [(step, value), ...]``."""
    run = mlflow_client.get_run(run_id)
    return {
        name: [(m.step, m.value) for m in mlflow_client.get_metric_history(run_id, name)]
        for name in run.data.metrics
    }


def run_tags(kind: str) -> dict[str, str]:
    """The tags every run gets: its kind, the code's commit and the library versions."""
    import ray
    import torch

    return {
        names.TAG_KIND: kind,
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


@dataclass(frozen=True)
class RunInfo:
    """What orchestrl reads back of a run."""

    run_id: str
    name: str
    status: str
    tags: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    """The latest value of each metric."""
    params: Mapping[str, str] = field(default_factory=dict)


@dataclass
class RunOutcome:
    """How a run ends; the body of :meth:`RunStore.terminated_as` sets ``status`` once it knows."""

    status: str = "FAILED"


class RunStore:
    """orchestrl's operations on an MLflow tracking store (module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.client = client(uri)

    # -- experiments and runs ----------------------------------------------------------------------
    def experiment(self, name: str, run_dir: Path) -> str:
        """Gets or creates an experiment; embedded stores keep artifacts under the run dir."""
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = artifact_root(run_dir) if self.uri.startswith("sqlite:") else None
        kind = {names.TAG_EXPERIMENT_KIND: names.EXPERIMENT_KIND_TRAINING}  # the UI opens on runs
        return self.client.create_experiment(name, artifact_location=location, tags=kind)

    def create_run(
        self,
        experiment_id: str,
        name: str,
        tags: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
    ) -> str:
        tags = {**tags, **({names.TAG_PARENT: parent_run_id} if parent_run_id else {})}
        run_id = self.client.create_run(experiment_id, run_name=name, tags=dict(tags)).info.run_id
        if params:
            self.log_params(run_id, params)
        return run_id

    def run(self, run_id: str) -> RunInfo:
        """The run ``run_id``; raises :class:`UnknownRunError` when the store has none."""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:
            raise UnknownRunError(run_id) from None
        return _info(run)

    def find_runs(
        self,
        experiment_id: str,
        tags: Mapping[str, str],
        *,
        status: str | None = None,
        latest_first: bool = False,
        max_results: int | None = None,
    ) -> list[RunInfo]:
        """Runs of an experiment whose tags have these values (and, if given, this status)."""
        clauses = [f"tags.`{key}` = '{value}'" for key, value in tags.items()]
        if status:
            clauses.append(f"status = '{status}'")
        kwargs: dict[str, Any] = {"filter_string": " and ".join(clauses)}
        if latest_first:
            kwargs["order_by"] = ["attributes.start_time DESC"]
        if max_results:
            kwargs["max_results"] = max_results
        return [_info(r) for r in self.client.search_runs([experiment_id], **kwargs)]

    def reopen(self, run_id: str) -> None:
        """Marks a run RUNNING again (a resumed run keeps logging into it)."""
        self.client.update_run(run_id, status="RUNNING")

    def set_terminated(self, run_id: str, status: str) -> None:
        self.client.set_terminated(run_id, status=status)

    @contextlib.contextmanager
    def terminated_as(self, run_id: str) -> Iterator[RunOutcome]:
        """Marks ``run_id`` terminated when the block ends: with the status the block set
        (``FINISHED``, ``KILLED``), ``KILLED`` on Ctrl-C, ``FAILED`` on any other exception."""
        outcome = RunOutcome()
        try:
            yield outcome
        except KeyboardInterrupt:
            outcome.status = "KILLED"
            raise
        finally:
            self.set_terminated(run_id, outcome.status)

    # -- logging -----------------------------------------------------------------------------------
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        entities = [Param(k, str(v)[:PARAM_LIMIT]) for k, v in params.items()]
        for i in range(0, len(entities), BATCH):
            self.client.log_batch(run_id, params=entities[i : i + BATCH])

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int, tags: Mapping[str, str] | None = None
    ) -> None:
        """One batch: every metric at ``step`` (and the tags, set in the same call)."""
        from mlflow.entities import Metric, RunTag

        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, step) for k, v in metrics.items()],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(run_id, key, str(value))

    def metric_history(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        return metric_history(self.client, run_id)

    def log_artifact(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path=artifact_path)

    def log_artifacts(self, run_id: str, folder: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifacts(run_id, str(folder), artifact_path=artifact_path)


def _info(run: Any) -> RunInfo:
    return RunInfo(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        status=run.info.status,
        tags=dict(run.data.tags),
        metrics=dict(run.data.metrics),
        params=dict(run.data.params),
    )
