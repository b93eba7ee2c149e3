"""IPPO's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from orchestrl.algorithms.behaviour_cloning import with_expert_warm_start
from orchestrl.algorithms.modules import with_actor_critic_modules

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.algorithms.context import BuildContext


class IppoConfig(BaseModel):
    """``algorithm:`` keys for ippo."""

    model_config = ConfigDict(extra="forbid")
    share_policy: bool = True
    """One module per group of agents with identical spaces (True) or one per agent (False)."""


def configure_ippo(ppo: PPOConfig, knobs: IppoConfig, context: BuildContext) -> PPOConfig:
    ppo = with_actor_critic_modules(ppo, context, share_policy=knobs.share_policy, critic="local")
    return with_expert_warm_start(ppo, context.warm_start, context.env)
