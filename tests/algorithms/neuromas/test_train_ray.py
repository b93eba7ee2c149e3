"""With a real local Ray: the warm start runs once the algorithm is built, and the remote env
runners act with the cloned weights (not their random initialisation)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from neuromas_helpers import team_demonstrations, trivial_agreement
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.neuromas.team_env import TEAM
from orchestrl.algorithms.weight_sync import sync_learner_weights
from orchestrl.apps.text2sql.ask import Database, Team
from orchestrl.envs.text2sql.database import database_path
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.tracking.metrics import curate
from orchestrl.training.checkpoints import build_algorithm

pytestmark = pytest.mark.ray


class ExpertAgreement:
    """Run on an env runner: how often its greedy joint action equals the expert's."""

    def __init__(self, obs: dict, expert: torch.Tensor) -> None:
        self.obs, self.expert = obs, expert

    def __call__(self, runner) -> float:
        module = runner.module[TEAM]
        logits = module.forward_inference({Columns.OBS: self.obs})[Columns.ACTION_DIST_INPUTS]
        dist = module.env_action_dist_cls().from_logits(logits[:, : sum(module.env_lens)])
        return float((dist.to_deterministic().sample() == self.expert).float().mean())


def test_warm_started_weights_reach_the_remote_env_runners(
    ray_local: Path, experiment, tmp_path: Path
) -> None:
    data = experiment(
        "text2sql",
        warm_start={"episodes": 256, "epochs": 10, "batch_size": 32, "lr": 3e-3},
        word_vectors=True,
    )
    data["resources"] = {"env_runners": 1, "envs_per_env_runner": 4, "cpus_per_env_runner": 1}
    ppo = build_ppo_config(validate_config(data))
    demos = team_demonstrations(ppo.env_config, 64, seed=5)
    obs, expert = demos.batch(slice(None))
    expert = expert[:, : sum(len(list(v)) for v in ppo.rl_module_spec.model_config["nvecs"].values())]
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ExpertAgreement runs remotely
    algo = build_algorithm(ppo, tmp_path / "ray_results")
    try:
        agreement = algo.env_runner_group.foreach_env_runner(
            ExpertAgreement(obs, expert), local_env_runner=False
        )
        # above what ignoring the observation can reach (the most common value per component)
        assert len(agreement) == 1 and agreement[0] > trivial_agreement(expert) + 0.05
        assert sync_learner_weights(algo) == 0.0
        metrics = curate(algo.train())
        assert "env/success" in metrics
        # the run's checkpoint is what `orchestrl ask` loads
        checkpoint = algo.save_to_path(str(tmp_path / "checkpoint"))
        team = Team.load(checkpoint)
        data_dir = Path(ppo.env_config["kwargs"]["data_dir"])
        db = Database.open(database_path(data_dir, SCHEMAS["flights"], 0))
        assert team.ask(db, "How many flights are there?").sql.startswith("SELECT ")
    finally:
        algo.stop()
