"""Fixtures for the deploy tests: trained teams made in-process (``deploy_helpers``), one real
MLflow store with their training runs. The Ray tests use a checkpoint of a real ``train``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deploy_helpers import orchestration_team, tiny, write_run

from orchestrl.tracking import names
from orchestrl.tracking.store import RunStore, default_tracking_uri


@pytest.fixture
def make_run(run_dir: Path) -> Callable[..., Path]:
    """``make_run(data, trainer=None)`` -> the checkpoint of a run folder (see :func:`write_run`)."""
    return lambda data, trainer=None: write_run(run_dir, data, trainer)


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two run folders in one real MLflow store, each with the training run ``orchestrl train``
    would have left (its tags): ``spread`` (ippo, simple_spread) and ``matrix`` (ippo, matrix
    game): ``(checkpoint, run id)`` each, and the ``run_dir`` and ``store``."""
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


@pytest.fixture(scope="session")
def plan_teams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Level-1 LEMON team checkpoints for ``plan``: ``warm`` (the solver cloned in) and ``untrained``."""
    run_dir = tmp_path_factory.mktemp("plan") / "runs"
    return {
        "warm": orchestration_team(run_dir, warm_start=True),
        "untrained": orchestration_team(run_dir, warm_start=False),
    }
