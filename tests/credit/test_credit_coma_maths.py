"""COMA's advantage and critic targets on hand-made batches with closed-form answers."""

from __future__ import annotations

import itertools

import numpy as np
import torch

from orchestrl.algorithms.coma.advantage import (
    ComaAdvantage,
    center_per_agent,
    coma_advantages,
    fitted_baseline_scale,
    policy_probs,
)
from orchestrl.algorithms.coma.module import Q_VALUES, taken_q
from orchestrl.algorithms.credit.advantage import team_value_targets
from orchestrl.algorithms.joint_columns import AGENT_INDEX, TEAM_REWARD
from orchestrl.envs.matrix import CLIMBING_GAME

R = np.asarray(CLIMBING_GAME)
PI = [np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.6, 0.3])]


def test_coma_advantage_matches_the_closed_form_on_the_matrix_game() -> None:
    # With the exact critic Q(s, u) = R[u_0, u_1], agent 0's row holds Q for each of its actions with
    # u_1 fixed (a column of R) and agent 1's row a row of R.
    for a0, a1 in itertools.product(range(3), range(3)):
        q = torch.tensor(np.stack([R[:, a1], R[a0, :]]), dtype=torch.float32)
        probs = torch.tensor(np.stack(PI), dtype=torch.float32)
        adv, q_taken = coma_advantages(q, probs, torch.tensor([a0, a1]), [3])
        expected_0 = R[a0, a1] - sum(PI[0][b] * R[b, a1] for b in range(3))
        expected_1 = R[a0, a1] - sum(PI[1][b] * R[a0, b] for b in range(3))
        np.testing.assert_allclose(adv.numpy(), [expected_0, expected_1], atol=1e-5)
        np.testing.assert_allclose(q_taken.numpy(), [R[a0, a1]] * 2, atol=1e-6)


def test_counterfactual_baseline_has_zero_mean_under_the_agents_policy() -> None:
    rng = np.random.default_rng(0)
    q = torch.tensor(rng.normal(size=(1, 5)), dtype=torch.float32).repeat(5, 1)
    logits = torch.tensor(rng.normal(size=(1, 5)), dtype=torch.float32).repeat(5, 1)
    probs = policy_probs(logits, [5])
    adv, _ = coma_advantages(q, probs, torch.arange(5), [5])
    assert abs(float((probs[0] * adv).sum())) < 1e-5  # E_{u_i ~ pi_i}[A_i] = 0


def test_factorised_baseline_equals_marginalising_every_joint_own_action() -> None:
    lens = [3, 2, 4]
    rng = np.random.default_rng(1)
    q = torch.tensor(rng.normal(size=(1, sum(lens))), dtype=torch.float32)
    probs = policy_probs(torch.tensor(rng.normal(size=(1, sum(lens))), dtype=torch.float32), lens)
    action = torch.tensor([[2, 0, 3]])
    adv, q_taken = coma_advantages(q, probs, action, lens)
    q_parts = torch.split(q[0], lens)
    p_parts = torch.split(probs[0], lens)
    baseline = 0.0
    for joint in itertools.product(*(range(n) for n in lens)):
        p = np.prod([float(p_parts[k][a]) for k, a in enumerate(joint)])
        baseline += p * sum(float(q_parts[k][a]) for k, a in enumerate(joint))
    taken = sum(float(q_parts[k][a]) for k, a in enumerate([2, 0, 3]))
    np.testing.assert_allclose(float(q_taken[0]), taken, atol=1e-5)
    np.testing.assert_allclose(float(adv[0]), taken - baseline, atol=1e-5)


def test_masked_actions_get_no_probability_in_the_baseline() -> None:
    logits = torch.tensor([[0.0, -1e9, 0.0]])
    probs = policy_probs(logits, [3])
    np.testing.assert_allclose(probs.numpy(), [[0.5, 0.0, 0.5]], atol=1e-6)
    q = torch.tensor([[1.0, 100.0, 3.0]])
    adv, _ = coma_advantages(q, probs, torch.tensor([0]), [3])
    np.testing.assert_allclose(adv.numpy(), [1.0 - 2.0], atol=1e-5)


def test_taken_q_reads_one_slot_per_component() -> None:
    q = torch.arange(9, dtype=torch.float32).reshape(1, 9)
    assert float(taken_q(q, torch.tensor([[1, 0, 3]]), [2, 3, 4])[0]) == 1.0 + 2.0 + 8.0


