"""Run orchestrl commands as Ray jobs on a cluster: submit, list, follow, fetch logs, stop.

Everything goes through Ray's Jobs API (:class:`ray.job_submission.JobSubmissionClient`), which
talks HTTP to the head node's dashboard, so the only thing a laptop needs is a route to that port
(``ray dashboard cluster/aws-gpu.yaml`` or ``kubectl port-forward``; see ``cluster/README.md``).

A submitted job runs ``orchestrl <args...>`` on the cluster. Two ways, picked automatically:

* **Uploaded** (any cluster that is not entirely this machine): the project directory travels as
  the job's ``runtime_env.working_dir`` (minus ``.venv``, ``runs``, ``.git`` and caches) and the
  dependencies listed in ``pyproject.toml`` are pip-installed into the job's environment. Driver
  and workers share no disk there, so the job must log to an MLflow *server*: a local file or
  SQLite tracking URI is refused (:func:`require_remote_tracking`) and so is "no URI at all",
  which would mean the embedded SQLite store inside the job's scratch copy of the project.
* **In place** (every node of the cluster is this machine, e.g. ``ray start --head`` on a
  workstation): the job runs in the project directory itself with this interpreter, like a plain
  ``orchestrl train`` would, so ``runs/`` and the embedded SQLite store land where the user looks
  for them and local tracking stores are allowed. Deciding this by the node IPs the cluster reports
  rather than by a ``127.0.0.1`` address matters: an SSH tunnel or ``kubectl port-forward`` also
  gives a loopback address to a remote cluster.

Errors are raised as :class:`JobsError` subclasses whose message is one line, so the CLI prints it
and exits non-zero without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import re
import secrets
import shlex
import socket
import sys
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

import yaml

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
"""Where the Jobs API is looked for when neither ``--address`` nor ``RAY_ADDRESS`` is given."""

SUBCOMMANDS = ("train", "sweep", "curriculum")
"""The orchestrl commands that may run as a cluster job."""

ORCHESTRL_LAUNCHER = "import sys; from orchestrl.cli import main; sys.argv[0] = 'orchestrl'; sys.exit(main())"
"""Python source that behaves exactly like the ``orchestrl`` console script.

The job runs ``python -c ORCHESTRL_LAUNCHER <args...>`` instead of ``orchestrl <args...>``: the
uploaded working directory is the job's current directory (first on ``sys.path``), so this works
on a stock ``rayproject/ray`` image where the project is not pip-installed and no console script
exists, and it always runs the uploaded code rather than an older installed copy."""

UPLOAD_EXCLUDES = (
    ".venv",
    "venv",
    ".git",
    "runs",
    "mlruns",
    "mlruns.db",
    "ray_results",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    "*.egg-info",
    "*.pyc",
)
"""Never uploaded as part of the job's working_dir (``.gitignore`` is honoured on top of these):
virtualenvs, results and caches are large and machine-specific."""

SETUP_TIMEOUT_S = 1800
"""Time Ray gives a job's runtime env to install; torch alone can take minutes on a fresh node."""

PROJECT_NAME = "orchestrl"


class JobsError(Exception):
    """Base class of every error this module raises on purpose; ``str(err)`` is one line."""


class ClusterUnreachableError(JobsError):
    """No Ray Jobs API answers at the address (down, wrong port, no tunnel, or refused auth)."""


class JobNotFoundError(JobsError):
    """The cluster knows no job with that id."""


class SubmitRefusedError(JobsError, ValueError):
    """The submission is refused before anything is sent (bad command, path or address)."""


class LocalTrackingStoreError(SubmitRefusedError):
    """A cluster job would write MLflow data to a local file or SQLite store nobody else can read."""


@dataclasses.dataclass(frozen=True)
class TrackingChoice:
    """The MLflow tracking URI a job will use, and where that choice came from (for messages)."""

    uri: str | None
    source: str


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
# Addresses and connections


