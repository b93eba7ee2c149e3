"""Small trained-team fixtures for the deploy tests, made in-process (no Ray).

A run folder laid out as ``orchestrl train`` lays it out (``config.yaml`` and
``checkpoints/iter_000001/learner_group/learner/rl_module``), its modules written by RLlib's own
``save_to_path`` from an in-process learner. The Ray tests use a checkpoint of a real ``train``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import RL_MODULE_DIR
from orchestrl.tracking import names
from orchestrl.tracking.store import RunStore, default_tracking_uri
from orchestrl.training.inprocess import InProcessTrainer

RUN_ID = "0" * 32


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(algo: str, env: str = "simple_spread", **sections: Any) -> dict[str, Any]:
    """A few-hundred-step experiment of ``algo`` (simple_spread: 2 agents, 5 steps)."""
    kwargs = {"N": 2, "max_cycles": 5} if env == "simple_spread" else {}
    data: dict[str, Any] = {
        "name": f"tiny_{algo}",
        "seed": 1,
        "env": {"name": env, "kwargs": kwargs},
        "algorithm": {"name": algo},
        "model": {"hidden": [16]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 1},
        "training": {"train_batch_size": 40, "minibatch_size": 40, "num_epochs": 1},
    }
    if algo == "neuromas":
        data["algorithm"].update(layers=[1], embed_dim=8, heads=1)
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def write_run(run_dir: Path, data: dict[str, Any], trainer: InProcessTrainer | None = None) -> Path:
    """A run folder of ``data`` under ``run_dir`` holding the modules of ``trainer`` (a fresh one when
    None); returns its checkpoint."""
    cfg = validate_config({**data, "run_dir": str(run_dir)})
    own = trainer is None
    trainer = trainer or InProcessTrainer(build_ppo_config(cfg))
    try:
        folder = run_dir.resolve() / "experiments" / cfg.name / RUN_ID
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(cfg.to_yaml())
        checkpoint = folder / "checkpoints" / "iter_000001"
        trainer.learner.module.save_to_path(str(checkpoint / RL_MODULE_DIR))
    finally:
        if own:
            trainer.stop()
    return checkpoint


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
