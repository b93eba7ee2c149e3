"""Behaviour-cloning warm start of actor-critic teams (ippo, mappo, coma, lemon) from the env's expert.

LEMON trains its orchestrator supervised on valid specs before counterfactual RL: without that
warm start, early rollouts are mostly invalid and no edit changes anything (arXiv 2605.14483,
ablations). Here the valid specs are written by the env's expert (``env.expert_actions()``) on
``episodes`` training tasks, and every agent's actor maximises their likelihood,

    L_BC = -E_(o_i, a*_i) ~ D [ sum_c log pi_c(a*_ic | o_i) ]        (masked logits, every agent)

for a few epochs: enough to write mostly valid specs, not enough to solve held-out tasks, so RL
(and its credit assignment) still decides the outcome. Critics are not fitted: they learn from the
first rollouts, like the rest of PPO. Configured by the experiment's ``warm_start:`` section; the
platform runs it once the algorithm is built and pushes the cloned weights to every env runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.utils.spaces import space_utils

from orchestrl.algorithms.actor_critic import ActorCriticModule

WARM_START_KEY = "expert_warm_start"
"""``learner_config_dict`` key holding the experiment's :class:`WarmStartSettings`."""


@dataclass(frozen=True)
class WarmStartSettings:
    """The ``warm_start:`` section as the learners get it (plus the experiment's seed)."""

    episodes: int
    epochs: int
    batch_size: int
    lr: float
    seed: int


@dataclass
class AgentDemonstrations:
    """One agent's (observation, expert action) pairs, stacked."""

    obs: Any
    """The observations: an array, or a dict of arrays (``observations`` + ``action_mask``)."""
    actions: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)


def collect_agent_demonstrations(
    env_config: Mapping[str, Any], episodes: int, seed: int = 0
) -> dict[str, AgentDemonstrations]:
    """Plays ``episodes`` episodes of the experiment's env with its expert's joint actions and keeps
    every agent's observations and actions (the observations the actors see, agent ids included)."""
    from orchestrl.envs.rllib_env import RegisteredEnv

    env = RegisteredEnv(dict(env_config))
    expert = getattr(env.raw_env, "expert_actions", None)
    if not callable(expert):
        env.close()
        raise ValueError(f"env '{env_config.get('name')}' has no expert_actions(): warm_start needs one")
    observations: dict[str, list[Any]] = {}
    actions: dict[str, list[np.ndarray]] = {}
    try:
        for episode in range(episodes):
            obs, _ = env.reset(seed=seed + episode)
            done = False
            while not done:
                joint = expert()
                for agent, o in obs.items():
                    observations.setdefault(agent, []).append(o)
                    actions.setdefault(agent, []).append(np.asarray(joint[agent]))
                obs, _, terminated, truncated, _ = env.step(joint)
                done = terminated.get("__all__", False) or truncated.get("__all__", False)
    finally:
        env.close()
    return {
        agent: AgentDemonstrations(space_utils.batch(observations[agent]), np.stack(actions[agent]))
        for agent in observations
    }


def clone_actors(
    modules: Mapping[str, ActorCriticModule],
    demos: Mapping[str, AgentDemonstrations],
    agent_to_module: Callable[[str], str],
    settings: WarmStartSettings,
) -> dict[str, list[float]]:
    """Fits each module's actor to the demonstrations of the agents it serves, in place. Returns
    each module's BC loss (mean per epoch)."""
    generator = np.random.default_rng(settings.seed)
    torch.manual_seed(settings.seed)
    history: dict[str, list[float]] = {}
    for module_id, module in modules.items():
        served = [demos[a] for a in sorted(demos) if agent_to_module(a) == module_id]
        if not served:
            continue
        obs = space_utils.batch([d.obs for d in served], individual_items_already_have_batch_dim=True)
        actions = torch.as_tensor(np.concatenate([d.actions for d in served]))
        optimiser = torch.optim.Adam(module.actor.parameters(), lr=settings.lr)
        dist_cls = module.get_train_action_dist_cls()
        losses = history[module_id] = []
        for _ in range(settings.epochs):
            total = 0.0
            order = generator.permutation(len(actions))
            for start in range(0, len(order), settings.batch_size):
                index = order[start : start + settings.batch_size]
                batch = {Columns.OBS: tree.map_structure(lambda x, i=index: torch.as_tensor(x[i]), obs)}
                logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
                loss = -dist_cls.from_logits(logits).logp(actions[index]).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += loss.item() * len(index)
            losses.append(total / len(actions))
    return history


class ActorWarmStart:
    """Collects the expert's demonstrations and clones them into one learner's actors (picklable,
    so it also runs on remote learners)."""

    def __init__(self, settings: WarmStartSettings, env_config: Mapping[str, Any], agent_to_module: Any):
        self.settings = settings
        self.env_config = dict(env_config)
        self.agent_to_module = agent_to_module

    def __call__(self, learner: Any, **kwargs: Any) -> dict[str, list[float]]:
        demos = collect_agent_demonstrations(self.env_config, self.settings.episodes, self.settings.seed)
        modules = {mid: m.unwrapped() for mid, m in learner.module.items()}
        return clone_actors(modules, demos, self.agent_to_module, self.settings)


def configured_warm_start(config: Any) -> ActorWarmStart | None:
    """The warm start an RLlib config asks for (``learner_config_dict``), or None."""
    settings = (config.learner_config_dict or {}).get(WARM_START_KEY)
    if settings is None:
        return None
    return ActorWarmStart(settings, dict(config.env_config), config.policy_mapping_fn)