def resolve_address(address: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The Jobs API URL: ``address`` > ``RAY_ADDRESS`` > :data:`DEFAULT_ADDRESS`.

    A bare ``host:port`` gets ``http://`` (the Jobs API is HTTP; without a scheme Ray would treat it
    as a GCS address and hang for half a minute). ``auto`` and ``ray://`` addresses name other Ray
    protocols and are refused with a hint.
    """
    env = os.environ if env is None else env
    raw = (address or env.get("RAY_ADDRESS") or DEFAULT_ADDRESS).strip().rstrip("/")
    origin = "--address" if address else ("RAY_ADDRESS" if env.get("RAY_ADDRESS") else "default")
    if raw == "auto" or raw.startswith(("ray://", "anyscale://")):
        raise SubmitRefusedError(
            f"{origin}={raw!r} is not a Jobs API address; pass the dashboard URL, "
            f"e.g. --address {DEFAULT_ADDRESS}"
        )
    if "://" not in raw:
        raw = "http://" + raw
    parsed = urlparse(raw)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SubmitRefusedError(f"{origin}={raw!r} is not an http(s) URL of a Ray dashboard")
    return raw


def _probe(address: str, timeout_s: float) -> None:
    """Fails fast with a clear message when nothing listens at ``address``.

    The Jobs client itself sends requests without a timeout, so a firewalled address would hang
    for minutes before the OS gives up.
    """
    parsed = urlparse(address)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ClusterUnreachableError(f"{_unreachable_prefix(address)} ({reason}); {_TUNNEL_HINT}") from None


_TUNNEL_HINT = (
    "is the cluster up, and for a remote cluster is a tunnel open "
    "(`ray dashboard CLUSTER.yaml` or `kubectl port-forward svc/HEAD-SVC 8265:8265`)?"
)


def _unreachable_prefix(address: str) -> str:
    return f"cannot reach the Ray Jobs API at {address}"


def connect(address: str | None = None, *, timeout_s: float = 10.0) -> JobSubmissionClient:
    """A Jobs API client for ``address`` (resolved by :func:`resolve_address`), checked to answer."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    url = resolve_address(address)
    _probe(url, timeout_s)
    try:
        return JobSubmissionClient(url)
    except AuthenticationError as err:
        raise ClusterUnreachableError(
            f"{url} refused the request ({_first_line(str(err))}); the cluster uses token auth: "
            "export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (see cluster/README.md)"
        ) from None
    except (ConnectionError, OSError) as err:
        # Something listens (the probe passed) but does not speak the Jobs API: often the GCS port.
        raise ClusterUnreachableError(
            f"{_unreachable_prefix(url)} ({_first_line(str(err))}); is that the dashboard's port "
            "(8265 unless changed), not the GCS port (6379)?"
        ) from None
    except RuntimeError as err:
        raise ClusterUnreachableError(
            f"{url} does not look like a Ray dashboard ({_first_line(str(err))})"
        ) from None


def cluster_ray_version(client: JobSubmissionClient) -> str | None:
    """The Ray version the cluster runs, as reported when the client connected (None if unknown)."""
    # JobSubmissionClient records the version from its connection check; there is no public getter.
    return getattr(client, "_server_ray_version", None)


@contextlib.contextmanager
def _translated(address: str, job_id: str | None = None) -> Iterator[None]:
    """Turns the Jobs client's exceptions into one-line :class:`JobsError` messages."""
    from ray.exceptions import AuthenticationError

    try:
        yield
    except AuthenticationError as err:
        raise ClusterUnreachableError(f"{address} refused the request ({_first_line(str(err))})") from None
    except RuntimeError as err:
        text = str(err)
        if job_id is not None and ("404" in text or "does not exist" in text):
            raise JobNotFoundError(f"no job {job_id!r} on the cluster at {address}") from None
        raise JobsError(f"the Jobs API at {address} failed: {_first_line(text)}") from None
    except OSError as err:  # requests' ConnectionError is an OSError
        raise ClusterUnreachableError(f"{_unreachable_prefix(address)} ({_first_line(str(err))})") from None


def _first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --------------------------------------------------------------------------------------------
# MLflow tracking


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


# --------------------------------------------------------------------------------------------
# The job: project, requirements, runtime env, entrypoint


