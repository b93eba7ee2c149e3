"""Behaviour-cloning warm start from the env's expert, before any RL.

Random play succeeds on ~0.1% of Text2SQL questions, so RL from scratch sees almost no reward. The
seed write-up's remedy: clone an expert first. ``collect_demonstrations`` steps the team env with
``env.expert_actions()``; ``behaviour_cloning`` then maximises the log-likelihood of the expert's
joint action under the team graph:

    L_BC = -E_(s, a*) ~ D [ sum_c log pi_c(a*_c | s) ]         (env components c only)

Discrete message tokens are latent here (the expert says nothing about them): the graph runs with
straight-through Gumbel-softmax messages (Jang et al. 2017), so the message heads are trained by
backpropagation through the same loss. Known words are dropped to the "unknown" embedding at random
(``token_dropout``) so the policy learns to read around words it has never seen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from ray.rllib.core.columns import Columns

from orchestrl.policies.neuromas.team_env import TEAM, NeuromasTeamEnv


@dataclass
class Demonstrations:
    obs: dict[str, Any]
    """The team observations, stacked: a tree of arrays with a leading batch axis."""
    actions: np.ndarray
    """(N, env components) the expert's joint actions."""

    def __len__(self) -> int:
        return len(self.actions)

    def batch(self, index: np.ndarray | slice) -> tuple[dict[str, Any], torch.Tensor]:
        return map_tree(self.obs, lambda x: torch.as_tensor(x[index])), torch.as_tensor(self.actions[index])


def collect_demonstrations(env_config: dict[str, Any], n: int, seed: int = 0) -> Demonstrations:
    """``n`` (team observation, expert joint action) pairs from the env's own expert."""
    env = NeuromasTeamEnv(env_config)
    try:
        if not hasattr(env.inner.raw_env, "expert_actions"):
            raise AttributeError(
                f"env '{env_config.get('name')}' has no expert_actions(): behaviour cloning needs one"
            )
        slots = int(np.asarray(env.action_space[TEAM].nvec).size) - sum(len(v) for v in env.nvecs.values())
        observations, actions = [], []
        obs, _ = env.reset(seed=seed)
        while len(actions) < n:
            expert = env.expert_actions()
            observations.append(obs[TEAM])
            actions.append(expert)
            obs, _, terminated, truncated, _ = env.step(
                {TEAM: np.concatenate([expert, np.zeros(slots, int)])}
            )
            if terminated["__all__"] or truncated["__all__"]:
                obs, _ = env.reset()
    finally:
        env.inner.close()
    return Demonstrations(stack_tree(observations), np.asarray(actions, dtype=np.int64))


def behaviour_cloning(
    module: Any,
    demos: Demonstrations,
    *,
    epochs: int,
    batch_size: int = 256,
    lr: float = 1e-3,
    token_dropout: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Fits ``module`` (a :class:`.module.NeuromasModule`) to ``demos`` in place; returns the mean
    loss of each epoch."""
    generator = np.random.default_rng(seed)
    torch.manual_seed(seed)
    params = [p for p in module.net.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(params, lr=lr)
    mode = "gumbel" if module.discrete else "greedy"
    dist_cls = module.env_action_dist_cls()
    losses = []
    module.train()
    for _ in range(epochs):
        order = generator.permutation(len(demos))
        total = 0.0
        for start in range(0, len(order), batch_size):
            obs, actions = demos.batch(order[start : start + batch_size])
            out = module.run_graph({Columns.OBS: obs}, mode, token_dropout=token_dropout)
            loss = -dist_cls.from_logits(out.env_logits).logp(actions).mean()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimiser.step()
            total += loss.item() * len(actions)
        losses.append(total / len(demos))
    module.eval()
    return losses


def stack_tree(items: list[Any]) -> Any:
    """A list of (nested dict) observations -> one tree of arrays with a leading batch axis."""
    first = items[0]
    if isinstance(first, dict):
        return {k: stack_tree([item[k] for item in items]) for k in first}
    return np.stack([np.asarray(item) for item in items])


def map_tree(tree: Any, fn: Any) -> Any:
    """``fn`` applied to every leaf of a nested dict."""
    if isinstance(tree, dict):
        return {k: map_tree(v, fn) for k, v in tree.items()}
    return fn(tree)
