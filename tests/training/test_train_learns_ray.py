"""The flagship path end to end: ``orchestrl train`` with LEMON credit through a real local Ray (a
remote env runner, so the learner's weights must reach it every iteration), then ``orchestrl
evaluate``'s greedy rollout of the checkpoint it printed beats the random team and the untrained
policy on the matrix game of :mod:`learning_helpers`.

Measured on seeds 0-2 (5 iterations of 200 env steps, 6-9 s each): greedy team return 10.0 on
every seed (the best joint action), against 3.44 for the random team; the first iteration's sampled
return (the untrained policy exploring) was 3.32, 3.70 and 3.97. The margin asserted, 5, is the
in-process tests' (``test_training_beats_untrained``), whose smallest over seeds 0-9 was 6.02.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from learning_helpers import RANDOM_TEAM, experiment

from orchestrl.deploy.evaluate import RETURN, evaluate
from orchestrl.deploy.team import find_team
from orchestrl.experiment.config import validate_config
from orchestrl.training.train import train

pytestmark = pytest.mark.ray

MARGIN = 5.0


def test_lemon_trained_through_ray_beats_random_and_untrained(ray_local: Path, run_dir: Path) -> None:
    data = experiment("lemon", seed=0)
    data.update(
        run_dir=str(run_dir),
        resources={"env_runners": 1, "envs_per_env_runner": 8, "cpus_per_env_runner": 1},
        stop={"iterations": 5},
        tracking={"checkpoint_every": 0},
    )
    summary = train(validate_config(data), echo=lambda _: None)
    assert summary.checkpoint, "train did not say where the weights went"
    untrained = summary.first["team_return_sum_mean"] / 2  # both agents get the payoff

    team = find_team(summary.checkpoint)
    result = evaluate(team, split="train", episodes=20, log=False, echo=lambda _: None)
    trained = result.metrics[RETURN].mean.value / 2

    assert untrained < RANDOM_TEAM + 2, f"the first iteration already scored {untrained}"
    assert trained >= RANDOM_TEAM + MARGIN, f"greedy {trained} vs random team {RANDOM_TEAM}"
    assert trained >= untrained + MARGIN, f"greedy {trained} vs untrained {untrained}"
