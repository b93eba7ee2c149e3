"""What running a sweep or a curriculum shares: how it is launched, the parent MLflow run and its
resume, and what the CLI needs of each (:class:`TuneCommand`).

Both run as Tune experiments recorded as one MLflow tree: a parent run (its kind, the spec's name,
its params and the YAML itself) with a child run per trial or stage. ``--resume`` finds the latest
unfinished parent of the same spec (or the one ``--parent`` names) and goes on logging into it.
What their YAML files share, and reading one, is :mod:`orchestrl.tune.spec`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from orchestrl.tracking import names
from orchestrl.tracking.store import (
    RunInfo,
    RunOutcome,
    RunStore,
    UnknownRunError,
    resolve_tracking_uri,
    run_tags,
)
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise
from orchestrl.tune.spec import TuneRun

Echo = Callable[[str], Any]


@dataclass(frozen=True)
class Launch:
    """How a sweep or curriculum is launched (the CLI's options)."""

    resume: bool = False
    """Continue the latest unfinished parent run of the same spec (or ``parent_run_id``)."""
    parent_run_id: str | None = None
    tracking_uri: str | None = None
    address: str | None = None
    """An existing Ray cluster (None: ``RAY_ADDRESS``, else a local Ray)."""
    verbose: bool = False
    echo: Echo = print


DEFAULT_LAUNCH = Launch()


@dataclass(frozen=True)
class TuneCommand:
    """What ``orchestrl sweep`` and ``orchestrl curriculum`` take from their module (its ``COMMAND``):
    the CLI loads the YAML, runs it and prints its summary; ``errors`` (and a ``ConfigError``)
    end the command with their one line and exit code 2."""

    load: Callable[..., TuneRun]
    """``load(path, run_dir=...)``: the YAML as validated."""
    run: Callable[[Any, Launch], Any]
    """``run(loaded, launch)``: the summary, whose ``interrupted`` says whether a resume is due."""
    summary_text: Callable[[Any], str]
    errors: tuple[type[Exception], ...]


@dataclass
class ParentRun:
    """The open parent run of a sweep or curriculum, inside its Ray session."""

    store: RunStore
    experiment_id: str
    run_id: str
    tune_path: str
    resumed: bool
    outcome: RunOutcome
    """Set ``outcome.status`` (``FINISHED``, ``KILLED``) before the block ends."""
    info: RunInfo | None = None
    """The parent as the store held it when resumed (its tags say what is done)."""


@contextlib.contextmanager
def parent_run(
    run: TuneRun,
    launch: Launch,
    *,
    kind: str,
    params: Mapping[str, Any],
    error: type[Exception],
    resumable: Callable[[RunInfo], str | None] = lambda _: None,
) -> Iterator[ParentRun]:
    """Opens (or, with ``resume``, reopens) the parent run and a Ray session for the block; marks
    the parent terminated when the block ends. ``resumable(parent)`` returns why a found parent
    cannot be resumed, or None; refusals raise ``error`` with a one-line message."""
    run_dir, echo = run.run_dir, launch.echo
    quiet_environment(run_dir)
    silence_noise(launch.verbose)
    uri = resolve_tracking_uri(run_dir, launch.tracking_uri or run.cfg.tracking.uri)
    # closing the store says where writes wait if the tracking server never came back
    with RunStore(uri, run_dir, journal_mb=run.cfg.tracking.journal_mb, echo=echo) as store:
        exp_id = store.experiment(run.experiment, run_dir)
        label = f"{kind} {run.spec.name}"
        info = None
        if launch.resume:
            info = _find_parent(store, exp_id, run, kind, launch.parent_run_id, error)
            why = resumable(info)
            if why:
                raise error(f"--resume: {why}")
            parent_id, tune_path = info.run_id, info.tags[names.TAG_TUNE_PATH]
            store.reopen(parent_id)
            echo(f"resuming {label}: parent run {parent_id}, {tune_path}")
        else:
            tags = {**run_tags(kind), names.TAG_SPEC_NAME: run.spec.name}
            parent_id = store.create_run(exp_id, run.spec.name, tags, params)
            store.log_artifact(parent_id, run.path)
            tune_path = str(run_dir / "tune" / f"{run.spec.name}-{parent_id[:8]}")
            store.set_tags(parent_id, {names.TAG_TUNE_PATH: tune_path})
            echo(f"{label}: parent run {parent_id}, Tune storage {tune_path}")
        with store.terminated_as(parent_id) as outcome:
            with ray_session(run.cfg.resources, run_dir, address=launch.address, verbose=launch.verbose):
                yield ParentRun(store, exp_id, parent_id, tune_path, launch.resume, outcome, info)


def _find_parent(
    store: RunStore,
    exp_id: str,
    run: TuneRun,
    kind: str,
    parent_run_id: str | None,
    error: type[Exception],
) -> RunInfo:
    if parent_run_id:
        try:
            parent = store.run(parent_run_id)
        except UnknownRunError:
            raise error(f"--resume {parent_run_id}: no such run in the tracking store") from None
    else:
        found = store.find_runs(
            exp_id,
            {names.TAG_SPEC_NAME: run.spec.name, names.TAG_KIND: kind},
            latest_first=True,
            max_results=1,
        )
        if not found:
            raise error(
                f"--resume: no earlier run of {kind} '{run.spec.name}' in experiment '{run.experiment}'"
            )
        parent = found[0]
    if parent.status == "FINISHED":
        raise error(f"--resume: {kind} run {parent.run_id} already finished")
    if names.TAG_TUNE_PATH not in parent.tags:
        raise error(f"--resume: run {parent.run_id} is not a {kind} run")
    return parent
