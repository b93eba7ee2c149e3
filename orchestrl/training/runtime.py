"""An embedded local Ray (or an existing cluster), with every side file kept under the run dir.

Ray 2.60 writes session files to /tmp/ray, a token to ~/.ray/auth_token and, for an Algorithm built
outside Tune, results to ~/ray_results; MLflow phones home. Here all of it stays in ``run_dir``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import secrets
import signal
import sys
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from orchestrl.envs.registry import run_dir_environment
from orchestrl.experiment.config import ResourcesSection

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""


def quiet_environment(run_dir: Path) -> None:
    """Environment defaults set before Ray or MLflow are imported by a command."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # One intra-op thread for the driver's learner (Ray already does this for its workers): with
    # OpenMP's spinning threads, a 2-thread learner next to a busy process runs many times slower.
    # Export OMP_NUM_THREADS to choose otherwise.
    threads = os.environ.setdefault("OMP_NUM_THREADS", "1")
    if "torch" in sys.modules:  # imported already (validating a config imports the algorithm)
        sys.modules["torch"].set_num_threads(int(threads))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(run_dir.resolve() / "cache" / "torchinductor"))
    # What the registered envs keep under the run dir (a task cache), for every process of this run
    # dir: Ray's local workers inherit it.
    for var, folder in run_dir_environment(run_dir).items():
        os.environ.setdefault(var, folder)


def silence_noise(verbose: bool) -> None:
    """Drops the harmless warnings every RLlib run prints, unless ``--verbose``."""
    if verbose:
        return
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*Box.*precision.*")
    for name in ("ray", "ray.rllib", "ray.tune", "mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.ERROR)


def worker_pool(jobs: int, run_dir: Path, fresh_per_task: bool = False) -> ProcessPoolExecutor:
    """``jobs`` fresh (spawned) processes for independent in-process runs (a benchmark's seeds):
    each with one torch thread and the run dir's environment defaults, and string hashing fixed
    (``PYTHONHASHSEED=0`` unless the caller set it; RLlib iterates over sets of agent ids, so
    without it a seed's run differs from one invocation to the next). ``fresh_per_task``: a new
    process for every task, so that no run inherits another's warm caches (generated tasks, node
    outputs) and runs' times compare."""
    os.environ.setdefault("PYTHONHASHSEED", "0")  # spawned workers inherit it at start
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(
        jobs,
        mp_context=context,
        initializer=_init_worker,
        initargs=(str(run_dir), os.getpid()),
        max_tasks_per_child=1 if fresh_per_task else None,
    )


def _init_worker(run_dir: str, parent: int) -> None:
    _die_with_parent(parent)
    quiet_environment(Path(run_dir))
    silence_noise(verbose=False)
    import torch

    torch.set_num_threads(1)


def _die_with_parent(parent: int) -> None:
    """The worker exits when ``parent``, the process that started it, dies, however it dies (a
    benchmark stopped with ``kill``, whose pool would otherwise train on unseen): Linux's
    ``PR_SET_PDEATHSIG``, plus a check for a parent already gone. Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(1)


def _local_auth_token(path: Path) -> None:
    """Ray 2.60 turns token auth on for local clusters; keep its token in the run dir, not ~/.ray."""
    if (
        os.environ.get("RAY_AUTH_MODE")
        or os.environ.get("RAY_AUTH_TOKEN")
        or os.environ.get("RAY_AUTH_TOKEN_PATH")
    ):
        return
    if not path.exists():
        path.touch(mode=0o600)
        path.write_text(secrets.token_hex(32))
    os.environ["RAY_AUTH_TOKEN_PATH"] = str(path)


@contextlib.contextmanager
def ray_session(
    resources: ResourcesSection, run_dir: Path, address: str | None = None, verbose: bool = False
) -> Iterator[None]:
    """Starts (and stops) an embedded local Ray, or connects to ``address`` / ``RAY_ADDRESS``."""
    import ray

    address = address or os.environ.get("RAY_ADDRESS") or None
    if ray.is_initialized():
        yield
        return
    kwargs: dict = {
        "log_to_driver": verbose,
        "logging_level": logging.INFO if verbose else logging.ERROR,
        "configure_logging": True,
        "ignore_reinit_error": True,
    }
    if address:
        ray.init(address=address, **kwargs)
    else:
        temp_dir = run_dir.resolve() / "ray"
        temp_dir.mkdir(parents=True, exist_ok=True)
        _local_auth_token(temp_dir / "auth_token")
        ray.init(
            num_cpus=resources.num_cpus or os.cpu_count(),
            object_store_memory=resources.object_store_mb * 1024 * 1024,
            include_dashboard=False,
            _temp_dir=str(temp_dir),
            **kwargs,
        )
    try:
        yield
    finally:
        ray.shutdown()
