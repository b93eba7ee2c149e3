"""LEMON's deltas, their centring per agent and edit family, advantage mixing and edit-family
sampling, with closed-form answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from orchestrl.algorithms.credit.advantage import standardize
from orchestrl.algorithms.joint_columns import AGENT_INDEX, CF_DELTA, CF_FAMILY, TEAM_REWARD
from orchestrl.algorithms.lemon.advantage import DeltaBaseline, ReplayAdvantage, lemon_advantages
from orchestrl.algorithms.lemon.replay import (
    AgentChooser,
    FamilySampler,
    alternative_action,
    family_probabilities,
    replay_episode,
)
from orchestrl.envs.counterfactual import (
    EDIT_FAMILIES,
    CounterfactualOutcome,
    Edit,
    EditFamily,
    EditNotApplicable,
)
from orchestrl.envs.matrix import CLIMBING_GAME, MatrixGameEnv

R = np.asarray(CLIMBING_GAME)


def test_matrix_env_has_no_spec_to_replay_before_an_episode_ends() -> None:
    env = MatrixGameEnv()
    assert env.counterfactual_spec() is None
    env.reset()
    assert env.counterfactual_spec() is None  # a reset alone finishes nothing
    env.step({"agent_0": 2, "agent_1": 1})
    assert env.counterfactual_spec() == {"agent_0": 2, "agent_1": 1}


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


def test_mix_zero_is_team_gae_and_mix_one_is_the_scaled_centred_delta() -> None:
    gae = np.array([0.5, -1.0, 0.2, 1.0], dtype=np.float32)
    delta = np.array([3.0, -5.0, 1.0, 4.0], dtype=np.float32)
    baseline = np.array([1.0, 1.0, 1.0, 9.0], dtype=np.float32)
    has = np.array([True, True, True, False])
    np.testing.assert_allclose(lemon_advantages(gae, delta, has, baseline, 0.0), gae)
    scale = (2.0 + 6.0 + 0.0) / 3.0  # mean |delta - b| over the rows with a replay
    np.testing.assert_allclose(
        lemon_advantages(gae, delta, has, baseline, 1.0), [2 / scale, -6 / scale, 0.0, 1.0], rtol=1e-6
    )
    half = lemon_advantages(gae, delta, has, baseline, 0.5)
    np.testing.assert_allclose(half[:3], 0.5 * gae[:3] + 0.5 * (delta - baseline)[:3] / scale, rtol=1e-6)
    assert half[3] == gae[3]  # a row without a replay keeps its team advantage


def test_a_delta_at_its_baseline_pulls_the_advantage_to_zero_and_signs_are_kept() -> None:
    gae = np.zeros(3, dtype=np.float32)
    delta = np.array([4.0, -2.0, 1.0], np.float32)
    out = lemon_advantages(gae, delta, np.ones(3, bool), np.ones(3, np.float32), 1.0)
    assert out[0] > 0 > out[1] and out[2] == 0


def test_delta_baseline_is_a_running_mean_per_agent_and_family_from_earlier_batches() -> None:
    agent = np.array([0, 0, 0, 1, 1])
    family = np.array([1, 1, 3, 1, 1])
    has = np.array([True, True, True, True, False])  # the last row has no replay
    baseline = DeltaBaseline(decay=0.5)
    np.testing.assert_array_equal(baseline.rows(agent, family), 0.0)  # nothing seen yet
    baseline.update(np.array([1.0, 3.0, -2.0, 10.0, 99.0]), agent, family, has)
    assert baseline.means == {(0, 1): 2.0, (0, 3): -2.0, (1, 1): 10.0}  # the first batch sets them
    baseline.update(np.array([4.0, 4.0, 0.0, 0.0, 0.0]), agent, family, np.array([1, 1, 0, 1, 0], bool))
    assert baseline.means == {(0, 1): 3.0, (0, 3): -2.0, (1, 1): 5.0}  # (0, 3) not in this batch
    np.testing.assert_array_equal(baseline.rows(agent, family), [3.0, 3.0, -2.0, 5.0, 5.0])
    restored = DeltaBaseline(decay=0.5)
    restored.set_state(baseline.get_state())
    assert restored.means == baseline.means


class ZeroValues:
    """A critic that predicts 0 (the team GAE term is then the standardised team return)."""

    def compute_values(self, batch: dict) -> np.ndarray:
        return np.zeros(len(batch[TEAM_REWARD]), dtype=np.float32)


def replay_batch(delta_0: float, delta_1: list[float]) -> tuple[dict, np.ndarray]:
    """Four one-step episodes: agent 0's drop-edge delta is ``delta_0`` each time (an edit that
    always breaks the pipeline), agent 1's alternative deltas are ``delta_1``; each row followed
    by the artificial bootstrap step."""
    n = len(delta_1)
    drop, alternative = EDIT_FAMILIES.index(EditFamily.DROP_EDGE), EDIT_FAMILIES.index(EditFamily.ALTERNATIVE)
    rows = [(0, delta_0, drop)] * n + [(1, d, alternative) for d in delta_1]
    batch: dict = {AGENT_INDEX: [], CF_DELTA: [], CF_FAMILY: [], TEAM_REWARD: [], "terminateds": []}
    for i, d, f in rows:
        for real in (True, False):
            batch[AGENT_INDEX].append(i)
            batch[CF_DELTA].append(d if real else np.nan)
            batch[CF_FAMILY].append(f if real else -1)
            batch[TEAM_REWARD].append(1.0 if real else 0.0)
            batch["terminateds"].append(float(real))
    batch = {k: np.asarray(v) for k, v in batch.items()}
    batch["truncateds"] = np.zeros(len(batch[AGENT_INDEX]), np.float32)
    return batch, np.tile([True, False], len(rows))


def test_replay_piece_centres_each_agent_and_family_with_the_earlier_batches_mean() -> None:
    """Agent 0's drop-edge delta is +2 whatever it did; agent 1's alternative delta is +-1 around 0.
    After one batch the piece centres agent 0's to 0 and leaves agent 1's: per agent and family.
    Centring over the whole batch (mean 1) would leave +1 on agent 0 and shift agent 1's to 0 / -2."""
    piece = ReplayAdvantage(
        gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], mix=1.0, baseline_decay=0.9
    )
    batch, mask = replay_batch(2.0, [1.0, -1.0, 1.0, -1.0])
    first, _, stats = piece.module_advantages(ZeroValues(), batch, mask)
    scale = np.abs(batch[CF_DELTA][mask]).mean()  # nothing seen before: uncentred
    np.testing.assert_allclose(first[mask], batch[CF_DELTA][mask] / scale, rtol=1e-6)
    second, _, stats = piece.module_advantages(ZeroValues(), batch, mask)
    np.testing.assert_allclose(second[mask][:4], 0.0, atol=1e-6)  # agent 0: at its family's mean
    np.testing.assert_allclose(second[mask][4:], [2.0, -2.0, 2.0, -2.0], rtol=1e-6)  # / mean |d| = 0.5
    assert stats["credit/agent_0_drop_edge_delta_baseline"] == 2.0
    assert stats["credit/agent_1_alternative_delta_baseline"] == 0.0
    assert piece.get_state()["delta_baseline"] == [[0, 1, 2.0], [1, 3, 0.0]]
    uncentred = ReplayAdvantage(
        gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], mix=1.0, center=False
    )
    uncentred.set_state(piece.get_state())
    again, _, _ = uncentred.module_advantages(ZeroValues(), batch, mask)
    np.testing.assert_allclose(again[mask], first[mask], rtol=1e-6)  # LEMON's delta, as on batch 1


