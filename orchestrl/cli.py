"""The ``orchestrl`` command line.

Bad input (a config error, an unknown run) prints one line naming the culprit and exits with 2,
before Ray or MLflow starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrl.cli_options import AddressOpt, NoLogOpt, SetOpt, StoreDirOpt, TrackingOpt, VerboseOpt, fail
from orchestrl.experiment.config import ConfigError, ExperimentConfig, load_config

if TYPE_CHECKING:
    from orchestrl.training.train import TrainSummary

app = typer.Typer(
    name="orchestrl",
    help="Distributed multi-agent RL for orchestrating executable work (Ray RLlib + Tune + MLflow).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def load_or_fail(path: Path, overrides: list[str] | None) -> ExperimentConfig:
    try:
        return load_config(path, overrides or [])
    except ConfigError as err:
        fail(str(err))


@app.command()
def train(
    config: Annotated[Path | None, typer.Argument(help="Experiment YAML (not needed with --resume).")] = None,
    set_: SetOpt = None,
    stop_iters: Annotated[
        int | None, typer.Option("--stop-iters", min=1, help="Stop after N iterations.")
    ] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="MLflow run id to continue.")] = None,
    run_dir: Annotated[
        str | None, typer.Option("--run-dir", help="Where runs go (overrides run_dir).")
    ] = None,
    address: AddressOpt = None,
    tracking_uri: TrackingOpt = None,
    verbose: VerboseOpt = False,
) -> None:
    """Train one experiment on Ray and record it as one MLflow run."""
    if config is None and resume is None:
        fail("train needs CONFIG.yaml or --resume RUN_ID")
    overrides = list(set_ or []) + ([f"run_dir={run_dir}"] if run_dir else [])
    if config is not None:
        cfg = load_or_fail(config, overrides)
    else:
        cfg = _placeholder_for_resume(run_dir)
    # Imported once the config is valid: torch and RLlib take seconds, a config error should not.
    from orchestrl.tracking.journal import TrackingUnavailable
    from orchestrl.training.train import ResumeError
    from orchestrl.training.train import train as run_training

    try:
        summary = run_training(
            cfg,
            stop_iters=stop_iters,
            resume=resume,
            address=address,
            tracking_uri=tracking_uri,
            verbose=verbose,
            echo=lambda line: typer.echo(line),
        )
    except (ResumeError, ConfigError, TrackingUnavailable) as err:
        fail(str(err))
        return
    typer.echo(summary_table(summary))


def _placeholder_for_resume(run_dir: str | None) -> ExperimentConfig:
    """With only --resume, the run's own config is read back; this only locates the store."""
    return ExperimentConfig.model_validate(
        {
            "name": "resume",
            "run_dir": run_dir or "runs",
            "env": {"name": "simple_spread"},
            "algorithm": {"name": "ippo"},
        }
    )


