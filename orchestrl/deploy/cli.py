"""Commands that use any trained team: ``evaluate``, ``serve`` and ``runs show|register``.

The lead CLI mounts them (``orchestrl/cli.py``); the commands of one env family (``plan``, ``ask``)
live with its apps (``orchestrl.apps``). Bad input (an unknown run id, a path that is not a
checkpoint, a checkpoint whose env cannot be rebuilt, a bad ``--set``) prints one line naming the
culprit and exits with 2, before Ray or Serve starts.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path
from typing import Annotated

import typer

from orchestrl.cli_options import (
    AddressOpt,
    NoLogOpt,
    SetOpt,
    StoreDirOpt,
    TargetArg,
    TrackingOpt,
    VerboseOpt,
    fail,
    named_files,
)
from orchestrl.deploy.limits import TOKEN_ENV, ServeLimits, TokenError, resolve_token
from orchestrl.errors import ConfigError

LIMITS = ServeLimits()

runs_app = typer.Typer(
    name="runs",
    help="Read runs back from MLflow: a run's checkpoint, config and key metrics; register its model.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def port_free(host: str, port: int) -> bool:
    """Whether this machine can listen on ``host:port`` (where a local Serve's proxy will)."""
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def parse_databases(values: list[str], family: str) -> dict[str, str]:
    """``["shop=shop.sqlite"]`` -> ``{"shop": "/abs/shop.sqlite"}``, each file checked now, before Ray
    starts, by the family's endpoint that answers about databases."""
    from orchestrl.deploy.endpoints import endpoint_classes

    if not values:
        return {}
    readers = [cls for cls in endpoint_classes(family) if getattr(cls, "reads_databases", False)]
    if not readers:
        fail(f"--database: this checkpoint's env family ({family}) serves no endpoint that reads databases")
    out: dict[str, str] = {}
    for value, name, file in named_files(values, "--database", "NAME=FILE.sqlite"):
        path = file.expanduser().resolve()
        for reader in readers:
            try:
                reader.check_database(path)
            except ValueError as err:
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
    no_log: NoLogOpt = False,
    run_dir: StoreDirOpt = None,
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


def serve_command(
    target: TargetArg,
    address: AddressOpt = None,
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
            help="A SQLite file the team's endpoints answer about (Text2SQL's POST /ask), NAME=FILE.sqlite "
            "(repeatable; read-only).",
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            help=f"A file holding the bearer token requests must carry (else {TOKEN_ENV}); "
            "required beyond loopback.",
        ),
    ] = None,
    max_body_bytes: Annotated[
        int, typer.Option("--max-body-bytes", min=1, help="Largest request body (413).")
    ] = LIMITS.body_bytes,
    timeout_s: Annotated[
        float, typer.Option("--timeout-s", min=0.001, help="Time limit of one request's work (504).")
    ] = LIMITS.timeout_s,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Requests one replica answers at once (503).")
    ] = LIMITS.concurrency,
    queued: Annotated[
        int, typer.Option("--queued", min=1, help="Requests waiting for a free replica (503 beyond).")
    ] = LIMITS.queued,
    max_table_rows: Annotated[
        int, typer.Option("--max-table-rows", min=1, help="Rows per table of a POST /plan (413).")
    ] = LIMITS.table_rows,
    max_table_columns: Annotated[
        int, typer.Option("--max-table-columns", min=1, help="Columns per table of a POST /plan (413).")
    ] = LIMITS.table_columns,
    max_question_chars: Annotated[
        int, typer.Option("--max-question-chars", min=1, help="Characters of a POST /ask question (413).")
    ] = LIMITS.question_chars,
    max_result_rows: Annotated[
        int, typer.Option("--max-result-rows", min=1, help="Rows a POST /ask query may return.")
    ] = LIMITS.result_rows,
    run_dir: StoreDirOpt = None,
    tracking_uri: TrackingOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Serve a checkpoint over HTTP on Ray Serve: POST /act (observations -> actions) and the
    endpoints of its env family (POST /plan, POST /ask); Ctrl-C stops it. Beyond loopback every
    request needs the bearer token (--token-file or ORCHESTRL_SERVE_TOKEN)."""
    from orchestrl.deploy import serve
    from orchestrl.deploy.endpoints import ServedTeam, endpoint_classes
    from orchestrl.deploy.team import TeamError, find_team
    from orchestrl.envs.registry import get_env
    from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

    try:
        token = resolve_token(host, token_file)
    except TokenError as err:
        fail(str(err))
    limits = ServeLimits(
        body_bytes=max_body_bytes,
        timeout_s=timeout_s,
        concurrency=concurrency,
        queued=queued,
        table_rows=max_table_rows,
        table_columns=max_table_columns,
        question_chars=max_question_chars,
        result_rows=max_result_rows,
    )
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
    served = ServedTeam(policy, str(team.checkpoint), family, cfg.to_dict(), databases, limits)
    serve.serve_environment()
    stop = threading.Event()
    with ray_session(cfg.resources, Path(run_dir or cfg.run_dir), address=address, verbose=verbose):
        for signum in (signal.SIGINT, signal.SIGTERM):  # after Ray's own handlers are installed
            signal.signal(signum, lambda *_: stop.set())
        try:
            url = serve.start(served, host=host, port=port, replicas=replicas, token=token, verbose=verbose)
            typer.echo(f"serving {team.checkpoint}")
            typer.echo(
                f"  {cfg.algorithm.name} on {cfg.env.name}; agents: {', '.join(sorted(policy.agents))}"
            )
            typer.echo(f"  GET {url}/  (what is served)")
            for endpoint in endpoint_classes(family):
                typer.echo(f"  POST {url}{endpoint.path}  ({endpoint.summary})")
            if databases:
                typer.echo(f"  databases: {', '.join(sorted(databases))}")
            if token is not None:
                typer.echo("  every request needs the header  Authorization: Bearer <token>")
            typer.echo("Ctrl-C stops it")
            while not stop.wait(0.5):
                pass
        finally:
            serve.stop(keep_serve=True)  # a local Ray ends with the session; a cluster keeps its Serve
    typer.echo("stopped")


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="An MLflow run id.")],
    run_dir: StoreDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Print a run's checkpoint, config and key metrics."""
    from orchestrl.tracking.show import describe_run
    from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri

    uri = resolve_tracking_uri(Path(run_dir or "runs"), tracking_uri)
    try:
        typer.echo(describe_run(RunStore(uri), run_id))
    except UnknownRunError:
        fail(f"run {run_id}: no such run in the tracking store ({uri})")


@runs_app.command("register")
def runs_register(
    run_id: Annotated[str, typer.Argument(help="A training run id (its final policy is an MLflow model).")],
    name: Annotated[str, typer.Option("--name", help="Registered model name.")],
    run_dir: StoreDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Register a run's policy model in the MLflow Model Registry (a new version of --name)."""
    from orchestrl.tracking.models import register_policy_model
    from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri

    uri = resolve_tracking_uri(Path(run_dir or "runs"), tracking_uri)
    try:
        version = register_policy_model(RunStore(uri), run_id, name)
    except UnknownRunError:
        fail(f"run {run_id}: no such run in the tracking store ({uri})")
    except LookupError as err:
        fail(str(err))
    typer.echo(f"registered models:/{name}/{version}")
