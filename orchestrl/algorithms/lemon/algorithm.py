"""LEMON's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrl.algorithms.credit.configure import configure_credit, credit_spec_for
from orchestrl.algorithms.joint_columns import global_state_dim
from orchestrl.algorithms.lemon.advantage import ReplayAdvantage
from orchestrl.algorithms.lemon.replay import ReplayCallbacks, ReplaySettings
from orchestrl.envs.counterfactual import EDIT_FAMILIES, EditFamily, supports_counterfactual
from orchestrl.errors import ConfigError

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.algorithms.context import BuildContext
    from orchestrl.envs.info import EnvInfo


class LemonConfig(BaseModel):
    """``algorithm:`` keys for lemon."""

    model_config = ConfigDict(extra="forbid")
    advantage: Literal["replay", "gae"] = "replay"
    """``replay``: exact counterfactual deltas mixed with team GAE; ``gae``: team GAE alone (ablation)."""
    share_policy: bool = True
    """One actor per group of agents with identical spaces."""
    critic: Literal["local", "central"] = "central"
    """The value function behind the team GAE term: own observation, or MAPPO's global state."""
    mix: float = Field(0.5, ge=0, le=1)
    """Weight of the counterfactual term: A_i = (1 - mix) * A_team + mix * d_i / mean|d|, with
    d_i = delta_i - b_{i,f} (see ``lemon_advantages``)."""
    center_delta: bool = True
    """Centre each delta by b_{i,f}, the running mean of agent i's deltas of edit family f over
    earlier batches (see ``lemon_advantages``). Off: LEMON's uncentred delta, whose mean (an edit
    usually makes a warm-started team's spec worse, so delta > 0) pushes every edited action up, a
    self-imitation term. ``benchmarks/credit.py --algos lemon_uncentred`` compares the two."""
    delta_baseline_decay: float = Field(0.9, ge=0, lt=1)
    """EMA decay of b_{i,f} over batches (0: the previous batch's mean alone)."""
    edit_families: list[EditFamily] = Field(default_factory=lambda: list(EDIT_FAMILIES), min_length=1)
    """Which edits to sample from (base_duty, drop_edge, downgrade_capacity, alternative)."""
    family_floor: float = Field(0.1, ge=0, le=0.25)
    """Minimum probability of each edit family (LEMON's floor)."""
    family_decay: float = Field(0.9, ge=0, lt=1)
    """EMA decay of each family's recent |delta| (higher: slower adaptation)."""
    replay_agents: int | None = Field(None, ge=1)
    """At most this many agents' edits replayed per episode (None: every agent's, as LEMON), chosen
    by how much their recent deltas varied (``replay.AgentChooser``, with ``family_floor`` and
    ``family_decay``): fewer scored executions per episode; an agent not replayed keeps the team
    advantage on its row."""

    def replay_settings(self) -> ReplaySettings:
        """The env runners' share of these knobs, for
        :class:`~orchestrl.algorithms.lemon.replay.ReplayCallbacks`."""
        return ReplaySettings(
            families=tuple(self.edit_families),
            floor=self.family_floor,
            decay=self.family_decay,
            agents=self.replay_agents,
        )


def require_counterfactual_env(env: EnvInfo) -> None:
    """``advantage: replay`` needs an env that can re-execute edited specs; says so in one line."""
    from orchestrl.envs.registry import get_env, make_env

    target = get_env(env.name).load()
    if isinstance(target, type):
        ok = supports_counterfactual(target)
    else:  # a factory function: look at what it builds
        built = make_env(env.name, **env.kwargs)
        try:
            ok = supports_counterfactual(getattr(built, "unwrapped", built))
        finally:
            built.close()
    if not ok:
        raise ConfigError(
            f"algorithm.advantage: replay needs an env with a counterfactual API "
            f"(counterfactual_spec/counterfactual_edits/counterfactual); env '{env.name}' has none "
            f"(use advantage: gae, or algorithm coma)"
        )


def configure_lemon(ppo: PPOConfig, knobs: LemonConfig, context: BuildContext) -> PPOConfig:
    env = context.env
    state_dim = global_state_dim(env) if knobs.critic == "central" else None
    replay = knobs.advantage == "replay"
    if replay:
        require_counterfactual_env(env)
    spec = credit_spec_for(
        env,
        ReplayAdvantage,
        {"mix": knobs.mix, "baseline_decay": knobs.delta_baseline_decay, "center": knobs.center_delta},
        team_gae=not replay,
    )
    return configure_credit(
        ppo,
        context,
        spec,
        share_policy=knobs.share_policy,
        critic=knobs.critic,
        state_dim=state_dim,
        with_replay=replay,
        callbacks=(ReplayCallbacks.with_settings(knobs.replay_settings()),) if replay else (),
    )
