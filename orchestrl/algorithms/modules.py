"""Which agents share which module: one spec builder for every actor-critic algorithm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.policy import PolicySpec

from orchestrl.algorithms.actor_critic import ActorCriticModule

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.algorithms.context import BuildContext
    from orchestrl.envs.info import EnvInfo

SHARED = "shared"


class AgentToModule:
    """A picklable ``policy_mapping_fn``: a fixed agent -> module table."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = dict(table)

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        return self.table[agent_id]


def group_agents(env: EnvInfo, share_policy: bool) -> dict[str, list[str]]:
    """Module id -> agents. Shared modules group agents whose spaces are identical."""
    if not share_policy:
        return {a: [a] for a in env.agents}
    groups: dict[tuple[str, str], list[str]] = {}
    for a in env.agents:
        key = (repr(env.observation_spaces[a]), repr(env.action_spaces[a]))
        groups.setdefault(key, []).append(a)
    if len(groups) == 1:
        return {SHARED: list(env.agents)}
    return {members[0]: members for members in groups.values()}


def observation_batch(*observations: Any) -> dict[str, Any]:
    """Agents' observations (nested numpy or lists, each of one structure) as a module's input
    batch, one row per observation in the order given."""
    import numpy as np
    import torch
    import tree
    from ray.rllib.core.columns import Columns

    return {Columns.OBS: tree.map_structure(lambda *xs: torch.as_tensor(np.stack(xs)), *observations)}


def chosen_actions(module: Any, out: dict[str, Any], explore: bool) -> Any:
    """The actions of a module's forward pass ``out``: the ones it chose itself (an actor that
    samples autoregressively returns them), else a sample of its action distribution, the
    deterministic one without exploration (what RLlib's ``GetActions`` connector does)."""
    from ray.rllib.core.columns import Columns

    actions = out.get(Columns.ACTIONS)
    if actions is not None:
        return actions
    if explore:
        return module.get_exploration_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS]).sample()
    dist = module.get_inference_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    return dist.to_deterministic().sample()


def with_actor_critic_modules(
    ppo: PPOConfig,
    context: BuildContext,
    *,
    share_policy: bool,
    critic: str,
    state_dim: int | None = None,
    module_class: type = ActorCriticModule,
    extra_model_config: dict[str, Any] | None = None,
) -> PPOConfig:
    """Adds the modules, their spaces and the agent -> module mapping to ``ppo``.

    One ``RLModuleSpec`` without spaces plus a ``PolicySpec`` per module (rather than a
    ``MultiRLModuleSpec`` of full specs): only on this path does RLlib 2.60 build env-runner modules
    with ``inference_only=True``, so the learner-only critic stays off the env runners.
    """
    env, model = context.env, context.model
    if model.option_rows and env.option_rows is None:
        from orchestrl.errors import ConfigError

        raise ConfigError(f"model.option_rows: env '{env.name}' lays out no option rows in its observation")
    groups = group_agents(env, share_policy)
    model_config = {
        "hidden": list(model.hidden),
        "critic_hidden": list(model.critic_hidden) if model.critic_hidden else None,
        "activation": model.activation,
        "critic": critic,
        "state_dim": state_dim,
        "candidate_features": model.candidate_features,
        "option_rows": dict(env.option_rows) if model.option_rows else None,
        **(extra_model_config or {}),
    }
    policies = {
        mid: PolicySpec(
            observation_space=env.observation_spaces[agents[0]], action_space=env.action_spaces[agents[0]]
        )
        for mid, agents in groups.items()
    }
    table = {a: mid for mid, agents in groups.items() for a in agents}
    return ppo.multi_agent(policies=policies, policy_mapping_fn=AgentToModule(table)).rl_module(
        rl_module_spec=RLModuleSpec(module_class=module_class, model_config=model_config)
    )
