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


def iteration_order(episodes: list) -> list[str]:
    """The agent order RLlib's connector pieces walk an episode in (``agent_ids``, a set)."""
    from ray.rllib.connectors.connector_v2 import ConnectorV2

    return [sa.agent_id for sa in ConnectorV2.single_agent_episode_iterator(episodes[:1], False)]


def test_agent_order_in_episodes_does_not_change_the_state(
    mappo: InProcessTrainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connector pieces walk each episode's agents in the order of ``agent_ids``, a set whose
    order depends on string hashing. Force two different orders (sorted, then reversed) through
    the whole learner pipeline: every row's global state must stay its own."""
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    episodes = mappo.sample(60)
    states, orders = [], []
    for reverse in (False, True):
        ordered = property(lambda ep, r=reverse: sorted(ep.agent_episodes, reverse=r))
        monkeypatch.setattr(MultiAgentEpisode, "agent_ids", ordered)
        batch = copy.deepcopy(episodes)  # the learner pipeline lengthens episodes in place
        orders.append(iteration_order(batch))
        rows = mappo.learner_batch(batch)["shared"]
        states.append((rows["obs"].numpy(), rows[GLOBAL_STATE].numpy()))
    assert orders[0] == list(reversed(orders[1])) and orders[0] != orders[1]  # the order really changed
    # Rows come out grouped by agent in walking order, so compare (obs, state) pairs as sets.
    key = lambda obs, state: np.array(sorted(map(tuple, np.hstack([obs, state]).round(6))))  # noqa: E731
    np.testing.assert_allclose(key(*states[0]), key(*states[1]))
    for obs, state in states:  # and within each order, a row's own slot of the state is its obs
        own = state[:, 3 * obs.shape[1] : 3 * obs.shape[1] + 3].argmax(axis=1)
        for row in range(len(obs)):
            i = own[row]
            np.testing.assert_allclose(state[row, i * obs.shape[1] : (i + 1) * obs.shape[1]], obs[row])


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
