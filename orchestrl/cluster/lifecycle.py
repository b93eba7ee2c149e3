"""A cluster job from plan to end: plan and submit ``orchestrl <args...>``, list jobs, read a job's
status and logs, follow it to the end, stop it, and the exit code and line a CLI reports for it.

A submitted job runs ``orchestrl <args...>`` on the cluster. Two ways, picked automatically by
:func:`orchestrl.cluster.connection.cluster_on_this_machine`:

* **Uploaded** (any cluster that is not entirely this machine): the project directory travels as
  the job's ``runtime_env.working_dir`` and the dependencies listed in ``pyproject.toml`` are
  pip-installed into the job's environment (:mod:`orchestrl.cluster.packaging`). Driver and
  workers share no disk there, so the job must log to an MLflow *server*
  (:mod:`orchestrl.cluster.tracking_policy`).
* **In place** (every node of the cluster is this machine, e.g. ``ray start --head`` on a
  workstation): the job runs in the project directory itself with this interpreter, like a plain
  ``orchestrl train`` would, so ``runs/`` and the embedded SQLite store land where the user looks
  for them and local tracking stores are allowed. Deciding this by the node IPs the cluster reports
  rather than by a ``127.0.0.1`` address matters: an SSH tunnel or ``kubectl port-forward`` also
  gives a loopback address to a remote cluster.

Errors are raised as :class:`orchestrl.cluster.errors.JobsError` subclasses whose message is one
line, so the CLI prints it and exits non-zero without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

from orchestrl.cluster.connection import (
    cluster_on_this_machine,
    cluster_ray_version,
    connect,
    resolve_address,
    translated_errors,
)
from orchestrl.cluster.errors import first_line
from orchestrl.cluster.packaging import (
    ORCHESTRL_LAUNCHER,
    build_entrypoint,
    build_runtime_env,
    find_project_dir,
    rebase_paths,
    validate_args,
)
from orchestrl.cluster.tracking_policy import TrackingChoice, check_tracking_for_cluster, find_tracking_uri

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient


@dataclasses.dataclass(frozen=True)
class JobSummary:
    """One job as the cluster reports it, reduced to what a person needs to read."""

    job_id: str
    status: str
    command: str
    start_time: datetime | None = None
    end_time: datetime | None = None
    message: str = ""
    exit_code: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in ("SUCCEEDED", "FAILED", "STOPPED")


@dataclasses.dataclass(frozen=True)
class JobPlan:
    """Everything :func:`submit` will send, computed without talking to the cluster."""

    entrypoint: str
    runtime_env: dict[str, Any]
    metadata: dict[str, str]
    submission_id: str
    in_place: bool
    tracking: TrackingChoice
    project_dir: Path
    args: tuple[str, ...] = dataclasses.field(default=())
    notes: tuple[str, ...] = dataclasses.field(default=())
    """Things worth telling the user that do not block the submission."""


class StopOutcome(NamedTuple):
    """What :func:`stop` did: whether a stop was requested (False: the job had already ended)."""

    requested: bool
    job: JobSummary


# --------------------------------------------------------------------------------------------
# Planning a job


def _new_submission_id(command: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"orchestrl-{command}-{stamp}-{secrets.token_hex(2)}"


def plan_submission(
    args: Sequence[str],
    *,
    on_this_machine: bool,
    project_dir: Path | None = None,
    requirements: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    launcher: str = ORCHESTRL_LAUNCHER,
    submission_id: str | None = None,
) -> JobPlan:
    """Validates ``args`` and computes the job :func:`submit` would send, without any network.

    Raises:
        SubmitRefusedError: a command that cannot run on a cluster, or a path the job cannot see.
        LocalTrackingStoreError: a tracking store the job's nodes could not share.
    """
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    args = list(args)
    validate_args(args)
    project_dir = (project_dir or find_project_dir(cwd)).resolve()
    tracking = find_tracking_uri(args, env, cwd)
    check_tracking_for_cluster(tracking, on_this_machine=on_this_machine)
    upload = not on_this_machine
    job_args = [args[0], *rebase_paths(args[1:], project_dir, upload=upload, cwd=cwd)]
    env_vars = {}
    if tracking.source == "MLFLOW_TRACKING_URI" and tracking.uri:
        env_vars["MLFLOW_TRACKING_URI"] = tracking.uri  # the job does not inherit this shell's env
    if upload:
        entrypoint = build_entrypoint(job_args, launcher=launcher)
    else:
        entrypoint = build_entrypoint(job_args, python=sys.executable, cwd=project_dir, launcher=launcher)
    runtime_env = build_runtime_env(project_dir, upload=upload, requirements=requirements, env_vars=env_vars)
    metadata = {"orchestrl_args": shlex.join(args), "orchestrl_mode": "upload" if upload else "in-place"}
    notes = []
    host = urlparse(tracking.uri or "").hostname
    if upload and host in ("localhost", "127.0.0.1", "::1"):
        notes.append(
            f"tracking URI {tracking.uri} names localhost, which the job resolves on the cluster node "
            "it runs on, not on this machine"
        )
    return JobPlan(
        entrypoint=entrypoint,
        runtime_env=runtime_env,
        metadata=metadata,
        submission_id=submission_id or _new_submission_id(args[0]),
        in_place=not upload,
        tracking=tracking,
        project_dir=project_dir,
        args=tuple(job_args),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------------
# Submitting and controlling jobs


def submit(
    args: Sequence[str],
    *,
    address: str | None = None,
    project_dir: Path | None = None,
    requirements: bool = True,
    in_place: bool | None = None,
    env: Mapping[str, str] | None = None,
    launcher: str = ORCHESTRL_LAUNCHER,
    submission_id: str | None = None,
    dry_run: bool = False,
) -> JobPlan:
    """Submits ``orchestrl <args...>`` as a Ray job and returns the plan it sent (with its id).

    Args:
        args: the orchestrl command line, e.g. ``["train", "configs/x.yaml"]``.
        address: the Jobs API; see :func:`orchestrl.cluster.connection.resolve_address`.
        project_dir: the project to run (default: found from the current directory).
        requirements: pip-install pyproject's dependencies in the job (uploaded jobs only).
        in_place: force in-place (True) or upload (False); None decides by
            :func:`orchestrl.cluster.connection.cluster_on_this_machine`.
        env: the environment ``MLFLOW_TRACKING_URI`` is read from (default: ``os.environ``).
        launcher: Python source run with the args in ``sys.argv[1:]`` (tests swap it).
        submission_id: the job id to use (default: ``orchestrl-<command>-<time>-<random>``).
        dry_run: connect and plan, but send nothing.
    """
    import ray

    validate_args(list(args))
    client = connect(address)
    url = resolve_address(address)
    local = cluster_on_this_machine(url) if in_place is None else in_place
    plan = plan_submission(
        args,
        on_this_machine=local,
        project_dir=project_dir,
        requirements=requirements,
        env=env,
        launcher=launcher,
        submission_id=submission_id,
    )
    remote_version = cluster_ray_version(client)
    if remote_version and remote_version != ray.__version__:
        note = (
            f"the cluster runs Ray {remote_version} but this machine has {ray.__version__}; the job's code "
            f"expects the project's pinned Ray, so match them (pip install 'ray[default]=={remote_version}')"
        )
        plan = dataclasses.replace(plan, notes=(*plan.notes, note))
    if dry_run:
        return plan
    with translated_errors(url):
        client.submit_job(
            entrypoint=plan.entrypoint,
            runtime_env=plan.runtime_env,
            metadata=plan.metadata,
            submission_id=plan.submission_id,
        )
    return plan


def submit_entrypoint(
    entrypoint: str,
    *,
    address: str | None = None,
    runtime_env: dict[str, Any] | None = None,
    metadata: Mapping[str, str] | None = None,
    submission_id: str | None = None,
) -> str:
    """Submits an arbitrary shell command as a Ray job (no orchestrl checks) and returns its id."""
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url):
        return client.submit_job(
            entrypoint=entrypoint,
            runtime_env=runtime_env,
            metadata=dict(metadata or {}),
            submission_id=submission_id,
        )


def _summary(details: JobDetails) -> JobSummary:
    def when(ms: int | None) -> datetime | None:
        return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms else None

    metadata = details.metadata or {}
    command = metadata.get("orchestrl_args")
    command = f"orchestrl {command}" if command else details.entrypoint
    return JobSummary(
        job_id=details.submission_id or details.job_id or "?",
        status=str(getattr(details.status, "value", details.status)),
        command=command,
        start_time=when(details.start_time),
        end_time=when(details.end_time),
        message=first_line(details.message or ""),
        exit_code=details.driver_exit_code,
    )


def list_jobs(address: str | None = None) -> list[JobSummary]:
    """Every submitted job the cluster remembers, newest first."""
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url):
        jobs = [_summary(d) for d in client.list_jobs() if d.submission_id]
    epoch = datetime.fromtimestamp(0, tz=UTC)
    return sorted(jobs, key=lambda j: j.start_time or epoch, reverse=True)


def job_status(job_id: str, address: str | None = None) -> JobSummary:
    """The current state of one job."""
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url, job_id):
        return _summary(client.get_job_info(job_id))


def logs(job_id: str, address: str | None = None) -> str:
    """Everything the job's driver has printed so far."""
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url, job_id):
        client.get_job_info(job_id)  # a clear "no such job" before anything else
        return client.get_job_logs(job_id)


