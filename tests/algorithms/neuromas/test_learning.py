"""Behaviour cloning, the auxiliary reward head and joint RL learn on tiny problems, without Ray."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from neuromas_helpers import greedy_team_reward, team_demonstrations, trivial_agreement
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.behaviour_cloning import configured_warm_start
from orchestrl.algorithms.neuromas.team_env import TEAM, NeuromasTeamEnv
from orchestrl.errors import ConfigError
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer


def trainer_for(experiment, env: str, lr: float = 3e-4, warm_start: dict | None = None, **knobs):
    """An in-process trainer without a warm start, and the warm-start hook ``warm_start`` asks for
    (run it on the trainer's learner to warm-start it)."""
    data = experiment(env, **knobs)
    data["training"]["lr"] = lr
    hook = None
    if warm_start:
        hook = configured_warm_start(build_ppo_config(validate_config({**data, "warm_start": warm_start})))
    return InProcessTrainer(build_ppo_config(validate_config(data))), hook


def greedy_logits(module, obs) -> torch.Tensor:
    return module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]


@pytest.mark.parametrize("messages", ["continuous", "discrete"])
def test_behaviour_cloning_fits_the_expert_and_env_runners_act_with_it(experiment, messages: str) -> None:
    trainer, hook = trainer_for(
        experiment,
        "text2sql",
        warm_start={"episodes": 256, "epochs": 12, "batch_size": 32, "lr": 3e-3},
        messages=messages,
        aux_coeff=0.1,
        word_vectors=True,
    )
    try:
        learner_module = trainer.learner.module[TEAM]
        report = hook(trainer.learner)
        losses = report["bc_loss"]
        assert len(losses) == 12 and losses[-1] < 0.7 * losses[0]
        for head in ("bc_value_loss", "bc_aux_loss"):  # the critic and the auxiliary head fit meanwhile
            assert len(report[head]) == 12 and report[head][-1] < 0.5 * report[head][0], head

        demos = team_demonstrations(trainer.config.env_config, 32, seed=99)
        obs, expert = demos.batch(slice(None))
        expert = expert[:, : len(trainer.learner.module[TEAM].env_lens)]
        runner_module = trainer.runner.module[TEAM]
        if messages == "continuous":  # the runner still holds its initial weights...
            assert not torch.allclose(greedy_logits(runner_module, obs), greedy_logits(learner_module, obs))
        trainer.sync_weights()  # ...until the cloned weights are pushed
        runner_out = runner_module.forward_inference({Columns.OBS: obs})
        learner_out = learner_module.forward_inference({Columns.OBS: obs})
        torch.testing.assert_close(
            runner_out[Columns.ACTION_DIST_INPUTS], learner_out[Columns.ACTION_DIST_INPUTS]
        )

        # and the runner's greedy joint action agrees with the expert well above the trivial policies
        env_logits = runner_out[Columns.ACTION_DIST_INPUTS][:, : sum(runner_module.env_lens)]
        dist = runner_module.env_action_dist_cls().from_logits(env_logits)
        greedy = dist.to_deterministic().sample()
        agreement = float((greedy == expert).float().mean())
        # (measured: 0.81 continuous, 0.77 discrete, against 0.67 for the best constant policy)
        assert agreement > trivial_agreement(expert) + 0.05, (agreement, trivial_agreement(expert))
    finally:
        trainer.stop()


def test_the_trivial_baseline_is_high_because_most_components_are_zero(experiment) -> None:
    env_config = build_ppo_config(validate_config(experiment("text2sql"))).env_config
    _, expert = team_demonstrations(env_config, 256, seed=7).batch(slice(None))
    assert 0.5 < float((expert == 0).float().mean()) <= trivial_agreement(expert) < 0.9


