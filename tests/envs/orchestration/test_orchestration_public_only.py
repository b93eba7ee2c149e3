"""A task of public inputs only (a user's tables: ``byexample.public_task``) plays through the env
unscored: rewards are 0, nothing reads a hidden target, and round 2's feedback is the same as for
the generated task it came from, except the row-count ratio, which follows ``target_rows``."""

from __future__ import annotations

import numpy as np

from orchestrl.envs.orchestration import byexample
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.solver import spec_actions
from orchestrl.envs.orchestration.tasks import generate_task
from orchestrl.envs.spaces import OBS_KEY


def round_two(env: OrchestrationEnv, task, actions, **options) -> tuple[np.ndarray, dict[str, float]]:
    env.reset(options={"task": task, **options})
    obs, rewards, *_ = env.step(actions)
    return obs["agent_0"][OBS_KEY], rewards


def test_a_public_only_task_plays_unscored_with_feedback_from_its_examples() -> None:
    generated = generate_task(1, "heldout", 27)
    public = byexample.public_task(dict(generated.sources), generated.public.examples, level=1)
    assert public.target is None and public.reference is None
    env = OrchestrationEnv(level=1)
    try:
        actions = spec_actions(generated.reference, public, env.layout)
        feedback = env.builder.offsets()["feedback"]
        round_two(env, public, actions)  # every later run finds its nodes cached (a feature too)
        unknown, rewards = round_two(env, public, actions)
        assert set(rewards.values()) == {0.0}
        told, _ = round_two(env, public, actions, target_rows=len(generated.target))
        off, _ = round_two(env, public, actions, target_rows=2 * len(generated.target))
        truth, scored = round_two(env, generated, spec_actions(generated.reference, generated, env.layout))
        assert set(scored.values()) != {0.0}
        assert np.array_equal(told[feedback], truth[feedback])  # the right count: the same feedback
        assert np.array_equal(unknown[feedback], told[feedback])  # unknown: a ratio of 1, as here
        assert not np.array_equal(off[feedback], told[feedback])  # the ratio moves with target_rows
        round_two(env, public, actions)
        _, _, terminated, _, infos = env.step(actions)
        assert terminated["agent_0"] and infos["agent_0"]["metrics"]["score"] == 0.0
    finally:
        env.close()
