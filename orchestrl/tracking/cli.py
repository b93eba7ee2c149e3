"""``orchestrl tracking ...``: the tracking commands that are not a run (registered by ``orchestrl.cli``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

tracking_app = typer.Typer(
    help="Tracking writes a server has not taken yet (a server outage's journal).", no_args_is_help=True
)


@tracking_app.command("flush")
def flush(
    run_dir: Annotated[Path, typer.Argument(help="The run dir whose tracking_journal/ to send.")],
    tracking_uri: Annotated[
        str | None, typer.Option("--tracking-uri", help="Send here instead of the server each run used.")
    ] = None,
) -> None:
    """Send what a run dir's tracking journal holds, in order; a second flush sends nothing twice."""
    from orchestrl.tracking.flush import flush_run_dir

    if not run_dir.is_dir():
        typer.echo(f"error: {run_dir}: no such run dir", err=True)
        raise typer.Exit(2)
    reports = flush_run_dir(run_dir, tracking_uri, echo=typer.echo)
    if not reports:
        typer.echo(f"nothing to flush under {run_dir}")
    for report in reports:
        for line in report.lines():
            typer.echo(line)
    if any(r.left or r.busy for r in reports):
        raise typer.Exit(1)
