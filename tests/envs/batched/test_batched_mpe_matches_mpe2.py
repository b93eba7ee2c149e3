"""The batched MPE gives mpe2's observations and rewards, step by step, from the same state and actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from mpe2 import simple_reference_v3, simple_speaker_listener_v4, simple_spread_v3

from orchestrl.envs.batched import mpe
from orchestrl.envs.batched.mpe_env import BatchedMpe, BatchedMpeVectorEnv

COPIES = 6
CASES = [
    ("simple_spread", simple_spread_v3, {"N": 3}),
    ("simple_spread", simple_spread_v3, {"N": 4, "local_ratio": 0.2}),
    ("simple_spread", simple_spread_v3, {"N": 4, "num_agent_neighbors": 2, "num_landmark_neighbors": 3}),
    ("simple_spread", simple_spread_v3, {"N": 2, "num_agent_neighbors": 3, "num_landmark_neighbors": 1}),
    ("simple_speaker_listener", simple_speaker_listener_v4, {}),
    ("simple_reference", simple_reference_v3, {"local_ratio": 0.7}),
]


def load_mpe2_state(sim: BatchedMpe, copy: int, raw: Any) -> None:
    """Writes an mpe2 world's state (positions, velocities, messages, goals) into one copy."""
    world = raw.world
    w = sim.world
    w.pos[copy] = torch.tensor(np.stack([a.state.p_pos for a in world.agents]))
    w.vel[copy] = torch.tensor(np.stack([a.state.p_vel for a in world.agents]))
    w.comm[copy] = torch.tensor(np.stack([a.state.c for a in world.agents]))
    w.landmarks[copy] = torch.tensor(np.stack([lm.state.p_pos for lm in world.landmarks]))
    goals = [world.landmarks.index(a.goal_b) for a in world.agents if getattr(a, "_goal_b", None) is not None]
    w.goals[copy] = torch.tensor(goals, dtype=torch.int64)
    sim.steps[copy] = 0


@pytest.mark.parametrize(("scenario", "module", "kwargs"), CASES, ids=lambda c: str(c))
def test_same_state_and_actions_give_mpe2s_observations_and_rewards(
    scenario: str, module: Any, kwargs: dict[str, Any]
) -> None:
    references = [module.parallel_env(max_cycles=25, **kwargs) for _ in range(COPIES)]
    first = [ref.reset(seed=100 + i)[0] for i, ref in enumerate(references)]
    sim = BatchedMpe(getattr(mpe, scenario)(max_cycles=25, **kwargs), num_envs=COPIES)
    for i, ref in enumerate(references):
        load_mpe2_state(sim, i, ref.unwrapped)
    agents = sim.agents
    assert agents == references[0].possible_agents
    assert sim.observation_spaces == {a: references[0].observation_space(a) for a in agents}
    assert sim.action_spaces == {a: references[0].action_space(a) for a in agents}

    def check(observations: list[dict[str, np.ndarray]]) -> None:
        ours = sim.observe()
        for k, a in enumerate(agents):
            theirs = np.stack([o[a] for o in observations])
            np.testing.assert_allclose(ours[k].numpy(), theirs, atol=1e-5, rtol=0)

    check(first)
    rng = np.random.default_rng(0)
    for step in range(25):
        actions = rng.integers(0, [sim.action_spaces[a].n for a in agents], size=(COPIES, len(agents)))
        results = [
            ref.step(dict(zip(agents, row.tolist(), strict=True)))
            for ref, row in zip(references, actions, strict=True)
        ]
        rewards, terminated, truncated = sim.step(torch.as_tensor(actions, dtype=torch.int64))
        check([r[0] for r in results])
        theirs = np.array([[r[1][a] for a in agents] for r in results])
        np.testing.assert_allclose(rewards.numpy(), theirs, atol=1e-5, rtol=0)
        assert truncated.tolist() == [all(r[3].values()) for r in results] == [step == 24] * COPIES
        assert not terminated.any()


def test_collisions_push_agents_apart_and_cost_reward_as_in_mpe2() -> None:
    """Agents placed overlapping: the contact force and the collision penalty are exercised."""
    ref = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    ref.reset(seed=3)
    world = ref.unwrapped.world
    world.agents[0].state.p_pos = np.array([0.0, 0.0])
    world.agents[1].state.p_pos = np.array([0.1, 0.05])
    world.agents[2].state.p_pos = np.array([0.8, 0.8])
    sim = BatchedMpe(mpe.simple_spread(N=3, max_cycles=25), num_envs=1)
    load_mpe2_state(sim, 0, ref.unwrapped)
    for step in range(5):
        obs, rew, *_ = ref.step({a: 0 for a in sim.agents})
        rewards, _, _ = sim.step(torch.zeros(1, 3, dtype=torch.int64))
        if step == 0:  # overlapping: pushed apart with no action taken, and penalised
            assert sim.world.vel.abs().sum() > 0
            assert rewards[0, 0] == rewards[0, 1] < rewards[0, 2]
        for k, a in enumerate(sim.agents):
            np.testing.assert_allclose(sim.observe()[k][0].numpy(), obs[a], atol=1e-5, rtol=0)
            assert rewards[0, k].item() == pytest.approx(rew[a], abs=1e-5)


def test_terminate_on_success_ends_a_copy_when_every_landmark_is_covered() -> None:
    sim = BatchedMpe(mpe.simple_spread(N=2, terminate_on_success=True), num_envs=2)
    sim.world.landmarks[:] = torch.tensor([[0.5, 0.5], [-0.5, -0.5]], dtype=torch.float64)
    sim.world.pos[0] = torch.tensor([[0.5, 0.5], [-0.5, -0.5]], dtype=torch.float64)
    sim.world.pos[1] = torch.tensor([[0.9, 0.9], [-0.5, -0.5]], dtype=torch.float64)
    _, terminated, truncated = sim.step(torch.zeros(2, 2, dtype=torch.int64))
    assert terminated.tolist() == [True, False]
    assert not truncated.any()


def test_reset_with_a_seed_is_reproducible() -> None:
    def states(seed: int) -> list[torch.Tensor]:
        env = BatchedMpeVectorEnv(mpe.simple_reference(), num_envs=4)
        first = env.reset_tensors(seed=seed)
        out = list(first.values())
        for _ in range(30):  # past an auto-reset at step 25
            step = env.step_tensors({a: torch.ones(4, dtype=torch.int64) for a in env.possible_agents})
            out += list(step.next_obs.values())
        return out

    same, other = states(7), states(8)
    assert all(torch.equal(a, b) for a, b in zip(same, states(7), strict=True))
    assert not torch.equal(same[0], other[0])


def test_continuous_actions_are_refused_with_a_pointer_to_mpe2() -> None:
    with pytest.raises(ValueError, match="mpe2"):
        mpe.simple_spread(continuous_actions=True)
