"""Command line for cluster jobs: ``orchestrl submit`` and ``orchestrl jobs list|logs|stop``.

The lead CLI mounts these::

    app.command("submit", context_settings=SUBMIT_CONTEXT_SETTINGS)(submit_command)
    app.add_typer(jobs_app, name="jobs")

so that ``orchestrl submit [--address URL] [--follow] -- train configs/x.yaml`` runs
``orchestrl train configs/x.yaml`` as a Ray job (see :mod:`orchestrl.cluster.lifecycle` for how).

Every failure is one line on stderr and a non-zero exit, never a traceback: 2 for a submission
refused before anything was sent (bad command, local tracking store, path outside the project),
1 for an unreachable cluster or unknown job, and for a job that failed on the cluster its own
exit code (so ``submit --follow`` fails the way the local command would), 130 on Ctrl-C.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from orchestrl.cli_options import fail
from orchestrl.cluster import lifecycle
from orchestrl.cluster.connection import DEFAULT_ADDRESS, resolve_address
from orchestrl.cluster.errors import JobsError, SubmitRefusedError

SUBMIT_CONTEXT_SETTINGS = {"allow_interspersed_args": False, "ignore_unknown_options": True}
"""Register ``submit_command`` with these so that everything after the subcommand name belongs to
it even without ``--``: ``orchestrl submit train --set training.lr=1e-3`` works too."""

jobs_app = typer.Typer(
    name="jobs",
    help="List, follow and stop orchestrl jobs on a Ray cluster (see cluster/README.md).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

AddressOption = Annotated[
    str | None,
    typer.Option(
        "--address",
        help=f"Ray Jobs API (dashboard) URL; default: $RAY_ADDRESS, else {DEFAULT_ADDRESS}.",
        show_default=False,
    ),
]


def _error_code(err: JobsError) -> int:
    return 2 if isinstance(err, SubmitRefusedError) else 1


def _address_flag(address: str | None) -> str:
    return f" --address {address}" if address else ""


def _finish(summary: lifecycle.JobSummary) -> None:
    """Reports how a followed job ended and exits with the matching code."""
    code = lifecycle.exit_code(summary)
    line = lifecycle.outcome_line(summary)
    if code == 0:
        typer.echo(line, err=True)
        return
    fail(line, code)


def _follow(job_id: str, address: str | None) -> None:
    try:
        summary = lifecycle.follow(job_id, address=address)
    except KeyboardInterrupt:
        typer.echo(
            f"\ndetached; job {job_id} keeps running (stop it: orchestrl jobs stop {job_id}"
            f"{_address_flag(address)})",
            err=True,
        )
        raise typer.Exit(130) from None
    except JobsError as err:  # e.g. the tunnel closed while following
        fail(str(err), _error_code(err))
    _finish(summary)


def submit_command(
    args: Annotated[
        list[str],
        typer.Argument(
            metavar="train|sweep|curriculum [ARGS]...",
            help="The orchestrl command to run on the cluster, after `--`.",
            show_default=False,
        ),
    ],
    address: AddressOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Stream the job's logs and exit with its outcome.")
    ] = False,
    requirements: Annotated[
        bool,
        typer.Option(
            "--requirements/--no-requirements",
            help="pip-install pyproject's dependencies in the job (skip when the image has them).",
        ),
    ] = True,
    project_dir: Annotated[
        Path | None,
        typer.Option("--project-dir", help="Project to run; default: found from the current directory."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the job that would be submitted and send nothing.")
    ] = False,
) -> None:
    """Run an orchestrl command as a Ray job on a cluster.

    A remote cluster gets the project uploaded and needs an MLflow server (--tracking-uri).
    A cluster on this machine runs the job in place, in the project directory.
    """
    try:
        plan = lifecycle.submit(
            args, address=address, project_dir=project_dir, requirements=requirements, dry_run=dry_run
        )
    except JobsError as err:
        fail(str(err), _error_code(err))
    for note in plan.notes:
        typer.echo(f"note: {note}", err=True)
    target = resolve_address(address)
    if plan.in_place:
        how = f"in place in {plan.project_dir}"
    else:
        how = "uploaded" + (" with pip requirements" if "pip" in plan.runtime_env else "")
    if dry_run:
        typer.echo(f"would submit {plan.submission_id} to {target} ({how})")
        typer.echo(f"  entrypoint:  {plan.entrypoint}")
        typer.echo(f"  runtime_env: {plan.runtime_env}")
        typer.echo(f"  tracking:    {plan.tracking.uri or '(embedded store)'} from {plan.tracking.source}")
        return
    typer.echo(f"submitted {plan.submission_id} to {target} ({how})")
    flag = _address_flag(address)
    if follow:
        _follow(plan.submission_id, address)
        return
    typer.echo(f"  follow: orchestrl jobs logs {plan.submission_id} --follow{flag}")
    typer.echo(f"  stop:   orchestrl jobs stop {plan.submission_id}{flag}")


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _duration(job: lifecycle.JobSummary) -> str:
    if job.start_time is None:
        return "-"
    end = job.end_time or datetime.now(job.start_time.tzinfo)
    seconds = int((end - job.start_time).total_seconds())
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@jobs_app.command("list")
def list_command(address: AddressOption = None) -> None:
    """List the cluster's jobs, newest first."""
    try:
        rows = lifecycle.list_jobs(address)
    except JobsError as err:
        fail(str(err), _error_code(err))
    if not rows:
        typer.echo("no jobs")
        return
    id_width = max(len("JOB ID"), *(len(r.job_id) for r in rows))
    typer.echo(f"{'JOB ID':<{id_width}}  {'STATUS':<9}  {'STARTED':<19}  {'TIME':>8}  COMMAND")
    for r in rows:
        started = _when(r.start_time)
        typer.echo(f"{r.job_id:<{id_width}}  {r.status:<9}  {started:<19}  {_duration(r):>8}  {r.command}")


@jobs_app.command("logs")
def logs_command(
    job_id: Annotated[str, typer.Argument(help="The job's id, as `submit` or `jobs list` print it.")],
    address: AddressOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until the job ends; exit with its outcome.")
    ] = False,
) -> None:
    """Print a job's logs."""
    try:
        if follow:
            _follow(job_id, address)
            return
        text = lifecycle.logs(job_id, address)
    except JobsError as err:
        fail(str(err), _error_code(err))
    sys.stdout.write(text)
    sys.stdout.flush()


@jobs_app.command("stop")
def stop_command(
    job_id: Annotated[str, typer.Argument(help="The job's id, as `submit` or `jobs list` print it.")],
    address: AddressOption = None,
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Seconds to wait for the job to end (0: don't wait).")
    ] = 10.0,
) -> None:
    """Stop a running job (its processes on the cluster are killed)."""
    try:
        outcome = lifecycle.stop(job_id, address=address, wait_s=wait)
    except JobsError as err:
        fail(str(err), _error_code(err))
    job = outcome.job
    if not outcome.requested:
        typer.echo(f"job {job_id} had already ended: {job.status}")
    elif job.terminal:
        typer.echo(f"job {job_id} stopped ({job.status})")
    else:
        typer.echo(f"stop requested; job {job_id} is still {job.status}")
