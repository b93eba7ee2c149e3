"""MAPPO's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from orchestrl.algorithms.actor_critic import flat_obs_dim
from orchestrl.algorithms.mappo.connector import AddGlobalState, global_state_dim
from orchestrl.algorithms.modules import with_actor_critic_modules

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.experiment.builder import EnvInfo
    from orchestrl.experiment.config import ExperimentConfig


class MappoConfig(BaseModel):
    """``algorithm:`` keys for mappo."""

    model_config = ConfigDict(extra="forbid")
    share_policy: bool = True
    """Share actors (and the critic) between agents with identical spaces."""


class GlobalStateConnector:
    """A picklable factory for the learner pipeline (RLlib calls it with the spaces)."""

    def __init__(self, agent_order: list[str], horizon: int) -> None:
        self.agent_order = agent_order
        self.horizon = horizon

    def __call__(self, input_observation_space=None, input_action_space=None, **kwargs) -> list:
        return [
            AddGlobalState(
                input_observation_space,
                input_action_space,
                agent_order=self.agent_order,
                horizon=self.horizon,
            )
        ]


def configure_mappo(ppo: PPOConfig, cfg: ExperimentConfig, knobs: MappoConfig, env: EnvInfo) -> PPOConfig:
    state_dim = global_state_dim([flat_obs_dim(env.observation_spaces[a]) for a in env.agents])
    ppo = with_actor_critic_modules(
        ppo, cfg, env, share_policy=knobs.share_policy, critic="central", state_dim=state_dim
    )
    return ppo.learners(learner_connector=GlobalStateConnector(env.agents, env.horizon))
