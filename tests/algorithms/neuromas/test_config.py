"""Registry and config errors name the key and the problem, before anything is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrl.algorithms.neuromas import NeuromasConfig, configure_neuromas
from orchestrl.experiment.algorithms import get_algorithm
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import ConfigError, validate_config

TUNE_CONFIGS = Path(__file__).resolve().parents[3] / "configs"


def test_the_registry_entry_resolves_to_this_package() -> None:
    entry = get_algorithm("neuromas")
    assert entry.config_class is NeuromasConfig
    assert entry.configure is configure_neuromas


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"layer": [2, 2]}, "algorithm.layer: unknown key"),
        ({"messages": "sparse"}, "algorithm.messages: Input should be 'continuous', 'discrete' or 'none'"),
        ({"layers": [2, 0]}, "every hidden layer needs at least one node"),
        ({"embed_dim": 30, "heads": 4}, "embed_dim 30 is not divisible by heads 4"),
        ({"objective": "a2c"}, "algorithm.objective: Input should be 'ppo' or 'reinforce'"),
        ({"monolithic": True, "grow_from": "x"}, "a monolithic agent has no nodes to grow"),
        ({"repeats": 3}, "repeats: only a monolithic agent applies its neuron more than once"),
        ({"observe": "some"}, "algorithm.observe: Input should be 'every', 'all' or 'inputs'"),
    ],
)
def test_bad_knobs_fail_validation_with_the_key(experiment, knobs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_config(experiment("text2sql", **knobs), source="x.yaml")


@pytest.mark.parametrize(
    ("env", "knobs", "message"),
    [
        ("text2sql", {"input_agents": ["planner"]}, r"algorithm.input_agents: \['planner'\] are not agents"),
        ("text2sql", {"input_agents": ["schema_extractor", "sql_composer"]}, "no output agent reads"),
        (
            "simple_speaker_listener",
            {"encoder": "text2sql"},
            "algorithm.encoder: text2sql reads the text2sql",
        ),
        (
            "simple_speaker_listener",
            {"word_vectors": True},
            "algorithm.word_vectors: only the text2sql encoder reads words, not 'mlp'",
        ),
        (
            "simple_speaker_listener",
            {"warm_start": {"episodes": 2}},
            "warm_start: env 'simple_speaker_listener' has no expert_actions",
        ),
        ("text2sql", {"grow_from": "/nowhere/ckpt"}, "algorithm.grow_from: /nowhere/ckpt does not exist"),
    ],
)
def test_env_dependent_errors_are_config_errors(experiment, env: str, knobs: dict, message: str) -> None:
    cfg = validate_config(experiment(env, **knobs))
    with pytest.raises(ConfigError, match=message):
        build_ppo_config(cfg)


@pytest.mark.parametrize("path", sorted(TUNE_CONFIGS.glob("neuromas_*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path: Path) -> None:
    from orchestrl.experiment.config import load_config

    cfg = load_config(path)
    assert cfg.algorithm.name == "neuromas"
    NeuromasConfig.model_validate(cfg.algorithm.knobs())


def test_reinforce_runs_one_on_policy_step_on_the_whole_batch_with_full_returns(experiment) -> None:
    data = experiment("text2sql", objective="reinforce")
    data["training"].update(train_batch_size=512, minibatch_size=256, num_epochs=3)
    ppo = build_ppo_config(validate_config(data))
    assert ppo.num_epochs == 1
    assert ppo.minibatch_size is None  # the learner takes the whole batch as one minibatch
    assert ppo.lambda_ == 1.0
    data["algorithm"]["objective"] = "ppo"
    ppo = build_ppo_config(validate_config(data))
    assert (ppo.num_epochs, ppo.minibatch_size) == (3, 256)  # PPO keeps its minibatches and epochs


def test_reinforce_takes_exactly_one_gradient_step_per_batch(experiment) -> None:
    from orchestrl.algorithms.neuromas.team_env import TEAM
    from orchestrl.training.inprocess import InProcessTrainer

    data = experiment("text2sql", objective="reinforce")
    data["training"].update(train_batch_size=64, minibatch_size=16, num_epochs=4)
    trainer = InProcessTrainer(build_ppo_config(validate_config(data)))
    try:
        optimiser = trainer.learner.get_optimizers_for_module(TEAM)[0][1]
        trainer.step()
        steps = {int(state["step"]) for state in optimiser.state.values()}
        assert steps == {
            1
        }  # Adam counted one update, not 4 epochs x 8 minibatches (64 steps + 64 bootstrap rows)
    finally:
        trainer.stop()


def test_contextual_states_need_the_pretrained_model(experiment) -> None:
    cfg = validate_config(experiment("text2sql", contextual=True))
    with pytest.raises(ConfigError, match=r"algorithm\.contextual: .* set word_vectors"):
        build_ppo_config(cfg)