def test_auxiliary_reward_loss_decreases(experiment) -> None:
    trainer, _ = trainer_for(experiment, "simple_speaker_listener", lr=3e-3, aux_coeff=1.0)
    try:
        episodes = trainer.sample(128)
        losses = []
        for _ in range(12):
            results = trainer.learner.update(
                episodes=copy.deepcopy(episodes), num_epochs=1, minibatch_size=128
            )
            losses.append(float(results[TEAM]["credit/aux_reward_loss"].peek()))
        assert all(math.isfinite(x) for x in losses)
        assert losses[-1] < 0.5 * losses[0]
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("env", "knobs"),
    [
        ("text2sql", {"messages": "continuous", "aux_coeff": 0.5}),
        ("text2sql", {"word_vectors": True, "observe": "inputs"}),
        ("text2sql", {"messages": "discrete", "objective": "reinforce"}),
        (
            "text2sql",
            {"credit": "counterfactual", "sequential": True, "observe": "every", "anchor_coeff": 0.01},
        ),
        ("simple_speaker_listener", {"messages": "none"}),
        ("simple_speaker_listener", {"monolithic": True}),
        ("orchestration", {"messages": "discrete", "warm_start": {"episodes": 16, "epochs": 1}}),
    ],
    ids=[
        "t2s-continuous-ppo",
        "t2s-word-vectors-inputs",
        "t2s-discrete-reinforce",
        "t2s-counterfactual-sequential",
        "mpe-cut",
        "mpe-monolithic",
        "orchestration-bc",
    ],
)
def test_two_training_iterations_in_process(experiment, env: str, knobs: dict) -> None:
    """Two PPO/REINFORCE iterations: finite losses, weights that moved and reached the env runner,
    and on Text2SQL a greedy team that earns more on a fixed set of questions than before training
    (measured, seed 3, 2 iterations of 128 steps: -0.400 -> -0.196 continuous, -0.106 -> -0.094 word
    vectors + inputs, -0.170 -> -0.116 discrete REINFORCE; the reward is mostly the invalid-SQL
    penalty at first, which RL removes first)."""
    import ray

    trainer, hook = trainer_for(experiment, env, **knobs)
    team_env = NeuromasTeamEnv(trainer.config.env_config) if env == "text2sql" else None
    try:
        if hook is not None:
            hook(trainer.learner)
            trainer.sync_weights()
        before = greedy_team_reward(trainer.runner.module[TEAM], team_env) if team_env else None
        first_weights = [p.detach().clone() for p in trainer.learner.module[TEAM].parameters()]
        results = [trainer.step()[TEAM] for _ in range(2)]
        after = list(trainer.learner.module[TEAM].parameters())
        runner_state = trainer.runner.module[TEAM].get_state(inference_only=True)
        learner_state = trainer.learner.module[TEAM].get_state(inference_only=True)
        if team_env is not None:
            trained = greedy_team_reward(trainer.runner.module[TEAM], team_env)
            assert trained > before, (before, trained)
    finally:
        trainer.stop()
        if team_env is not None:
            team_env.close()
    assert not ray.is_initialized()
    for result in results:
        for key in ("policy_loss", "vf_loss", "entropy"):
            assert np.isfinite(result[key]), key
    assert any(not torch.equal(a, b) for a, b in zip(first_weights, after, strict=True))
    for name, value in learner_state.items():  # the env runner acts with the trained weights
        torch.testing.assert_close(torch.as_tensor(runner_state[name]), torch.as_tensor(value), msg=name)


def test_demonstrations_carry_the_experts_discounted_returns(experiment) -> None:
    orchestration = build_ppo_config(validate_config(experiment("orchestration"))).env_config
    demos = team_demonstrations(orchestration, 3, gamma=0.5)  # three 2-round episodes
    assert demos.returns.shape == (6,)
    for first in (0, 2):  # G_0 = r_0 + 0.5 r_1, G_1 = r_1: no return reaches into the next episode
        assert demos.rewards[first + 2] != 0  # (so a return summed across episodes would differ)
        r0, r1 = demos.rewards[first : first + 2]
        np.testing.assert_allclose(demos.returns[first : first + 2], [r0 + 0.5 * r1, r1], rtol=1e-6)
    env_config = build_ppo_config(validate_config(experiment("text2sql"))).env_config
    demos = team_demonstrations(env_config, 8)
    assert demos.returns.shape == demos.rewards.shape == (8,)
    np.testing.assert_allclose(demos.returns, demos.rewards)  # one-step episodes: G = r
    assert (demos.rewards > 0.9).all()  # the expert's SQL runs and matches
    speaker_listener = build_ppo_config(validate_config(experiment("simple_speaker_listener"))).env_config
    with pytest.raises(AttributeError, match="no expert_actions"):
        team_demonstrations(speaker_listener, 4)


