"""What an algorithm may know of an experiment's env before it builds its modules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class EnvInfo:
    """The env an experiment trains on: its name and kwargs, its agents and their spaces.

    Built once on the driver (``orchestrl.experiment.builder.probe_env``) and handed to the
    algorithm's ``configure`` function, which shapes modules and connectors from it.
    """

    agents: list[str]
    """Every agent, sorted: the order of joint columns (global state, joint actions)."""
    observation_spaces: dict[str, gym.Space]
    action_spaces: dict[str, gym.Space]
    horizon: int
    """Env steps per episode at most (for the t/T feature of centralised critics)."""
    name: str = ""
    """The registered env name (``env.name`` in the experiment)."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """The env's kwargs as the experiment gives them."""
    agent_id_in_obs: bool = False
    """Whether each observation ends with a one-hot agent id."""
    cache_dir: str | None = None
    """Where this env's generated data (and what is derived from it) is cached for the run dir."""
    option_rows: Mapping[str, int] | None = None
    """Where each observation lists one row of features per option of an action component, given
    another component's value (``given``, ``component``, ``first``, ``start``, ``width``: see
    ``orchestrl.algorithms.actor_critic.OptionRows``), when the env lays one out."""
