"""Curricula on a real local Ray: a 2-stage curriculum that grows simple_spread from 3 to 4
agents, and the weight carry it relies on, checked on the env runners themselves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.tracking import names
from orchestrl.tracking import store as tracking
from orchestrl.training.checkpoints import build_algorithm
from orchestrl.training.weight_carry import (
    carry_modules,
    checkpoint_module_states,
    module_dir,
    runner_weight_gap,
)
from orchestrl.tune.curriculum import CurriculumSummary, load_curriculum, run_curriculum
from orchestrl.tune.lifecycle import Launch

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
SPREAD = {"max_cycles": 10, "num_agent_neighbors": 2, "num_landmark_neighbors": 3}


@pytest.fixture(scope="module")
def curriculum_run(
    ray_local: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[CurriculumSummary, Path]:
    root = tmp_path_factory.mktemp("curriculum")
    spec = {
        "name": "it_curriculum",
        "base": str(REPO / "configs" / "mappo_simple_spread.yaml"),
        "overrides": {
            "env.kwargs": {"N": 3, **SPREAD},
            "model.hidden": [32],
            "training.train_batch_size": 200,
            "training.minibatch_size": 100,
            "training.num_epochs": 1,
        },
        "trial_resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "stages": [
            {
                "name": "n3",
                # any return passes: promoted by the metric rule after 2 consecutive iterations
                "promote": {
                    "metric": "team_return_sum_mean",
                    "threshold": -1.0e9,
                    "consecutive": 2,
                    "iterations": 6,
                },
            },
            {"name": "n4", "overrides": {"env.kwargs.N": 4, "seed": 5}, "promote": {"iterations": 1}},
        ],
    }
    path = root / "curriculum.yaml"
    path.write_text(yaml.safe_dump(spec))
    lines: list[str] = []
    summary = run_curriculum(load_curriculum(path, run_dir=str(root / "runs")), Launch(echo=lines.append))
    return summary, root


def test_stages_run_in_order_and_the_second_has_more_agents(curriculum_run: tuple) -> None:
    summary, _ = curriculum_run
    assert [(s.name, s.iterations, s.promoted_by) for s in summary.stages] == [
        ("n3", 2, "metric"),
        ("n4", 1, "budget"),
    ]
    client = tracking.client(summary.tracking_uri)
    runs = [client.get_run(s.run_id) for s in summary.stages]
    assert [r.data.params["env.kwargs.N"] for r in runs] == ["3", "4"]
    assert all(r.data.tags[names.TAG_PARENT] == summary.parent_run_id for r in runs)
    assert all(r.info.status == "FINISHED" for r in runs)
    assert [r.data.tags["orchestrl.stage"] for r in runs] == ["n3", "n4"]
    assert runs[0].data.tags["orchestrl.stop_reason"].startswith("promoted: team_return_sum_mean")


def test_the_parent_logs_stage_transitions(curriculum_run: tuple) -> None:
    summary, _ = curriculum_run
    client = tracking.client(summary.tracking_uri)
    parent = client.get_run(summary.parent_run_id)
    assert parent.info.status == "FINISHED"
    stage = sorted(
        (m.step, m.value) for m in client.get_metric_history(parent.info.run_id, "curriculum/stage")
    )
    assert stage == [(0, 0.0), (2, 1.0)]  # stage 1 started after 2 iterations in all
    promoted = sorted(
        (m.step, m.value)
        for m in client.get_metric_history(parent.info.run_id, "curriculum/promoted_by_metric")
    )
    assert promoted == [(2, 1.0), (3, 0.0)]
    assert parent.data.tags[names.TAG_CHECKPOINT] == summary.stages[-1].checkpoint
    assert Path(summary.stages[-1].checkpoint).is_dir()


def test_the_grown_stage_carried_the_actor_and_reinitialised_the_critic(curriculum_run: tuple) -> None:
    summary, _ = curriculum_run
    client = tracking.client(summary.tracking_uri)
    grown = client.get_run(summary.stages[1].run_id)
    carry = json.loads(grown.data.tags[names.TAG_CARRY])
    assert carry["carried"] == {"shared": "shared"}
    assert carry["reinitialised"] == {"shared": ["critic"]}  # MAPPO's state grows with N
    assert carry["checkpoint"] == summary.stages[0].checkpoint
    assert grown.data.metrics["carry/runner_max_abs_diff"] == 0.0
    assert any("re-initialised shared.critic" in line for line in summary.stages[1].carry)


def _config(n: int, seed: int, root: Path) -> Any:
    return validate_config(
        {
            "name": f"carry{n}",
            "seed": seed,
            "run_dir": str(root),
            "env": {"name": "simple_spread", "kwargs": {"N": n, **SPREAD}},
            "algorithm": {"name": "mappo"},
            "model": {"hidden": [32]},
            # a remote env runner: the case where RLlib's own restore sync can be dropped
            "resources": {"env_runners": 1, "envs_per_env_runner": 2, "cpus_per_env_runner": 0},
            "training": {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 1},
        }
    )


def _logp_under(module: Any, episodes: list) -> tuple[np.ndarray, np.ndarray]:
    """The log-probs the runner recorded for its actions, and those the given module assigns."""
    recorded, recomputed = [], []
    for ma_episode in episodes:
        for sa in ma_episode.agent_episodes.values():
            n = len(sa)
            obs = np.array(sa.get_observations(slice(0, n)), dtype=np.float32)
            actions = torch.as_tensor(np.array(sa.get_actions(slice(0, n))))
            with torch.no_grad():
                logits = module.forward_inference({Columns.OBS: torch.as_tensor(obs)})[
                    Columns.ACTION_DIST_INPUTS
                ]
            logp = torch.log_softmax(logits, dim=-1).gather(-1, actions[:, None]).squeeze(-1)
            recomputed.append(logp.numpy())
            recorded.append(np.asarray(sa.get_extra_model_outputs(Columns.ACTION_LOGP, slice(0, n))))
    return np.concatenate(recorded), np.concatenate(recomputed)


def test_env_runners_act_with_the_carried_weights_before_and_after_the_first_iteration(
    curriculum_run: tuple, tmp_path: Path
) -> None:
    summary, _ = curriculum_run
    checkpoint = summary.stages[0].checkpoint  # the 3-agent stage's final algorithm checkpoint
    source = checkpoint_module_states(checkpoint)
    ckpt_module = RLModule.from_checkpoint(str(module_dir(checkpoint) / "shared"))
    grown = build_algorithm(build_ppo_config(_config(4, seed=2, root=tmp_path)), tmp_path / "b")
    try:
        assert runner_weight_gap(grown, source) > 1e-3  # another seed: a different initialisation
        report = carry_modules(grown, checkpoint)
        assert report.reinitialised == {"shared": ["critic"]}
        # Before the first iteration: the remote runner holds the checkpoint's actor exactly, and
        # the actions it samples have the checkpoint module's log-probabilities.
        assert runner_weight_gap(grown, source) == 0.0
        episodes = grown.env_runner_group.foreach_env_runner(
            lambda runner: runner.sample(num_timesteps=40, explore=True), local_env_runner=False
        )[0]
        recorded, recomputed = _logp_under(ckpt_module, episodes)
        assert len(recorded) >= 40
        np.testing.assert_allclose(recorded, recomputed, atol=1e-5)
        # After it: the runner follows the learner, whose actor started from the checkpoint.
        grown.train()
        learner = grown.learner_group.get_state(components="learner/rl_module", inference_only=True)
        learner_actor = {k: np.asarray(v) for k, v in learner["learner"]["rl_module"]["shared"].items()}
        assert runner_weight_gap(grown, {"shared": learner_actor}) == 0.0
        moved = max(float(np.max(np.abs(learner_actor[k] - source["shared"][k]))) for k in learner_actor)
        assert 0.0 < moved < 0.05
    finally:
        grown.stop()