def test_td_lambda_targets_follow_the_recursive_definition() -> None:
    # One terminated 3-step episode plus the artificial step RLlib appends (masked out).
    gamma, lam = 0.9, 0.8
    rewards = np.array([1.0, 0.0, 2.0, 0.0], dtype=np.float32)
    q = np.array([0.5, 1.5, 2.5, 9.0], dtype=np.float32)  # Q(s_t, u_t) from the target critic
    batch = {
        TEAM_REWARD: rewards,
        "terminateds": np.array([0, 0, 1, 0], dtype=np.float32),
        "truncateds": np.zeros(4, dtype=np.float32),
    }
    targets = team_value_targets(q, batch, gamma, lam)
    g2 = rewards[2]  # terminal: no bootstrap
    g1 = rewards[1] + gamma * ((1 - lam) * q[2] + lam * g2)
    g0 = rewards[0] + gamma * ((1 - lam) * q[1] + lam * g1)
    np.testing.assert_allclose(targets[:3], [g0, g1, g2], rtol=1e-5)


def test_td_lambda_bootstraps_a_cut_chunk_from_the_artificial_step() -> None:
    gamma, lam = 0.9, 0.5
    rewards = np.array([1.0, 2.0, 0.0], dtype=np.float32)
    q = np.array([0.0, 0.0, 10.0], dtype=np.float32)
    batch = {
        TEAM_REWARD: rewards,
        "terminateds": np.zeros(3, dtype=np.float32),
        "truncateds": np.array([0, 1, 0], dtype=np.float32),
    }
    targets = team_value_targets(q, batch, gamma, lam)
    g1 = rewards[1] + gamma * q[2]
    g0 = rewards[0] + gamma * ((1 - lam) * q[1] + lam * g1)
    np.testing.assert_allclose(targets[:2], [g0, g1], rtol=1e-5)


class FakeQModule:
    """The two critic calls ComaAdvantage makes, answered from the batch (an exact critic)."""

    logit_lens = (3,)

    def compute_q(self, batch: dict) -> torch.Tensor:
        return batch["q"]

    def forward_target(self, batch: dict) -> dict:
        return {Q_VALUES: batch["q"]}


def one_step_batch(a0: int, a1: int) -> tuple[dict, np.ndarray]:
    """Agent 0 and agent 1 rows of one climbing-game step, each followed by RLlib's artificial step."""
    q_rows = [R[:, a1], R[:, a1], R[a0, :], R[a0, :]]
    logits = np.log(np.stack([PI[0], PI[0], PI[1], PI[1]]))
    batch = {
        "q": torch.tensor(np.stack(q_rows), dtype=torch.float32),
        "actions": torch.tensor([a0, a0, a1, a1]),
        "action_dist_inputs": torch.tensor(logits, dtype=torch.float32),
        TEAM_REWARD: np.array([R[a0, a1], 0.0, R[a0, a1], 0.0], dtype=np.float32),
        "terminateds": np.array([1, 0, 1, 0], dtype=np.float32),
        "truncateds": np.zeros(4, dtype=np.float32),
        AGENT_INDEX: np.array([0, 0, 1, 1]),
    }
    return batch, np.array([True, False, True, False])


def test_coma_piece_waits_for_the_critic_then_uses_the_counterfactual_baseline() -> None:
    piece = ComaAdvantage(
        gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], critic_warmup=1, normalize=False
    )
    batch, mask = one_step_batch(1, 2)
    adv, targets, stats = piece.module_advantages(FakeQModule(), batch, mask)
    assert stats["credit/critic_warmup"] == 1.0 and not adv.any()
    np.testing.assert_allclose(targets[mask], [R[1, 2]] * 2)  # terminal step: the team reward
    piece.updates = 1
    adv, _, stats = piece.module_advantages(FakeQModule(), batch, mask)
    expected_0 = R[1, 2] - sum(PI[0][b] * R[b, 2] for b in range(3))
    expected_1 = R[1, 2] - sum(PI[1][b] * R[1, b] for b in range(3))
    np.testing.assert_allclose(adv[mask], [expected_0, expected_1], rtol=1e-5)
    assert stats["credit/critic_warmup"] == 0.0


def test_lambda_return_source_keeps_the_baseline_and_samples_q() -> None:
    piece = ComaAdvantage(
        gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], normalize=False, q_source="lambda_return"
    )
    batch, mask = one_step_batch(0, 0)
    batch["q"] = torch.zeros_like(batch["q"])  # a critic that knows nothing yet
    adv, _, _ = piece.module_advantages(FakeQModule(), batch, mask)
    np.testing.assert_allclose(adv[mask], [R[0, 0]] * 2)  # G - b with b = 0


