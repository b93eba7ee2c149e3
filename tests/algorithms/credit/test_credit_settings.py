"""The settings an estimator's knobs turn into: the learner's CreditSpec (its ``advantage: gae``
ablation included) and LEMON's replay settings, which must reach every env runner's callbacks."""

from __future__ import annotations

import dataclasses
import pickle
from types import SimpleNamespace

import pytest
from credit_helpers import tiny
from ray import cloudpickle

from orchestrl.algorithms.coma.advantage import ComaAdvantage
from orchestrl.algorithms.credit.advantage import TeamGaeAdvantage
from orchestrl.algorithms.credit.configure import credit_spec_for
from orchestrl.algorithms.credit.learner import CreditSpec
from orchestrl.algorithms.lemon.algorithm import LemonConfig
from orchestrl.algorithms.lemon.replay import ReplayCallbacks, ReplaySettings
from orchestrl.envs.counterfactual import EditFamily
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config

AGENTS = SimpleNamespace(agents=["agent_0", "agent_1"])


def test_credit_spec_carries_the_estimator_and_its_settings() -> None:
    spec = credit_spec_for(
        AGENTS, ComaAdvantage, {"td_lambda": 0.5}, target_update_interval=2, critic_lr=1e-3
    )
    assert spec == CreditSpec(
        piece=ComaAdvantage,
        piece_kwargs={"td_lambda": 0.5},
        agents=("agent_0", "agent_1"),
        target_update_interval=2,
        critic_lr=1e-3,
    )


def test_gae_ablation_spec_is_team_gae_without_the_estimators_settings() -> None:
    spec = credit_spec_for(
        AGENTS, ComaAdvantage, {"td_lambda": 0.5}, team_gae=True, target_update_interval=2, critic_lr=1e-3
    )
    assert spec == CreditSpec(piece=TeamGaeAdvantage, agents=("agent_0", "agent_1"))


def replay_callbacks(callbacks_class: list) -> list[ReplayCallbacks]:
    """The callbacks RLlib makes from ``callbacks_class`` (it calls each entry with no arguments)."""
    return [c for c in (make() for make in callbacks_class) if isinstance(c, ReplayCallbacks)]


def test_yaml_replay_keys_reach_the_callbacks_of_a_remote_env_runner() -> None:
    knobs = {"edit_families": ["alternative"], "family_floor": 0.05, "family_decay": 0.5, "replay_agents": 1}
    ppo = build_ppo_config(validate_config(tiny("lemon", algorithm=knobs)))
    expected = ReplaySettings(families=(EditFamily.ALTERNATIVE,), floor=0.05, decay=0.5, agents=1)
    remote = cloudpickle.loads(cloudpickle.dumps(ppo))  # how the config reaches other processes
    for callbacks_class in (ppo.callbacks_class, remote.callbacks_class):
        [callbacks] = replay_callbacks(callbacks_class)
        assert callbacks.settings == expected
    [factory] = [c for c in ppo.callbacks_class if replay_callbacks([c])]
    assert pickle.loads(pickle.dumps(factory))().settings == expected  # by reference: no code pickled


def test_replay_callbacks_without_keys_get_lemon_configs_defaults() -> None:
    ppo = build_ppo_config(validate_config(tiny("lemon")))
    [callbacks] = replay_callbacks(ppo.callbacks_class)
    assert callbacks.settings == LemonConfig().replay_settings()


def test_the_sampler_follows_the_settings() -> None:
    settings = ReplaySettings(families=(EditFamily.BASE_DUTY, EditFamily.ALTERNATIVE), floor=0.05, decay=0.5)
    callbacks = ReplayCallbacks.with_settings(settings)()
    callbacks._setup(SimpleNamespace(config=SimpleNamespace(seed=1), worker_index=2))
    assert callbacks.sampler.families == [EditFamily.BASE_DUTY, EditFamily.ALTERNATIVE]
    assert (callbacks.sampler.floor, callbacks.sampler.decay) == (0.05, 0.5)
    assert callbacks.chooser is None  # every agent's edit, as LEMON
    budget = ReplayCallbacks.with_settings(dataclasses.replace(settings, agents=3))()
    budget._setup(SimpleNamespace(config=SimpleNamespace(seed=1), worker_index=2))
    assert (budget.chooser.k, budget.chooser.floor, budget.chooser.decay) == (3, 0.05, 0.5)


def test_replay_callbacks_without_settings_say_how_to_get_them() -> None:
    with pytest.raises(ValueError, match=r"ReplayCallbacks\.with_settings"):
        ReplayCallbacks()._setup(SimpleNamespace(config=SimpleNamespace(seed=0), worker_index=0))
