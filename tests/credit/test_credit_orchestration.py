"""LEMON over the orchestration env, which speaks the counterfactual protocol itself."""

from __future__ import annotations

import numpy as np
import pytest
from credit_helpers import tiny, trainer

from orchestrl.envs.counterfactual import (
    EDIT_FAMILIES,
    Edit,
    EditFamily,
    EditNotApplicable,
    supports_counterfactual,
)

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


@pytest.mark.parametrize("algo", ["mappo", "coma", "lemon"])
def test_centralised_learners_read_the_dict_observations_of_list_episodes(algo: str) -> None:
    """Env runners return list episodes (``episodes_to_numpy=False``): the joint-state pieces must
    batch each step's observation dict themselves."""
    data = tiny(algo, "orchestration", kwargs={"level": 1, "rounds": 2, "task_pool": 4})
    data["training"] = {"train_batch_size": 40, "minibatch_size": 40, "num_epochs": 1}
    run = trainer(data)
    try:
        results = run.step()
        losses = [
            float(v["total_loss"]) for v in results.values() if isinstance(v, dict) and "total_loss" in v
        ]
        assert losses and all(np.isfinite(losses))
    finally:
        run.stop()
