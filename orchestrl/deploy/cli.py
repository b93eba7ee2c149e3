"""Commands that use a trained team: ``evaluate``, ``plan``, ``serve``, ``ask`` and ``runs show|register``.

The lead CLI mounts them (``orchestrl/cli.py``). Bad input (an unknown run id, a path that is not
a checkpoint, a checkpoint whose env cannot be rebuilt, a bad ``--set``) prints one line naming
the culprit and exits with 2, before Ray or Serve starts.

``ask`` prints the SQL the team wrote, then one line per result row (values separated by `` | ``)
and the row count. Bad input (a missing or unreadable file, a schema or question beyond the action
space's limits, a checkpoint that holds no Text2SQL team) is one line on stderr and exit code 2;
SQL that SQLite rejects is printed with SQLite's error and exit code 1.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from orchestrl.errors import ConfigError

runs_app = typer.Typer(
    name="runs",
    help="Read runs back from MLflow: a run's checkpoint, config and key metrics; register its model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

TargetArg = Annotated[str, typer.Argument(help="A training run id, or a checkpoint folder.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override the run's config, e.g. --set env.kwargs.N=4 (repeatable)."),
]
RunDirOpt = Annotated[
    str | None,
    typer.Option("--run-dir", help="Run dir of the embedded store (default: runs; a checkpoint's own)."),
]
TrackingOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri", help="MLflow tracking URI (default: MLFLOW_TRACKING_URI, else the run dir's)."
    ),
]


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def port_free(host: str, port: int) -> bool:
    """Whether this machine can listen on ``host:port`` (where a local Serve's proxy will)."""
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def named_files(values: list[str], flag: str, example: str) -> list[tuple[str, str, str]]:
    """``["a=x.csv", ...]`` -> ``[(value, name, file), ...]``; a malformed or repeated name is one
    line naming ``flag`` and exit 2."""
    out: list[tuple[str, str, str]] = []
    for value in values:
        name, sep, file = (part.strip() for part in value.partition("="))
        if not sep or not name or not file:
            fail(f"{flag} {value}: expected {example}")
        if any(name == seen for _, seen, _ in out):
            fail(f"{flag} {value}: the name {name!r} is given twice")
        out.append((value, name, file))
    return out


def parse_databases(values: list[str], family: str) -> dict[str, str]:
    """``["shop=shop.sqlite"]`` -> ``{"shop": "/abs/shop.sqlite"}``, each file opened (read-only) and
    checked against the Text2SQL action space's limits now, before Ray starts."""
    if not values:
        return {}
    if family != "text2sql":
        fail(f"--database: only a Text2SQL team answers questions; this checkpoint's env family is {family}")
    from orchestrl.deploy.ask import Database
    from orchestrl.envs.text2sql.observation import LimitError

    out: dict[str, str] = {}
    for value, name, file in named_files(values, "--database", "NAME=FILE.sqlite"):
        path = Path(file).expanduser().resolve()
        try:
            Database.open(path)
        except (FileNotFoundError, LimitError) as err:
            fail(f"--database {value}: {err}")
        out[name] = str(path)
    return out


def parse_seeds(values: list[str]) -> list[int]:
    """``["0,1", "2"]`` -> ``[0, 1, 2]``."""
    try:
        seeds = [int(part) for value in values for part in value.split(",") if part.strip()]
    except ValueError:
        fail(f"--seeds {' '.join(values)}: expected integers, e.g. --seeds 0,1,2")
    if not seeds:
        fail("--seeds: give at least one seed")
    return seeds


def evaluate_command(
    target: TargetArg,
    split: Annotated[
        str,
        typer.Option("--split", help="heldout: the config's evaluation.env_overrides; train: as trained."),
    ] = "heldout",
    episodes: Annotated[int, typer.Option("--episodes", min=1, help="Episodes per seed.")] = 20,
    seeds: Annotated[
        list[str] | None, typer.Option("--seeds", help="Env seeds, comma-separated: --seeds 0,1,2.")
    ] = None,
    set_: SetOpt = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="Do not log an evaluation run to MLflow.")] = False,
    run_dir: RunDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Evaluate a checkpoint greedily on its env (or another, with --set): metrics with 95% CIs."""
    from orchestrl.deploy.evaluate import evaluate
    from orchestrl.deploy.team import TeamError, find_team
    from orchestrl.training.runtime import quiet_environment, silence_noise

    if split not in ("heldout", "train"):
        fail(f"--split: expected heldout or train, got {split!r}")
    chosen = parse_seeds(seeds or ["0"])
    quiet_environment(Path(run_dir or "runs"))
    silence_noise(verbose=False)
    try:
        team = find_team(target, run_dir=run_dir, tracking_uri=tracking_uri, overrides=set_)
        result = evaluate(team, split=split, episodes=episodes, seeds=chosen, log=not no_log, echo=typer.echo)  # type: ignore[arg-type]
    except (TeamError, ConfigError) as err:
        fail(str(err))
    typer.echo(result.table())


def plan_command(
    checkpoint: Annotated[
        str,
        typer.Option(
            "--checkpoint", "-c", help="A trained orchestration team: a run id or a checkpoint folder."
        ),
    ],
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
    target_rows: Annotated[
        int | None,
        typer.Option("--target-rows", min=1, help="The wanted table's row count, when you know it."),
    ] = None,
    no_fallback: Annotated[
        bool, typer.Option("--no-fallback", help="Do not fall back to the solver when the team's spec fails.")
    ] = False,
    run_dir: RunDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Plan a pipeline for your own tables with a trained LEMON team: spec YAML, pipeline.py, and
    how its output matches your example rows (the solver steps in when the team's spec fails)."""
    from orchestrl.deploy.plan import PlanInputError, Planner, read_csv, write_plan
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
    try:
        team = find_team(checkpoint, run_dir=run_dir, tracking_uri=tracking_uri)
        planner = Planner.from_team(team)
    except (TeamError, ConfigError) as err:
        fail(str(err))
    except PlanInputError as err:
        fail(f"--checkpoint {checkpoint}: {err.message}")
    try:
        plan = planner.plan(sources, examples, fallback=not no_fallback, target_rows=target_rows)
    except PlanInputError as err:
        where = "--target-example" if err.field == "target_example" else "--source"
        fail(f"{where} {err}")
    finally:
        planner.close()
    folder = out or Path(run_dir or "runs") / "plans" / Path(str(team.checkpoint)).parent.parent.name
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


