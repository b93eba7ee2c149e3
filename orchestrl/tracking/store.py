"""Where runs go and the one MLflow client every other layer goes through.

The embedded default is a SQLite store with artifacts beside it, both under the run dir, so a
laptop needs no server; ``--tracking-uri`` / ``MLFLOW_TRACKING_URI`` point at a shared one.
:class:`RunStore` holds the handful of operations orchestrl performs on runs (create, log, tag,
find, finish), so no module outside ``orchestrl.tracking`` imports MLflow. Against a server, its
writes go through the run dir's journal (:mod:`orchestrl.tracking.journal`), so a run outlives a
server outage; every write is one entry that :meth:`RunStore.apply` sends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from orchestrl.tracking import names
from orchestrl.tracking.journal import (
    Echo,
    Journal,
    TrackingUnavailable,
    close_shared,
    is_provisional,
    journal_root,
    provisional_id,
    shared_journal,
    stderr_echo,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

PARAM_LIMIT = 6000
"""MLflow's longest param value (longer values are cut)."""
BATCH = 100
"""Params (or tags) per ``log_batch`` call (MLflow's limit)."""
T = TypeVar("T")


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
    experiment_id: str = ""


@dataclass
class RunOutcome:
    """How a run ends; the body of :meth:`RunStore.terminated_as` sets ``status`` once it knows."""

    status: str = "FAILED"


HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
"""MLflow's HTTP settings for a remote server unless the environment sets them. MLflow's own
defaults (7 retries with backoff, a 120 s timeout) stall a write for minutes when the server is
gone; here a refused connection fails in milliseconds, a silent network in 10 s (once per outage),
and the journal does the retrying."""


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def is_outage(err: BaseException) -> bool:
    """Whether an MLflow error means the server cannot be reached (as opposed to refusing the
    request): a failed connection, a timeout, or a 5xx/429 answer after retries (a restarting
    server or its proxy)."""
    import requests

    unreachable = (
        requests.exceptions.ConnectionError | requests.exceptions.Timeout | requests.exceptions.RetryError
    )
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, requests.exceptions.HTTPError) and cause.response is not None:
            return cause.response.status_code >= 500
        if isinstance(cause, unreachable | ConnectionError | TimeoutError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


class RunStore:
    """orchestrl's operations on an MLflow tracking store (module docstring).

    With ``run_dir`` and a remote (``http(s)://``) server, writes go through the run dir's
    :class:`~orchestrl.tracking.journal.Journal`, which keeps them through a server outage; reads
    raise :class:`~orchestrl.tracking.journal.TrackingUnavailable` while it lasts. The embedded
    SQLite store is a local file, so its writes go straight to it.
    """

    def __init__(
        self,
        uri: str,
        run_dir: Path | None = None,
        *,
        journal_mb: float = 256,
        echo: Echo = stderr_echo,
    ) -> None:
        self.uri = uri
        self.journal_root = journal_root(run_dir) if run_dir is not None and is_remote(uri) else None
        self.journal_mb = journal_mb
        self.echo = echo
        self._journal: Journal | None = None
        if is_remote(uri):
            for key, value in HTTP_DEFAULTS.items():
                os.environ.setdefault(key, value)
        self.client = client(uri)

    @property
    def journal(self) -> Journal | None:
        """The run dir's open journal (shared with the process's other stores on it), or None."""
        if self.journal_root is None:
            return None
        if self._journal is None or self._journal.closed:
            self._journal = shared_journal(
                self.journal_root,
                self.uri,
                self.apply,
                max_bytes=int(self.journal_mb * 2**20),
                echo=self.echo,
            )
        return self._journal

    def say(self, line: str) -> None:
        """A one-line notice, where the run's tracking messages go (its journal's echo)."""
        journal = self.journal
        (journal.echo if journal is not None else self.echo)(line)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ends the run dir's journal session: one last try to send what waits, else a line saying
        where it is and the command that uploads it."""
        if self._journal is not None:
            close_shared(self._journal)

    # -- experiments and runs ----------------------------------------------------------------------
    def experiment(self, name: str, run_dir: Path) -> str:
        """Gets or creates an experiment; embedded stores keep artifacts under the run dir."""
        found = self._read(lambda: self.client.get_experiment_by_name(name))
        if found is not None:
            return found.experiment_id
        location = artifact_root(run_dir) if self.uri.startswith("sqlite:") else None
        kind = {names.TAG_EXPERIMENT_KIND: names.EXPERIMENT_KIND_TRAINING}  # the UI opens on runs
        return self._read(lambda: self.client.create_experiment(name, artifact_location=location, tags=kind))

    def create_run(
        self,
        experiment_id: str,
        name: str,
        tags: Mapping[str, str],
        params: Mapping[str, Any] | None = None,
        parent_run_id: str | None = None,
    ) -> str:
        """A new run; while the server is unreachable, a provisional id that later writes may use."""
        tags = {**tags, **({names.TAG_PARENT: parent_run_id} if parent_run_id else {})}
        journal = self.journal
        entry = {
            "op": "create_run",
            "run": provisional_id() if journal else None,
            "experiment_id": experiment_id,
            "name": name,
            "tags": {k: str(v) for k, v in tags.items()},
            "params": _params(params or {}),
            "time": _now_ms(),
        }
        if journal is None:
            return self.apply(entry) or ""
        journal.submit(entry)
        run = entry["run"]
        return journal.tally.ids.get(run, run)

    def run(self, run_id: str) -> RunInfo:
        """The run ``run_id``; raises :class:`UnknownRunError` when the store has none."""
        from mlflow.exceptions import MlflowException

        try:
            run = self._read(lambda: self.client.get_run(self._real(run_id)))
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
        clauses = [f"tags.`{key}` = '{self._real(value)}'" for key, value in tags.items()]
        if status:
            clauses.append(f"status = '{status}'")
        kwargs: dict[str, Any] = {"filter_string": " and ".join(clauses)}
        if latest_first:
            kwargs["order_by"] = ["attributes.start_time DESC"]
        if max_results:
            kwargs["max_results"] = max_results
        return [_info(r) for r in self._read(lambda: self.client.search_runs([experiment_id], **kwargs))]

    def reopen(self, run_id: str) -> None:
        """Marks a run RUNNING again (a resumed run keeps logging into it)."""
        self._write({"op": "status", "run_id": run_id, "status": "RUNNING", "time": _now_ms()})

    def set_terminated(self, run_id: str, status: str) -> None:
        self._write({"op": "status", "run_id": run_id, "status": status, "time": _now_ms()})

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
        self._write({"op": "log", "run_id": run_id, "params": _params(params)})

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int, tags: Mapping[str, str] | None = None
    ) -> None:
        """One batch: every metric at ``step`` (and the tags, set in the same call)."""
        entry: dict[str, Any] = {
            "op": "log",
            "run_id": run_id,
            "metrics": {k: float(v) for k, v in metrics.items()},
            "step": step,
            "time": _now_ms(),
        }
        if tags:
            entry["tags"] = {k: str(v) for k, v in tags.items()}
        self._write(entry)

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self._write({"op": "log", "run_id": run_id, "tags": {k: str(v) for k, v in tags.items()}})

    def metric_history(self, run_id: str) -> dict[str, list[tuple[int, float]]]:
        return self._read(lambda: metric_history(self.client, self._real(run_id)))

    def log_artifact(self, run_id: str, path: str | Path, artifact_path: str | None = None) -> None:
        entry = {"op": "artifact", "run_id": run_id, "path": str(path), "artifact_path": artifact_path}
        self._write(entry, copy=Path(path))

    def log_artifacts(self, run_id: str, folder: str | Path, artifact_path: str | None = None) -> None:
        entry = {"op": "artifacts", "run_id": run_id, "path": str(folder), "artifact_path": artifact_path}
        self._write(entry, copy=Path(folder))

    # -- the one place writes reach MLflow ----------------------------------------------------------
    def _write(self, entry: dict[str, Any], copy: Path | None = None) -> None:
        journal = self.journal
        if journal is None:
            self.apply(entry)
        else:
            journal.submit(entry, copy=copy)

    def apply(self, entry: Mapping[str, Any]) -> str | None:
        """Sends one write (a journal entry, run ids already real) to the store; returns the id of
        a run it creates. Raises :class:`TrackingUnavailable` when the server cannot be reached."""
        from mlflow.exceptions import MlflowException

        try:
            return self._apply(entry)
        except (MlflowException, OSError) as err:
            if is_outage(err):
                raise TrackingUnavailable(f"{self.uri} unreachable: {_first_line(err)}") from err
            raise

    def _apply(self, entry: Mapping[str, Any]) -> str | None:
        from mlflow.entities import Metric, Param, RunTag

        op = entry["op"]
        if op == "create_run":
            tags = {**entry["tags"], **({names.TAG_RUN_KEY: entry["run"]} if entry["run"] else {})}
            found = self._created(entry) if entry.get("in_doubt") else None
            run_id = (
                found
                or self.client.create_run(
                    entry["experiment_id"], start_time=entry["time"], tags=tags, run_name=entry["name"]
                ).info.run_id
            )
            if entry["params"]:
                self._apply({"op": "log", "run_id": run_id, "params": entry["params"]})
            return run_id
        run_id = entry["run_id"]
        if op == "log":
            # a batch sent twice is stored once: it keeps its timestamp, and MLflow's SQL stores
            # keep one row per (key, step, timestamp, value)
            metrics = [
                Metric(k, v, entry["time"], entry["step"]) for k, v in entry.get("metrics", {}).items()
            ]
            params = [Param(k, v) for k, v in entry.get("params", {}).items()]
            tags = [RunTag(k, v) for k, v in entry.get("tags", {}).items()]
            # params and tags 100 a call (MLflow's limit), the metrics with the first call
            for i in range(0, max(len(params), len(tags), 1 if metrics else 0), BATCH):
                self.client.log_batch(
                    run_id,
                    metrics=metrics if i == 0 else [],
                    params=params[i : i + BATCH],
                    tags=tags[i : i + BATCH],
                )
        elif op == "status" and entry["status"] == "RUNNING":
            self.client.update_run(run_id, status="RUNNING")
        elif op == "status":
            self.client.set_terminated(run_id, status=entry["status"], end_time=entry["time"])
        elif op == "artifact":
            self.client.log_artifact(run_id, entry["path"], artifact_path=entry["artifact_path"])
        elif op == "artifacts":
            self.client.log_artifacts(run_id, entry["path"], artifact_path=entry["artifact_path"])
        else:
            raise ValueError(f"unknown tracking write {op!r}")
        return None

    def _created(self, entry: Mapping[str, Any]) -> str | None:
        """The run an in-doubt ``create_run`` made before its answer was lost, if any."""
        found = self.client.search_runs(
            [entry["experiment_id"]], f"tags.`{names.TAG_RUN_KEY}` = '{entry['run']}'", max_results=1
        )
        return found[0].info.run_id if found else None

    def _read(self, call: Callable[[], T]) -> T:
        from mlflow.exceptions import MlflowException

        journal = self.journal
        if journal is not None:
            journal.settle()
        try:
            return call()
        except MlflowException as err:
            if is_outage(err):
                raise TrackingUnavailable(f"{self.uri} unreachable: {_first_line(err)}") from err
            raise

    def _real(self, run_id: str) -> str:
        journal = self.journal
        return journal.resolve(run_id) if journal is not None and is_provisional(run_id) else run_id


def _params(params: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(v)[:PARAM_LIMIT] for k, v in params.items()}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def _info(run: Any) -> RunInfo:
    return RunInfo(
        run_id=run.info.run_id,
        name=run.info.run_name or "",
        status=run.info.status,
        tags=dict(run.data.tags),
        metrics=dict(run.data.metrics),
        params=dict(run.data.params),
        experiment_id=run.info.experiment_id,
    )
