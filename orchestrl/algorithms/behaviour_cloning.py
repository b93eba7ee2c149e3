"""Behaviour cloning of the env's expert before RL: one config surface, one collector, one hook.

LEMON trains its orchestrator supervised on valid specs before counterfactual RL: without that
warm start, early rollouts are mostly invalid and no edit changes anything (arXiv 2605.14483,
ablations). NeuroMAS' seed write-up clones an expert for the same reason: random play almost never
answers a Text2SQL question. Here the expert is the env's own (``env.expert_actions()``), and

    L_BC = -E_(o, a*) ~ D [ sum_c log pi_c(a*_c | o) ]          (masked logits, every component c)

is minimised for a few epochs: enough to write mostly valid specs, not enough to solve held-out
tasks, so RL (and its credit assignment) still decides the outcome.

The pieces, used by every algorithm:

- :class:`~orchestrl.algorithms.context.WarmStartSection`: the experiment's ``warm_start:``
  section, the only knobs (kept with the other sections, free of torch and RLlib);
- :func:`collect_demonstrations`: plays the expert (optionally with DART's noise, or the actors'
  own actions for DAgger) and keeps every agent's observations, the expert's actions, rewards and
  discounted returns;
- :func:`clone_actors`: the loss above for actor-critic modules (ippo, mappo, coma, lemon), which
  fits actors only (critics learn from the first rollouts, like the rest of PPO). NeuroMAS' team
  graph has its own loss on the same demonstrations (``orchestrl.algorithms.neuromas.cloning``);
- :class:`WarmStartCallbacks` and :func:`configured_warm_start`: an algorithm puts a picklable
  ``hook(learner) -> report`` in ``learner_config_dict``; once the algorithm is built the callback
  runs it on every learner and pushes the cloned weights to every env runner, checked
  (:func:`orchestrl.algorithms.weight_sync.sync_learner_weights`). The in-process trainer runs the
  same hook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
import tree
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import discount_cumsum
from ray.rllib.utils.spaces import space_utils

from orchestrl.algorithms.context import WarmStartSection
from orchestrl.algorithms.modules import chosen_actions, observation_batch
from orchestrl.algorithms.warm_start_store import WarmStartStore
from orchestrl.algorithms.weight_sync import sync_learner_weights
from orchestrl.envs.spaces import MASK_KEY

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.env.multi_agent_env import MultiAgentEnv

    from orchestrl.algorithms.actor_critic import ActorCriticModule
    from orchestrl.envs.info import EnvInfo

log = logging.getLogger(__name__)

WARM_START_KEY = "warm_start"
"""``learner_config_dict`` key holding an algorithm's warm-start hook."""


WarmStartHook = Callable[..., Mapping[str, Any]]
"""``hook(learner) -> {loss name or module id: [value per epoch], ...}``, run on every learner."""


@dataclass
class Demonstrations:
    """One agent's expert steps, stacked: what it saw, what the expert did, and what followed."""

    obs: Any
    """The observations: an array, or a tree of arrays (``observations`` + ``action_mask``...)."""
    actions: np.ndarray
    rewards: np.ndarray
    """The agent's reward at each step."""
    returns: np.ndarray
    """The agent's discounted return from each step to its episode's end."""

    def __len__(self) -> int:
        return len(self.actions)

    def extended(self, other: Demonstrations) -> Demonstrations:
        """These steps followed by ``other``'s."""
        return Demonstrations(
            obs=tree.map_structure(lambda a, b: np.concatenate([a, b]), self.obs, other.obs),
            actions=np.concatenate([self.actions, other.actions]),
            rewards=np.concatenate([self.rewards, other.rewards]),
            returns=np.concatenate([self.returns, other.returns]),
        )

    def batch(self, index: np.ndarray | slice) -> tuple[Any, torch.Tensor]:
        """The observations (as tensors) and actions of the rows ``index``."""
        obs = tree.map_structure(lambda x: torch.as_tensor(x[index]), self.obs)
        return obs, torch.as_tensor(self.actions[index])


