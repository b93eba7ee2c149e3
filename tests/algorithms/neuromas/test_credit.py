"""NeuroMAS' per-agent counterfactual credit: the env re-executes one agent's swapped action, the
runner turns the rewards into COMA advantages, the learner scores each agent by its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.neuromas.credit import (
    AGENT_ADVANTAGES,
    TeamCreditSettings,
    counterfactual_advantages,
)
from orchestrl.algorithms.neuromas.learner import joint_loss
from orchestrl.algorithms.neuromas.team_env import TEAM, NeuromasTeamEnv
from orchestrl.envs.counterfactual import Edit, EditNotApplicable
from orchestrl.envs.text2sql import actions as act
from orchestrl.envs.text2sql.env import Text2SQLEnv
from orchestrl.errors import ConfigError
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer

SETTINGS = TeamCreditSettings(tuple(act.AGENTS), tuple(tuple(act.NVEC[a]) for a in act.AGENTS), 4)


@pytest.fixture
def env(t2s_data_dir: Path) -> Text2SQLEnv:
    env = Text2SQLEnv(split="train", data_dir=t2s_data_dir)
    yield env
    env.close()


def _where_question(env: Text2SQLEnv) -> int:
    return next(i for i, q in enumerate(env.questions) if q.kind == "count_where")


def test_a_swapped_action_scores_as_the_query_written_with_it(env: Text2SQLEnv) -> None:
    """The counterfactual reward of the extractor's swapped WHERE column is what stepping the same
    question with those actions earns; the base reward is the episode's own."""
    index = _where_question(env)
    env.reset(options={"question_index": index})
    expert = env.expert_actions()
    _, rewards, *_ = env.step(expert)
    spec = env.counterfactual_spec()
    other = np.asarray(expert[act.EXTRACTOR]).copy()
    other[act.EXTRACTOR_COMPONENTS.index("where")] = 0  # no WHERE: counts every row
    outcome = env.counterfactual(spec, act.EXTRACTOR, Edit.alternative(other))
    env.reset(options={"question_index": index})
    _, direct, *_ = env.step({**expert, act.EXTRACTOR: other})
    assert outcome.base_reward == rewards[act.EXTRACTOR] == 1.0
    assert outcome.reward == direct[act.EXTRACTOR] < 1.0
    assert env.counterfactual_spec().reward == direct[act.EXTRACTOR]  # the latest episode's now
    with pytest.raises(EditNotApplicable):
        env.counterfactual(spec, act.EXTRACTOR, Edit.base_duty())


def _team_inputs(env: NeuromasTeamEnv, policy: str) -> tuple[np.ndarray, np.ndarray]:
    """The expert's joint action, and logits: uniform, or certain of the expert's choice (every
    other option at the masked logit, probability 0)."""
    action = np.asarray(env.expert_actions())
    logits, at = [], 0
    for agent in act.AGENTS:
        for n in act.NVEC[agent]:
            part = np.zeros(n)
            if policy == "certain":
                part[:] = -1e9
                part[action[at]] = 0.0
            logits.append(part)
            at += 1
    return np.concatenate(logits), action


class Recording:
    """The real team env, keeping each re-execution's reward per agent."""

    def __init__(self, env: NeuromasTeamEnv) -> None:
        self.env, self.rewards = env, {a: [] for a in act.AGENTS}

    def counterfactual(self, spec, agent, edit):
        outcome = self.env.counterfactual(spec, agent, edit)
        self.rewards[agent].append(outcome.reward)
        return outcome


@pytest.mark.parametrize("policy", ["uniform", "certain"])
def test_counterfactual_advantages_follow_coma_with_exact_re_executions(
    t2s_data_dir: Path, policy: str
) -> None:
    """The expert's (right) joint action: against a uniform policy each agent's advantage is exactly
    (1 - p_i)(R - mean of its alternatives' rewards), and positive (they are mostly wrong); against
    a policy certain of it there is nothing to contrast (0, and no re-execution)."""
    team = NeuromasTeamEnv({"name": "text2sql", "kwargs": {"split": "train", "data_dir": str(t2s_data_dir)}})
    try:
        team.reset(options={"question_index": _where_question(team.inner.raw_env)})
        logits, action = _team_inputs(team, policy)
        _, reward, *_ = team.step({TEAM: action})
        recording = Recording(team)
        advantages, runs = counterfactual_advantages(
            recording, team.counterfactual_spec(), logits, action, SETTINGS, np.random.default_rng(0)
        )
    finally:
        team.close()
    if policy == "certain":
        assert advantages == [0.0, 0.0] and runs == 0
        return
    assert runs == 2 * SETTINGS.alternatives
    shared = reward[TEAM] / len(act.AGENTS)  # the team reward sums the agents' (equal) rewards
    for agent, advantage in zip(act.AGENTS, advantages, strict=True):
        p = float(np.prod([1.0 / n for n in act.NVEC[agent]]))
        assert len(recording.rewards[agent]) == SETTINGS.alternatives
        assert advantage == pytest.approx((1 - p) * (shared - np.mean(recording.rewards[agent])))
        assert advantage > 0


