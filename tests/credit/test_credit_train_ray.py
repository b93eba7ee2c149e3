"""`orchestrl train` with a counterfactual estimator: curated credit metrics and the credit table
artifact in MLflow; a warm-started team's weights on the remote env runners (starts a real local Ray)."""

from __future__ import annotations

import sys
from pathlib import Path

import credit_helpers
import numpy as np
import pytest
from credit_helpers import ONE_AGENT_MATTERS, expert_agreement, tiny

from orchestrl.algorithms.behaviour_cloning import expert_demonstrations
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.tracking import store as tracking
from orchestrl.training.checkpoints import build_algorithm
from orchestrl.training.train import train

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("algo", ["lemon"])
def test_train_logs_per_agent_credit_and_the_credit_table(algo: str, ray_local: Path, run_dir: Path) -> None:
    data = tiny(
        algo,
        kwargs={"payoff": ONE_AGENT_MATTERS},
        resources={"env_runners": 1, "cpus_per_env_runner": 1},
        stop={"iterations": 2},
        tracking={"checkpoint_every": 0},
    )
    data["run_dir"] = str(run_dir)
    summary = train(validate_config(data), echo=lambda _: None)
    client = tracking.client(tracking.default_tracking_uri(run_dir))
    history = tracking.metric_history(client, summary.run_id)
    for key in ("shared/credit/agent_0_share", "shared/credit/agent_1_mean_abs_delta", "env/cf_executions"):
        assert key in history, key
    assert history["shared/credit/agent_1_mean_abs_delta"][-1][1] == 0.0
    artifacts = {a.path for a in client.list_artifacts(summary.run_id, "env")}
    assert "env/credit_table.csv" in artifacts
    table = (Path(summary.run_path) / "artifacts" / "credit_table.csv").read_text().splitlines()
    assert table[0].startswith("module,agent,") and len(table) == 3


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
