"""LEMON's deltas, advantage mixing and edit-family sampling, with closed-form answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from orchestrl.algorithms.lemon.advantage import lemon_advantages
from orchestrl.algorithms.lemon.replay import FamilySampler, alternative_action, family_probabilities
from orchestrl.envs.counterfactual import CounterfactualEnv, Edit, EditFamily, EditNotApplicable
from orchestrl.envs.matrix import CLIMBING_GAME, MatrixGameEnv

R = np.asarray(CLIMBING_GAME)


def test_matrix_env_implements_the_counterfactual_protocol() -> None:
    assert isinstance(MatrixGameEnv(), CounterfactualEnv)


def test_matrix_env_counterfactual_reads_the_edited_cell() -> None:
    env = MatrixGameEnv(base_action=1)
    env.reset()
    for a0, a1 in itertools.product(range(3), range(3)):
        _, rewards, *_ = env.step({"agent_0": a0, "agent_1": a1})
        spec = env.counterfactual_spec()
        env.reset()  # the spec of the finished episode survives the reset
        assert env.counterfactual_spec() == spec == {"agent_0": a0, "agent_1": a1}
        assert rewards["agent_0"] == R[a0, a1]
        for agent, own in (("agent_0", a0), ("agent_1", a1)):

            def cell(x: int, agent: str = agent, a0: int = a0, a1: int = a1) -> float:
                return R[x, a1] if agent == "agent_0" else R[a0, x]

            families = env.counterfactual_edits(spec, agent)
            assert (EditFamily.BASE_DUTY in families) == (own != 1)
            assert (EditFamily.DOWNGRADE_CAPACITY in families) == (own > 0)
            assert EditFamily.DROP_EDGE not in families
            if own != 1:
                assert env.counterfactual(spec, agent, Edit(EditFamily.BASE_DUTY)).reward == cell(1)
            if own > 0:
                assert env.counterfactual(spec, agent, Edit(EditFamily.DOWNGRADE_CAPACITY)).reward == cell(
                    own - 1
                )
            for alt in range(3):
                assert env.counterfactual(spec, agent, Edit(EditFamily.ALTERNATIVE, alt)).reward == cell(alt)
            with pytest.raises(EditNotApplicable):
                env.counterfactual(spec, agent, Edit(EditFamily.DROP_EDGE))


def test_difference_reward_of_the_base_edit_has_the_closed_form() -> None:
    # delta_i = R(u) - R(u with u_i = base): the difference reward with a fixed default action.
    env = MatrixGameEnv(base_action=2)
    env.reset()
    env.step({"agent_0": 0, "agent_1": 0})
    spec = env.counterfactual_spec()
    delta_0 = R[0, 0] - env.counterfactual(spec, "agent_0", Edit(EditFamily.BASE_DUTY)).reward
    delta_1 = R[0, 0] - env.counterfactual(spec, "agent_1", Edit(EditFamily.BASE_DUTY)).reward
    assert (delta_0, delta_1) == (11.0 - 0.0, 11.0 - 0.0)


def test_mix_zero_is_team_gae_and_mix_one_is_the_scaled_delta() -> None:
    gae = np.array([0.5, -1.0, 0.2, 1.0], dtype=np.float32)
    delta = np.array([2.0, -6.0, 0.0, 4.0], dtype=np.float32)
    has = np.array([True, True, True, False])
    np.testing.assert_allclose(lemon_advantages(gae, delta, has, 0.0), gae)
    scale = (2.0 + 6.0 + 0.0) / 3.0
    np.testing.assert_allclose(
        lemon_advantages(gae, delta, has, 1.0), [2 / scale, -6 / scale, 0.0, 1.0], rtol=1e-6
    )
    half = lemon_advantages(gae, delta, has, 0.5)
    np.testing.assert_allclose(half[:3], 0.5 * gae[:3] + 0.5 * delta[:3] / scale, rtol=1e-6)
    assert half[3] == gae[3]  # a row without a replay keeps its team advantage


def test_a_zero_delta_pulls_the_advantage_to_zero_and_signs_are_kept() -> None:
    gae = np.zeros(3, dtype=np.float32)
    out = lemon_advantages(gae, np.array([3.0, -3.0, 0.0], np.float32), np.ones(3, bool), 1.0)
    assert out[0] > 0 > out[1] and out[2] == 0


def test_family_probabilities_keep_the_floor_and_follow_recent_delta() -> None:
    p = family_probabilities([0.0, 0.0, 9.0, 1.0], floor=0.1)
    np.testing.assert_allclose(p.sum(), 1.0)
    assert p.min() >= 0.1 - 1e-12
    np.testing.assert_allclose(p, [0.1, 0.1, 0.1 + 0.6 * 0.9, 0.1 + 0.6 * 0.1])
    np.testing.assert_allclose(family_probabilities([0.0, 0.0], floor=0.1), [0.5, 0.5])
    np.testing.assert_allclose(family_probabilities([1.0, 0.0], floor=0.9), [0.5, 0.5])  # floor <= 1/F


def test_sampler_shifts_towards_the_family_whose_edits_matter() -> None:
    families = [EditFamily.BASE_DUTY, EditFamily.DROP_EDGE]
    sampler = FamilySampler(families, floor=0.05, decay=0.5, rng=np.random.default_rng(0))
    for _ in range(20):
        sampler.update(EditFamily.BASE_DUTY, 0.0)
        sampler.update(EditFamily.DROP_EDGE, 2.0)
    probs = sampler.probabilities()
    assert probs[EditFamily.DROP_EDGE] > 0.9 and probs[EditFamily.BASE_DUTY] >= 0.05
    draws = [sampler.sample(families) for _ in range(400)]
    assert 0 < draws.count(EditFamily.BASE_DUTY) < 60
    assert sampler.sample([EditFamily.BASE_DUTY]) is EditFamily.BASE_DUTY  # only applicable ones
    assert sampler.sample([]) is None


def test_alternative_action_is_drawn_from_the_policy_and_differs() -> None:
    rng = np.random.default_rng(0)
    logits = np.array([0.0, 3.0, -1e9, 0.0], dtype=np.float32)  # action 2 masked
    draws = [alternative_action(logits, 1, [4], rng) for _ in range(300)]
    assert set(draws) == {0, 3}  # never the actual action, never a masked one
    assert alternative_action(np.array([0.0, -1e9], np.float32), 0, [2], rng) is None


def test_multidiscrete_alternative_is_the_policy_conditioned_on_differing() -> None:
    rng = np.random.default_rng(1)
    lens = [2, 3]
    logits = np.array([1.0, 0.0, 0.5, 1.5, -1e9], dtype=np.float32)  # component 1: value 2 masked
    actual = (0, 1)
    p0, p1 = np.exp([1.0, 0.0]) / np.exp([1.0, 0.0]).sum(), np.exp([0.5, 1.5]) / np.exp([0.5, 1.5]).sum()
    joint = {(a, b): p0[a] * p1[b] for a in range(2) for b in range(2) if (a, b) != actual}
    total = sum(joint.values())
    draws = [tuple(alternative_action(logits, actual, lens, rng)) for _ in range(6000)]
    assert actual not in draws and all(b != 2 for _, b in draws)
    for cell, p in joint.items():
        assert abs(draws.count(cell) / len(draws) - p / total) < 0.02
