"""Small experiments for the credit tests (tests/algorithms, tests/benchmarks): in-process (no Ray), a
few hundred env steps each."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
import tree
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.modules import chosen_actions
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer

ONE_AGENT_MATTERS = [[1.0, 1.0], [0.0, 0.0]]
"""agent_0's row decides the payoff; agent_1's column never does."""


def tiny(algo: str, env: str = "matrix_game", *, kwargs: dict | None = None, **sections: Any) -> dict:
    data: dict[str, Any] = {
        "name": "credit",
        "seed": 3,
        "env": {"name": env, "kwargs": kwargs or {}},
        "algorithm": {"name": algo},
        "model": {"hidden": [32, 32]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "training": {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 2},
    }
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module, registered in ``sys.modules`` (its dataclasses look
    their module up there); :func:`unload_benchmark` takes it out again."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def unload_benchmark(module: ModuleType) -> None:
    sys.modules.pop(module.__name__, None)


def trainer(data: dict) -> InProcessTrainer:
    return InProcessTrainer(build_ppo_config(validate_config(data)))


def expert_agreement(module, demos) -> np.ndarray:
    """Per action component: how often the module's greedy action equals the expert's."""
    obs = tree.map_structure(torch.as_tensor, demos.obs)
    with torch.no_grad():
        greedy = chosen_actions(module, module.forward_inference({Columns.OBS: obs}), explore=False)
    return (greedy.numpy() == demos.actions).mean(axis=0)
