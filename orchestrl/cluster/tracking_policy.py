"""Which MLflow tracking URI a cluster job may use, and where the command line takes it from.

An uploaded job (a cluster that is not entirely this machine) runs on nodes that share no disk
with the user or with each other, so it must log to an MLflow *server*: a local file or SQLite
tracking URI is refused (:func:`require_remote_tracking`) and so is "no URI at all", which would
mean the embedded SQLite store inside the job's scratch copy of the project. A job that runs in
place (every node is this machine) may use any store, like a plain ``orchestrl train``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

import yaml

from orchestrl.cluster.errors import LocalTrackingStoreError


@dataclasses.dataclass(frozen=True)
class TrackingChoice:
    """The MLflow tracking URI a job will use, and where that choice came from (for messages)."""

    uri: str | None
    source: str


_HOSTED_STORES = ("databricks", "databricks-uc", "uc")
"""Scheme-less tracking URIs that MLflow resolves to a hosted service, not to a directory."""


def require_remote_tracking(uri: str) -> None:
    """Refuses a tracking URI that names a local file or SQLite store.

    A cluster job's driver and workers run on other machines with their own disks, and
    autoscaled nodes vanish with theirs: a ``file:``/plain-path or ``sqlite:`` store would be
    unreadable from the laptop and lost with the node. A server (``http(s)://``), a managed service
    (``databricks``) or a networked database (``postgresql://``, ``mysql://``) are accepted.

    Raises:
        LocalTrackingStoreError: (a ValueError) for an empty URI, a path, ``file:`` or ``sqlite:``.
    """
    text = (uri or "").strip()
    scheme = urlparse(text).scheme.lower()
    if text.lower() in _HOSTED_STORES:
        return
    if not text:
        kind = "empty (MLflow would use a local ./mlruns directory)"
    elif scheme == "sqlite":
        kind = "a SQLite file"
    elif scheme in ("", "file") or len(scheme) == 1:  # one letter: a Windows drive, C:\...
        kind = "a local directory"
    else:
        return
    raise LocalTrackingStoreError(
        f"MLflow tracking URI {text!r} is {kind}, but cluster nodes share no disk: run an MLflow "
        "server (see cluster/README.md) and pass --tracking-uri http://HOST:5000 or set MLFLOW_TRACKING_URI"
    )


def find_tracking_uri(
    args: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> TrackingChoice:
    """The tracking URI an ``orchestrl`` command line will use, by the CLI's precedence.

    ``--tracking-uri X`` > ``--set``/``-s tracking.uri=X`` > ``tracking.uri`` in a YAML config named
    in the args > ``MLFLOW_TRACKING_URI`` > none (the embedded SQLite store under the run dir), the
    order :func:`orchestrl.tracking.runs.resolve_tracking_uri` and the config apply.
    """
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    flag = _option_values(args, "--tracking-uri")
    if flag:
        return TrackingChoice(flag[-1], "--tracking-uri")
    for value in reversed(_option_values(args, "--set", "-s")):
        key, sep, raw = value.partition("=")
        if sep and key.strip() == "tracking.uri":
            try:  # the CLI reads --set values as YAML
                parsed = yaml.safe_load(raw) if raw.strip() else None
            except yaml.YAMLError:
                parsed = raw
            return TrackingChoice(None if parsed is None else str(parsed), "--set tracking.uri")
    for arg in args:
        path = cwd / arg
        if arg.endswith((".yaml", ".yml")) and path.is_file():
            uri = _yaml_tracking_uri(path)
            if uri:
                return TrackingChoice(uri, f"tracking.uri in {arg}")
    if env.get("MLFLOW_TRACKING_URI"):
        return TrackingChoice(env["MLFLOW_TRACKING_URI"], "MLFLOW_TRACKING_URI")
    return TrackingChoice(None, "default (the embedded SQLite store in the run dir)")


def _yaml_tracking_uri(path: Path) -> str | None:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    tracking = data.get("tracking") if isinstance(data, dict) else None
    uri = tracking.get("uri") if isinstance(tracking, dict) else None
    return str(uri) if uri else None


def _option_values(args: Sequence[str], *names: str) -> list[str]:
    """Every value given to an option called one of ``names`` (as ``NAME V`` or ``--name=V``),
    in order, stopping at a bare ``--``."""
    values: list[str] = []
    it = iter(args)
    for arg in it:
        if arg == "--":
            break
        if arg in names:
            nxt = next(it, None)
            if nxt is not None:
                values.append(nxt)
            continue
        name, sep, value = arg.partition("=")
        if sep and name.startswith("--") and name in names:
            values.append(value)
    return values


def check_tracking_for_cluster(choice: TrackingChoice, *, on_this_machine: bool) -> None:
    """Refuses a tracking choice the job could not use; see the module docstring for the policy.

    On a cluster that is entirely this machine (the job runs in place) every store works. Elsewhere
    "no URI" is refused like an explicit local one, because it means the embedded SQLite store.
    """
    if on_this_machine:
        return
    if choice.uri is None:
        raise LocalTrackingStoreError(
            "no MLflow tracking URI given, so the job would write the embedded SQLite store on a "
            "cluster node's disk: run an MLflow server (see cluster/README.md) and pass "
            "--tracking-uri http://HOST:5000 or set MLFLOW_TRACKING_URI"
        )
    try:
        require_remote_tracking(choice.uri)
    except LocalTrackingStoreError as err:
        raise LocalTrackingStoreError(f"{err} (URI from {choice.source})") from None