def test_cloning_stops_early_on_validation_schemas_and_keeps_its_best_epoch(experiment) -> None:
    """The warm start with ``bc_validation_env``: after each epoch the greedy team's agreement with
    the expert on the validation split's schemas; it stops ``bc_patience`` epochs after the best
    one (well before ``epochs`` on a tiny set), and the weights it keeps are that epoch's."""
    from orchestrl.algorithms.neuromas.cloning import agreement

    trainer, hook = trainer_for(
        experiment,
        "text2sql",
        warm_start={"episodes": 192, "epochs": 40, "batch_size": 32, "lr": 3e-3},
        word_vectors=True,
        bc_validation_env={"split": "validation"},
        bc_validation_episodes=48,
        bc_patience=2,
    )
    try:
        report = hook(trainer.learner)
        scores, best = report["bc_validation_agreement"], report["bc_best_epoch"][0]
        assert len(scores) == len(report["bc_loss"]) == best + 2 < 40
        assert scores[best - 1] == max(scores) > 0
        config = copy.deepcopy(trainer.config.env_config)
        config["kwargs"] = {**config["kwargs"], "split": "validation"}
        validation = team_demonstrations(config, 48, seed=3)  # the hook's validation episodes
        module = trainer.learner.module[TEAM]
        assert agreement(module, validation, len(module.env_lens))[0] == pytest.approx(scores[best - 1])
    finally:
        trainer.stop()


def test_cloning_stops_early_on_the_mean_over_several_validation_sets(experiment) -> None:
    """``bc_validation_env`` as a list (the validation split and the hand-written dev questions):
    the epoch kept is the one whose agreement, the mean over both sets, was best, and that mean is
    what the kept weights score on the two sets."""
    from orchestrl.algorithms.neuromas.cloning import agreement

    dev = str(Path(__file__).resolve().parents[2] / "data" / "text2sql_natural_dev.jsonl")
    sets = [{"split": "validation"}, {"split": "validation", "questions_file": dev}]
    trainer, hook = trainer_for(
        experiment,
        "text2sql",
        warm_start={"episodes": 192, "epochs": 40, "batch_size": 32, "lr": 3e-3},
        word_vectors=True,
        bc_validation_env=sets,
        bc_validation_episodes=48,
        bc_patience=2,
    )
    try:
        report = hook(trainer.learner)
        scores, best = report["bc_validation_agreement"], report["bc_best_epoch"][0]
        assert scores[best - 1] == max(scores)
        module = trainer.learner.module[TEAM]
        per_set = []
        for override in sets:
            config = copy.deepcopy(trainer.config.env_config)
            config["kwargs"] = {**config["kwargs"], **override}
            demos = team_demonstrations(config, 48, seed=3)
            per_set.append(agreement(module, demos, len(module.env_lens))[0])
        assert scores[best - 1] == pytest.approx(np.mean(per_set))
        assert per_set[0] != per_set[1]  # two sets, not one counted twice
    finally:
        trainer.stop()


def test_a_validation_file_is_resolved_where_the_config_is_built_and_a_missing_one_is_named(
    experiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative ``questions_file`` reaches the warm start as an absolute path (workers may run
    elsewhere); one that is not a file is refused before anything trains, naming the key."""
    from orchestrl.algorithms.behaviour_cloning import configured_warm_start

    dev = Path(__file__).resolve().parents[2] / "data" / "text2sql_natural_dev.jsonl"
    (tmp_path / "dev.jsonl").write_text(dev.read_text())
    monkeypatch.chdir(tmp_path)
    data = experiment(
        "text2sql",
        bc_validation_env=[{"split": "validation"}, {"split": "validation", "questions_file": "dev.jsonl"}],
    )
    data["warm_start"] = {"episodes": 16, "epochs": 1}
    hook = configured_warm_start(build_ppo_config(validate_config(data)))
    assert hook.knobs.bc_validation_env[1]["questions_file"] == str(tmp_path / "dev.jsonl")
    data["algorithm"]["bc_validation_env"][1]["questions_file"] = "absent.jsonl"
    with pytest.raises(
        ConfigError, match=r"algorithm.bc_validation_env\[1\].questions_file: absent.jsonl is not a file"
    ):
        build_ppo_config(validate_config(data))