def test_a_credited_row_scores_each_agent_by_its_own_advantage() -> None:
    """REINFORCE: a row with per-agent advantages contributes sum_i logp_i A_i, one without the joint
    logp times the shared advantage; flipping agent 1's advantage only moves agent 1's gradient."""
    agent_logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.5]], requires_grad=True)
    logp = agent_logp.sum(-1)
    common = {
        "objective": "reinforce",
        "old_logp": logp.detach(),
        "advantages": torch.tensor([0.3, 0.7]),
        "entropy": torch.zeros(2),
        "values": torch.zeros(2),
        "value_targets": torch.zeros(2),
        "reward_prediction": None,
        "rewards": torch.zeros(2),
        "clip": 0.2,
        "vf_clip": 10.0,
        "vf_coeff": 0.0,
        "entropy_coeff": 0.0,
        "aux_coeff": 0.0,
        "agent_logp": agent_logp,
        "agent_old_logp": agent_logp.detach(),
    }
    credit = torch.tensor([[1.0, -1.0], [float("nan"), float("nan")]])
    loss, _ = joint_loss(logp=logp, agent_advantages=credit, **common)
    expected = -((-1.0 * 1.0 + -2.0 * -1.0) + (-1.0 * 0.7)) / 2
    assert loss.item() == pytest.approx(expected)
    (grad,) = torch.autograd.grad(loss, agent_logp)
    torch.testing.assert_close(grad, torch.tensor([[-0.5, 0.5], [-0.35, -0.35]]))


def _trainer(t2s_data_dir: Path, **knobs) -> InProcessTrainer:
    from neuromas_helpers import small_experiment

    data = small_experiment("text2sql", t2s_data_dir, word_vectors=True, **knobs)
    return InProcessTrainer(build_ppo_config(validate_config(data)))


def test_the_runner_s_advantages_reach_the_learner_on_the_final_action_s_row(t2s_data_dir: Path) -> None:
    """Each sampled episode carries its agents' advantages; the learner batch holds them on the
    episode's real row (finite, as the runner computed them) and NaN on the bootstrap row; a PPO
    iteration with the anchor trains on them (finite losses) and counts the re-executions."""
    trainer = _trainer(
        t2s_data_dir,
        credit="counterfactual",
        alternatives=2,
        anchor_coeff=0.1,
        sequential=True,
        observe="every",
    )
    try:
        episodes = trainer.sample(64)
        stored = [ep.custom_data["neuromas_team_credit"] for ep in episodes if ep.is_done]
        assert stored and all(len(a) == 2 and np.all(np.isfinite(a)) for a in stored)
        batch = trainer.learner_batch(episodes)[TEAM]
        column = np.asarray(batch[AGENT_ADVANTAGES])
        real = np.asarray(batch[Columns.LOSS_MASK], dtype=bool)
        assert column.shape == (len(real), 2)
        assert np.isfinite(column[real]).all() and np.isnan(column[~real]).all()
        got, want = column[real], np.asarray(stored, dtype=np.float32)
        np.testing.assert_allclose(got[np.lexsort(got.T)], want[np.lexsort(want.T)], rtol=1e-6)
        result = trainer.update(episodes)
        assert np.isfinite(result[TEAM]["policy_loss"]) and np.isfinite(result[TEAM]["neuromas/anchor_kl"])
        runner_metrics = trainer.runner.get_metrics()
        assert runner_metrics["env/cf_executions"] > 0
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("env", "knobs", "message"),
    [
        ("simple_speaker_listener", {}, "algorithm.credit: env 'simple_speaker_listener' cannot re-execute"),
        ("text2sql", {"messages": "discrete"}, "discrete message tokens belong to no agent"),
    ],
)
def test_counterfactual_credit_is_refused_where_it_cannot_work(
    experiment, env: str, knobs: dict, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build_ppo_config(validate_config(experiment(env, credit="counterfactual", **knobs)))
