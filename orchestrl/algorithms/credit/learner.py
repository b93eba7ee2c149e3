"""PPO's torch learner with GAE swapped for a counterfactual advantage piece."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from ray.rllib.connectors.connector_pipeline_v2 import ConnectorPipelineV2
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI

from orchestrl.algorithms.ppo_learner import FastStepPPOLearner

CREDIT_KEY = "credit"
"""``learner_config_dict`` key holding the experiment's :class:`CreditSpec`."""


@dataclass(frozen=True)
class CreditSpec:
    """Everything the shared learner needs: the advantage piece to append and its settings (built by
    :func:`~orchestrl.algorithms.credit.configure.credit_spec_for`)."""

    piece: type[ConnectorV2]
    """The :class:`CounterfactualAdvantage` subclass that replaces GAE."""
    piece_kwargs: Mapping[str, Any] = field(default_factory=dict)
    agents: tuple[str, ...] = ()
    """All agents, sorted: the order of joint columns and of credit statistics."""
    target_update_interval: int = 0
    """Hard-copy critic -> target critic every N learner updates (0: no target network)."""
    critic_lr: float | None = None
    """A separate learning rate for the critic (None: one optimiser at ``training.lr``)."""


def credit_spec(config: Any) -> CreditSpec:
    spec = (config.learner_config_dict or {}).get(CREDIT_KEY)
    if not isinstance(spec, CreditSpec):
        raise ValueError("learner_config_dict['credit'] must hold a CreditSpec (see configure_credit)")
    return spec


class NoAdvantagePieceError(RuntimeError):
    """The learner pipeline has no GAE piece to replace (RLlib renamed or moved it)."""


def replace_gae(pipeline: ConnectorPipelineV2, piece: ConnectorV2) -> None:
    """Removes every ``GeneralAdvantageEstimation`` from ``pipeline`` and appends ``piece``.

    RLlib's ``remove`` only logs a warning when the piece is missing, and GAE left in place would
    overwrite the advantages ``piece`` computes (or, renamed, run silently): so a pipeline without
    one (or a subclass) raises, naming its pieces.
    """
    names = [type(p).__name__ for p in pipeline.connectors]
    found = [p for p in pipeline.connectors if isinstance(p, GeneralAdvantageEstimation)]
    if not found:
        raise NoAdvantagePieceError(
            f"the PPO learner pipeline has no GeneralAdvantageEstimation to replace with "
            f"{type(piece).__name__} (pieces: {', '.join(names)}); has RLlib renamed it?"
        )
    for gae in found:
        pipeline.remove(type(gae))
    pipeline.append(piece)


class CounterfactualPPOLearner(FastStepPPOLearner):
    """PPO's torch learner with GAE swapped for a counterfactual advantage piece.

    RLlib appends ``GeneralAdvantageEstimation`` in ``PPOLearner.build()``; a ``learner_connector``
    can only add pieces before the defaults, so the swap happens here (:func:`replace_gae`, with
    the public ConnectorPipelineV2 methods ``remove`` + ``append``). Modules implementing
    ``TargetNetworkAPI`` get target networks, hard-synced every ``target_update_interval`` updates.
    """

    def build(self) -> None:
        super().build()
        spec = credit_spec(self.config)
        if self._learner_connector is not None:
            piece = spec.piece(
                gamma=self.config.gamma,
                lambda_=self.config.lambda_,
                agents=list(spec.agents),
                **dict(spec.piece_kwargs),
            )
            replace_gae(self._learner_connector, piece)
        self._credit_updates = 0
        self.module.foreach_module(
            lambda mid, mod: mod.make_target_networks() if isinstance(mod, TargetNetworkAPI) else None
        )

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        spec = credit_spec(self.config)
        module = self._module[module_id].unwrapped()
        if spec.critic_lr is None or not hasattr(module, "critic") or not hasattr(module, "actor"):
            super().configure_optimizers_for_module(module_id, config)
            return
        for name, net, lr in (("actor", module.actor, config.lr), ("critic", module.critic, spec.critic_lr)):
            params = list(net.parameters())
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=name,
                optimizer=torch.optim.Adam(params),
                params=params,
                lr_or_lr_schedule=lr,
            )

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        interval = credit_spec(self.config).target_update_interval
        self._credit_updates += 1
        if interval <= 0 or self._credit_updates % interval:
            return
        for module in self.module._rl_modules.values():
            unwrapped = module.unwrapped()
            if isinstance(unwrapped, TargetNetworkAPI):
                for main_net, target_net in unwrapped.get_target_network_pairs():
                    update_target_network(main_net=main_net, target_net=target_net, tau=1.0)
