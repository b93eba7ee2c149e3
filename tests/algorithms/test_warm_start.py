"""The behaviour-cloning warm start of actor-critic teams: it clones the env's expert into every
actor (in-process, no Ray), and its bad configurations fail with one clear line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from credit_helpers import expert_agreement, tiny, trainer

from orchestrl.algorithms import behaviour_cloning
from orchestrl.algorithms.actor_critic import ActorCriticModule
from orchestrl.algorithms.behaviour_cloning import SampledActions, expert_demonstrations, random_valid_action
from orchestrl.algorithms.coma.module import ComaModule
from orchestrl.algorithms.neuromas.module import NeuromasModule
from orchestrl.algorithms.warm_start_store import actor_code
from orchestrl.envs.orchestration.planning.env import CANDIDATE_FEATURES, CONTEXT
from orchestrl.envs.rllib_env import env_config
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import ConfigError, validate_config


@pytest.mark.parametrize(("algo", "option_rows"), [("ippo", False), ("lemon", False), ("lemon", True)])
def test_warm_start_clones_the_expert_into_every_actor(algo: str, option_rows: bool) -> None:
    data = tiny(
        algo,
        "orchestration",
        kwargs={"level": 2, "task_pool": 50},
        model={"hidden": [128, 128], "option_rows": option_rows},
        warm_start={"episodes": 40, "epochs": 60, "batch_size": 64},
    )
    t = trainer(data)
    try:
        (losses,) = t.warm_start.values()
        assert losses[-1] < 0.25 * losses[0]
        # On tasks it never saw, each component agrees with the expert well above chance: the duty
        # (about one in four) is inferred from what the candidates do to the data and the examples,
        # never read off a ranked list.
        fresh = expert_demonstrations(t.config.env_config, 10, seed=1000)
        for agent, demos in fresh.items():
            assert expert_agreement(t.runner.module["shared"], demos).min() >= 0.6, agent
        if option_rows:  # the actor that picks its own actions also samples and trains through RLlib
            assert np.isfinite(t.step(60)["shared"]["policy_loss"])
    finally:
        t.stop()


def reused_warm_start(algo: str, run_dir: Path, **warm: Any) -> tuple[dict[str, torch.Tensor], dict]:
    """A level-1 team's actor weights right after a warm start with ``reuse``, and its report."""
    data = tiny(
        algo,
        "orchestration",
        kwargs={"level": 1, "task_pool": 20},
        model={"option_rows": True},
        warm_start={"episodes": 6, "epochs": 2, "dagger_rounds": 1, "reuse": True, **warm},
    )
    t = trainer({**data, "run_dir": str(run_dir)})
    try:
        actor = t.learner.module["shared"].unwrapped().actor.state_dict()
        return {name: value.clone() for name, value in actor.items()}, dict(t.warm_start)
    finally:
        t.stop()


def test_a_reused_warm_start_is_cloned_once_for_the_algorithms_that_share_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lemon, lemon_report = reused_warm_start("lemon", tmp_path)
    store = tmp_path / "cache" / "orchestration" / "warm_starts"
    assert len(list(store.glob("*.pt"))) == 1
    played: list[int] = []
    play = behaviour_cloning.expert_demonstrations
    monkeypatch.setattr(
        behaviour_cloning, "expert_demonstrations", lambda *a, **k: played.append(1) or play(*a, **k)
    )
    ippo, ippo_report = reused_warm_start("ippo", tmp_path)  # another critic, the same actor and clone
    assert not played and ippo_report == lemon_report
    assert all(torch.equal(ippo[name], lemon[name]) for name in lemon)
    coma, coma_report = reused_warm_start("coma", tmp_path)  # another module class, the same actor code
    assert not played and coma_report == lemon_report
    assert all(torch.equal(coma[name], lemon[name]) for name in lemon)
    reused_warm_start("ippo", tmp_path, epochs=3)  # another warm start: cloned, and kept beside it
    assert played and len(list(store.glob("*.pt"))) == 2


class _OwnLogits(ComaModule):
    def _logits(self, batch: dict[str, Any], given: torch.Tensor | None = None) -> torch.Tensor:
        return super()._logits(batch, given) * 2.0


def test_only_a_subclass_that_acts_as_its_base_shares_its_clone() -> None:
    assert actor_code(ComaModule) == actor_code(ActorCriticModule)  # COMA adds a critic only
    assert actor_code(_OwnLogits) != actor_code(ActorCriticModule)  # it acts otherwise: its own clone
    assert actor_code(NeuromasModule) == [f"{NeuromasModule.__module__}.NeuromasModule"]


def test_an_unreadable_stored_clone_is_cloned_again(tmp_path: Path) -> None:
    first, _ = reused_warm_start("ippo", tmp_path)
    (stored,) = (tmp_path / "cache" / "orchestration" / "warm_starts").glob("*.pt")
    stored.write_bytes(b"truncated")
    again, _ = reused_warm_start("ippo", tmp_path)
    assert all(torch.equal(again[name], first[name]) for name in first)  # the same clone, made again
    assert stored.stat().st_size > len(b"truncated")


