"""COMA's knobs and how they shape an RLlib ``PPOConfig``."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrl.algorithms.coma.advantage import ComaAdvantage
from orchestrl.algorithms.coma.module import ComaModule, QHeadKind
from orchestrl.algorithms.credit.configure import configure_credit, credit_spec_for
from orchestrl.algorithms.joint_columns import global_state_dim, joint_action_dim

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from orchestrl.algorithms.context import BuildContext


class ComaConfig(BaseModel):
    """``algorithm:`` keys for coma (Foerster et al. 2018; the defaults give Eq. 4)."""

    model_config = ConfigDict(extra="forbid")
    cross_fit_scale: ClassVar[bool] = False
    """Scale each agent's baseline by its control-variate coefficient (coma_cv); not a YAML key."""
    advantage: Literal["critic", "gae"] = "critic"
    """``critic``: COMA's counterfactual baseline; ``gae``: team-reward GAE (the ablation)."""
    share_policy: bool = True
    """One actor (and one critic, which reads the agent id) per group of agents with equal spaces."""
    td_lambda: float = Field(0.8, ge=0, le=1)
    """lambda of the critic's TD(lambda) targets (0.8 in Foerster et al.)."""
    target_update_interval: int = Field(2, ge=1)
    """Copy the critic into the target critic every N learner updates."""
    critic_warmup: int = Field(3, ge=0)
    """Learner updates during which only the critic learns (actors get zero advantages)."""
    critic_lr: float | None = Field(1e-3, gt=0)
    """The critic's own learning rate (None: ``training.lr``)."""
    q_head: QHeadKind = "factorised"
    """The critic's output over the agent's own action components: ``factorised`` (sum over
    components), ``paired`` (plus the first component, e.g. the orchestration role, paired with
    each other one) or ``joint`` (one Q per joint action); all the same for a Discrete action. See
    :mod:`orchestrl.algorithms.coma.module` (and why factorised stays the default)."""
    q_source: Literal["critic", "lambda_return"] = "critic"
    """The Q(s,u) term of A_i: the critic's (Eq. 4 verbatim) or the sampled TD(lambda) return."""
    normalize_advantages: bool = True
    """Divide advantages by their batch std."""
    center_advantages: bool = False
    """Subtract each agent's batch mean first. In theory the baseline centres them; a learned
    critic's error, different for every agent, does not (see ``center_per_agent``)."""


class ComaCvConfig(ComaConfig):
    """``algorithm:`` keys for coma_cv: COMA with each agent's counterfactual baseline scaled by its
    control-variate coefficient, cross-fitted on the previous batch (``control_variate_scale``).
    Its defaults are the setting the credit benchmark measures: the sampled TD(lambda) return as
    Q(s,u) and per-agent centring, i.e. a team-return policy gradient with a scaled counterfactual
    baseline. With the critic's own Q (``q_source: critic``), b is the policy-weighted mean of the
    same critic's Q, so c is near 1 wherever Q varies mostly with the state: close to COMA."""

    cross_fit_scale: ClassVar[bool] = True
    q_source: Literal["critic", "lambda_return"] = "lambda_return"
    center_advantages: bool = True


def configure_coma(ppo: PPOConfig, knobs: ComaConfig, context: BuildContext) -> PPOConfig:
    env = context.env
    state_dim = global_state_dim(env)
    common = {"share_policy": knobs.share_policy, "critic": "central", "state_dim": state_dim}
    gae = knobs.advantage == "gae"
    spec = credit_spec_for(
        env,
        ComaAdvantage,
        {
            "td_lambda": knobs.td_lambda,
            "critic_warmup": knobs.critic_warmup,
            "normalize": knobs.normalize_advantages,
            "center": knobs.center_advantages,
            "q_source": knobs.q_source,
            "cross_fit_scale": knobs.cross_fit_scale,
        },
        team_gae=gae,
        target_update_interval=knobs.target_update_interval,
        critic_lr=knobs.critic_lr,
    )
    if gae:
        return configure_credit(ppo, context, spec, **common)
    return configure_credit(
        ppo,
        context,
        spec,
        module_class=ComaModule,
        extra_model_config={"q_input_dim": state_dim + joint_action_dim(env), "q_head": knobs.q_head},
        with_others_actions=True,
        **common,
    )
