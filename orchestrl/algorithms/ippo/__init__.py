"""IPPO: independent PPO learners on a shared team (de Witt et al. 2020, "Is Independent Learning
All You Need in the StarCraft Multi-Agent Challenge?").

Each agent's actor and critic see only its own observation. By default one module is shared by all
agents with the same spaces (parameter sharing; add ``env.agent_id_in_obs: true`` to let it
specialise); ``share_policy: false`` gives each agent its own module.
"""

from orchestrl.algorithms.ippo.algorithm import IppoConfig, configure_ippo

__all__ = ["IppoConfig", "configure_ippo"]