def test_option_rows_are_refused_on_an_env_that_lays_out_none() -> None:
    data = tiny("ippo", "orchestration_planning", kwargs={"task_pool": 4}, model={"option_rows": True})
    with pytest.raises(ConfigError, match=r"^model\.option_rows: env 'orchestration_planning' lays out no"):
        build_ppo_config(validate_config(data))


@pytest.mark.parametrize("algo", ["ippo", "mappo", "coma", "lemon", "neuromas"])
def test_every_algorithm_refuses_a_warm_start_on_an_env_without_an_expert(algo: str) -> None:
    extra = {"algorithm": {"advantage": "gae"}} if algo == "lemon" else {}
    spread = tiny(algo, "simple_spread", kwargs={"N": 2}, warm_start={"episodes": 4}, **extra)
    with pytest.raises(ConfigError, match=r"^warm_start: env 'simple_spread' has no expert_actions"):
        build_ppo_config(validate_config(spread))


def test_a_bad_warm_start_value_names_its_key() -> None:
    data = tiny("ippo", "orchestration", kwargs={"level": 1}, warm_start={"episodes": 10, "epochs": 0})
    with pytest.raises(ConfigError, match=r"warm_start\.epochs"):
        validate_config(data)


def test_dart_noise_plays_random_valid_actions_and_keeps_the_expert_as_label() -> None:
    """With noise, the labels are still the expert's and the first round's observations are the
    same; the actions played are others (the second round sees them), so the returns fall."""
    config = env_config("orchestration_planning", {"split": "train", "task_pool": 20, "rounds": 2})
    clean = expert_demonstrations(config, 3, seed=5)
    noisy = expert_demonstrations(config, 3, seed=5, noise=1.0)
    for agent in clean:
        np.testing.assert_array_equal(clean[agent].actions, noisy[agent].actions)
        first = slice(0, None, 2)  # the rows alternate an episode's rounds 1 and 2
        np.testing.assert_array_equal(clean[agent].obs[OBS_KEY][first], noisy[agent].obs[OBS_KEY][first])
    assert any(not np.array_equal(clean[a].obs[OBS_KEY][1::2], noisy[a].obs[OBS_KEY][1::2]) for a in clean)
    assert sum(d.rewards.sum() for d in noisy.values()) < sum(d.rewards.sum() for d in clean.values())


def test_dagger_plays_the_actors_actions_and_keeps_the_expert_as_label() -> None:
    """DAgger's rollouts: the actions played are the player's (here every agent's first option,
    which the second round's observations show as taken), the labels the expert's."""
    config = env_config("orchestration_planning", {"split": "train", "task_pool": 20, "rounds": 2})
    clean = expert_demonstrations(config, 2, seed=5)
    first = expert_demonstrations(config, 2, seed=5, player=lambda obs: {a: np.array([0]) for a in obs})
    taken = CONTEXT + CANDIDATE_FEATURES - 1  # option 0's "taken last round" feature
    for agent in clean:
        np.testing.assert_array_equal(clean[agent].actions, first[agent].actions)
        assert (first[agent].obs[OBS_KEY][1::2, taken] == 1.0).all(), agent
    assert any((clean[a].obs[OBS_KEY][1::2, taken] == 0.0).any() for a in clean)


def test_sampled_actions_are_the_module_s_and_dagger_clones_again() -> None:
    data = tiny(
        "ippo",
        "orchestration_planning",
        kwargs={"task_pool": 4, "rounds": 2},
        model={"hidden": [32], "candidate_features": CANDIDATE_FEATURES},
        warm_start={"episodes": 3, "epochs": 2, "batch_size": 16, "dagger_rounds": 1},
    )
    t = trainer(data)
    try:
        assert set(t.warm_start) == {"shared", "shared (DAgger round 1)"}
        module = t.runner.module["shared"]
        player = SampledActions({"shared": module}, lambda agent: "shared")
        demos = expert_demonstrations(t.config.env_config, 1, seed=9)
        obs = {a: {k: v[0] for k, v in d.obs.items()} for a, d in demos.items()}
        for agent, action in player(obs).items():
            assert obs[agent][MASK_KEY][int(action[0])] == 1.0, agent
    finally:
        t.stop()


def test_dagger_is_refused_where_the_team_clones_itself() -> None:
    data = tiny(
        "neuromas", "orchestration", kwargs={"level": 1}, warm_start={"episodes": 2, "dagger_rounds": 1}
    )
    with pytest.raises(ConfigError, match=r"^warm_start\.dagger_rounds: neuromas"):
        build_ppo_config(validate_config(data))


def test_a_random_valid_action_respects_the_mask() -> None:
    generator = np.random.default_rng(0)
    mask = np.array([0, 0, 1, 0, 1, 0, 0, 0], dtype=np.float32)
    for space in (gym.spaces.Discrete(8), gym.spaces.MultiDiscrete([8])):
        drawn = {
            int(np.asarray(random_valid_action(space, {MASK_KEY: mask}, generator)).reshape(-1)[0])
            for _ in range(40)
        }
        assert drawn == {2, 4}, space
    split = gym.spaces.MultiDiscrete([2, 3])
    both = np.array([0, 1, 1, 0, 0], dtype=np.float32)
    assert all(random_valid_action(split, {MASK_KEY: both}, generator).tolist() == [1, 0] for _ in range(10))