def summary_table(summary: TrainSummary) -> str:
    from orchestrl.tracking.ui import ui_url

    first, last = summary.first, summary.last
    rows = [
        (
            "team return (sum over agents), first iteration",
            f"{first.get('team_return_sum_mean', float('nan')):.2f}",
        ),
        (
            "team return (sum over agents), last iteration",
            f"{last.get('team_return_sum_mean', float('nan')):.2f}",
        ),
    ]
    for key in ("env/success", "eval/env/success", "eval/team_return_sum_mean"):
        value = summary.evaluation.get(key, last.get(key))
        if value is not None:
            rows.append((key, f"{value:.3f}"))
    for key in sorted(k for k in last if k.endswith("/vf_explained_var")):
        rows.append((key, f"{last[key]:.3f}"))
    rows += [
        ("iterations", str(summary.iterations)),
        ("env steps", f"{int(summary.env_steps):,}"),
        ("env steps/s (last iteration)", f"{summary.steps_per_s():.0f}"),
        ("MLflow run id", summary.run_id),
        ("tracking URI", summary.tracking_uri),
        ("open it", f"orchestrl ui   (then {ui_url(5000)})"),
        ("use it", f"orchestrl evaluate {summary.run_id}   |   orchestrl serve {summary.run_id}"),
        ("checkpoint", summary.checkpoint or "none"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(["", "summary", "-" * (width + 30)] + [f"{k:<{width}}  {v}" for k, v in rows])


@app.command()
def ui(
    run_dir: StoreDirOpt = None,
    port: Annotated[int, typer.Option("--port")] = 5000,
    tracking_uri: TrackingOpt = None,
) -> None:
    """Serve the MLflow UI on 127.0.0.1 for the embedded store (or --tracking-uri)."""
    from orchestrl.tracking.ui import serve_ui, ui_command, ui_url

    cmd, uri = ui_command(Path(run_dir or "runs"), port, tracking_uri)
    typer.echo(f"MLflow UI on {ui_url(port)} (store: {uri}); Ctrl-C to stop")
    raise typer.Exit(serve_ui(cmd))


@app.command()
def envs() -> None:
    """List the registered environments."""
    from orchestrl.envs.registry import ENVS

    for name, entry in sorted(ENVS.items()):
        typer.echo(f"{name:<26} {entry.family:<14} {entry.summary}")


@app.command()
def algos() -> None:
    """List the registered algorithms."""
    from orchestrl.experiment.algorithms import ALGORITHMS

    for name, entry in sorted(ALGORITHMS.items()):
        typer.echo(f"{name:<10} {entry.summary}")


def _register_cluster_commands() -> None:
    from orchestrl.cluster.cli import SUBMIT_CONTEXT_SETTINGS, jobs_app, submit_command

    app.command("submit", context_settings=SUBMIT_CONTEXT_SETTINGS)(submit_command)
    app.add_typer(jobs_app, name="jobs")


_register_cluster_commands()


def _register_tracking_commands() -> None:
    from orchestrl.tracking.cli import tracking_app

    app.add_typer(tracking_app, name="tracking")


_register_tracking_commands()


def _register_deploy_commands() -> None:
    from orchestrl.deploy.cli import evaluate_command, runs_app, serve_command
    from orchestrl.dotted import load
    from orchestrl.envs.registry import app_commands

    app.command("evaluate")(evaluate_command)
    app.command("serve")(serve_command)
    for name, path in app_commands().items():  # each env family's own (plan, ask)
        app.command(name)(load(path))
    app.add_typer(runs_app, name="runs")


_register_deploy_commands()


ResumeOpt = Annotated[
    bool,
    typer.Option("--resume", help="Continue the latest unfinished run of this file (same MLflow parent)."),
]
ParentOpt = Annotated[
    str | None, typer.Option("--parent", help="With --resume: the MLflow parent run id to continue.")
]
RunDirOpt = Annotated[
    str | None, typer.Option("--run-dir", help="Where runs go (overrides the base's run_dir).")
]


def run_tune_command(command: str, module: str, config: Path, run_dir: str | None, **launch: Any) -> None:
    """What ``sweep`` and ``curriculum`` share: load and validate the YAML, run its Tune experiment,
    print the summary; an interrupted run exits with 130 and says how to resume. ``module`` (imported
    only now: it brings Ray and torch) supplies the loader, runner, summary text and error types as
    its ``COMMAND``, a :class:`~orchestrl.tune.lifecycle.TuneCommand`."""
    import importlib

    from orchestrl.tune.lifecycle import Launch, TuneCommand

    kind: TuneCommand = importlib.import_module(module).COMMAND
    try:
        summary = kind.run(kind.load(config, run_dir=run_dir), Launch(**launch, echo=typer.echo))
    except (ConfigError, *kind.errors) as err:
        fail(str(err))
        return
    typer.echo(kind.summary_text(summary))
    if summary.interrupted:
        typer.echo(f"resume with: orchestrl {command} {config} --resume")
        raise typer.Exit(130)


def tune_command(name: str, module: str, config_help: str, doc: str) -> Callable[..., None]:
    """Adds ``orchestrl NAME``, the command of the Tune-driven kind in ``module``: its YAML
    (``config_help``), the options every such kind takes, ``doc`` as its help."""

    def command(
        config: Path,
        resume: ResumeOpt = False,
        parent: ParentOpt = None,
        run_dir: RunDirOpt = None,
        address: AddressOpt = None,
        tracking_uri: TrackingOpt = None,
        verbose: VerboseOpt = False,
    ) -> None:
        run_tune_command(
            name,
            module,
            config,
            run_dir,
            resume=resume,
            parent_run_id=parent,
            address=address,
            tracking_uri=tracking_uri,
            verbose=verbose,
        )

    command.__annotations__["config"] = Annotated[Path, typer.Argument(help=config_help)]
    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return app.command(name)(command)


sweep = tune_command(
    "sweep",
    "orchestrl.tune.sweep",
    "Sweep YAML (see configs/sweeps/).",
    "Run a hyperparameter sweep with Ray Tune: one MLflow parent run, a child run per trial.",
)
curriculum = tune_command(
    "curriculum",
    "orchestrl.tune.curriculum",
    "Curriculum YAML (see configs/curricula/).",
    "Run curriculum stages in order, each starting from the previous stage's weights.",
)


@app.command()
def report(
    target: Annotated[
        str, typer.Argument(help="A parent (sweep/curriculum) run id, a run id or an experiment name.")
    ],
    compare: Annotated[
        str | None,
        typer.Option(
            "--compare", help="Group by params (e.g. algorithm.name) or list runs: id-or-name,id-or-name,..."
        ),
    ] = None,
    metric: Annotated[
        str, typer.Option("--metric", help="Curated metric to score runs by.")
    ] = "team_return_sum_mean",
    mode: Annotated[str, typer.Option("--mode", help="max: higher is better; min: lower is.")] = "max",
    last: Annotated[int, typer.Option("--last", min=1, help="Score = mean of the last N logged values.")] = 1,
    task: Annotated[str, typer.Option("--task", help="Param whose values are the tasks.")] = "env.name",
    reps: Annotated[int, typer.Option("--reps", min=100, help="Bootstrap resamples.")] = 2000,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default RUN_DIR/reports/...).")
    ] = None,
    no_log: NoLogOpt = False,
    run_dir: StoreDirOpt = None,
    tracking_uri: TrackingOpt = None,
) -> None:
    """IQM, mean, 95% bootstrap CIs, P(improvement), learning curves and credit plots of runs."""
    from orchestrl.tracking.report import ReportError, build_report
    from orchestrl.tracking.store import resolve_tracking_uri
    from orchestrl.training.runtime import quiet_environment

    if mode not in ("max", "min"):
        fail(f"--mode: expected max or min, got {mode!r}")
    root = Path(run_dir or "runs")
    quiet_environment(root)
    uri = resolve_tracking_uri(root, tracking_uri)
    try:
        result = build_report(
            target,
            tracking_uri=uri,
            run_dir=root,
            compare=compare,
            metric=metric,
            mode=mode,
            last=last,
            task_key=task,
            reps=reps,
            out_dir=out,
            log=not no_log,
        )
    except ReportError as err:
        fail(str(err))
        return
    typer.echo(result.markdown)
    if result.log_run_id:
        typer.echo(f"logged under report/ on MLflow run {result.log_run_id}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
