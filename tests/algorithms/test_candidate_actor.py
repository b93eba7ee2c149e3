"""``model.candidate_features``: the actor scores each option's row with one shared network, so a
slot's logit follows its row wherever the row is listed (no Ray: the module is built directly)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.actor_critic import ActorCriticModule
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

CONTEXT, ROWS, FEATURES = 3, 5, 4


def module(candidate_features: int | None = FEATURES, rows: int = ROWS) -> ActorCriticModule:
    obs = gym.spaces.Dict(
        {
            OBS_KEY: gym.spaces.Box(-1.0, 1.0, shape=(CONTEXT + rows * FEATURES,), dtype=np.float32),
            MASK_KEY: gym.spaces.Box(0.0, 1.0, shape=(rows,), dtype=np.float32),
        }
    )
    config = {"hidden": [16], "activation": "tanh", "candidate_features": candidate_features}
    return ActorCriticModule(
        observation_space=obs,
        action_space=gym.spaces.MultiDiscrete([rows]),
        inference_only=False,
        model_config=config,
    )


def logits(
    net: ActorCriticModule, context: torch.Tensor, rows: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    obs = {OBS_KEY: torch.cat([context, rows.reshape(len(rows), -1)], dim=-1), MASK_KEY: mask}
    return net._forward({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]


def test_a_row_keeps_its_logit_wherever_it_is_listed():
    torch.manual_seed(0)
    net = module()
    for p in net.actor.parameters():  # off the near-zero output init, so logits differ
        torch.nn.init.normal_(p)
    context, rows = torch.randn(2, CONTEXT), torch.randn(2, ROWS, FEATURES)
    mask = torch.ones(2, ROWS)
    order = torch.tensor([3, 0, 4, 1, 2])
    before, after = logits(net, context, rows, mask), logits(net, context, rows[:, order], mask)
    torch.testing.assert_close(after, before[:, order])
    assert not torch.allclose(before[:, 0], before[:, 1])


def test_masked_options_are_never_chosen():
    net = module()
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0]])
    out = logits(net, torch.zeros(1, CONTEXT), torch.randn(1, ROWS, FEATURES), mask)
    assert (out[0, mask[0] < 0.5] < -1e8).all()


def test_rows_that_do_not_fit_the_observation_are_refused():
    with pytest.raises(ValueError, match="candidate_features"):
        module(candidate_features=FEATURES * 3)
