"""MAPPO's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from orchestrl.algorithms.behaviour_cloning import with_expert_warm_start
from orchestrl.algorithms.joint_columns import JointColumns, global_state_dim
from orchestrl.algorithms.modules import with_actor_critic_modules

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.algorithms.context import BuildContext


class MappoConfig(BaseModel):
    """``algorithm:`` keys for mappo."""

    model_config = ConfigDict(extra="forbid")
    share_policy: bool = True
    """Share actors (and the critic) between agents with identical spaces."""


def configure_mappo(ppo: PPOConfig, knobs: MappoConfig, context: BuildContext) -> PPOConfig:
    env = context.env
    ppo = with_actor_critic_modules(
        ppo, context, share_policy=knobs.share_policy, critic="central", state_dim=global_state_dim(env)
    )
    ppo = ppo.learners(
        learner_connector=JointColumns(agents=env.agents, horizon=env.horizon, with_state=True)
    )
    return with_expert_warm_start(ppo, context.warm_start, env)
