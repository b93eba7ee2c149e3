"""The behaviour-cloning warm start on a real local Ray: a warm-started team's weights on the remote
env runners (split from tests/algorithms/credit/test_credit_train_ray.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import credit_helpers
import numpy as np
import pytest
from credit_helpers import expert_agreement, tiny

from orchestrl.algorithms.behaviour_cloning import expert_demonstrations
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.checkpoints import build_algorithm

pytestmark = pytest.mark.ray


class ExpertAgreement:
    """Run on an env runner: per component, how often its greedy actions equal the expert's."""

    def __init__(self, demos) -> None:
        self.demos = demos

    def __call__(self, runner) -> list[float]:
        return expert_agreement(runner.module["shared"], self.demos).tolist()


def test_warm_started_actors_reach_the_remote_env_runners(ray_local: Path, tmp_path: Path) -> None:
    data = tiny(
        "lemon",
        "orchestration",
        kwargs={"level": 1, "task_pool": 50},
        model={"hidden": [128, 128]},
        resources={"env_runners": 1, "cpus_per_env_runner": 1},
        warm_start={"episodes": 40, "epochs": 25},
    )
    ppo = build_ppo_config(validate_config(data))
    fresh = expert_demonstrations(ppo.env_config, 10, seed=1000)
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ExpertAgreement runs remotely
    cloudpickle.register_pickle_by_value(credit_helpers)
    algo = build_algorithm(ppo, tmp_path / "ray_results")
    try:
        for demos in fresh.values():
            local, remote = algo.env_runner_group.foreach_env_runner(
                ExpertAgreement(demos), local_env_runner=True
            )
            assert remote == local  # the same cloned weights everywhere
            assert np.mean(remote) > 0.8  # an untrained actor agrees on ~1/n of each component
    finally:
        algo.stop()
