"""BatchedEnvRunner: ordinary RLlib episodes from bulk sampling, a learner that trains on them, and the
same training through Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

from orchestrl.envs.batched.runner import BatchedEnvRunner
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config

COPIES = 8


def experiment(run_dir: Path, env: str = "simple_spread_batched", **resources: Any) -> Any:
    return validate_config(
        {
            "name": "batched",
            "seed": 0,
            "run_dir": str(run_dir),
            "env": {"name": env, "kwargs": {"max_cycles": 25}},
            "algorithm": {"name": "mappo"},
            "resources": {"env_runners": 0, "envs_per_env_runner": COPIES, **resources},
            "training": {"train_batch_size": COPIES * 30, "minibatch_size": 120, "num_epochs": 1},
        }
    )


def stepwise_copy(ep: MultiAgentEpisode) -> MultiAgentEpisode:
    """The same chunk built by RLlib's constructor from per-step dicts."""
    agents = sorted(ep.agent_episodes)
    n = len(ep)
    obs = {a: ep.agent_episodes[a].get_observations(slice(0, n + 1)) for a in agents}
    act = {a: ep.agent_episodes[a].get_actions(slice(0, n)) for a in agents}
    rew = {a: ep.agent_episodes[a].get_rewards(slice(0, n)) for a in agents}
    extra = {
        a: {
            k: ep.agent_episodes[a].get_extra_model_outputs(k, slice(0, n))
            for k in ep.agent_episodes[a].extra_model_outputs
        }
        for a in agents
    }
    done = {a: ep.is_terminated for a in agents} | {"__all__": ep.is_terminated}
    cut = {a: ep.is_truncated for a in agents} | {"__all__": ep.is_truncated}
    return MultiAgentEpisode(
        id_=ep.id_,
        observations=[{a: obs[a][t] for a in agents} for t in range(n + 1)],
        actions=[{a: act[a][t] for a in agents} for t in range(n)],
        rewards=[{a: float(rew[a][t]) for a in agents} for t in range(n)],
        extra_model_outputs=[{a: {k: v[t] for k, v in extra[a].items()} for a in agents} for t in range(n)],
        terminateds=done,
        truncateds=cut,
        env_t_started=ep.env_t_started,
        agent_t_started=dict.fromkeys(agents, ep.env_t_started),
        agent_module_ids={a: ep.module_for(a) for a in agents},
        len_lookback_buffer=0,
    )


def test_bulk_episodes_equal_rllibs_stepwise_construction(run_dir: Path) -> None:
    runner = BatchedEnvRunner(config=build_ppo_config(experiment(run_dir)))
    episodes = runner.sample(num_timesteps=COPIES * 40) + runner.sample(num_timesteps=COPIES * 20)
    assert sorted(len(e) for e in episodes) == [10] * 16 + [15] * 8 + [25] * 8  # whole, cut, continued, new
    for ep in episodes:
        ref = stepwise_copy(ep)
        assert (ep.env_t_started, ep.env_t, len(ep), ep.is_done) == (
            ref.env_t_started,
            ref.env_t,
            len(ref),
            ref.is_done,
        )
        for a in ref.agent_ids:
            mine, theirs = ep.agent_episodes[a], ref.agent_episodes[a]
            assert (mine.t_started, mine.t, mine.module_id) == (theirs.t_started, theirs.t, theirs.module_id)
            assert ep.env_t_to_agent_t[a].data == list(ref.env_t_to_agent_t[a].data)
        for t in (0, -1):
            assert ep.get_infos(t) == ref.get_infos(t)
            for a, o in ref.get_observations(t).items():
                np.testing.assert_array_equal(ep.get_observations(t)[a], o)
            for key in ref.agent_episodes["agent_0"].extra_model_outputs:
                np.testing.assert_array_equal(
                    ep.get_extra_model_outputs(key, t)["agent_0"],
                    ref.get_extra_model_outputs(key, t)["agent_0"],
                )
            assert ep.get_actions(t) == ref.get_actions(t)
            assert ep.get_rewards(t) == pytest.approx(ref.get_rewards(t))
        assert ep.get_return() == pytest.approx(ref.get_return(), abs=1e-4)


def test_chunks_of_one_episode_continue_where_the_last_call_stopped(run_dir: Path) -> None:
    runner = BatchedEnvRunner(config=build_ppo_config(experiment(run_dir)))
    first = runner.sample(num_timesteps=COPIES * 10)
    second = runner.sample(num_timesteps=COPIES * 20)
    by_id = {e.id_: e for e in first}
    continued = [e for e in second if e.id_ in by_id]
    assert len(continued) == COPIES
    for e in continued:
        before = by_id[e.id_]
        assert e.env_t_started == before.env_t == 10 and e.is_done and len(e) == 15
        for a in e.agent_ids:  # the continuation starts from the observation the cut chunk ended on
            np.testing.assert_array_equal(e.get_observations(0)[a], before.get_observations(-1)[a])
    metrics = runner.get_metrics()
    assert metrics["num_episodes"].peek() == COPIES
    assert metrics["num_env_steps_sampled_lifetime"].peek() == COPIES * 30


def test_a_learner_trains_on_bulk_episodes_and_greedy_episodes_come_back_whole(run_dir: Path) -> None:
    ppo = build_ppo_config(experiment(run_dir, env="simple_speaker_listener_batched"))
    runner = BatchedEnvRunner(config=ppo)
    learner = ppo.build_learner(env=None, spaces=runner.get_spaces())
    results = learner.update(episodes=runner.sample(num_timesteps=COPIES * 30))
    assert results
    runner.set_state({"rl_module": learner.module.get_state(inference_only=True)})
    greedy = runner.sample(num_episodes=3, explore=False)
    assert len(greedy) == 3 and all(len(e) == 25 and e.is_truncated for e in greedy)


def test_rllib_stepping_is_kept_for_what_bulk_sampling_does_not_do(run_dir: Path) -> None:
    ppo = build_ppo_config(experiment(run_dir)).environment(
        env_config={"name": "simple_spread_batched", "kwargs": {"max_cycles": 25}, "rllib_stepping": True}
    )
    runner = BatchedEnvRunner(config=ppo)
    assert not runner._bulk_ok(random_actions=False)
    episodes = runner.sample(num_timesteps=COPIES * 30)
    assert sum(len(e) for e in episodes) == COPIES * 30
    assert {len(e) for e in episodes} == {25, 5}


def test_same_seed_same_samples(run_dir: Path) -> None:
    def last_observations() -> list[Any]:
        runner = BatchedEnvRunner(config=build_ppo_config(experiment(run_dir)))
        return [e.get_observations(-1)["agent_0"].tolist() for e in runner.sample(num_timesteps=COPIES * 5)]

    assert last_observations() == last_observations()


@pytest.mark.ray
def test_mappo_trains_an_iteration_on_the_batched_env_through_ray(ray_local: Path, run_dir: Path) -> None:
    from orchestrl.training.checkpoints import build_algorithm

    algo = build_algorithm(build_ppo_config(experiment(run_dir)), run_dir / "algo")
    try:
        assert type(algo.env_runner).__name__ == "BatchedEnvRunner"
        result = algo.train()
        assert result["env_runners"]["num_env_steps_sampled"] >= COPIES * 30
        assert np.isfinite(result["env_runners"]["episode_return_mean"])
        path = algo.save_to_path(str(run_dir / "ckpt"))
        assert Path(path).exists()
    finally:
        algo.stop()
