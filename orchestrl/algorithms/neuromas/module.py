"""The NeuroMAS RLModule: one torch graph for the whole team, on env runners and the learner alike.

RLlib sees a single agent, ``team`` (:mod:`.team_env`), whose observation holds every env agent's
observation and whose ``MultiDiscrete`` action is every agent's action (plus, with discrete
messages, the message tokens). Why this mechanism rather than a ``MultiRLModule`` that handles all
agents jointly: RLlib's multi-agent path batches each module's rows separately and samples each
agent's action on its own, so a joint forward across agents would have to re-assemble agents from
rows inside the module and could not make one agent's action depend on another's sampled message
in the same step. As one joint actor the graph runs once per env step with every agent in it,
PPO's ratio, GAE and the critic are over the joint action and the shared team reward (NeuroMAS'
"one network, one reward"), and the env runners and the learner run the very same class.

``model_config`` keys: see :func:`.algorithm.module_model_config`.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchMultiCategorical
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from orchestrl.algorithms.neuromas.network import MASKED_LOGIT, NetConfig, NetOut, NeuromasNet, TeamSpec
from orchestrl.algorithms.neuromas.team_env import TIME_KEY
from orchestrl.algorithms.neuromas.topology import Topology
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

AUX_PREDICTION = "neuromas_aux_reward"
"""Forward-train output column: the auxiliary head's predicted team reward."""


def team_spec(observation_space: gym.spaces.Dict, agents: list[str], nvecs: dict[str, list[int]]) -> TeamSpec:
    """The env side of the graph: observation and mask sizes from the spaces, components as given."""
    obs_dims, mask_dims = {}, {}
    for a in agents:
        space = observation_space[a]
        if isinstance(space, gym.spaces.Dict):
            obs_dims[a] = int(np.prod(space[OBS_KEY].shape))
            mask_dims[a] = int(np.prod(space[MASK_KEY].shape)) if MASK_KEY in space.spaces else 0
        else:
            obs_dims[a] = int(np.prod(space.shape))
            mask_dims[a] = 0
    return TeamSpec(tuple(agents), obs_dims, mask_dims, {a: tuple(int(n) for n in nvecs[a]) for a in agents})


def build_topology(model_config: dict[str, Any], agents: list[str]) -> Topology:
    if model_config.get("monolithic"):
        return Topology.monolithic(agents)
    inputs = list(model_config["input_agents"])
    outputs = [a for a in agents if a not in inputs]
    topology = Topology.layered(inputs, list(model_config.get("layers", [])), outputs)
    return topology.without_edges() if model_config.get("messages") == "none" else topology


class NeuromasModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """Message-passing team policy + global critic + optional auxiliary reward head."""

    def setup(self) -> None:
        cfg = self.model_config
        agents = list(cfg["agents"])
        spec = team_spec(self.observation_space, agents, cfg["nvecs"])
        self.topology = build_topology(cfg, agents)
        net_cfg = NetConfig(
            dim=int(cfg["embed_dim"]),
            heads=int(cfg["heads"]),
            hidden=tuple(cfg["hidden"]),
            activation=cfg["activation"],
            messages=cfg["messages"],
            message_vocab=int(cfg["message_vocab"]),
            message_len=int(cfg["message_len"]),
            adapter_rank=int(cfg["adapter_rank"]),
            encoder=cfg["encoder"],
            text_layers=int(cfg["text_layers"]),
            word_vectors=bool(cfg.get("word_vectors")),
            contextual=bool(cfg.get("contextual")),
            observe=cfg.get("observe", "all"),
            sequential=bool(cfg.get("sequential")),
            repeats=int(cfg.get("repeats", 1)),
        )
        self.net = NeuromasNet(spec, self.topology, net_cfg)
        self.env_lens = [n for a in agents for n in spec.nvecs[a]]
        self.agent_lens = [list(spec.nvecs[a]) for a in agents]
        self.discrete = net_cfg.messages == "discrete"
        self.sequential = net_cfg.sequential
        n_tokens = len(self.net.senders) * net_cfg.message_len if self.discrete else 0
        self.token_lens = [net_cfg.message_vocab] * n_tokens
        expected = len(self.env_lens) + n_tokens
        got = int(np.asarray(self.action_space.nvec).size)
        if got != expected:
            raise ValueError(
                f"the team action has {got} components, the topology needs {expected} "
                f"({len(self.env_lens)} env + {n_tokens} message tokens)"
            )
        if not self.inference_only:
            d = net_cfg.dim
            critic_hidden = list(cfg.get("critic_hidden") or [d])
            self.critic = _mlp([d + 1, *critic_hidden, 1])
            self.aux_head = _mlp([d + 1, d, 1]) if cfg.get("aux_head") else None

    # -- forward passes ----------------------------------------------------------------------------
    def run_graph(self, batch: dict[str, Any], mode: str, **kwargs: Any) -> NetOut:
        """The team graph on a batch holding ``obs``; ``mode`` is the message mode (see network.py)."""
        obs, masks = _split_team_obs(batch[Columns.OBS], self.net.spec.agents)
        return self.net(obs, masks, message_mode=mode, **kwargs)

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._act(batch, explore=False)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        with torch.no_grad():
            return self._act(batch, explore=True)

    def _act(self, batch: dict[str, Any], explore: bool) -> dict[str, Any]:
        if not (self.discrete or self.sequential):  # RLlib's GetActions samples (or takes the
            return {Columns.ACTION_DIST_INPUTS: self.run_graph(batch, "greedy").env_logits}  # argmax)
        # Discrete messages are sampled inside the graph, layer by layer, and a sequential team's
        # later agents need the earlier agents' actions: the module returns the whole joint action
        # and its log-probability itself.
        mode = "sample" if explore else "greedy"
        out = self.run_graph(batch, mode, action_mode=mode)
        if out.actions is not None:
            env_actions = out.actions
        else:
            env_dist = self._dist(self.env_lens).from_logits(out.env_logits)
            env_actions = (env_dist if explore else env_dist.to_deterministic()).sample()
        if not self.discrete:
            return {
                Columns.ACTIONS: env_actions.long(),
                Columns.ACTION_LOGP: self.get_train_action_dist_cls()
                .from_logits(out.env_logits)
                .logp(env_actions),
                Columns.ACTION_DIST_INPUTS: out.env_logits,
            }
        logits = torch.cat([out.env_logits, out.token_logits], -1)
        actions = torch.cat([env_actions.long(), out.tokens.long()], -1)
        return {
            Columns.ACTIONS: actions,
            Columns.ACTION_LOGP: self.get_train_action_dist_cls().from_logits(logits).logp(actions),
            Columns.ACTION_DIST_INPUTS: logits,
        }

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        given = batch[Columns.ACTIONS][:, : len(self.env_lens)] if self.sequential else None
        if self.discrete:
            tokens = batch[Columns.ACTIONS][:, len(self.env_lens) :]
            out = self.run_graph(batch, "given", tokens=tokens, actions=given)
            logits = torch.cat([out.env_logits, out.token_logits], -1)
        else:
            out = self.run_graph(batch, "greedy", actions=given)
            logits = out.env_logits
        result = {Columns.ACTION_DIST_INPUTS: logits}
        if not self.discrete:  # the critic may reuse these states (see compute_values)
            result[Columns.EMBEDDINGS] = out.states
        if self.aux_head is not None:
            result[AUX_PREDICTION] = self.reward_prediction(batch, out.states)
        return result

    def live_parameters(self, batch: dict[str, Any]) -> int:
        """Parameters of the team graph on some path to its actions, at the observations
        ``batch[OBS]``: those that get a non-zero gradient from a fixed random projection of every
        agent's unmasked logits (greedy play), on a copy of the graph with every weight moved off
        its initialisation (a weight that starts at zero, as a new report or choice embedding does,
        would otherwise hide every path through it). Weights that are built but never reached
        (messages nobody reads, look-ups of a node that does not read) do not count: the honest
        size to match a single agent to."""
        generator = torch.Generator().manual_seed(0)
        net = copy.deepcopy(self.net).train(False)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.01 * torch.randn(p.shape, generator=generator))
        with torch.enable_grad():
            obs, masks = _split_team_obs(batch[Columns.OBS], net.spec.agents)
            logits = net(obs, masks, message_mode="soft" if self.discrete else "greedy").env_logits
            live = logits > MASKED_LOGIT / 2
            projection = torch.randn(logits.shape, generator=generator)
            (logits.masked_fill(~live, 0.0) * projection).sum().backward()
        return sum(p.numel() for p in net.parameters() if p.grad is not None and bool(p.grad.any()))

    def reward_prediction(self, batch: dict[str, Any], states: torch.Tensor) -> torch.Tensor:
        """The auxiliary head's team reward from all nodes' states (with their gradient, unlike the
        critic: shaping the agents' representations is its purpose)."""
        return self.aux_head(self._critic_input(batch, states)).squeeze(-1)

    # -- critic ------------------------------------------------------------------------------------
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        """V(s) from all nodes' states. With discrete messages the states are recomputed with the
        expected message embeddings, so the baseline is a function of the observation alone.

        The critic reads the states detached: its loss trains the critic, never the agents'
        representations. Sharing them cost the cloned policy its generalisation: with the value
        gradient flowing into the graph, a few PPO iterations after behaviour cloning lost much of
        NeuroMAS-7's test accuracy; without it, little."""
        states = embeddings
        if states is None:
            states = self.run_graph(batch, "soft" if self.discrete else "greedy").states
        return self.critic(self._critic_input(batch, states.detach())).squeeze(-1)

    def _critic_input(self, batch: dict[str, Any], states: torch.Tensor) -> torch.Tensor:
        time = batch[Columns.OBS][TIME_KEY].float().reshape(states.shape[0], 1)
        return torch.cat([self.net.pooled(states), time], -1)

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic", "aux_head"]

    # -- distributions -----------------------------------------------------------------------------
    def _dist(self, lens: list[int]):
        return TorchMultiCategorical.get_partial_dist_cls(input_lens=list(lens))

    def get_train_action_dist_cls(self):
        return self._dist(self.env_lens + self.token_lens)

    def get_exploration_action_dist_cls(self):
        return self.get_train_action_dist_cls()

    def get_inference_action_dist_cls(self):
        return self.get_train_action_dist_cls()

    def agent_logp(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """(B, env agents): each env agent's log-probability of its components of ``actions``
        under ``logits`` (the team's distribution inputs, env components first)."""
        out, logit_at, action_at = [], 0, 0
        for lens in self.agent_lens:
            part = self._dist(lens).from_logits(logits[:, logit_at : logit_at + sum(lens)])
            out.append(part.logp(actions[:, action_at : action_at + len(lens)]))
            logit_at, action_at = logit_at + sum(lens), action_at + len(lens)
        return torch.stack(out, -1)

    def env_action_dist_cls(self):
        """The distribution over the env agents' components only (behaviour cloning's target)."""
        return self._dist(self.env_lens)


def _split_team_obs(
    obs: dict[str, Any], agents: tuple[str, ...]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    flat, masks = {}, {}
    for a in agents:
        part = obs[a]
        if isinstance(part, dict):
            flat[a] = part[OBS_KEY].float()
            if MASK_KEY in part:
                masks[a] = part[MASK_KEY]
        else:
            flat[a] = part.float()
    return flat, masks


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)