def test_replay_piece_keeps_team_gae_on_rows_without_a_delta() -> None:
    piece = ReplayAdvantage(gamma=0.99, lambda_=0.95, agents=["agent_0", "agent_1"], mix=0.5)
    batch, mask = replay_batch(2.0, [1.0, -1.0, 1.0, -1.0])
    batch[TEAM_REWARD] = np.arange(len(mask), dtype=np.float32)
    batch[CF_DELTA][0] = np.nan  # agent 0's first row: no replay
    advantages, _, _ = piece.module_advantages(ZeroValues(), batch, mask)
    gae = standardize(np.where(mask, batch[TEAM_REWARD], 0.0).astype(np.float32), mask)
    assert advantages[0] == pytest.approx(gae[0])
    assert advantages[2] != pytest.approx(gae[2])


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


def test_replays_priced_without_running_are_not_counted_as_executions() -> None:
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

    from orchestrl.algorithms.lemon.replay import ReplayRecord, log_replay_metrics

    sampler = FamilySampler(list(EditFamily), 0.05, 0.9, np.random.default_rng(0))
    ran = ReplayRecord("agent_0", EditFamily.ALTERNATIVE, 0.5, 1.0, 0.1, {"executions": 1.0})
    priced = ReplayRecord("agent_1", EditFamily.ALTERNATIVE, 0.0, 1.5, 0.0, {"executions": 0.0})
    other_env = ReplayRecord("agent_2", EditFamily.BASE_DUTY, 0.2, 1.3, 0.1, {})  # no such term: it ran
    logger = MetricsLogger()
    log_replay_metrics(logger, [ran, priced, other_env], sampler)
    assert logger.peek("env/cf_executions") == 2.0


