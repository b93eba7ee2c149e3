"""NeuroMAS' group baseline: the env poses each task G times running, each sampled answer is scored
against the others of its group, and the learner uses that advantage in place of the critic's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from orchestrl.algorithms.neuromas.group import GROUP_ADVANTAGES, leave_one_out_advantages
from orchestrl.algorithms.neuromas.learner import joint_loss
from orchestrl.algorithms.neuromas.team_env import GROUP_INFO, GROUP_SIZE_KEY, TEAM, NeuromasTeamEnv
from orchestrl.errors import ConfigError
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer


def test_each_answer_is_scored_against_the_rest_of_its_group() -> None:
    """A_g = R_g - mean of the group's other returns, over the batch's std of those advantages; a
    group the batch holds only part of gets none, a group that scored alike gets zeros."""
    returns = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 0.0])
    groups = np.array(["a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "d"])
    got = leave_one_out_advantages(returns, groups, group_size=2)
    raw = np.array([1.0, -1 / 3, -1 / 3, -1 / 3, 0, 0, 0, 0, -0.5, 0.5])
    np.testing.assert_allclose(got[:10], raw / raw.std())
    assert np.isnan(got[10])
    assert np.isnan(leave_one_out_advantages(returns, groups, group_size=5)).all()
    np.testing.assert_array_equal(leave_one_out_advantages(np.ones(4), np.zeros(4), 4), np.zeros(4))


def _team(data_dir: Path, group_size: int) -> NeuromasTeamEnv:
    kwargs = {"split": "train", "data_dir": str(data_dir)}
    return NeuromasTeamEnv({"name": "text2sql", "kwargs": kwargs, GROUP_SIZE_KEY: group_size})


def test_a_grouped_env_poses_each_task_group_size_times_running(t2s_data_dir: Path) -> None:
    """Three resets per group: the same question and group key three times, then another; one
    per group is the plain env, which names no group."""
    team = _team(t2s_data_dir, 3)
    try:
        posed = []
        for i in range(9):
            _, info = team.reset(seed=11 if i == 0 else None)
            question = info[TEAM]["agents"]["schema_extractor"]["question_id"]
            posed.append((info[TEAM][GROUP_INFO], question))
    finally:
        team.close()
    assert [len(set(posed[g : g + 3])) for g in (0, 3, 6)] == [1, 1, 1]
    assert len({key for key, _ in posed}) == 3 and len({q for _, q in posed}) == 3
    plain = _team(t2s_data_dir, 1)
    try:
        questions = [plain.reset(seed=11 if i == 0 else None)[1][TEAM] for i in range(4)]
    finally:
        plain.close()
    assert all(GROUP_INFO not in q for q in questions)
    assert len({q["agents"]["schema_extractor"]["question_id"] for q in questions}) == 4


def test_a_row_with_a_group_advantage_uses_it_in_place_of_the_critic_s() -> None:
    """REINFORCE: the first row's loss is logp * its group advantage, the second (NaN) keeps GAE's."""
    logp = torch.tensor([-1.0, -2.0], requires_grad=True)
    zeros = torch.zeros(2)
    loss, _ = joint_loss(
        objective="reinforce",
        logp=logp,
        old_logp=logp.detach(),
        advantages=torch.tensor([0.3, 0.7]),
        entropy=zeros,
        values=zeros,
        value_targets=zeros,
        reward_prediction=None,
        rewards=zeros,
        clip=0.2,
        vf_clip=10.0,
        vf_coeff=0.0,
        entropy_coeff=0.0,
        aux_coeff=0.0,
        group_advantages=torch.tensor([-2.0, float("nan")]),
    )
    assert loss.item() == pytest.approx(-((-1.0 * -2.0) + (-2.0 * 0.7)) / 2)


def _trainer(t2s_data_dir: Path, **knobs) -> InProcessTrainer:
    from neuromas_helpers import small_experiment

    data = small_experiment("text2sql", t2s_data_dir, word_vectors=True, **knobs)
    return InProcessTrainer(build_ppo_config(validate_config(data)))


def test_the_learner_scores_each_sampled_answer_against_its_group(t2s_data_dir: Path) -> None:
    """A sampled batch holds whole groups of four answers to one question; the learner batch holds
    each answer's leave-one-out advantage on its real row (NaN on the bootstrap rows), computed from
    the episodes' own rewards; a PPO iteration trains on them with finite losses."""
    trainer = _trainer(t2s_data_dir, baseline="group", group_size=4, anchor_coeff=0.1)
    try:
        assert trainer.config.env_config[GROUP_SIZE_KEY] == 4
        episodes = trainer.sample(64)
        done = [ep.agent_episodes[TEAM] for ep in episodes if ep.is_done]
        groups = [sa.get_infos(0)[GROUP_INFO] for sa in done]
        assert len(done) >= 64 and max(groups.count(g) for g in groups) == 4
        want = leave_one_out_advantages([float(sa.get_rewards()[-1]) for sa in done], groups, 4)
        batch = trainer.learner_batch(episodes)[TEAM]
        column = np.asarray(batch[GROUP_ADVANTAGES])
        real = np.asarray(batch[Columns.LOSS_MASK], dtype=bool)
        assert np.isnan(column[~real]).all()
        np.testing.assert_allclose(
            np.sort(column[real][np.isfinite(column[real])]), np.sort(want[np.isfinite(want)]), rtol=1e-5
        )
        assert (
            np.isfinite(want).sum() >= 48 and np.asarray(batch[Postprocessing.ADVANTAGES]).shape == real.shape
        )
        result = trainer.update(episodes)
        assert np.isfinite(result[TEAM]["policy_loss"]) and np.isfinite(result[TEAM]["neuromas/anchor_kl"])
    finally:
        trainer.stop()


def test_demonstrations_and_evaluation_pose_every_task_once(experiment) -> None:
    """The group size reaches the training env only: the warm start and the evaluation env are
    built without it."""
    data = experiment("text2sql", baseline="group", group_size=8)
    data["warm_start"] = {"episodes": 16, "epochs": 1}
    data["evaluation"] = {"interval": 1, "episodes": 4}
    ppo = build_ppo_config(validate_config(data))
    assert ppo.env_config[GROUP_SIZE_KEY] == 8
    assert GROUP_SIZE_KEY not in ppo.evaluation_config["env_config"]
    from orchestrl.algorithms.behaviour_cloning import configured_warm_start

    hook = configured_warm_start(ppo)
    assert GROUP_SIZE_KEY not in hook.env_config


@pytest.mark.parametrize(
    ("env", "knobs", "message"),
    [
        ("simple_speaker_listener", {}, "algorithm.baseline: the group baseline scores one-step episodes"),
        ("text2sql", {"credit": "counterfactual"}, "each replace the shared advantage; choose one"),
    ],
)
def test_the_group_baseline_is_refused_where_it_cannot_work(
    experiment, env: str, knobs: dict, message: str
) -> None:
    with pytest.raises((ConfigError, ValueError), match=message):
        build_ppo_config(validate_config(experiment(env, baseline="group", **knobs)))
