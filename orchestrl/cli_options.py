"""What every ``orchestrl`` command shares: its options, defined once, and how bad input ends it.

The lead CLI (``orchestrl/cli.py``), the commands of deploy, cluster and the env families' apps
all take these, so each option reads the same in every ``--help``. Bad input is one line on stderr
naming the culprit, and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        help="Dotted override of the experiment config, e.g. --set training.lr=1e-3 (repeatable).",
    ),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Existing Ray cluster (default: RAY_ADDRESS, else a local Ray)."),
]
TrackingOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else the run dir's mlflow.db).",
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Ray's own logs (RLlib's, Serve's).")]
StoreDirOpt = Annotated[
    str | None,
    typer.Option("--run-dir", help="Run dir of the embedded store (default: runs, or a checkpoint's own)."),
]
NoLogOpt = Annotated[
    bool, typer.Option("--no-log", help="Do not log the result (a report, an evaluation run) to MLflow.")
]
TargetArg = Annotated[str, typer.Argument(help="A training run id, or a checkpoint folder.")]


def fail(message: str, code: int = 2) -> NoReturn:
    """Ends the command: ``error: message`` on stderr, exit ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def named_files(values: list[str], flag: str, example: str) -> list[tuple[str, str, Path]]:
    """``["a=x.csv", ...]`` -> ``[(value, name, path), ...]``; a malformed or repeated name is one
    line naming ``flag`` and exit 2."""
    out: list[tuple[str, str, Path]] = []
    for value in values:
        name, sep, file = (part.strip() for part in value.partition("="))
        if not sep or not name or not file:
            fail(f"{flag} {value}: expected {example}")
        if any(name == seen for _, seen, _ in out):
            fail(f"{flag} {value}: the name {name!r} is given twice")
        out.append((value, name, Path(file)))
    return out