def follow(
    job_id: str,
    *,
    address: str | None = None,
    out: IO[str] | None = None,
    poll_s: float = 1.0,
) -> JobSummary:
    """Streams the job's logs to ``out`` (default stdout) until it ends; returns its final state.

    Logs arrive over the Jobs API's websocket while the job runs. Ray keeps that stream open for
    about five seconds after the job ends, so the job's status is watched alongside and the stream
    dropped once it is final; what is left (and everything, where a proxy refuses websockets) is
    read from the full log, writing only the part not yet shown.
    """
    out = sys.stdout if out is None else out
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url, job_id):
        finished = _summary(client.get_job_info(job_id)).terminal
    written = [0]  # characters already shown; survives a stream that drops half-way
    if not finished:
        with _quiet_job_sdk(), contextlib.suppress(Exception):  # polling below catches up
            asyncio.run(_stream_until_done(client, job_id, out, written, poll_s))
    with translated_errors(url, job_id):
        while True:
            summary = _summary(client.get_job_info(job_id))
            text = client.get_job_logs(job_id)
            if len(text) > written[0]:
                out.write(text[written[0] :])
                out.flush()
                written[0] = len(text)
            if summary.terminal:
                return summary
            time.sleep(poll_s)


async def _stream_until_done(
    client: JobSubmissionClient, job_id: str, out: IO[str], written: list[int], poll_s: float
) -> None:
    tail = asyncio.create_task(tail_logs(client, job_id, out, written))
    try:
        while not tail.done():
            status = await asyncio.to_thread(client.get_job_status, job_id)
            if status.is_terminal():
                return
            await asyncio.wait({tail}, timeout=poll_s)
        tail.result()  # re-raises a dropped stream, for the caller to fall back on polling
    finally:
        tail.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await tail