def find_project_dir(start: Path | None = None) -> Path:
    """The orchestrl project root: the nearest directory at or above ``start`` (default: the
    current directory) whose ``pyproject.toml`` names project ``orchestrl``, else the source tree
    this package was imported from."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if _is_project_root(candidate):
            return candidate
    source_root = Path(__file__).resolve().parents[2]
    if _is_project_root(source_root):
        return source_root
    raise SubmitRefusedError(f"no orchestrl project (pyproject.toml) at or above {here}; pass --project-dir")


def _is_project_root(path: Path) -> bool:
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        return tomllib.loads(pyproject.read_text()).get("project", {}).get("name") == PROJECT_NAME
    except (OSError, tomllib.TOMLDecodeError):
        return False


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(pyproject: Path) -> list[str]:
    """``[project].dependencies`` of ``pyproject``, without Ray itself.

    Ray must not be reinstalled inside a job: the cluster already runs it, and client and cluster
    must run the same version anyway (the launcher YAMLs and KubeRay images pin it).
    """
    try:
        deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise SubmitRefusedError(f"cannot read [project].dependencies from {pyproject}: {err}") from None
    out = []
    for dep in deps:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", dep)
        if match and _canonical(match.group(1)) != "ray":
            out.append(dep.strip())
    return out


def build_runtime_env(
    project_dir: Path,
    *,
    upload: bool = True,
    requirements: bool = True,
    env_vars: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The job's ``runtime_env``.

    With ``upload`` the project directory becomes the working_dir (without
    :data:`UPLOAD_EXCLUDES`), and with ``requirements`` too the pyproject dependencies are
    pip-installed on top of the node's packages (skip that when the image already has them).
    ``env_vars`` are set for the driver and every worker; keep secrets out of them, as the runtime
    env is shown to anyone who can list jobs.
    """
    runtime_env: dict[str, Any] = {}
    if upload:
        runtime_env["working_dir"] = str(project_dir)
        runtime_env["excludes"] = list(UPLOAD_EXCLUDES)
        if requirements:
            runtime_env["pip"] = {
                "packages": read_requirements(project_dir / "pyproject.toml"),
                "pip_check": False,
            }
            runtime_env["config"] = {"setup_timeout_seconds": SETUP_TIMEOUT_S}
    if env_vars:
        runtime_env["env_vars"] = dict(env_vars)
    return runtime_env


def build_entrypoint(
    args: Sequence[str],
    *,
    python: str = "python",
    cwd: Path | None = None,
    launcher: str = ORCHESTRL_LAUNCHER,
) -> str:
    """The shell command the job runs: ``[cd CWD &&] PYTHON -c LAUNCHER ARGS...``, all quoted."""
    command = shlex.join([python, "-c", launcher, *args])
    return f"cd {shlex.quote(str(cwd))} && {command}" if cwd is not None else command


def validate_args(args: Sequence[str]) -> None:
    """Refuses a command line that does not start with a subcommand that may run on a cluster."""
    if not args:
        raise SubmitRefusedError(f"nothing to submit: give one of {', '.join(SUBCOMMANDS)} and its arguments")
    if args[0] not in SUBCOMMANDS:
        raise SubmitRefusedError(
            f"{args[0]!r} cannot run as a cluster job; submit one of {', '.join(SUBCOMMANDS)}"
        )


def rebase_paths(
    args: Sequence[str], project_dir: Path, *, upload: bool, cwd: Path | None = None
) -> list[str]:
    """Rewrites arguments that name existing files or directories so they resolve in the job.

    The job runs in the project root (or its uploaded copy), which need not be the directory the
    user typed the command in, so a path inside the project becomes project-relative. For an
    upload, a *file* outside the project or inside a directory that is not uploaded (``runs/``,
    ...) would be missing on the cluster and is refused; directories (e.g. ``--run-dir``) are
    outputs as often as inputs and are left to the command. In place, outside paths become
    absolute. ``--opt=PATH`` is handled too.
    """
    cwd = Path.cwd() if cwd is None else cwd
    project_dir = project_dir.resolve()
    out = []
    for arg in args:
        prefix, value = "", arg
        if arg.startswith("--") and "=" in arg:
            name, _, value = arg.partition("=")
            prefix = name + "="
        out.append(prefix + _rebase_one(value, project_dir, upload=upload, cwd=cwd))
    return out


