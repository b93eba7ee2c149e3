"""Growing NeuroMAS-7 from a trained NeuroMAS-5: trained nodes and shared weights carry over exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from orchestrl.algorithms.context import WarmStartSection
from orchestrl.algorithms.neuromas.algorithm import NeuromasConfig, TeamWarmStart
from orchestrl.algorithms.neuromas.growth import NODE_PARAMS, grow, load_module
from orchestrl.algorithms.neuromas.network import NetConfig, NeuromasNet, TeamSpec
from orchestrl.algorithms.neuromas.team_env import TEAM
from orchestrl.algorithms.neuromas.topology import Topology
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config

SPEC = TeamSpec(("in", "out"), {"in": 6, "out": 6}, {"in": 0, "out": 0}, {"in": (4,), "out": (2, 3)})
CFG = NetConfig(dim=16, heads=2, hidden=(16,), adapter_rank=3)
V3 = dataclasses.replace(CFG, observe="every", sequential=True)
"""v3's graph: every node reads, the output agent decides knowing the input agent's action."""


def trained(layers: list[int], seed: int, cfg: NetConfig = CFG) -> NeuromasNet:
    """A net whose every parameter is moved away from its initialisation."""
    torch.manual_seed(seed)
    model = NeuromasNet(SPEC, Topology.layered(["in"], layers, ["out"]), cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    return model


def rows(model: NeuromasNet, key: str, name: str) -> torch.Tensor:
    return model.state_dict()[key][model.topology.names.index(name)]


def test_growing_5_into_7_copies_every_trained_node_and_shared_weight_exactly() -> None:
    small, big = trained([2, 2], seed=0), trained([2, 2, 2], seed=1)
    report = grow(big, small, noise=0.01)
    assert report == {
        "copied": ["in", "h1.0", "h1.1", "h2.0", "h2.1", "out"],
        "cloned": ["h3.0", "h3.1"],
        "fresh": [],
        "relays": ["h3.0", "h3.1"],
    }
    for name in report["copied"]:
        for key in NODE_PARAMS:
            assert torch.equal(rows(big, key, name), rows(small, key, name)), (name, key)
    small_state = small.state_dict()
    for key, value in big.state_dict().items():
        if key not in NODE_PARAMS:
            assert torch.equal(value, small_state[key]), key


@pytest.mark.parametrize("cfg", [CFG, V3], ids=["v2", "v3"])
def test_deepening_is_exact_the_grown_team_acts_as_the_trained_one(cfg: NetConfig) -> None:
    """Exact in v3 too: a relay's message is its lane's whatever the task it now reads says."""
    small, big = trained([2, 2], seed=0, cfg=cfg), trained([2, 2, 2], seed=1, cfg=cfg)
    grow(big, small, noise=0.01)
    for name in ("h3.0", "h3.1"):  # relays: pass their lane's message on, add none of their own
        assert rows(big, "message_mix", name).tolist() == [0.0, 1.0]
    obs = {"in": torch.randn(5, 6), "out": torch.randn(5, 6)}
    assert torch.equal(big(obs).env_logits, small(obs).env_logits)
    with torch.no_grad():  # the relays still train: once they speak, the team's action moves
        big.message_mix[big.topology.names.index("h3.0")] += torch.tensor([0.5, -0.5])
    assert not torch.allclose(big(obs).env_logits, small(obs).env_logits)


def test_widening_is_not_a_relay() -> None:
    small, big = trained([1, 1], seed=0), trained([2, 2], seed=1)
    assert grow(big, small, noise=0.0)["relays"] == []


def test_new_nodes_start_near_the_deepest_trained_node_at_their_position() -> None:
    small, big = trained([2, 2], seed=0), trained([2, 2, 2], seed=1)
    grow(big, small, noise=0.01)
    for new, source in (("h3.0", "h2.0"), ("h3.1", "h2.1")):
        a, b = rows(big, "node_embedding.weight", new), rows(small, "node_embedding.weight", source)
        assert not torch.equal(a, b)  # noise breaks the tie with its twin...
        assert torch.allclose(a, b, atol=0.1)  # ...but it starts from the trained neuron


def test_widening_3_into_5_clones_the_single_trained_neuron() -> None:
    small, big = trained([1, 1], seed=0), trained([2, 2], seed=1)
    report = grow(big, small, noise=0.0)
    assert report["cloned"] == ["h1.1", "h2.1"]
    assert torch.equal(
        rows(big, "node_embedding.weight", "h1.1"), rows(small, "node_embedding.weight", "h1.0")
    )


def test_growing_across_message_kinds_is_refused() -> None:
    small = trained([1, 1], seed=0)
    big = NeuromasNet(
        SPEC, Topology.layered(["in"], [2, 2], ["out"]), NetConfig(**{**CFG.__dict__, "messages": "discrete"})
    )
    with pytest.raises(ValueError, match="cannot grow continuous messages into discrete"):
        grow(big, small)


def test_grow_from_a_saved_module_through_the_warm_start(
    experiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def team_module(layers: list[int]):
        ppo = build_ppo_config(validate_config(experiment("simple_speaker_listener", layers=layers)))
        return ppo.get_multi_rl_module_spec().build()[TEAM]

    small = team_module([2, 2])
    small.save_to_path(str(tmp_path / "small"))
    big = team_module([2, 2, 2])
    knobs = NeuromasConfig(layers=[2, 2, 2], grow_from=str(tmp_path / "small"), growth_noise=0.01)
    report = TeamWarmStart(knobs, WarmStartSection(), env_config={}, seed=0, gamma=0.99).apply(big)
    assert report["growth"]["cloned"] == ["h3.0", "h3.1"]
    for name in ("speaker_0", "h2.1", "listener_0"):
        assert torch.equal(
            rows(big.net, "node_embedding.weight", name), rows(small.net, "node_embedding.weight", name)
        )
    assert torch.equal(big.critic[0].weight, small.critic[0].weight)  # learner-only parts too
    assert type(load_module(tmp_path / "small")).__name__ == "NeuromasModule"
    monkeypatch.chdir(tmp_path)  # a path relative to the working directory (as typed on the CLI)
    assert type(load_module("small")).__name__ == "NeuromasModule"
    with pytest.raises(FileNotFoundError, match="no NeuroMAS module checkpoint"):
        load_module(tmp_path)
