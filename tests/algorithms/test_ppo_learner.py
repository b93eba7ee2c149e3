"""The fast optimizer step: RLlib's PPO update, bit for bit, without its per-tensor gradient
checks (in-process learners on the matrix game, no Ray)."""

from __future__ import annotations

import copy

import pytest
import torch
from credit_helpers import tiny
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from orchestrl.algorithms.ppo_learner import FastStepPPOLearner, with_rllibs_step
from orchestrl.experiment.algorithms import ALGORITHMS
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.training.inprocess import InProcessTrainer


def trainer(algo: str, rllibs_step: bool = False) -> InProcessTrainer:
    """``rllibs_step``: the algorithm's learner with RLlib's own ``apply_gradients`` put back."""
    config = build_ppo_config(validate_config(tiny(algo)))
    if rllibs_step:
        config = config.learners(learner_class=with_rllibs_step(config.learner_class))
    return InProcessTrainer(config)


def parameters(t: InProcessTrainer) -> list[torch.Tensor]:
    return [p.detach().clone() for p in t.learner._params.values()]


@pytest.mark.parametrize("algo", ["mappo", "coma"])
def test_an_update_is_rllibs_bit_for_bit(algo: str) -> None:
    ours, rllibs = trainer(algo), trainer(algo, rllibs_step=True)
    try:
        rllibs.learner.module.set_state(ours.learner.module.get_state())
        before = parameters(ours)
        assert all(torch.equal(a, b) for a, b in zip(before, parameters(rllibs), strict=True))
        episodes = ours.sample(200)
        for t in (ours, rllibs):
            copies = copy.deepcopy(episodes)  # the learner pipeline extends episodes in place
            t.learner.update(episodes=copies, num_epochs=2, minibatch_size=50, shuffle_batch_per_epoch=False)
        after = parameters(ours)
        assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))  # it learned
        assert all(torch.equal(a, b) for a, b in zip(after, parameters(rllibs), strict=True))
    finally:
        ours.stop()
        rllibs.stop()


def test_only_a_non_finite_gradient_takes_rllibs_per_tensor_path(monkeypatch: pytest.MonkeyPatch) -> None:
    t = trainer("ippo")
    try:
        learner = t.learner
        slow_path: list[int] = []
        monkeypatch.setattr(
            PPOTorchLearner, "apply_gradients", lambda self, grads: slow_path.append(len(grads))
        )
        gradients = {ref: torch.randn_like(p) for ref, p in learner._params.items()}
        before = parameters(t)
        learner.apply_gradients(gradients)
        assert slow_path == []
        assert all(not torch.equal(a, b) for a, b in zip(before, parameters(t), strict=True))  # stepped
        first = next(iter(gradients))
        gradients[first] = gradients[first].clone().view(-1).index_fill(0, torch.tensor([0]), float("nan"))
        gradients[first] = gradients[first].view_as(learner._params[first])
        learner.apply_gradients(gradients)
        assert slow_path == [len(gradients)]
    finally:
        t.stop()


@pytest.mark.parametrize("algo", sorted(set(ALGORITHMS) - {"neuromas"}))
def test_every_ppo_algorithm_learns_with_the_fast_step(algo: str) -> None:
    assert issubclass(build_ppo_config(validate_config(tiny(algo))).learner_class, FastStepPPOLearner)