def collect_demonstrations(
    env: MultiAgentEnv,
    expert: Callable[[], Mapping[str, Any]],
    episodes: int,
    *,
    seed: int = 0,
    gamma: float = 0.99,
    noise: float = 0.0,
    player: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> dict[str, Demonstrations]:
    """Plays ``episodes`` whole episodes of ``env`` (the ``i``-th reset with ``seed + i``) with the
    joint actions ``expert()`` gives, and keeps each agent's steps. ``env`` is an RLlib
    ``MultiAgentEnv``, so the observations are exactly what the agents' modules see.

    With ``noise`` each agent's action is played, with that probability, as a random valid one while
    the expert's stays its label (DART: Laskey et al. 2017, "Noise Injection for Robust Imitation
    Learning", Sec. 4): the demonstrations then also show the states that follow a mistake, and
    what the expert does there. With ``player`` (``player(obs) -> joint action``) the actions
    played are its own, the expert's still the labels (DAgger's relabelled rollouts). Rewards and
    returns are those of the actions played."""
    generator = np.random.default_rng(seed)
    steps: dict[str, dict[str, list[Any]]] = {}
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        rewards: dict[str, list[float]] = {}
        done = False
        while not done:
            joint = expert()
            played = dict(player(obs)) if player is not None else dict(joint)
            for agent, o in obs.items():
                record = steps.setdefault(agent, {"obs": [], "actions": [], "rewards": [], "returns": []})
                record["obs"].append(o)
                record["actions"].append(np.asarray(joint[agent]))
                if noise and generator.random() < noise:
                    played[agent] = random_valid_action(env.get_action_space(agent), o, generator)
            obs, reward, terminated, truncated, _ = env.step(played)
            for agent in joint:
                rewards.setdefault(agent, []).append(float(reward.get(agent, 0.0)))
            done = terminated.get("__all__", False) or truncated.get("__all__", False)
        for agent, values in rewards.items():
            steps[agent]["rewards"] += values
            steps[agent]["returns"] += discount_cumsum(np.asarray(values), gamma).tolist()
    return {
        agent: Demonstrations(
            obs=space_utils.batch(record["obs"]),
            actions=np.stack(record["actions"]).astype(np.int64),
            rewards=np.asarray(record["rewards"], dtype=np.float32),
            returns=np.asarray(record["returns"], dtype=np.float32),
        )
        for agent, record in steps.items()
    }


def random_valid_action(space: gym.Space, obs: Any, generator: np.random.Generator) -> Any:
    """A uniformly random action of ``space`` among those the observation's ``action_mask`` allows
    (any action when it has none, or one of another shape)."""
    space.seed(int(generator.integers(2**31)))
    mask = obs.get(MASK_KEY) if isinstance(obs, Mapping) else None
    flat = None if mask is None else np.asarray(mask).reshape(-1).astype(np.int8)
    if isinstance(space, gym.spaces.Discrete) and flat is not None and flat.size == space.n:
        return space.sample(mask=flat)
    if isinstance(space, gym.spaces.MultiDiscrete) and flat is not None and flat.size == space.nvec.sum():
        return space.sample(mask=tuple(np.split(flat, np.cumsum(space.nvec)[:-1])))
    return space.sample()


def expert_demonstrations(
    env_config: Mapping[str, Any],
    episodes: int,
    *,
    seed: int = 0,
    noise: float = 0.0,
    player: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> dict[str, Demonstrations]:
    """:func:`collect_demonstrations` of the env's own expert on the registered env ``env_config``
    names (the observations the actors see, agent ids included)."""
    from orchestrl.envs.rllib_env import RegisteredEnv

    env = RegisteredEnv(dict(env_config))
    try:
        return collect_demonstrations(env, expert_of(env), episodes, seed=seed, noise=noise, player=player)
    finally:
        env.close()


class SampledActions:
    """``player(obs) -> joint action``: each agent's action sampled from its module's distribution
    (what DAgger's rollouts play: the actors' own mistakes, as likely as the actors make them)."""

    def __init__(
        self, modules: Mapping[str, ActorCriticModule], agent_to_module: Callable[[str], str]
    ) -> None:
        self.modules, self.agent_to_module = modules, agent_to_module

    def __call__(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        joint = {}
        for agent, o in obs.items():
            module = self.modules[self.agent_to_module(agent)]
            with torch.no_grad():
                out = module.forward_exploration(observation_batch(o))
            joint[agent] = chosen_actions(module, out, explore=True)[0].numpy()
        return joint


def expert_of(env: Any) -> Callable[[], Mapping[str, Any]]:
    """The env's ``expert_actions`` (on a registered env's raw PettingZoo env, or on the env itself);
    raises ``ValueError`` naming the env when it has none."""
    for candidate in (getattr(env, "raw_env", None), env):
        expert = getattr(candidate, "expert_actions", None)
        if callable(expert):
            return expert
    raise ValueError(
        f"env '{getattr(env, 'name', type(env).__name__)}' has no expert_actions(): a warm start needs one"
    )


def clone_actors(
    modules: Mapping[str, ActorCriticModule],
    demos: Mapping[str, Demonstrations],
    agent_to_module: Callable[[str], str],
    settings: WarmStartSection,
    seed: int,
) -> dict[str, list[float]]:
    """Fits each module's actor to the demonstrations of the agents it serves, in place (L_BC above).
    Returns each module's BC loss, the mean per epoch."""
    generator = np.random.default_rng(seed)
    torch.manual_seed(seed)
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
                batch = {
                    Columns.OBS: tree.map_structure(lambda x, i=index: torch.as_tensor(x[i]), obs),
                    Columns.ACTIONS: actions[index],  # the labels: what an autoregressive actor conditions on
                }
                logits = module.forward_train(batch)[Columns.ACTION_DIST_INPUTS]
                loss = -dist_cls.from_logits(logits).logp(actions[index]).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                total += loss.item() * len(index)
            losses.append(total / len(actions))
    return history


class ActorWarmStart:
    """The warm-start hook of actor-critic teams: collects the expert's demonstrations on the
    experiment's env and clones them into one learner's actors (picklable, so it also runs on
    remote learners). With a ``store`` (``warm_start.reuse``) a clone another run of the same warm
    start made is loaded instead, and one made here is stored (:mod:`.warm_start_store`)."""

    def __init__(
        self,
        settings: WarmStartSection,
        env_config: Mapping[str, Any],
        agent_to_module: Any,
        seed: int,
        store: WarmStartStore | None = None,
    ) -> None:
        self.settings = settings
        self.env_config = dict(env_config)
        self.agent_to_module = agent_to_module
        self.seed = seed
        self.store = store

    def __call__(self, learner: Learner, **kwargs: Any) -> dict[str, list[float]]:
        modules = {mid: m.unwrapped() for mid, m in learner.module.items()}
        if self.store is None:
            return self.clone(modules)
        served = getattr(self.agent_to_module, "table", None) or {"mapping": repr(self.agent_to_module)}
        key = self.store.key(
            self.settings.model_dump(mode="json"), self.env_config, self.seed, served, modules
        )
        with self.store.claimed(key) as path:
            history = self.store.load(path, modules)
            if history is not None:
                log.info("warm start: the actors cloned by an earlier run, %s", path)
                return history
            history = self.clone(modules)
            self.store.save(path, modules, history)
            return history

    def clone(self, modules: Mapping[str, ActorCriticModule]) -> dict[str, list[float]]:
        """Clones the expert into ``modules``' actors, DAgger rounds included; the losses per epoch."""
        settings, config = self.settings, self.env_config
        demos = expert_demonstrations(config, settings.episodes, seed=self.seed, noise=settings.noise)
        history = clone_actors(modules, demos, self.agent_to_module, settings, self.seed)
        player = SampledActions(modules, self.agent_to_module)  # the modules as each round leaves them
        for k in range(1, settings.dagger_rounds + 1):  # DAgger: Ross et al. 2011, Algorithm 3.1
            more = expert_demonstrations(config, settings.episodes, seed=self.seed, player=player)
            demos = {agent: demos[agent].extended(more[agent]) for agent in demos}
            for name, values in clone_actors(
                modules, demos, self.agent_to_module, settings, self.seed + k
            ).items():
                history[f"{name} (DAgger round {k})"] = values
        return history


class WarmStartCallbacks(RLlibCallback):
    """Runs the algorithm's warm-start hook on every learner once the algorithm is built, then
    pushes the weights to every env runner and checks that they arrived."""

    def on_algorithm_init(self, *, algorithm: Algorithm, metrics_logger: Any = None, **kwargs: Any) -> None:
        hook = configured_warm_start(algorithm.config)
        if hook is None:
            return
        for result in algorithm.learner_group.foreach_learner(hook):
            for name, values in result.get().items():
                if isinstance(values, list) and values:
                    log.info("warm start: %s %.3f -> %.3f", name, values[0], values[-1])
        sync_learner_weights(algorithm)


def configured_warm_start(config: Any) -> WarmStartHook | None:
    """The warm-start hook an RLlib config holds (``learner_config_dict``), or None."""
    return (config.learner_config_dict or {}).get(WARM_START_KEY)


def with_warm_start(ppo: PPOConfig, hook: WarmStartHook) -> PPOConfig:
    """``ppo`` with ``hook`` run on every learner before the first iteration (adds
    :class:`WarmStartCallbacks` to the config's callbacks)."""
    from orchestrl.algorithms.callbacks import with_callbacks

    return with_callbacks(ppo.learners(learner_config_dict={WARM_START_KEY: hook}), WarmStartCallbacks)


def with_expert_warm_start(ppo: PPOConfig, settings: WarmStartSection, env: EnvInfo) -> PPOConfig:
    """The actor-critic warm start (:class:`ActorWarmStart`) when ``settings`` ask for one, kept in
    the run dir's cache of ``env`` with ``settings.reuse``; refuses, with the key in the message, an
    env without an expert."""
    if not settings.episodes:
        return ppo
    require_expert(env.name)
    store = None
    if settings.reuse:
        if env.cache_dir is None:
            from orchestrl.errors import ConfigError

            raise ConfigError(f"warm_start.reuse: env '{env.name}' was built without a run dir cache")
        store = WarmStartStore(Path(env.cache_dir) / "warm_starts")
    hook = ActorWarmStart(settings, ppo.env_config, ppo.policy_mapping_fn, seed=ppo.seed or 0, store=store)
    return with_warm_start(ppo, hook)


def require_expert(env_name: str, key: str = "warm_start") -> None:
    """Raises ``ConfigError`` when the registered env ``env_name`` has no ``expert_actions()``."""
    from orchestrl.envs.registry import get_env
    from orchestrl.errors import ConfigError

    if not callable(getattr(get_env(env_name).load(), "expert_actions", None)):
        raise ConfigError(f"{key}: env '{env_name}' has no expert_actions() to clone")