def serve_command(
    target: TargetArg,
    address: Annotated[
        str | None,
        typer.Option("--address", help="Existing Ray cluster (default: RAY_ADDRESS, else a local Ray)."),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Where Serve's HTTP proxy listens (0.0.0.0: every interface).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535)] = 8000,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Replicas of the team.")] = 1,
    set_: SetOpt = None,
    database: Annotated[
        list[str] | None,
        typer.Option(
            "--database",
            help="Text2SQL: a SQLite file POST /ask answers about, NAME=FILE.sqlite (repeatable; read-only).",
        ),
    ] = None,
    run_dir: RunDirOpt = None,
    tracking_uri: TrackingOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Ray's and Serve's own logs.")
    ] = False,
) -> None:
    """Serve a checkpoint over HTTP on Ray Serve: POST /act (observations -> actions), and for a
    Text2SQL team POST /ask (a question about a --database -> SQL and rows); Ctrl-C stops it."""
    from orchestrl.deploy import serve
    from orchestrl.deploy.team import TeamError, find_team
    from orchestrl.envs.registry import get_env
    from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

    quiet_environment(Path(run_dir or "runs"))
    silence_noise(verbose)
    try:
        team = find_team(target, run_dir=run_dir, tracking_uri=tracking_uri, overrides=set_)
        policy = team.policy(team.rllib_config("train"))
    except (TeamError, ConfigError) as err:
        fail(str(err))
    cfg = team.config
    family = get_env(cfg.env.name).family
    databases = parse_databases(database or [], family)
    if not (address or os.environ.get("RAY_ADDRESS")) and not port_free(host, port):
        fail(f"--port {port}: {host}:{port} is already in use")
    served = serve.ServedTeam(policy, str(team.checkpoint), family, cfg.to_dict(), databases)
    serve.serve_environment()
    stop = threading.Event()
    with ray_session(cfg.resources, Path(run_dir or cfg.run_dir), address=address, verbose=verbose):
        for signum in (signal.SIGINT, signal.SIGTERM):  # after Ray's own handlers are installed
            signal.signal(signum, lambda *_: stop.set())
        try:
            url = serve.start(served, host=host, port=port, replicas=replicas, verbose=verbose)
            typer.echo(f"serving {team.checkpoint}")
            typer.echo(
                f"  {cfg.algorithm.name} on {cfg.env.name}; agents: {', '.join(sorted(policy.agents))}"
            )
            typer.echo(f"  GET {url}/  (what is served)   POST {url}/act  (observations -> actions)")
            if databases:
                typer.echo(
                    f"  POST {url}/ask  (a question about {', '.join(sorted(databases))} -> SQL, rows)"
                )
            if served.family == "orchestration":
                typer.echo(f"  POST {url}/plan  (your tables as CSV + a target example -> spec, pipeline.py)")
            typer.echo("Ctrl-C stops it")
            while not stop.wait(0.5):
                pass
        finally:
            serve.stop(keep_serve=True)  # a local Ray ends with the session; a cluster keeps its Serve
    typer.echo("stopped")


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="An MLflow run id.")],
    run_dir: Annotated[str, typer.Option("--run-dir", help="Run dir of the embedded store.")] = "runs",
    tracking_uri: TrackingOpt = None,
) -> None:
    """Print a run's checkpoint, config and key metrics."""
    from orchestrl.tracking.show import describe_run
    from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri

    uri = resolve_tracking_uri(Path(run_dir), tracking_uri)
    try:
        typer.echo(describe_run(RunStore(uri), run_id))
    except UnknownRunError:
        fail(f"run {run_id}: no such run in the tracking store ({uri})")


