"""Growing a larger topology from a trained smaller one (NeuroMAS' "grow, don't restart").

Every parameter of the graph is shared by all nodes except a few per-node tensors: the node-id
embedding, the message mix (own message vs the lane's, see :mod:`.network`) and, when enabled, the
node's low-rank adapter. Growing therefore means:

- shared parameters (encoders, neuron backbone, message and attention weights, action heads,
  critic, auxiliary head) are copied as they are;
- a node that exists in both topologies (same name: an agent id, or ``h<layer>.<pos>``) keeps its
  trained embedding and adapter exactly;
- a new hidden node starts as a copy of a trained hidden node (Net2Net-style, Chen et al. 2016: the
  new neuron starts from one that already speaks the message format): from its own layer when the
  smaller topology has that layer (widening), else from the deepest trained layer (deepening), at
  the nearest position; plus Gaussian noise of ``noise`` x that tensor's std so twins can drift
  apart. With no trained hidden node to copy, the new node keeps its fresh initialisation;
- a node of a new (deeper) layer starts as a relay: it passes on its lane's message and adds none
  of its own (mix ``a = 0, b = 1``). Deepening is then exact: with every layer of the smaller
  topology kept at its width and each new layer as wide as the one below it (``[2,2]`` into
  ``[2,2,2]``), the grown team acts exactly as the trained one did, and training goes on from
  there instead of re-learning what the layer above had learnt to hear (without relays, a NeuroMAS-7
  grown from a trained -5 scored far below the -5 before training).

Both modules may be :class:`.network.NeuromasNet` or the RLModule around one (then the critic and
the auxiliary head carry over too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from orchestrl.algorithms.neuromas.network import NeuromasNet
from orchestrl.algorithms.neuromas.topology import Topology

NODE_PARAMS = ("node_embedding.weight", "message_mix", "backbone.adapter_down", "backbone.adapter_up")
"""Parameters with one row per node (indexed by node position in the topology)."""
RELAY = (0.0, 1.0)
"""A new layer's message mix: pass the lane's message on, add nothing of its own."""


def source_node(name: str, small: Topology) -> str | None:
    """The trained node a node of the larger topology is initialised from (itself if it exists)."""
    if name in small.names:
        return name
    hidden = [n for n in small.nodes if n.hidden]
    if not name.startswith("h") or not hidden:
        return None
    layer, position = (int(part) for part in name[1:].split("."))
    depth = layer if any(n.layer == layer for n in hidden) else max(n.layer for n in hidden)
    candidates = [n.name for n in hidden if n.layer == depth]
    return candidates[min(position, len(candidates) - 1)]


@torch.no_grad()
def grow(big: nn.Module, small: nn.Module, noise: float = 0.01, seed: int = 0) -> dict[str, list[str]]:
    """Copies ``small``'s trained parameters into ``big`` in place; returns which nodes were copied,
    cloned (new, from a trained node) or left fresh, and which new nodes start as relays."""
    big_net, small_net = _net(big), _net(small)
    if big_net.cfg.messages != small_net.cfg.messages:
        raise ValueError(
            f"cannot grow {small_net.cfg.messages} messages into {big_net.cfg.messages} messages"
        )
    small_state, big_state = small.state_dict(), big.state_dict()
    per_node = [k for k in big_state if k.endswith(NODE_PARAMS)]
    for key, value in small_state.items():
        if key in per_node or key not in big_state:
            continue
        if big_state[key].shape != value.shape:
            shapes = f"{tuple(value.shape)} vs {tuple(big_state[key].shape)}"
            raise ValueError(f"cannot grow: {key} has shape {shapes}")
        big_state[key].copy_(value)
    generator = torch.Generator().manual_seed(seed)
    report: dict[str, list[str]] = {"copied": [], "cloned": [], "fresh": [], "relays": []}
    small_index = {name: i for i, name in enumerate(small_net.topology.names)}
    for i, name in enumerate(big_net.topology.names):
        src = source_node(name, small_net.topology)
        if src is None:
            report["fresh"].append(name)
            continue
        for key in per_node:
            if key not in small_state:
                continue
            row = small_state[key][small_index[src]]
            if src != name and noise > 0:
                row = row + torch.randn(row.shape, generator=generator) * noise * float(
                    small_state[key].std()
                )
            big_state[key][i].copy_(row)
        report["copied" if src == name else "cloned"].append(name)
        deeper = big_net.topology.nodes[i].layer != small_net.topology.nodes[small_index[src]].layer
        if src != name and deeper and i in big_net.lanes:
            big_net.message_mix[i].copy_(torch.tensor(RELAY))
            report["relays"].append(name)
    return report


def _net(module: nn.Module) -> NeuromasNet:
    return module.net if hasattr(module, "net") else module


def load_module(path: str | Path) -> Any:
    """The team RLModule saved at ``path``: an ``orchestrl train`` (algorithm) checkpoint or a
    module directory written by ``module.save_to_path``."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    from orchestrl.algorithms.neuromas.team_env import TEAM

    root = Path(path).expanduser().resolve()  # RLlib reads checkpoints through pyarrow: absolute only
    for candidate in (root / "learner_group" / "learner" / "rl_module" / TEAM, root / TEAM, root):
        if (candidate / "class_and_ctor_args.pkl").is_file():
            return RLModule.from_checkpoint(str(candidate))
    raise FileNotFoundError(f"{root}: no NeuroMAS module checkpoint (looked for .../rl_module/{TEAM})")
