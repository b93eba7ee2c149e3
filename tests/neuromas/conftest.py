"""Fixtures for the NeuroMAS tests: one Text2SQL bank per session, small experiment configs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny tensors on a shared 2-core machine: intra-op threads only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def t2s_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("neuromas_text2sql")


@pytest.fixture
def experiment(t2s_data_dir: Path) -> Any:
    """``experiment(env, warm_start={...}, **algorithm_knobs)`` -> a small neuromas experiment dict."""
    return lambda env, **algorithm: small_experiment(env, t2s_data_dir, **algorithm)


def small_experiment(
    env: str, data_dir: Path, warm_start: dict[str, Any] | None = None, **algorithm: Any
) -> dict[str, Any]:
    if env == "text2sql":
        kwargs: dict[str, Any] = {"data_dir": str(data_dir)}
    elif env == "orchestration":
        kwargs = {}
    else:
        kwargs = {"max_cycles": 10}
        algorithm.setdefault("input_agents", ["speaker_0"])
    return {
        "name": "nm",
        "seed": 3,
        "run_dir": str(data_dir / "runs"),
        "env": {"name": env, "kwargs": kwargs},
        "algorithm": {"name": "neuromas", "embed_dim": 32, "layers": [1, 1], **algorithm},
        "model": {"hidden": [32]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 8},
        "training": {"train_batch_size": 128, "minibatch_size": 64, "num_epochs": 1},
        "warm_start": warm_start or {},
    }


def team_demonstrations(env_config: dict[str, Any], episodes: int, *, seed: int = 0, gamma: float = 0.99):
    """The env expert's team demonstrations (what the NeuroMAS warm start clones)."""
    from orchestrl.algorithms.behaviour_cloning import collect_demonstrations
    from orchestrl.algorithms.neuromas.team_env import TEAM, NeuromasTeamEnv

    env = NeuromasTeamEnv(env_config)
    try:
        return collect_demonstrations(env, env.team_expert, episodes, seed=seed, gamma=gamma)[TEAM]
    finally:
        env.close()
