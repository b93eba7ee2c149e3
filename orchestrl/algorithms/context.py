"""What an algorithm's ``configure`` function receives besides its own knobs.

Every algorithm is registered as a pair (its knobs' config class, a ``configure`` function; see
``orchestrl.experiment.algorithms``). ``configure(ppo, knobs, context)`` shapes the RLlib
``PPOConfig`` that the experiment builder made (env, runners, PPO's knobs, seed: read them from
``ppo``) with the algorithm's modules, connectors, learner and callbacks. The context carries the
rest of the experiment an algorithm may read: the env, the shared network shape and the warm start.
Nothing here knows the experiment YAML, so algorithms never import the layers above them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrl.envs.info import EnvInfo


class ModelSection(BaseModel):
    """The ``model:`` section: the networks' shape (actor and critic MLPs, a NeuroMAS node's blocks)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    hidden: list[int] = Field(default_factory=lambda: [64, 64], min_length=1)
    critic_hidden: list[int] | None = None
    activation: Literal["tanh", "relu", "silu"] = "tanh"
    candidate_features: int | None = Field(None, ge=1)
    """When set, the observation ends with one row of this many features per choice of a
    one-component action, and the actor scores every row with one shared network (a pointer over
    the options, in the spirit of Vinyals et al. 2015), so what it learns of one slot holds for
    every slot."""
    option_rows: bool = False
    """When true, the actor chooses the component the env's observation lists option rows for
    (``EnvInfo.option_rows``: an orchestration agent's duty, given its role) by scoring each row
    with one shared network, after the component it depends on (an autoregressive pointer)."""


class WarmStartSection(BaseModel):
    """The ``warm_start:`` section: behaviour cloning of the env's expert before RL (every algorithm)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    episodes: int = Field(0, ge=0)
    """Expert episodes on training tasks to clone (0: no warm start)."""
    epochs: int = Field(6, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    noise: float = Field(0.0, ge=0, le=1)
    """Probability that an agent's expert action is played as a random valid one, its label kept
    (DART): the demonstrations then show how the expert recovers from a mistake."""
    dagger_rounds: int = Field(0, ge=0)
    """After cloning, rounds of DAgger: the actors play ``episodes`` episodes with their own sampled
    actions, the expert labels every step, and the actors are cloned again on everything gathered
    (actor-critic algorithms)."""
    reuse: bool = False
    """Keep the cloned actors in the run dir's cache and load them in a later run of the same env
    whose warm start would be the same (these settings, seed, agents' modules, actor shapes and
    code), instead of cloning again: runs that differ in their RL algorithm or its settings then
    start from one clone (actor-critic algorithms; see ``behaviour_cloning.WarmStartStore``)."""


@dataclass(frozen=True)
class BuildContext:
    """The experiment as an algorithm sees it."""

    env: EnvInfo
    model: ModelSection
    warm_start: WarmStartSection