def _rebase_one(value: str, project_dir: Path, *, upload: bool, cwd: Path) -> str:
    if not value or value.startswith("-") or "://" in value:
        return value
    try:
        path = (cwd / value).resolve()
        exists, is_file = path.exists(), path.is_file()
    except (OSError, ValueError):
        return value
    if not exists:
        return value
    try:
        relative = path.relative_to(project_dir)
    except ValueError:
        if not upload:
            return str(path)
        if is_file:
            raise SubmitRefusedError(
                f"{value} is outside the project directory {project_dir}, so it would not be uploaded "
                "with the job; move it into the project"
            ) from None
        return value
    excluded = any(part in UPLOAD_EXCLUDES or part.endswith(".egg-info") for part in relative.parts)
    if upload and is_file and excluded:
        raise SubmitRefusedError(
            f"{value} lies in a directory that is not uploaded with the job "
            f"({', '.join(UPLOAD_EXCLUDES[:4])}, ...); copy it elsewhere in the project"
        )
    return relative.as_posix()


def _local_ips() -> set[str]:
    """Every IP address of this machine's interfaces (plus loopback)."""
    import ray  # noqa: F401  (also puts the psutil bundled in Ray's wheel on sys.path)

    ips = {"127.0.0.1", "::1"}
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            ips.update(
                a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)
            )
    except ImportError:  # pragma: no cover - psutil ships inside the ray wheel
        with contextlib.suppress(OSError):
            ips.update(info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None))
    return ips


def cluster_on_this_machine(address: str | None = None) -> bool:
    """True when every node of the cluster at ``address`` has one of this machine's IPs.

    Only then do driver, workers and the user share a disk. A loopback *address* alone proves
    nothing: SSH tunnels and port-forwards also end on 127.0.0.1. Any doubt answers False.
    """
    from ray.util.state import list_nodes

    url = resolve_address(address)
    try:
        nodes = list_nodes(address=url, raise_on_missing_output=False)
    except Exception:  # the state API is best-effort here: unknown means "not this machine"
        return False
    alive = [n for n in nodes if getattr(n, "state", "ALIVE") == "ALIVE"]
    if not alive:
        return False
    local = _local_ips()
    return all(n.node_ip in local for n in alive)


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
        address: the Jobs API; see :func:`resolve_address`.
        project_dir: the project to run (default: found from the current directory).
        requirements: pip-install pyproject's dependencies in the job (uploaded jobs only).
        in_place: force in-place (True) or upload (False); None decides by
            :func:`cluster_on_this_machine`.
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
    with _translated(url):
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
    with _translated(url):
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
        message=_first_line(details.message or ""),
        exit_code=details.driver_exit_code,
    )


def list_jobs(address: str | None = None) -> list[JobSummary]:
    """Every submitted job the cluster remembers, newest first."""
    client = connect(address)
    url = resolve_address(address)
    with _translated(url):
        jobs = [_summary(d) for d in client.list_jobs() if d.submission_id]
    epoch = datetime.fromtimestamp(0, tz=UTC)
    return sorted(jobs, key=lambda j: j.start_time or epoch, reverse=True)


def job_status(job_id: str, address: str | None = None) -> JobSummary:
    """The current state of one job."""
    client = connect(address)
    url = resolve_address(address)
    with _translated(url, job_id):
        return _summary(client.get_job_info(job_id))


def logs(job_id: str, address: str | None = None) -> str:
    """Everything the job's driver has printed so far."""
    client = connect(address)
    url = resolve_address(address)
    with _translated(url, job_id):
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
    with _translated(url, job_id):
        finished = _summary(client.get_job_info(job_id)).terminal
    written = [0]  # characters already shown; survives a stream that drops half-way
    if not finished:
        with _quiet_job_sdk(), contextlib.suppress(Exception):  # polling below catches up
            asyncio.run(_stream_until_done(client, job_id, out, written, poll_s))
    with _translated(url, job_id):
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
    tail = asyncio.create_task(_tail(client, job_id, out, written))
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


async def _tail(client: JobSubmissionClient, job_id: str, out: IO[str], written: list[int]) -> None:
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
    with _translated(url, job_id):
        requested = bool(client.stop_job(job_id))
        deadline = time.monotonic() + wait_s
        summary = _summary(client.get_job_info(job_id))
        while not summary.terminal and time.monotonic() < deadline:
            time.sleep(poll_s)
            summary = _summary(client.get_job_info(job_id))
    return StopOutcome(requested, summary)


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
