"""What a job is made of: the command it may run, the project it runs in, the pip requirements
and ``runtime_env`` it carries, its shell entrypoint, and its path arguments rebased to resolve
where the job runs. Nothing here talks to a cluster.

An uploaded job carries the project directory as its ``runtime_env.working_dir`` (minus
:data:`UPLOAD_EXCLUDES`) and pip-installs ``pyproject.toml``'s dependencies; an in-place job runs
in the project directory itself with this interpreter.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrl.cluster.errors import SubmitRefusedError

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


def validate_args(args: Sequence[str]) -> None:
    """Refuses a command line that does not start with a subcommand that may run on a cluster."""
    if not args:
        raise SubmitRefusedError(f"nothing to submit: give one of {', '.join(SUBCOMMANDS)} and its arguments")
    if args[0] not in SUBCOMMANDS:
        raise SubmitRefusedError(
            f"{args[0]!r} cannot run as a cluster job; submit one of {', '.join(SUBCOMMANDS)}"
        )


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
    """The job's ``runtime_env`` (a JSON object in Ray's runtime-env schema).

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
