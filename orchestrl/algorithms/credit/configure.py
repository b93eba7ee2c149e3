"""Configuring an experiment for counterfactual credit: the learner's spec (:func:`credit_spec_for`),
then modules, joint columns, learner and callbacks (:func:`configure_credit`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrl.algorithms.behaviour_cloning import with_expert_warm_start
from orchestrl.algorithms.callbacks import with_callbacks
from orchestrl.algorithms.credit.advantage import CounterfactualAdvantage, TeamGaeAdvantage
from orchestrl.algorithms.credit.learner import CREDIT_KEY, CounterfactualPPOLearner, CreditSpec
from orchestrl.algorithms.credit.table import CreditTableCallbacks
from orchestrl.algorithms.joint_columns import JointColumns
from orchestrl.algorithms.modules import with_actor_critic_modules

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.callbacks.callbacks import RLlibCallback

    from orchestrl.algorithms.context import BuildContext
    from orchestrl.envs.info import EnvInfo


def credit_spec_for(
    env: EnvInfo,
    piece: type[CounterfactualAdvantage],
    piece_kwargs: Mapping[str, Any] | None = None,
    *,
    team_gae: bool = False,
    target_update_interval: int = 0,
    critic_lr: float | None = None,
) -> CreditSpec:
    """The learner's :class:`CreditSpec` for ``env``'s agents: ``piece`` with its settings, or, with
    ``team_gae`` (every estimator's ``advantage: gae`` ablation), :class:`TeamGaeAdvantage` alone:
    the estimator, its settings, target network and critic learning rate all left out."""
    agents = tuple(env.agents)
    if team_gae:
        return CreditSpec(piece=TeamGaeAdvantage, agents=agents)
    return CreditSpec(
        piece=piece,
        piece_kwargs=dict(piece_kwargs or {}),
        agents=agents,
        target_update_interval=target_update_interval,
        critic_lr=critic_lr,
    )


def configure_credit(
    ppo: PPOConfig,
    context: BuildContext,
    spec: CreditSpec,
    *,
    share_policy: bool,
    critic: str,
    module_class: type | None = None,
    state_dim: int | None = None,
    extra_model_config: dict[str, Any] | None = None,
    with_others_actions: bool = False,
    with_replay: bool = False,
    callbacks: tuple[Callable[[], RLlibCallback], ...] = (),
) -> PPOConfig:
    """Modules + the joint columns + the learner that swaps GAE for ``spec.piece`` + the credit
    table, the expert warm start and ``callbacks`` (classes, or factories such as
    ``ReplayCallbacks.with_settings(...)``). ``with_replay``: the joint columns carry the deltas
    the env runners' replay left in each episode (LEMON)."""
    module_kwargs = {"module_class": module_class} if module_class is not None else {}
    ppo = with_actor_critic_modules(
        ppo,
        context,
        share_policy=share_policy,
        critic=critic,
        state_dim=state_dim,
        extra_model_config=extra_model_config,
        **module_kwargs,
    )
    env = context.env
    columns = JointColumns(
        agents=list(env.agents),
        horizon=env.horizon,
        action_spaces=dict(env.action_spaces),
        with_team=True,
        with_state=state_dim is not None,
        with_others_actions=with_others_actions,
        with_replay=with_replay,
    )
    ppo = ppo.learners(
        learner_class=CounterfactualPPOLearner,
        learner_connector=columns,
        learner_config_dict={CREDIT_KEY: spec},
    )
    ppo = with_callbacks(ppo, CreditTableCallbacks, *callbacks)
    return with_expert_warm_start(ppo, context.warm_start, env)