class DeltaTable:
    """A counterfactual env whose base-duty edit of agent i costs ``deltas[i](n)`` on its n-th call,
    and that counts the calls: what ``replay_episode`` re-executes."""

    def __init__(self, deltas: dict) -> None:
        self.deltas = deltas
        self.calls: dict[str, int] = dict.fromkeys(deltas, 0)

    def counterfactual_spec(self) -> str:
        return "spec"

    def counterfactual_edits(self, spec: str, agent: str) -> list[EditFamily]:
        return [EditFamily.BASE_DUTY]

    def counterfactual(self, spec: str, agent: str, edit: Edit) -> CounterfactualOutcome:
        self.calls[agent] += 1
        return CounterfactualOutcome(reward=-self.deltas[agent](self.calls[agent]), base_reward=0.0)


def test_a_replay_budget_re_executes_only_the_chosen_agents_and_favours_deltas_that_vary() -> None:
    from types import SimpleNamespace

    constant = {f"agent_{i}": (lambda n: 0.5) for i in range(3)}  # always the same: no credit once centred
    env = DeltaTable({**constant, "agent_3": lambda n: float(n % 2)})  # 0, 1, 0, 1...: it varies
    episode = SimpleNamespace(agent_episodes=dict.fromkeys(env.deltas))
    rng = np.random.default_rng(0)
    sampler = FamilySampler([EditFamily.BASE_DUTY], 0.1, 0.9, rng)
    chooser = AgentChooser(1, floor=0.1, decay=0.8, rng=rng)
    np.testing.assert_allclose(chooser.probabilities(list(env.deltas)), 0.25)  # uniform before any delta
    for _ in range(300):
        [record] = replay_episode(env, "spec", episode, sampler, {}, rng, chooser)
        assert record.delta == env.deltas[record.agent](env.calls[record.agent])
    assert sum(env.calls.values()) == 300  # one re-execution per episode, not one per agent
    p = chooser.probabilities(list(env.deltas))
    assert p[3] > 0.6 and np.all(p[:3] >= 0.1 - 1e-9)
    assert env.calls["agent_3"] > 150 and min(env.calls[a] for a in constant) >= 10  # the floor keeps turns
    every = replay_episode(env, "spec", episode, sampler, {}, rng)  # no chooser: every agent, as LEMON
    assert [r.agent for r in every] == sorted(env.deltas)
    assert AgentChooser(8, 0.1, 0.9, rng).choose(["b", "a"]) == ["b", "a"]  # a budget above the team: all
