"""``orchestrl plan``: a trained LEMON team writes a pipeline for your own tables (:mod:`.plan`).

Prints the spec, how its output matches the example rows, and the files it wrote; exit code 1 when
no spec matches them. Bad input (a missing or malformed CSV, input beyond the team's limits, a
checkpoint that is not an orchestration team) is one line naming the file or flag, exit code 2,
and nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrl.cli_options import StoreDirOpt, TrackingOpt, fail, named_files
from orchestrl.errors import ConfigError


def plan_command(
    source: Annotated[
        list[str],
        typer.Option("--source", help="NAME=FILE.csv, one per table, the fact table first (repeatable)."),
    ],
    target_example: Annotated[
        Path, typer.Option("--target-example", help="CSV with a few rows of the wanted table (its columns).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where spec.yaml, pipeline.py, plan.json and data/ go (default runs/plans/<checkpoint>).",
        ),
    ] = None,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            "-c",
            help="A trained orchestration team (a run id or a checkpoint folder); without one the"
            " synthesiser plans alone.",
        ),
    ] = None,
    target_rows: Annotated[
        int | None,
        typer.Option("--target-rows", min=1, help="The wanted table's row count, when you know it."),
    ] = None,
    description: Annotated[
        str | None,
        typer.Option(
            "--description",
            "-d",
            help="What you want, in your words (e.g. 'overdue invoices of 30 days or more'): values,"
            " bounds and columns it names become filters the example rows cannot show.",
        ),
    ] = None,
    no_fallback: Annotated[
        bool, typer.Option("--no-fallback", help="Do not fall back to the solver when the team's spec fails.")
    ] = False,
    run_dir: StoreDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Plan a pipeline for your own tables, with a trained LEMON team or the synthesiser alone:
    spec YAML, pipeline.py, and how its output matches your example rows (the synthesiser steps
    in when the team's spec fails)."""
    from orchestrl.apps.orchestration.plan import PlanInputError, Planner, read_csv, write_plan
    from orchestrl.deploy.team import TeamError, find_team
    from orchestrl.training.runtime import quiet_environment, silence_noise

    sources = {}
    for _, name, path in named_files(source, "--source", "NAME=FILE.csv"):
        try:
            sources[name] = read_csv(name, path, is_path=True)
        except PlanInputError as err:
            fail(f"--source {err}")
    try:
        examples = read_csv(str(target_example), target_example, is_path=True)
    except PlanInputError as err:
        fail(f"--target-example {err}")
    quiet_environment(Path(run_dir or "runs"))
    silence_noise(verbose=False)
    team = None
    try:
        if checkpoint is None:
            planner = Planner()
        else:
            team = find_team(checkpoint, run_dir=run_dir, tracking_uri=tracking_uri)
            planner = Planner.from_team(team)
    except (TeamError, ConfigError) as err:
        fail(str(err))
    except PlanInputError as err:
        fail(f"--checkpoint {checkpoint}: {err.message}")
    try:
        plan = planner.plan(
            sources, examples, fallback=not no_fallback, target_rows=target_rows, description=description
        )
    except PlanInputError as err:
        if err.field == "description":
            fail(f"--description: {err.message}")
        fail(f"{'--target-example' if err.field == 'target_example' else '--source'} {err}")
    finally:
        planner.close()
    name = "search" if team is None else Path(str(team.checkpoint)).parent.parent.name
    folder = out or Path(run_dir or "runs") / "plans" / name
    written = write_plan(plan, sources, folder)
    if plan.spec_yaml is not None:
        typer.echo(plan.spec_yaml.rstrip())
    typer.echo(plan.summary())
    for path in written:
        typer.echo(f"wrote {path}")
    if plan.spec_yaml is not None:
        typer.echo(f"run it: python {folder / 'pipeline.py'} --data {folder / 'data'}")
    if not plan.match.ok:
        raise typer.Exit(1)
