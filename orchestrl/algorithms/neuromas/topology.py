"""Which agent nodes exist and which edges carry their messages.

NeuroMAS (arXiv 2605.16757) arranges a team's agents like the neurons of a layered feed-forward
network. Here, for an env with agents A:

    layer 0            the *input agents* (e.g. ``schema_extractor``; MPE ``speaker_0``): each reads
                       its own observation, acts for its env agent and sends a message forward;
    layers 1..L        the *hidden* nodes, ``layers: [2, 2, 2]``: they have no observation and no
                       env action, only messages in and a message out (named ``h<layer>.<pos>``);
    layer L+1          the *output agents* (e.g. ``sql_composer``, ``listener_0``): each reads its
                       own observation plus the messages of layer L, and acts.

Edges join every node of one layer to every node of the next (dense, as in an MLP). NeuroMAS-3 /
-5 / -7 = hidden ``[1, 1]`` / ``[2, 2]`` / ``[2, 2, 2]`` plus the output node, as in the paper;
the input agents come on top (in the paper the task text itself is the input). A *monolithic*
topology has one node that reads every agent's observation and acts for all of them.

Nodes are named so that a grown topology can find the trained nodes of a smaller one
(:mod:`.growth`): agent nodes by their agent id, hidden nodes by layer and position.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

MONOLITH = "monolith"


@dataclass(frozen=True)
class Node:
    name: str
    layer: int
    agents: tuple[str, ...]
    """The env agents this node observes and acts for (empty for hidden nodes)."""

    @property
    def hidden(self) -> bool:
        return not self.agents


def hidden_name(layer: int, position: int) -> str:
    return f"h{layer}.{position}"


@dataclass(frozen=True)
class Topology:
    """A DAG of nodes in layers; ``edges`` are (source, destination) node indices."""

    nodes: tuple[Node, ...]
    edges: frozenset[tuple[int, int]]

    @classmethod
    def layered(
        cls, input_agents: Sequence[str], hidden: Sequence[int], output_agents: Sequence[str]
    ) -> Topology:
        """Input agents -> ``hidden`` layers -> output agents, dense between consecutive layers."""
        if not input_agents:
            raise ValueError("a layered topology needs at least one input agent")
        if any(int(n) < 1 for n in hidden):
            raise ValueError(f"every hidden layer needs at least one node, got {list(hidden)}")
        layers: list[list[Node]] = [[Node(a, 0, (a,)) for a in input_agents]]
        for depth, width in enumerate(hidden, start=1):
            layers.append([Node(hidden_name(depth, p), depth, ()) for p in range(int(width))])
        if output_agents:
            layers.append([Node(a, len(layers), (a,)) for a in output_agents])
        nodes = tuple(n for layer in layers for n in layer)
        index = {n.name: i for i, n in enumerate(nodes)}
        edges = frozenset(
            (index[src.name], index[dst.name])
            for below, above in itertools.pairwise(layers)
            for src in below
            for dst in above
        )
        return cls(nodes, edges)

    @classmethod
    def monolithic(cls, agents: Sequence[str]) -> Topology:
        """One node that observes and acts for every agent: the single-agent baseline."""
        return cls((Node(MONOLITH, 0, tuple(agents)),), frozenset())

    def without_edges(self) -> Topology:
        """The same nodes with every message cut (the ``messages: none`` ablation)."""
        return Topology(self.nodes, frozenset())

    # -- queries ----------------------------------------------------------------------------------
    @cached_property
    def layers(self) -> tuple[tuple[int, ...], ...]:
        """Node indices per layer, in order."""
        depth = max(n.layer for n in self.nodes) + 1
        return tuple(tuple(i for i, n in enumerate(self.nodes) if n.layer == d) for d in range(depth))

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def predecessors(self, node: int) -> tuple[int, ...]:
        return tuple(sorted(src for src, dst in self.edges if dst == node))

    def ancestors(self, node: int) -> frozenset[int]:
        found: set[int] = set()
        frontier = list(self.predecessors(node))
        while frontier:
            src = frontier.pop()
            if src not in found:
                found.add(src)
                frontier.extend(self.predecessors(src))
        return frozenset(found)

    def lane(self, node: int) -> int | None:
        """The predecessor whose message ``node`` can pass on (its *lane*): the node at the same
        position one layer down (the last one if that layer is narrower). None without predecessors.

        Lanes make deepening exact (:mod:`.growth`): a new layer whose nodes pass on their lanes'
        messages hands the next layer the very messages it heard before."""
        below = [u for u in self.predecessors(node) if self.nodes[u].layer == self.nodes[node].layer - 1]
        if not below:
            return None
        position = self.layers[self.nodes[node].layer].index(node)
        return below[min(position, len(below) - 1)]

    def acting_node(self, agent: str) -> int:
        """The node that emits ``agent``'s env action."""
        for i, node in enumerate(self.nodes):
            if agent in node.agents:
                return i
        raise KeyError(f"no node acts for agent '{agent}'")

    def senders(self) -> tuple[int, ...]:
        """Nodes whose message some other node reads."""
        return tuple(sorted({src for src, _ in self.edges}))

    def __post_init__(self) -> None:
        for src, dst in self.edges:
            if self.nodes[src].layer >= self.nodes[dst].layer:
                raise ValueError(
                    f"edge {self.nodes[src].name} -> {self.nodes[dst].name} does not go to a later layer"
                )
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"node names must be unique, got {list(self.names)}")
