"""The expert solves every task, and observations carry enough to imitate it on held-out tasks."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.tree import DecisionTreeClassifier

from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.spaces import OBS_KEY

TRAIN = {1: 60, 2: 50, 3: 60, 4: 80}
HELDOUT = 30


@pytest.fixture(scope="module")
def demonstrations() -> dict[int, tuple[np.ndarray, np.ndarray, list[float]]]:
    """Per level: (observations, expert actions, expert scores) over the training tasks."""
    out = {}
    for level, tasks in TRAIN.items():
        env = OrchestrationEnv(level=level, rounds=1)
        xs, ys, scores = [], [], []
        for seed in range(tasks):
            obs, _ = env.reset(seed=seed)
            actions = env.expert_actions()
            for agent in env.agents:
                xs.append(obs[agent][OBS_KEY])
                ys.append(actions[agent])
            *_, infos = env.step(actions)
            scores.append(infos["agent_0"]["metrics"]["score"])
        out[level] = (np.array(xs), np.array(ys), scores)
    return out


@pytest.mark.parametrize("level", sorted(TRAIN))
def test_expert_scores_at_least_099_on_every_sampled_task(level: int, demonstrations) -> None:
    _, _, train_scores = demonstrations[level]
    env = OrchestrationEnv(level=level, rounds=1, split="heldout", reward_schedule=1.0)
    heldout_scores = []
    for seed in range(10):
        env.reset(seed=seed)
        *_, infos = env.step(env.expert_actions())
        assert infos["agent_0"]["metrics"]["success"] == 1.0
        heldout_scores.append(infos["agent_0"]["metrics"]["score"])
    assert min(train_scores + heldout_scores) >= 0.99


@pytest.mark.parametrize("level", sorted(TRAIN))
def test_a_classifier_imitates_the_expert_on_heldout_tasks(level: int, demonstrations) -> None:
    xs, ys, _ = demonstrations[level]
    heads = [DecisionTreeClassifier(random_state=0).fit(xs, ys[:, c]) for c in range(ys.shape[1])]
    env = OrchestrationEnv(level=level, rounds=1, split="heldout")
    wins = 0.0
    for seed in range(HELDOUT):
        obs, _ = env.reset(seed=seed)
        batch = np.stack([obs[a][OBS_KEY] for a in env.agents])
        predicted = np.stack([h.predict(batch) for h in heads], axis=1)
        *_, infos = env.step(dict(zip(env.agents, predicted, strict=True)))
        wins += infos["agent_0"]["metrics"]["success"]
    assert wins / HELDOUT >= 0.95
