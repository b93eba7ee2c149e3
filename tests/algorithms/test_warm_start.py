"""The behaviour-cloning warm start of actor-critic teams: it clones the env's expert into every
actor (in-process, no Ray), and its bad configurations fail with one clear line."""

from __future__ import annotations

import pytest
from credit_helpers import expert_agreement, tiny, trainer

from orchestrl.algorithms.behaviour_cloning import expert_demonstrations
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import ConfigError, validate_config


@pytest.mark.parametrize("algo", ["ippo", "lemon"])
def test_warm_start_clones_the_expert_into_every_actor(algo: str) -> None:
    data = tiny(
        algo,
        "orchestration",
        kwargs={"level": 2, "task_pool": 50},
        model={"hidden": [128, 128]},
        warm_start={"episodes": 40, "epochs": 60, "batch_size": 64},
    )
    t = trainer(data)
    try:
        (losses,) = t.warm_start.values()
        assert losses[-1] < 0.25 * losses[0]
        fresh = expert_demonstrations(t.config.env_config, 10, seed=1000)  # tasks it never saw
        for agent, demos in fresh.items():
            assert expert_agreement(t.runner.module["shared"], demos).min() > 0.7, agent
    finally:
        t.stop()


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
