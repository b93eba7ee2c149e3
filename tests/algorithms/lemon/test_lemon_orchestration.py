"""LEMON over the orchestration env, which speaks the counterfactual protocol itself: multi-round
episodes put each delta on the row of the final round's action, and an invalid final spec gets no
replay."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from credit_helpers import tiny, trainer

from orchestrl.algorithms.actor_critic import GLOBAL_STATE
from orchestrl.algorithms.joint_columns import AGENT_INDEX, CF_DELTA, CF_FAMILY, REPLAY_KEY
from orchestrl.envs.counterfactual import (
    EDIT_FAMILIES,
    Edit,
    EditFamily,
    EditNotApplicable,
    supports_counterfactual,
)
from orchestrl.envs.spaces import OBS_KEY

orchestration = pytest.importorskip("orchestrl.envs.orchestration.env")


@pytest.fixture(scope="module")
def finished_env():
    from orchestrl.envs.orchestration.sandbox.pool import close_shared_pool

    env = orchestration.OrchestrationEnv(level=2)
    env.reset(seed=3)
    while env.agents:
        env.step(env.expert_actions())
    yield env
    env.close()
    close_shared_pool()


def test_orchestration_env_implements_the_counterfactual_protocol() -> None:
    assert supports_counterfactual(orchestration.OrchestrationEnv)


def test_each_edit_is_scored_as_a_fresh_env_scores_the_edited_spec(finished_env) -> None:
    """``delta = R(spec) - R(edited)``, with R(spec) the score the episode itself ended on and
    R(edited) the score of the edited spec executed from scratch by another env (no node cache):
    an independent path for both terms."""
    spec = finished_env.counterfactual_spec()
    assert spec is finished_env.last_spec
    fresh = orchestration.OrchestrationEnv(level=2)
    seen = set()
    try:
        for agent in finished_env.possible_agents:
            families = finished_env.counterfactual_edits(spec, agent)
            assert EditFamily.ALTERNATIVE in families
            for family in (EditFamily.BASE_DUTY, EditFamily.DOWNGRADE_CAPACITY, EditFamily.DROP_EDGE):
                if family not in families:
                    with pytest.raises(EditNotApplicable):
                        finished_env.counterfactual(spec, agent, Edit(family))
                    continue
                outcome = finished_env.counterfactual(spec, agent, Edit(family))
                assert outcome.base_reward == pytest.approx(finished_env.last_score.total)
                edited = finished_env.replay(spec, agent, Edit(family)).spec
                if edited is None:  # the edit made the spec invalid: the invalid-spec penalty
                    assert outcome.terms["r_penalty"] < 0
                else:
                    from_scratch = fresh.replay(
                        edited.to_yaml(), agent, Edit(EditFamily.BASE_DUTY)
                    ).base_reward
                    assert outcome.reward == pytest.approx(from_scratch)
                assert "nodes_run" in outcome.terms
                seen.add(family)
    finally:
        fresh.close()
    assert len(seen) >= 2
    assert set(seen) <= set(EDIT_FAMILIES)


@pytest.mark.parametrize("algo", ["mappo", "coma", "coma_cv", "lemon"])
def test_centralised_learners_read_the_dict_observations_of_list_episodes(algo: str) -> None:
    """Env runners return list episodes (``episodes_to_numpy=False``): the joint-state pieces must
    batch each step's observation dict themselves. COMA's critic has one Q per component value
    (factorised), and with ``q_head: paired`` one per (role, x) pair too, the pairs starting at 0."""
    data = tiny(algo, "orchestration", kwargs={"level": 1, "rounds": 2, "task_pool": 4})
    data["training"] = {"train_batch_size": 40, "minibatch_size": 40, "num_epochs": 1}
    if algo == "coma":
        data["algorithm"]["q_head"] = "paired"  # coma_cv keeps the default, factorised
    run = trainer(data)
    try:
        critic = getattr(run.learner.module["shared"], "critic", None)
        before = critic[-1].weight.detach().clone()
        results = run.step()
        losses = [
            float(v["total_loss"]) for v in results.values() if isinstance(v, dict) and "total_loss" in v
        ]
        assert losses and all(np.isfinite(losses))
        batch = run.learner_batch(run.sample(20))["shared"]  # each row's own slot of the joint state
        obs = batch["obs"][OBS_KEY].numpy()  # is its own observation, from the list episodes' dicts
        state, width, n = batch[GLOBAL_STATE].numpy(), obs.shape[1], len(run.config.policy_mapping_fn.table)
        own = state[:, n * width : n * width + n].argmax(axis=1)
        assert len(set(own.tolist())) == n
        for row, i in enumerate(own):
            np.testing.assert_array_equal(state[row, i * width : (i + 1) * width], obs[row])
        if algo.startswith("coma"):
            role, *others = (int(n) for n in run.learner.module["shared"].action_space.nvec)
            singles = role + sum(others)  # role, duty, capacity, input_a, input_b
            if algo == "coma_cv":
                assert len(before) == singles
            else:
                assert len(before) == singles + sum(role * n for n in others)
                assert not before[singles:].any() and before[:singles].any()  # pairs start at 0 ...
                assert critic[-1].weight[singles:].detach().abs().sum() > 0  # ... and learn
    finally:
        run.stop()


def idle_actions(env) -> dict:
    """Every agent idle: the spec has no node, so it is invalid."""
    return {a: np.zeros(len(env.action_space(a).nvec), dtype=np.int64) for a in env.agents}


@pytest.mark.parametrize("valid_rounds", [(True, False), (False, True)])
def test_the_spec_to_replay_is_the_one_the_final_round_executed(valid_rounds: tuple[bool, bool]) -> None:
    env = orchestration.OrchestrationEnv(level=2, rounds=2)
    try:
        env.reset(seed=3)
        for valid in valid_rounds:
            _, _, _, _, infos = env.step(env.expert_actions() if valid else idle_actions(env))
            assert all(info["valid"] is valid for info in infos.values())
        assert not env.agents  # the episode is over
        if valid_rounds[-1]:
            assert env.counterfactual_spec() == env.last_spec == env.task.reference
        else:  # last_spec is still round 1's: not what the final actions wrote
            assert env.last_spec == env.task.reference
            assert env.counterfactual_spec() is None
    finally:
        env.close()


@pytest.fixture(scope="module")
def lemon_two_rounds():
    t = trainer(tiny("lemon", "orchestration", kwargs={"level": 1, "rounds": 2, "task_pool": 4}))
    yield t
    t.stop()


def test_delta_sits_on_the_final_rounds_row_only(lemon_two_rounds) -> None:
    """Real 2-round episodes through the env runner, whole and cut into chunks between the rounds:
    each agent's delta is on the row of its final-round action (t/T = 1/2 in the global state), the
    round-1 row and the artificial bootstrap row are NaN, and an episode whose final spec was
    invalid gets no replay and is counted."""
    t = lemon_two_rounds
    t.runner.get_metrics()  # start counting from here
    chunks = []
    for steps in (1, 1, 40):  # one env step: every sub-env's episode is cut after round 1
        chunks += t.runner.sample(num_timesteps=steps, explore=True)
    invalid_final = int(t.runner.get_metrics()["env/cf_invalid_final"].peek())
    seen: Counter[str] = Counter()
    for chunk in chunks:
        record = chunk.custom_data.get(REPLAY_KEY)
        final_valid = chunk.is_done and next(iter(chunk.get_infos(-1).values()))["valid"]
        if not chunk.is_done:
            assert record is None, "a replay before the episode ended"
        elif not final_valid:
            assert record == {}, "the final spec was invalid: nothing to replay"
            seen["invalid_final"] += 1
        batch = t.learner_batch([chunk])["shared"]
        delta, family = batch[CF_DELTA].numpy(), batch[CF_FAMILY].numpy()
        t_over_horizon = batch[GLOBAL_STATE].numpy()[:, -1]
        real = batch["loss_mask"].numpy().astype(bool)
        final = real & np.isclose(t_over_horizon, 0.5) & chunk.is_done
        assert np.isnan(delta[~final]).all() and (family[~final] == -1).all()
        agents = [f"agent_{i}" for i in batch[AGENT_INDEX].numpy()]
        for row in np.flatnonzero(final):
            expected = (record or {}).get(agents[row])
            if expected is None:
                assert np.isnan(delta[row])
            else:
                assert delta[row] == pytest.approx(expected[0]) and family[row] == expected[1]
                seen["placed"] += 1
        if record and len(chunk) == 1:
            seen["continuation"] += 1  # the chunk that holds round 2 alone
        if not chunk.is_done:
            seen["cut"] += 1
    assert seen["invalid_final"] == invalid_final
    assert seen["placed"] >= 10 and seen["cut"] >= 1 and seen["continuation"] >= 1, seen
    assert seen["invalid_final"] >= 1, seen
