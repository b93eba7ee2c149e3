"""IPPO's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from orchestrl.algorithms.modules import with_actor_critic_modules

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.experiment.builder import EnvInfo
    from orchestrl.experiment.config import ExperimentConfig


class IppoConfig(BaseModel):
    """``algorithm:`` keys for ippo."""

    model_config = ConfigDict(extra="forbid")
    share_policy: bool = True
    """One module per group of agents with identical spaces (True) or one per agent (False)."""


def configure_ippo(ppo: PPOConfig, cfg: ExperimentConfig, knobs: IppoConfig, env: EnvInfo) -> PPOConfig:
    return with_actor_critic_modules(ppo, cfg, env, share_policy=knobs.share_policy, critic="local")
