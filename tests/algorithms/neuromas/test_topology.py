"""Message passing follows the topology: a node only hears its ancestors; what each node reads
(``observe``); the compute-matched monolith."""

from __future__ import annotations

import pytest
import torch

from orchestrl.algorithms.neuromas.network import NetConfig, NeuromasNet, TeamSpec
from orchestrl.algorithms.neuromas.topology import MONOLITH, Topology

AGENTS = ("a", "b", "c")
SPEC = TeamSpec(AGENTS, {a: 5 for a in AGENTS}, {a: 0 for a in AGENTS}, {a: (3,) for a in AGENTS})


def net(
    messages: str, hidden: list[int] = (2,), inputs: tuple[str, ...] = ("a", "b"), observe: str = "all"
) -> NeuromasNet:
    topology = Topology.layered(list(inputs), list(hidden), [x for x in AGENTS if x not in inputs])
    if messages == "none":
        topology = topology.without_edges()
    torch.manual_seed(0)
    cfg = NetConfig(dim=16, heads=2, hidden=(16,), messages=messages, observe=observe)
    model = NeuromasNet(SPEC, topology, cfg).eval()
    if model.lanes:
        with torch.no_grad():  # residual messages in use too (b_v = 0 at init)
            model.message_mix.uniform_(0.5, 1.5)
    return model


def observations(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {a: torch.randn(4, 5, generator=g) for a in AGENTS}


def changed_nodes(model: NeuromasNet, agent: str) -> set[str]:
    """Nodes whose state moves at all when only ``agent``'s observation changes (a node that does
    not hear ``agent`` recomputes from identical inputs, so its state is bit-identical). Discrete
    messages run with expected token embeddings, so any change reaches downstream (an argmax token
    may not flip)."""
    mode = "soft" if model.cfg.messages == "discrete" else "greedy"
    obs = observations()
    before = model(obs, message_mode=mode).states
    obs[agent] = obs[agent] + 1.0
    after = model(obs, message_mode=mode).states
    moved = (before != after).any(dim=2).any(dim=0)
    return {model.topology.names[i] for i in range(len(model.topology.nodes)) if moved[i]}


def test_layered_topology_names_layers_and_dense_edges() -> None:
    topology = Topology.layered(["a"], [2, 2, 2], ["c"])
    assert topology.names == ("a", "h1.0", "h1.1", "h2.0", "h2.1", "h3.0", "h3.1", "c")
    assert [len(layer) for layer in topology.layers] == [1, 2, 2, 2, 1]
    assert topology.predecessors(topology.names.index("c")) == (5, 6)
    assert topology.ancestors(topology.names.index("h2.0")) == {0, 1, 2}
    assert topology.acting_node("c") == 7
    lanes = {name: topology.lane(i) for i, name in enumerate(topology.names)}
    assert lanes == {"a": None, "h1.0": 0, "h1.1": 0, "h2.0": 1, "h2.1": 2, "h3.0": 3, "h3.1": 4, "c": 5}
    assert Topology.monolithic(AGENTS).names == (MONOLITH,)


@pytest.mark.parametrize("messages", ["continuous", "discrete"])
def test_a_node_never_hears_a_non_ancestor(messages: str) -> None:
    model = net(messages)
    # a and b are inputs (layer 0), h1.0/h1.1 hear both, c hears the hidden layer.
    assert changed_nodes(model, "a") == {"a", "h1.0", "h1.1", "c"}
    assert changed_nodes(model, "b") == {"b", "h1.0", "h1.1", "c"}
    assert changed_nodes(model, "c") == {"c"}  # nobody upstream hears the output agent


def test_cut_messages_leave_every_agent_on_its_own() -> None:
    model = net("none")
    assert changed_nodes(model, "a") == {"a"}
    assert changed_nodes(model, "c") == {"c"}
    assert model.senders == ()
    assert not hasattr(model, "message_mix")  # no residual messages either: no unused parameters


def test_an_agents_action_depends_on_its_ancestors_only() -> None:
    model = net("continuous")
    obs = observations()
    before = model(obs).env_logits
    obs["c"] = obs["c"] * 3
    after = model(obs).env_logits
    # Team-action order a, b, c with 3 logits each: only c's slice moves.
    assert torch.allclose(before[:, :6], after[:, :6])
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_continuous_messages_carry_gradient_back_to_the_input_agent() -> None:
    model = net("continuous").train()
    obs = observations()
    model(obs).env_logits[:, 6:].sum().backward()  # the output agent's logits only
    grads = model.encoders[model.encoder_of["a"]].net[0].weight.grad
    assert grads is not None and grads.abs().sum() > 0


def test_discrete_messages_are_replayed_exactly_from_recorded_tokens() -> None:
    model = net("discrete")
    obs = observations()
    torch.manual_seed(1)
    sampled = model(obs, message_mode="sample")
    replayed = model(obs, message_mode="given", tokens=sampled.tokens)
    assert sampled.tokens.shape == (4, len(model.senders) * model.cfg.message_len)
    assert torch.equal(sampled.tokens, replayed.tokens)
    assert torch.allclose(sampled.env_logits, replayed.env_logits)


def test_bad_topologies_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one input agent"):
        Topology.layered([], [1], ["c"])
    with pytest.raises(ValueError, match="at least one node"):
        Topology.layered(["a"], [2, 0], ["c"])


def test_with_observe_inputs_a_later_agent_knows_the_task_only_from_messages() -> None:
    model = net("continuous", observe="inputs")
    assert changed_nodes(model, "c") == set()  # c's own observation does not enter its state
    assert changed_nodes(model, "a") == {"a", "h1.0", "h1.1", "c"}
    assert changed_nodes(net("none", observe="inputs"), "a") == {"a"}
    # Nor do c's action heads look the task up in it (its flat observation offers no pointer rows).
    obs = observations()
    before = model(obs).env_logits
    obs["c"] = obs["c"] * 3
    assert torch.equal(model(obs).env_logits, before)


def test_with_observe_every_hidden_nodes_read_the_task() -> None:
    """Messages cut, so only reading can carry a change: under ``every`` the hidden nodes move with
    an input agent's observation, under ``all`` they do not."""
    assert changed_nodes(net("none", observe="every"), "a") == {"a", "h1.0", "h1.1"}
    assert changed_nodes(net("none", observe="all"), "a") == {"a"}


def test_the_compute_matched_monolith_applies_its_neuron_once_per_layer() -> None:
    obs = observations()
    states, sizes = [], []
    for repeats in (1, 3):
        torch.manual_seed(0)
        cfg = NetConfig(dim=16, heads=2, hidden=(16,), messages="none", repeats=repeats)
        model = NeuromasNet(SPEC, Topology.monolithic(list(AGENTS)), cfg).eval()
        states.append(model(obs).states)
        sizes.append(sum(p.numel() for p in model.parameters()))
    assert sizes[0] == sizes[1]
    assert not torch.allclose(states[0], states[1])  # the same weights, a deeper computation
