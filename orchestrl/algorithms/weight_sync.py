"""Pushing a learner's weights to every env runner, and checking that they arrived.

RLlib syncs weights to env runners through fire-and-forget requests, and a sync issued while another
``set_state`` request is in flight is dropped without a word: the runners then sample with the old
weights (measured; see the team's RLlib notes). Whoever changes a learner's modules outside RLlib's
update (a warm start, a curriculum's weight carry) pushes the weights here and reads them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm
    from ray.rllib.env.env_runner import EnvRunner


class WeightSyncError(RuntimeError):
    """The env runners do not hold the weights they were sent."""


def push_weights_to_env_runners(algo: Algorithm) -> None:
    """Sync the learner's inference-only weights to every (training and eval) env runner, waiting
    for the calls to land rather than firing and forgetting."""
    for runners in (algo.env_runner_group, getattr(algo, "eval_env_runner_group", None)):
        if runners is None:
            continue
        runners.fetch_ready_async_reqs(tags="set_state", timeout_seconds=30)
        runners.sync_weights(
            from_worker_or_learner_group=algo.learner_group, inference_only=True, timeout_seconds=30
        )


def sync_learner_weights(algo: Algorithm) -> float:
    """After a warm start changed the learner's modules in place (behaviour cloning, NeuroMAS
    growth): every learner takes the first one's weights, every env runner the learner's. Returns
    the largest |difference| read back from the runners (0.0); raises :class:`WeightSyncError` otherwise."""
    group = algo.learner_group
    if not group.is_local:  # a warm start ran on each learner; all must start from the same weights
        modules = group.get_state(components="learner/rl_module")["learner"]["rl_module"]
        group.set_state({"learner": {"rl_module": modules}})
    push_weights_to_env_runners(algo)
    inference = group.get_state(components="learner/rl_module", inference_only=True)["learner"]["rl_module"]
    expected = {mid: {k: np.asarray(v) for k, v in state.items()} for mid, state in inference.items()}
    gap = runner_weight_gap(algo, expected)
    if gap != 0.0:
        raise WeightSyncError(f"env runners do not hold the warm-started weights (max |diff| {gap:g})")
    return gap


def runner_weight_gap(algo: Algorithm, expected: dict[str, dict[str, np.ndarray]]) -> float:
    """Largest |difference| between each env runner's module tensors and ``expected`` (per module,
    compared on the keys the runner holds: env runners carry inference-only modules)."""
    mids = list(expected)

    def read(runner: EnvRunner) -> dict[str, dict[str, np.ndarray]]:
        if getattr(runner, "module", None) is None:  # a local runner without env or module
            return {}
        return {m: {k: np.asarray(v) for k, v in runner.module[m].get_state().items()} for m in mids}

    gap = 0.0
    states = [s for s in algo.env_runner_group.foreach_env_runner(read) if s]
    if not states:
        raise WeightSyncError("no env runner answered the weight check")
    for state in states:
        for mid, tensors in state.items():
            for key, value in tensors.items():
                gap = max(gap, float(np.max(np.abs(value - expected[mid][key]))))
    return gap
