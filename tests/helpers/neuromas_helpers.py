"""Helpers shared by the NeuroMAS tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def trivial_agreement(expert: torch.Tensor) -> float:
    """The best a policy that ignores its observation can agree with ``expert`` (N, components):
    every component's most common value, measured on these very actions (so never beaten by chance).
    Always choosing 0 is one such policy and scores no more (0.66 on Text2SQL: most components are
    0 for most questions)."""
    modes = torch.mode(expert, dim=0).values
    best = float((expert == modes).float().mean())
    assert best >= float((expert == 0).float().mean())
    return best


def greedy_team_reward(module, env, questions: int = 48) -> float:
    """The mean team reward of ``module``'s greedy joint action on the first ``questions`` Text2SQL
    questions of ``env`` (a ``NeuromasTeamEnv``): a fixed set, so a trained and an untrained team
    answer the same ones."""
    import numpy as np
    import tree
    from ray.rllib.core.columns import Columns

    from orchestrl.algorithms.neuromas.team_env import TEAM

    rewards = []
    for i in range(questions):
        obs, _ = env.reset(options={"question_index": i})
        batch = tree.map_structure(lambda x: torch.as_tensor(np.asarray(x))[None], obs[TEAM])
        with torch.no_grad():
            logits = module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]
        dist = module.env_action_dist_cls().from_logits(logits[:, : sum(module.env_lens)])
        action = dist.to_deterministic().sample()[0].numpy()
        rewards.append(env.step({TEAM: action})[1][TEAM])
    return float(np.mean(rewards))


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
