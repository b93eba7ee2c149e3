"""Shared fixtures: one local Ray per test session (started only by tests that ask for it), and the
fixtures that tests in several folders use (a Text2SQL bank, trained run folders in one MLflow store).

Test files mirror the package (``tests/envs/orchestration`` tests ``orchestrl/envs/orchestration``, ...).
Helper modules shared across folders live in ``tests/helpers/``, put on ``sys.path`` here, and are
imported by their own names (``from deploy_helpers import ...``): ``from conftest import`` would find
whichever folder's conftest was imported last. A folder's own fixtures are in its conftest.py; fixtures
that several folders share are in their nearest common parent's (here, for folders under different
top-level folders)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from orchestrl.envs.text2sql.bank import QuestionBank

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
# Files that libraries drop in /tmp go to one session dir instead, inherited by the session's
# processes (Ray's workers included) and removed at the end: torch's compiler cache
# (/tmp/torchinductor_$USER, made by every process that imports torch) and Ray Train/Tune's file
# locks (/tmp/_ray_lockfiles; every Ray start in the tests names its own --temp-dir / _temp_dir).
_SCRATCH = tempfile.mkdtemp(prefix="orl-session-")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_SCRATCH, "torchinductor"))
os.environ.setdefault("RAY_TMPDIR", _SCRATCH)
# No on-disk task store (commands default to one under their run dir): every test generates its
# tasks, as the determinism tests require; the store's own tests turn one on.
os.environ.setdefault("ORCHESTRL_TASK_STORE", "")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    # Sandbox pools of processes the tests killed (Ray's workers are SIGKILLed at shutdown) left
    # their directories; a later pool would remove them, but no test may leave them behind.
    from orchestrl.envs.orchestration.sandbox.pool import remove_stale_dirs

    remove_stale_dirs()


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects: ``make test`` runs ``-m ray`` and ``-m "not ray"``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything that uses the shared Ray is marked ``ray``; unit tests first, then those: the
    session's shared Ray is up only after the last unit test, so unit tests can check that they
    never start one."""
    for item in items:
        if "ray_local" in item.fixturenames and not item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.ray)
    items.sort(key=lambda item: bool(item.get_closest_marker("ray")))


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Path]:
    """A real local Ray shared by the integration tests; its files live in a short temp dir
    (Ray's unix socket paths must stay under 107 characters) and are removed afterwards."""
    import ray

    from orchestrl.deploy.serve import serve_environment
    from orchestrl.experiment.config import ResourcesSection
    from orchestrl.training.runtime import ray_session

    serve_environment()  # the Serve tests start Serve's proxy on this Ray
    root = Path(tempfile.mkdtemp(prefix="orl-"))
    with ray_session(ResourcesSection(num_cpus=2, object_store_mb=256), root):
        yield root
    assert not ray.is_initialized()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


# --------------------------------------------------------------------------------------------
# Text2SQL (tests/envs/text2sql and tests/apps/text2sql)


@pytest.fixture(scope="session")
def bank_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated bank of Text2SQL databases per test session, under pytest's tmp dir."""
    return tmp_path_factory.mktemp("text2sql_bank")


@pytest.fixture(scope="session")
def bank(bank_dir: Path) -> QuestionBank:
    from orchestrl.envs.text2sql.bank import load_bank

    return load_bank(0, bank_dir)


# --------------------------------------------------------------------------------------------
# Trained teams (tests/deploy, tests/tracking and tests/apps/orchestration)


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two run folders in one real MLflow store, each with the training run ``orchestrl train``
    would have left (its tags): ``spread`` (ippo, simple_spread) and ``matrix`` (ippo, matrix
    game): ``(checkpoint, run id)`` each, and the ``run_dir`` and ``store``. Their teams are made
    in-process by ``deploy_helpers``."""
    from deploy_helpers import tiny, write_run

    from orchestrl.tracking import names
    from orchestrl.tracking.store import RunStore, default_tracking_uri

    run_dir = tmp_path_factory.mktemp("deploy") / "runs"
    store = RunStore(default_tracking_uri(run_dir))
    out: dict[str, Any] = {"run_dir": run_dir, "store": store}
    for key, data in (
        ("spread", tiny("ippo")),
        ("matrix", {**tiny("ippo", "matrix_game"), "name": "tiny_matrix"}),
    ):
        checkpoint = write_run(run_dir, data)
        tags = {
            names.TAG_KIND: names.KIND_TRAIN,
            names.TAG_CHECKPOINT: str(checkpoint),
            names.TAG_CONFIG: str(checkpoint.parent.parent / names.CONFIG_FILE),
        }
        run_id = store.create_run(store.experiment(data["name"], run_dir), data["name"], tags)
        store.set_terminated(run_id, "FINISHED")
        out[key] = (checkpoint, run_id)
    return out