def test_per_agent_centring_removes_each_agents_critic_offset() -> None:
    """A critic off by a different constant for each agent shifts that agent's advantages alike."""
    signal = np.array([1.0, -1.0, 0.0, 2.0, -2.0, 0.0], dtype=np.float32)
    agent_index = np.array([0, 0, 0, 1, 1, 1])
    mask = np.array([True, True, False, True, True, False])  # the artificial last step of each
    shifted = signal + np.where(agent_index == 0, 50.0, -30.0)
    np.testing.assert_allclose(center_per_agent(shifted, agent_index, mask)[mask], signal[mask])


def test_coma_piece_centres_per_agent_when_asked() -> None:
    piece = ComaAdvantage(
        gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], q_source="lambda_return", center=True
    )
    batch, mask = one_step_batch(0, 1)
    batch["q"] = torch.full_like(batch["q"], -50.0)  # without centring every advantage is ~ +50
    adv, _, _ = piece.module_advantages(FakeQModule(), batch, mask)
    np.testing.assert_allclose(adv[mask], [0.0, 0.0], atol=1e-6)


def test_fitted_baseline_scale_is_the_control_variate_coefficient_per_agent() -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    b0, b1, noise = rng.normal(size=(3, n))
    q = np.concatenate([0.5 * b0 + noise, noise])  # agent 0's baseline half tracks Q, agent 1's not
    baseline = np.concatenate([b0, b1])
    agent_index = np.repeat([0, 1], n)
    mask = np.ones(2 * n, dtype=bool)
    scale = fitted_baseline_scale(q, baseline, agent_index, mask)
    assert abs(scale[0] - 0.5) < 0.02 and scale[n] < 0.02
    for i in (0, 1):  # never noisier than no baseline or COMA's whole baseline
        rows = agent_index == i
        scaled = np.var(q[rows] - scale[rows] * baseline[rows])
        assert scaled <= min(np.var(q[rows]), np.var(q[rows] - baseline[rows])) + 1e-9


def test_fitted_baseline_scale_is_clipped_and_ignores_masked_rows() -> None:
    b = np.array([1.0, -1.0, 2.0, -2.0, 100.0])
    mask = np.array([True, True, True, True, False])  # the artificial step must not count
    agent_index = np.zeros(5, dtype=int)
    np.testing.assert_allclose(fitted_baseline_scale(3.0 * b, b, agent_index, mask), 1.0)  # c* = 3
    np.testing.assert_allclose(fitted_baseline_scale(-b, b, agent_index, mask), 0.0)  # c* = -1
    np.testing.assert_allclose(fitted_baseline_scale(b, np.ones(5), agent_index, mask), 0.0)  # Var(b) = 0


def test_coma_piece_subtracts_the_fitted_share_of_the_baseline() -> None:
    piece = ComaAdvantage(
        gamma=0.99,
        lambda_=0.95,
        agents=["agent_0", "agent_1"],
        normalize=False,
        q_source="lambda_return",
        fit_baseline_scale=True,
    )
    steps = [one_step_batch(a0, a1) for a0, a1 in itertools.product(range(3), range(3))]
    batch = {key: np.concatenate([np.asarray(b[key]) for b, _ in steps]) for key in steps[0][0]}
    batch = {
        key: torch.as_tensor(v) if key in ("q", "actions", "action_dist_inputs") else v
        for key, v in batch.items()
    }
    mask = np.concatenate([m for _, m in steps])
    adv, targets, stats = piece.module_advantages(FakeQModule(), batch, mask)
    probs = np.stack([PI[0], PI[0], PI[1], PI[1]] * 9)
    baseline = (probs * batch["q"].numpy()).sum(axis=1)  # sum_a' pi_i(a') Q(s, (u_-i, a'))
    for i in (0, 1):
        rows = mask & (batch[AGENT_INDEX] == i)
        c = np.cov(targets[rows], baseline[rows], bias=True)[0, 1] / np.var(baseline[rows])
        assert 0.0 < c < 1.0
        np.testing.assert_allclose(adv[rows], targets[rows] - c * baseline[rows], rtol=1e-4, atol=1e-4)
    assert 0.0 < stats["credit/baseline_scale"] < 1.0
