"""MAPPO's centralised critic input: rows line up with their agents, whatever the agent order."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from orchestrl.algorithms.actor_critic import GLOBAL_STATE
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer


def tiny(algo: str, **extra) -> dict:
    data = {
        "name": "t",
        "seed": 7,
        "env": {"name": "simple_spread", "kwargs": {"N": 3, "max_cycles": 10}},
        "algorithm": {"name": algo},
        "model": {"hidden": [32, 32]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "training": {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 2},
    }
    for key, value in extra.items():
        data[key] = {**data.get(key, {}), **value}
    return data


@pytest.fixture(scope="module")
def mappo() -> InProcessTrainer:
    trainer = InProcessTrainer(build_ppo_config(validate_config(tiny("mappo"))))
    yield trainer
    trainer.stop()


def test_global_state_rows_line_up_with_their_agents(mappo: InProcessTrainer) -> None:
    episodes = mappo.sample(120)
    batch = mappo.learner_batch(episodes)["shared"]
    obs, state = batch["obs"].numpy(), batch[GLOBAL_STATE].numpy()
    n_agents, obs_dim = 3, obs.shape[1]
    assert state.shape == (obs.shape[0], n_agents * obs_dim + n_agents + 1)
    own = state[:, n_agents * obs_dim : n_agents * obs_dim + n_agents].argmax(axis=1)
    assert sorted(set(own.tolist())) == [0, 1, 2]
    for row in range(obs.shape[0]):
        i = own[row]
        np.testing.assert_allclose(state[row, i * obs_dim : (i + 1) * obs_dim], obs[row])
    t = state[:, -1]
    assert t.min() >= 0.0 and t.max() <= 1.0 + 1e-6


def test_agent_order_in_episodes_does_not_change_the_state(mappo: InProcessTrainer) -> None:
    episodes = mappo.sample(60)
    reordered = copy.deepcopy(episodes)  # the learner pipeline lengthens episodes in place
    before = mappo.learner_batch(episodes)["shared"][GLOBAL_STATE].numpy()
    for ep in reordered:  # the same episodes, with their agents stored in reverse order
        ep.agent_episodes = dict(reversed(list(ep.agent_episodes.items())))
    after = mappo.learner_batch(reordered)["shared"][GLOBAL_STATE].numpy()
    # Rows come out grouped by agent in episode order, so compare as sets of rows.
    key = lambda rows: np.array(sorted(map(tuple, rows.round(6))))  # noqa: E731
    np.testing.assert_allclose(key(before), key(after))


def test_env_runner_modules_carry_no_critic(mappo: InProcessTrainer) -> None:
    runner_module = mappo.runner.module["shared"]
    assert not hasattr(runner_module, "critic")
    assert hasattr(mappo.learner.module["shared"], "critic")


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_three_updates_without_ray_learn_a_value_function(algo: str) -> None:
    import ray

    trainer = InProcessTrainer(build_ppo_config(validate_config(tiny(algo))))
    try:
        # A held-out batch with its value targets frozen before training: the critic's error on it
        # must drop (the per-update vf_loss is measured on fresh samples each time, so it is noisy).
        held = trainer.learner_batch(trainer.sample(200))["shared"]
        targets = held["value_targets"].clone()

        def held_error() -> float:
            with torch.no_grad():
                values = trainer.learner.module["shared"].compute_values(held)
            return float(((values - targets) ** 2).mean())

        before = held_error()
        losses = [trainer.step()["shared"]["vf_loss"] for _ in range(3)]
        after = held_error()
    finally:
        trainer.stop()
    assert not ray.is_initialized()
    assert all(np.isfinite(losses))
    assert after < before


def test_same_seed_same_first_iteration() -> None:
    def first_iteration(seed: int) -> tuple[float, torch.Tensor]:
        trainer = InProcessTrainer(build_ppo_config(validate_config({**tiny("mappo"), "seed": seed})))
        try:
            results = trainer.step()["shared"]
            weights = next(iter(trainer.learner.module["shared"].actor.parameters())).detach().clone()
        finally:
            trainer.stop()
        return results["policy_loss"], weights

    loss_a, w_a = first_iteration(11)
    loss_b, w_b = first_iteration(11)
    _, w_c = first_iteration(12)
    assert loss_a == loss_b
    assert torch.equal(w_a, w_b)
    assert not torch.equal(w_a, w_c)
