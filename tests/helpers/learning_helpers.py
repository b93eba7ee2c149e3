"""Seeded learning runs for the per-algorithm learning tests: train in-process (no Ray), then score
the trained policy greedily against the untrained policy and a uniformly random team."""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer

PAYOFF = [[10.0, 9.0, 8.0], [2.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
"""A 3x3 cooperative matrix game: the row decides most of the payoff. A uniformly random team
expects 31/9 = 3.44; the best joint action pays 10."""
RANDOM_TEAM = float(np.mean(PAYOFF))
ITERATIONS = 5
"""Training iterations of 200 env steps each (1,000 one-step episodes)."""


def experiment(algo: str, seed: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": f"learn-{algo}",
        "seed": seed,
        "env": {"name": "matrix_game", "kwargs": {"payoff": PAYOFF}},
        "algorithm": {"name": algo},
        "model": {"hidden": [32, 32]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 8},
        "training": {"lr": 3e-3, "train_batch_size": 200, "minibatch_size": 200, "num_epochs": 4},
    }
    if algo == "neuromas":
        data["algorithm"].update(layers=[1], embed_dim=16, heads=2)
        data["model"] = {"hidden": [32]}
    return data


def team_return(trainer: InProcessTrainer, episodes: int, explore: bool) -> float:
    """The mean payoff the env runner's policy earns (greedy unless ``explore``): RLlib's episode
    return sums both agents' rewards (NeuroMAS' team agent gets their sum too), each the payoff."""
    got = trainer.runner.sample(num_episodes=episodes, explore=explore)
    return float(np.mean([ep.get_return() for ep in got])) / 2  # both agents get the payoff


def run_learning(algo: str, seed: int, iterations: int = ITERATIONS) -> dict[str, float]:
    trainer = InProcessTrainer(build_ppo_config(validate_config(experiment(algo, seed))))
    try:
        untrained = team_return(trainer, 200, explore=True)
        for _ in range(iterations):
            trainer.step()
        trained = team_return(trainer, 50, explore=False)
    finally:
        trainer.stop()
    return {"algo": algo, "seed": seed, "trained": trained, "untrained": untrained, "random": RANDOM_TEAM}
