"""COMA's advantage, its Q heads, its cross-fitted baseline scale (coma_cv) and critic targets on
hand-made batches with closed-form answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from orchestrl.algorithms.actor_critic import OptionRows
from orchestrl.algorithms.coma.advantage import (
    ComaAdvantage,
    center_per_agent,
    coma_advantages,
    control_variate_scale,
    policy_probs,
)
from orchestrl.algorithms.coma.module import Q_VALUES, ConditionalComponent, QHead
from orchestrl.algorithms.credit.advantage import team_value_targets
from orchestrl.algorithms.joint_columns import AGENT_INDEX, TEAM_REWARD
from orchestrl.envs.matrix import CLIMBING_GAME

R = np.asarray(CLIMBING_GAME)
PI = [np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.6, 0.3])]
DISCRETE_3 = QHead.of([3], "factorised")


def test_coma_advantage_matches_the_closed_form_on_the_matrix_game() -> None:
    # With the exact critic Q(s, u) = R[u_0, u_1], agent 0's row holds Q for each of its actions with
    # u_1 fixed (a column of R) and agent 1's row a row of R.
    for a0, a1 in itertools.product(range(3), range(3)):
        q = torch.tensor(np.stack([R[:, a1], R[a0, :]]), dtype=torch.float32)
        probs = torch.tensor(np.stack(PI), dtype=torch.float32)
        adv, q_taken = coma_advantages(q, probs, torch.tensor([a0, a1]), DISCRETE_3)
        expected_0 = R[a0, a1] - sum(PI[0][b] * R[b, a1] for b in range(3))
        expected_1 = R[a0, a1] - sum(PI[1][b] * R[a0, b] for b in range(3))
        np.testing.assert_allclose(adv.numpy(), [expected_0, expected_1], atol=1e-5)
        np.testing.assert_allclose(q_taken.numpy(), [R[a0, a1]] * 2, atol=1e-6)


def test_counterfactual_baseline_has_zero_mean_under_the_agents_policy() -> None:
    rng = np.random.default_rng(0)
    q = torch.tensor(rng.normal(size=(1, 5)), dtype=torch.float32).repeat(5, 1)
    logits = torch.tensor(rng.normal(size=(1, 5)), dtype=torch.float32).repeat(5, 1)
    probs = policy_probs(logits, [5])
    adv, _ = coma_advantages(q, probs, torch.arange(5), QHead.of([5], "paired"))
    assert abs(float((probs[0] * adv).sum())) < 1e-5  # E_{u_i ~ pi_i}[A_i] = 0


@pytest.mark.parametrize("kind", ["factorised", "paired", "joint"])
def test_baseline_equals_marginalising_every_joint_own_action(kind: str) -> None:
    lens = [3, 2, 4]
    head = QHead.of(lens, kind)
    rng = np.random.default_rng(1)
    q = torch.tensor(rng.normal(size=(1, head.size)), dtype=torch.float32)
    probs = policy_probs(torch.tensor(rng.normal(size=(1, sum(lens))), dtype=torch.float32), lens)
    p_parts = torch.split(probs[0], lens)
    baseline = 0.0  # sum over all 24 joint own actions of pi(u) Q(u), Q read one action at a time
    for joint in itertools.product(*(range(n) for n in lens)):
        p = np.prod([float(p_parts[k][a]) for k, a in enumerate(joint)])
        baseline += p * float(head.taken(q, torch.tensor([joint]))[0])
    adv, q_taken = coma_advantages(q, probs, torch.tensor([[2, 0, 3]]), head)
    np.testing.assert_allclose(float(adv[0]), float(q_taken[0]) - baseline, atol=1e-5)


def drawn_given(
    lens: list[int], given: int, component: int, seed: int
) -> tuple[torch.Tensor, ConditionalComponent]:
    """Per-component probabilities and, for ``component``, one distribution per value of ``given``
    (an ``option_rows`` actor's policy), for one observation."""
    rng = np.random.default_rng(seed)
    probs = policy_probs(torch.tensor(rng.normal(size=(1, sum(lens))), dtype=torch.float32), lens)
    table = torch.softmax(torch.tensor(rng.normal(size=(1, lens[given], lens[component]))), -1).float()
    return probs, ConditionalComponent(given, component, table)


@pytest.mark.parametrize("kind", ["factorised", "paired", "joint"])
@pytest.mark.parametrize(("given", "component"), [(0, 2), (2, 1)])
def test_baseline_marginalises_a_component_drawn_given_another(kind: str, given: int, component: int) -> None:
    """pi(u) = pi(u_given) pi(u_component | u_given) prod_others pi(u_k): the baseline is the sum
    over every joint own action of pi(u) Q(u), whichever of the two comes first in a head's group."""
    lens = [3, 2, 4]
    head = QHead.of(lens, kind)
    q = torch.tensor(np.random.default_rng(2).normal(size=(1, head.size)), dtype=torch.float32)
    probs, conditional = drawn_given(lens, given, component, seed=3)
    parts = torch.split(probs[0], lens)
    baseline = 0.0
    for joint in itertools.product(*(range(n) for n in lens)):
        p = float(conditional.probs[0, joint[given], joint[component]])
        p *= np.prod([float(parts[k][a]) for k, a in enumerate(joint) if k != component])
        baseline += p * float(head.taken(q, torch.tensor([joint]))[0])
    adv, q_taken = coma_advantages(q, probs, torch.tensor([[2, 0, 3]]), head, conditional)
    np.testing.assert_allclose(float(adv[0]), float(q_taken[0]) - baseline, atol=1e-5)


@pytest.mark.parametrize("kind", ["factorised", "paired"])
def test_the_baseline_of_an_option_rows_actor_does_not_depend_on_the_role_taken(kind: str) -> None:
    """Two rows alike but for the role taken get one baseline (Eq. 4 marginalises the agent's whole
    action). Marginalising the duty under pi(duty | the role taken) instead, as the batch's
    distribution inputs hold it, gives each row its own."""
    lens = [3, 2, 4]
    head = QHead.of(lens, kind)
    q = torch.tensor(np.random.default_rng(4).normal(size=(1, head.size)), dtype=torch.float32).repeat(2, 1)
    probs, conditional = drawn_given(lens, 0, 1, seed=5)
    probs, conditional = probs.repeat(2, 1), ConditionalComponent(0, 1, conditional.probs.repeat(2, 1, 1))
    actions = torch.tensor([[1, 0, 3], [2, 0, 3]])
    adv, q_taken = coma_advantages(q, probs, actions, head, conditional)
    baseline = q_taken - adv
    torch.testing.assert_close(baseline[0], baseline[1])
    as_taken = probs.clone()  # the duty's probabilities given each row's own role
    as_taken[:, 3:5] = conditional.probs[torch.arange(2), actions[:, 0]]
    adv_taken, _ = coma_advantages(q, as_taken, actions, head)
    assert abs(float((q_taken - adv_taken)[0] - (q_taken - adv_taken)[1])) > 1e-3


def test_each_head_reads_its_groups_slots() -> None:
    q = torch.arange(40, dtype=torch.float32).reshape(1, 40)
    action = torch.tensor([[1, 0, 3]])  # lens [2, 3, 4]
    factorised = QHead.of([2, 3, 4], "factorised")  # blocks of 2, 3, 4
    assert factorised.size == 9 and float(factorised.taken(q[:, :9], action)[0]) == 1.0 + 2.0 + 8.0
    paired = QHead.of([2, 3, 4], "paired")  # the 9 factorised slots, (u0, u1): 6, (u0, u2): 8
    assert paired.groups == ((0,), (1,), (2,), (0, 1), (0, 2)) and paired.size == 23
    assert paired.interaction_slots == slice(9, 23)
    assert float(paired.taken(q[:, :23], action)[0]) == 1 + 2 + 8 + 9 + (1 * 3 + 0) + 15 + (1 * 4 + 3)
    joint = QHead.of([2, 3, 4], "joint")
    assert joint.size == 24 and float(joint.taken(q[:, :24], action)[0]) == 1 * 12 + 0 * 4 + 3
    assert joint.interaction_slots == slice(0, 0)
    assert QHead.of([5], "paired").groups == QHead.of([5], "joint").groups == ((0,),)


def fit_residual(head: QHead, target: np.ndarray) -> float:
    """The least-squares error of the best Q this head can output for ``target`` (one value per
    joint own action): Q(u) = sum of head slots, so Q = X w with X[u, slot] = 1 where u reads it."""
    actions = torch.tensor(list(itertools.product(*(range(n) for n in head.logit_lens))))
    basis = torch.eye(head.size)
    design = np.stack(
        [head.taken(basis[j : j + 1].repeat(len(actions), 1), actions).numpy() for j in range(head.size)], 1
    )
    w, *_ = np.linalg.lstsq(design, target.reshape(-1), rcond=None)
    return float(np.abs(design @ w - target.reshape(-1)).max())


def test_paired_head_prices_a_duty_whose_meaning_depends_on_the_role() -> None:
    """Orchestration-like: (role, duty, capacity) where duty 1 is good for role 1 and bad for role 2
    (the same index names a different duty per role), role 0 (idle) makes duty and capacity moot."""
    q = np.zeros((3, 2, 2))
    q[1, 1], q[2, 1] = 1.0, -1.0
    q[1:, :, 1] += 0.5  # capacity helps an active agent alike
    assert fit_residual(QHead.of([3, 2, 2], "factorised"), q) > 0.3
    assert fit_residual(QHead.of([3, 2, 2], "paired"), q) < 1e-5
    assert fit_residual(QHead.of([3, 2, 2], "joint"), q) < 1e-5


def test_masked_actions_get_no_probability_in_the_baseline() -> None:
    logits = torch.tensor([[0.0, -1e9, 0.0]])
    probs = policy_probs(logits, [3])
    np.testing.assert_allclose(probs.numpy(), [[0.5, 0.0, 0.5]], atol=1e-6)
    q = torch.tensor([[1.0, 100.0, 3.0]])
    adv, _ = coma_advantages(q, probs, torch.tensor([0]), DISCRETE_3)
    np.testing.assert_allclose(adv.numpy(), [1.0 - 2.0], atol=1e-5)


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


R2 = np.array([2.0, 5.0, -1.0])
"""The team reward of round 2 (the last) of a 2-round episode, by agent 0's round-2 action."""


def round_1_target(pi_2: np.ndarray, a2: int | None) -> float:
    """Agent 0's round-1 critic target in a 2-round episode (action 0, then ``a2``; rewards 1, then
    R2[a2]) with an exact critic (Q(s_2, u) = R2[u]) and policy ``pi_2`` in round 2: from the whole
    episode when ``a2`` is given, else from its first chunk, cut after round 1."""
    piece = ComaAdvantage(gamma=0.9, lambda_=0.95, td_lambda=0.8, agents=["agent_0"], normalize=False)
    q_1 = np.array([0.5, 1.0, 1.5])
    if a2 is None:  # round 1, then RLlib's artificial step: s_2 with round 1's action repeated
        rows, actions, rewards = [q_1, R2], [0, 0], [1.0, 0.0]
        terminateds, truncateds = [0, 0], [1, 0]
    else:  # rounds 1 and 2 (terminal), then the artificial step
        rows, actions, rewards = [q_1, R2, np.zeros(3)], [0, a2, a2], [1.0, R2[a2], 0.0]
        terminateds, truncateds = [0, 1, 0], [0, 0, 0]
    n = len(rows)
    log_pi = np.log(np.maximum(np.stack([PI[0], pi_2, pi_2]), 1e-300))[:n]
    batch = {
        "q": torch.tensor(np.stack(rows), dtype=torch.float32),
        "actions": torch.tensor(actions),
        "action_dist_inputs": torch.tensor(log_pi[[0] * n], dtype=torch.float32),  # stored: round 1's
        "live_logits": torch.tensor(log_pi, dtype=torch.float32),  # the actor on each row's observation
        TEAM_REWARD: np.array(rewards, dtype=np.float32),
        "terminateds": np.array(terminateds, dtype=np.float32),
        "truncateds": np.array(truncateds, dtype=np.float32),
        AGENT_INDEX: np.zeros(n, dtype=np.int64),
    }
    _, targets, _ = piece.module_advantages(FakeQModule(), batch, np.arange(n) < n - 1)
    return float(targets[0])


def test_a_two_round_episode_split_after_round_1_gives_the_whole_episodes_round_1_target() -> None:
    """RLlib's artificial step after a cut repeats round 1's action; the bootstrap is the policy's
    expectation of Q' in round 2 (Foerster et al.'s TD(lambda) critic), not Q' of that action."""
    deterministic = np.array([0.0, 1.0, 0.0])  # round 2 takes action 1 for sure, not round 1's 0
    whole = round_1_target(deterministic, a2=1)
    assert whole == pytest.approx(1.0 + 0.9 * R2[1])
    assert round_1_target(deterministic, a2=None) == pytest.approx(whole)
    pi_2 = np.array([0.2, 0.5, 0.3])  # a stochastic round 2: the same in expectation over its action
    expected = sum(pi_2[a] * round_1_target(pi_2, a2=a) for a in range(3))
    assert round_1_target(pi_2, a2=None) == pytest.approx(expected)


class FakeQModule:
    """The critic and actor calls ComaAdvantage makes, answered from the batch (an exact critic)."""

    q_head = DISCRETE_3

    def compute_q(self, batch: dict) -> torch.Tensor:
        return batch["q"]

    def forward_target(self, batch: dict) -> dict:
        return {Q_VALUES: batch["q"]}

    def forward_train(self, batch: dict) -> dict:
        return {"action_dist_inputs": batch.get("live_logits", batch["action_dist_inputs"])}


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


def all_steps_batch() -> tuple[dict, np.ndarray]:
    """The nine one-step climbing-game episodes (every joint action), both agents' rows."""
    steps = [one_step_batch(a0, a1) for a0, a1 in itertools.product(range(3), range(3))]
    batch = {key: np.concatenate([np.asarray(b[key]) for b, _ in steps]) for key in steps[0][0]}
    batch = {
        key: torch.as_tensor(v) if key in ("q", "actions", "action_dist_inputs") else v
        for key, v in batch.items()
    }
    return batch, np.concatenate([m for _, m in steps])


def test_coma_piece_centres_per_agent_not_over_the_batch() -> None:
    """A critic off by a different constant for each agent shifts that agent's baseline, so (with
    the sampled return as Q) all of its advantages. Per-agent centring removes each agent's own mean;
    global centring would leave agent 0 about -40 and agent 1 about +40."""
    piece = ComaAdvantage(
        gamma=0.99,
        lambda_=0.95,
        agents=["agent_0", "agent_1"],
        normalize=False,
        center=True,
        q_source="lambda_return",
    )
    batch, mask = all_steps_batch()
    agent = batch[AGENT_INDEX]
    offset = np.where(agent == 0, 50.0, -30.0)
    batch["q"] = batch["q"] + torch.as_tensor(offset, dtype=torch.float32)[:, None]
    adv, targets, _ = piece.module_advantages(FakeQModule(), batch, mask)
    probs = np.stack([PI[0], PI[0], PI[1], PI[1]] * 9)
    uncentred = targets - (probs * batch["q"].numpy()).sum(axis=1)  # G - b_i
    for i in (0, 1):
        rows = mask & (agent == i)
        np.testing.assert_allclose(adv[rows], uncentred[rows] - uncentred[rows].mean(), atol=1e-4)
    globally = uncentred[mask] - uncentred[mask].mean()
    assert np.abs(globally - adv[mask]).min() > 30.0  # the batch tells the two apart


def test_control_variate_scale_is_the_variance_minimising_coefficient_per_agent() -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    b0, b1, noise = rng.normal(size=(3, n))
    q = np.concatenate([0.5 * b0 + noise, noise])  # agent 0's baseline half tracks Q, agent 1's not
    baseline = np.concatenate([b0, b1])
    agent_index = np.repeat([0, 1], n)
    scale = control_variate_scale(q, baseline, agent_index, np.ones(2 * n, dtype=bool))
    assert abs(scale[0] - 0.5) < 0.02 and scale[1] < 0.02
    for i in (0, 1):  # never noisier than no baseline or COMA's whole baseline
        rows = agent_index == i
        scaled = np.var(q[rows] - scale[i] * baseline[rows])
        assert scaled <= min(np.var(q[rows]), np.var(q[rows] - baseline[rows])) + 1e-9


def test_control_variate_scale_is_clipped_and_ignores_masked_rows() -> None:
    b = np.array([1.0, -1.0, 2.0, -2.0, 100.0])
    mask = np.array([True, True, True, True, False])  # the artificial step must not count
    agent_index = np.zeros(5, dtype=int)
    assert control_variate_scale(3.0 * b, b, agent_index, mask) == {0: 1.0}  # c* = 3
    assert control_variate_scale(-b, b, agent_index, mask) == {0: 0.0}  # c* = -1
    assert control_variate_scale(b, np.ones(5), agent_index, mask) == {}  # Var(b) = 0: no fit


def test_coma_cv_scales_the_baseline_by_the_previous_batchs_coefficient() -> None:
    """Cross-fitting: the first batch uses COMA's whole baseline (c = 1); the second uses the c
    fitted on the first, not its own."""
    piece = ComaAdvantage(
        gamma=0.99,
        lambda_=0.95,
        agents=["agent_0", "agent_1"],
        normalize=False,
        q_source="lambda_return",
        cross_fit_scale=True,
    )
    first, mask = all_steps_batch()
    second, _ = all_steps_batch()
    second["q"] = second["q"] * torch.linspace(0.5, 1.5, len(mask))[:, None]  # another critic
    probs = np.stack([PI[0], PI[0], PI[1], PI[1]] * 9)
    agent = first[AGENT_INDEX]

    def baseline(batch: dict) -> np.ndarray:  # sum_a' pi_i(a') Q(s, (u_-i, a'))
        return (probs * batch["q"].numpy()).sum(axis=1)

    adv, targets, stats = piece.module_advantages(FakeQModule(), first, mask)
    np.testing.assert_allclose(adv[mask], (targets - baseline(first))[mask], rtol=1e-4, atol=1e-4)
    assert stats["credit/baseline_scale"] == 1.0
    fitted = control_variate_scale(targets, baseline(first), agent, mask)
    assert all(0.0 < c < 1.0 for c in fitted.values()) and len(fitted) == 2
    own = control_variate_scale(targets, baseline(second), agent, mask)
    assert all(abs(own[i] - fitted[i]) > 0.01 for i in (0, 1))  # in-sample would differ
    adv, targets, stats = piece.module_advantages(FakeQModule(), second, mask)
    c = np.where(agent == 0, fitted[0], fitted[1])
    np.testing.assert_allclose(adv[mask], (targets - c * baseline(second))[mask], rtol=1e-4, atol=1e-4)
    assert piece.get_state()["baseline_scale"] == [[0, pytest.approx(own[0])], [1, pytest.approx(own[1])]]


class FakeOptionModule(FakeQModule):
    """An ``option_rows`` actor (role, then a duty given the role) with an exact critic."""

    q_head = QHead.of([3, 2], "factorised")
    option_rows = OptionRows(given=0, component=1, first=1, start=0, width=1)

    def option_probs(self, batch: dict) -> torch.Tensor:
        return batch["option_probs"]


def test_coma_piece_marginalises_the_duty_over_every_role_of_an_option_rows_actor() -> None:
    """Two terminal rows, the same observation, roles 1 and 2 taken: the piece reads pi(duty | role)
    for every role from the actor, so both rows get the baseline of the whole policy."""
    role = np.array([0.2, 0.5, 0.3])
    duty = torch.tensor([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])  # pi(duty | role), per role
    q = torch.tensor([[0.0, 1.0, -1.0, 2.0, 5.0]]).repeat(2, 1)  # q_role (3 slots), q_duty (2)
    actions = torch.tensor([[1, 0], [2, 1]])
    stored = np.log(np.concatenate([np.tile(role, (2, 1)), duty[actions[:, 0]].numpy()], axis=1))
    batch = {
        "q": q,
        "actions": actions,
        "action_dist_inputs": torch.tensor(stored, dtype=torch.float32),  # the duty given the role taken
        "option_probs": duty.expand(2, 3, 2),
        TEAM_REWARD: np.array([1.0, 1.0], dtype=np.float32),
        "terminateds": np.ones(2, dtype=np.float32),
        "truncateds": np.zeros(2, dtype=np.float32),
        AGENT_INDEX: np.zeros(2, dtype=np.int64),
    }
    piece = ComaAdvantage(gamma=0.99, lambda_=0.95, agents=["agent_0"], normalize=False)
    adv, _, _ = piece.module_advantages(FakeOptionModule(), batch, np.ones(2, dtype=bool))
    marginal = (torch.tensor(role, dtype=torch.float32)[:, None] * duty).sum(0)
    baseline = float((torch.tensor(role) * q[0, :3]).sum() + (marginal * q[0, 3:]).sum())
    taken = [float(q[0, 1] + q[0, 3]), float(q[0, 2] + q[0, 4])]
    np.testing.assert_allclose(adv, [taken[0] - baseline, taken[1] - baseline], atol=1e-5)
