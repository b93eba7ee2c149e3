"""The COMA-heads probe: its return-to-go, its exact advantages (episodes replayed for real in the
orchestration env, in-process, no Ray) and its command line."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
import torch
from credit_helpers import load_benchmark, tiny, trainer, unload_benchmark

from orchestrl.algorithms.joint_columns import TEAM_REWARD


@pytest.fixture(scope="module")
def heads() -> Iterator[ModuleType]:
    module = load_benchmark("coma_heads")
    yield module
    unload_benchmark(module)


def test_return_to_go_is_the_discounted_team_return_per_real_row(heads: ModuleType) -> None:
    # one agent's 2-round episode (+ its artificial step), then another agent's 1-row chunk that
    # was cut (not terminated: its return-to-go is what it saw, no bootstrap)
    batch = {
        TEAM_REWARD: torch.tensor([0.5, 1.0, 9.0, 2.0, 9.0]),
        "loss_mask": torch.tensor([1, 1, 0, 1, 0]),
        "terminateds": torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]),
    }
    np.testing.assert_allclose(heads.returns_to_go(batch, 0.9), [0.5 + 0.9 * 1.0, 1.0, 2.0], rtol=1e-6)


def test_exact_advantages_replay_each_agents_own_final_action(heads: ModuleType) -> None:
    """The rows come back in the agents' order of the episode: replacing each row's agent by the
    action that row took changes nothing (delta 0, and the replay scores the episode's own score,
    which exact_advantages checks); uniformly drawn actions change something, for some agent."""
    from orchestrl.envs.orchestration.env import OrchestrationEnv

    kwargs = {"level": 2, "rounds": 2, "task_pool": 4}
    t = trainer(tiny("coma", "orchestration", kwargs=kwargs))
    env = OrchestrationEnv(**kwargs)
    try:
        episodes = [ep for ep in t.runner.sample(num_timesteps=12, explore=True) if ep.is_done][:3]
        lens = [int(n) for n in t.learner.module["shared"].action_space.nvec]
        rng, changed = np.random.default_rng(0), []
        for episode in episodes:
            rows = heads.critic_rows(t, [episode], final_only=True)
            assert sorted(rows["agent"].tolist()) == [0, 1, 2]
            taken = {**rows, "probs": one_hot(rows["actions"], lens)}
            same = heads.exact_advantages(env, episode, taken, lens, 2, rng)
            other = heads.exact_advantages(
                env, episode, {**rows, "probs": torch.ones_like(taken["probs"])}, lens, 2, rng
            )
            if same is None:  # an invalid final spec: nothing to edit, for any action
                assert other is None
                continue
            assert same.shape == (3, 2) and not same.any()
            changed.append(np.abs(other).sum())
        assert changed and max(changed) > 0
    finally:
        env.close()
        t.stop()


def one_hot(actions: torch.Tensor, lens: list[int]) -> torch.Tensor:
    return torch.cat(
        [torch.nn.functional.one_hot(actions[:, k].long(), n).float() for k, n in enumerate(lens)], dim=1
    )


@pytest.mark.parametrize("argv", [["--steps", "10"], ["--fit-steps", "50"], ["--level", "1"]])
def test_bad_arguments_exit_2(heads: ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        heads.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
