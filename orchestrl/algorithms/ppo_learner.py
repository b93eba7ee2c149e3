"""RLlib's PPO torch learner without the cost of its per-tensor gradient checks, and the same
updates, bit for bit.

RLlib 2.60's ``TorchLearner.apply_gradients`` runs ``torch.isfinite(g).all()`` on every gradient
tensor twice per minibatch (before setting it, and again before stepping its optimizer). On CPU
that costs more than the Adam step it guards when a central critic reads all 8 agents'
observations (level 4). One fused norm over all the gradients answers the same question: a NaN
or inf in any gradient makes it non-finite. When it is finite, the gradients are set and every
optimizer steps, which is what RLlib does when every gradient is finite. Otherwise (a non-finite
gradient, or a finite one whose norm overflows), and with a grad scaler or learning-rate
schedulers, RLlib's own path runs.

``benchmarks/learner_step.py`` times both on real level-4 learners and checks that their weights
stay equal. (Multi-tensor Adam, ``foreach=True``, was timed too: it saved too little per step to be
worth a change.)
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner


def all_finite(gradients: list[torch.Tensor]) -> bool:
    """Whether every gradient is finite, from one fused norm (False also when the norm of finite
    gradients overflows: the caller then takes the exact per-tensor path)."""
    return bool(torch.isfinite(torch.nn.utils.get_total_norm(gradients)))


class FastStepPPOLearner(PPOTorchLearner):
    """PPO's torch learner for every orchestrl algorithm (module docstring: why)."""

    def apply_gradients(self, gradients_dict: dict[Any, torch.Tensor]) -> None:
        gradients = list(gradients_dict.values())
        plain = self._grad_scalers is None and self._lr_scheduler_classes is None
        if not (plain and gradients and all_finite(gradients)):
            super().apply_gradients(gradients_dict)
            return
        for param_ref, gradient in gradients_dict.items():
            self._params[param_ref].grad = gradient
        for module_id, optimizer_names in self._module_optimizers.items():
            for optimizer_name in optimizer_names:
                self.get_optimizer(module_id, optimizer_name).step()


def with_rllibs_step(learner_class: type[FastStepPPOLearner]) -> type[PPOTorchLearner]:
    """``learner_class`` with RLlib's own ``apply_gradients`` put back: the reference that the fast
    step is checked against (tests, ``benchmarks/learner_step.py``)."""
    rllibs = {"apply_gradients": PPOTorchLearner.apply_gradients}
    return type(f"{learner_class.__name__}WithRllibsStep", (learner_class,), rllibs)