@runs_app.command("register")
def runs_register(
    run_id: Annotated[str, typer.Argument(help="A training run id (its final policy is an MLflow model).")],
    name: Annotated[str, typer.Option("--name", help="Registered model name.")],
    run_dir: Annotated[str, typer.Option("--run-dir", help="Run dir of the embedded store.")] = "runs",
    tracking_uri: TrackingOpt = None,
) -> None:
    """Register a run's policy model in the MLflow Model Registry (a new version of --name)."""
    from orchestrl.tracking.models import register_policy_model
    from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri

    uri = resolve_tracking_uri(Path(run_dir), tracking_uri)
    try:
        version = register_policy_model(RunStore(uri), run_id, name)
    except UnknownRunError:
        fail(f"run {run_id}: no such run in the tracking store ({uri})")
    except LookupError as err:
        fail(str(err))
    typer.echo(f"registered models:/{name}/{version}")


def ask_command(
    question: Annotated[str, typer.Argument(help="The question, in English.")],
    checkpoint: Annotated[
        Path, typer.Option("--checkpoint", help="A trained NeuroMAS Text2SQL run checkpoint or module dir.")
    ],
    db: Annotated[Path, typer.Option("--db", help="The SQLite file to ask about (opened read-only).")],
) -> None:
    """Ask a trained NeuroMAS Text2SQL team a question about a SQLite file: prints the SQL and its rows."""
    from orchestrl.deploy.ask import CheckpointError, Database, Team
    from orchestrl.envs.text2sql.observation import LimitError, check_question
    from orchestrl.envs.text2sql.tokenizer import split_words

    try:
        check_question(split_words(question))
        database = Database.open(db)
        answer = Team.load(checkpoint).ask(database, question)
    except (FileNotFoundError, LimitError, CheckpointError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"SQL: {answer.sql if answer.sql is not None else '(none)'}")
    if answer.error is not None:
        typer.echo(f"error: {answer.error}", err=True)
        raise typer.Exit(1)
    for row in answer.rows:
        typer.echo(" | ".join(str(v) for v in row))
    typer.echo(f"({len(answer.rows)} row{'s' if len(answer.rows) != 1 else ''})")