async def tail_logs(client: JobSubmissionClient, job_id: str, out: IO[str], written: list[int]) -> None:
    """Writes the job's log stream (the Jobs API's websocket) to ``out`` as it arrives, adding the
    characters written to ``written[0]``; returns when the stream closes, raises if it drops."""
    async for chunk in client.tail_job_logs(job_id):
        out.write(chunk)
        out.flush()
        written[0] += len(chunk)


@contextlib.contextmanager
def _quiet_job_sdk() -> Iterator[None]:
    """Hides the Jobs SDK's "WebSocket closed" INFO line, which would trail every followed job."""
    sdk_logger = logging.getLogger("ray.dashboard.modules.job.sdk")
    level = sdk_logger.level
    sdk_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        sdk_logger.setLevel(level)


def stop(job_id: str, *, address: str | None = None, wait_s: float = 0.0, poll_s: float = 0.5) -> StopOutcome:
    """Asks the cluster to stop a job and, with ``wait_s``, waits up to that long for it to end.

    Stopping an already finished job is not an error: nothing is requested and its final state is
    returned.
    """
    client = connect(address)
    url = resolve_address(address)
    with translated_errors(url, job_id):
        requested = bool(client.stop_job(job_id))
        deadline = time.monotonic() + wait_s
        summary = _summary(client.get_job_info(job_id))
        while not summary.terminal and time.monotonic() < deadline:
            time.sleep(poll_s)
            summary = _summary(client.get_job_info(job_id))
    return StopOutcome(requested, summary)


# --------------------------------------------------------------------------------------------
# How a job ended


def exit_code(summary: JobSummary) -> int:
    """The exit code a CLI should return for a finished job: 0 on success, else the driver's own
    code when it is a usable one (so ``submit --follow`` fails like the local command would), else 1."""
    if summary.status == "SUCCEEDED":
        return 0
    if summary.exit_code is not None and 0 < summary.exit_code < 256:
        return summary.exit_code
    return 1


def outcome_line(summary: JobSummary) -> str:
    """One line saying how a job ended."""
    if summary.status == "SUCCEEDED":
        return f"job {summary.job_id} succeeded"
    if summary.status == "STOPPED":
        return f"job {summary.job_id} was stopped"
    code = f" with exit code {summary.exit_code}" if summary.exit_code is not None else ""
    why = f": {summary.message}" if summary.message and summary.exit_code is None else ""
    hint = f"(logs: orchestrl jobs logs {summary.job_id})"
    return f"job {summary.job_id} {summary.status.lower()}{code}{why} {hint}"
