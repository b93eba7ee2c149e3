"""LEMON over the orchestration env's own counterfactual API, through the adapter."""

from __future__ import annotations

import numpy as np
import pytest
from credit_helpers import tiny, trainer

from orchestrl.algorithms.lemon.adapters import as_counterfactual_env, has_counterfactual_api
from orchestrl.envs.counterfactual import EDIT_FAMILIES, Edit, EditFamily, EditNotApplicable

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


def test_orchestration_env_is_recognised_as_counterfactual() -> None:
    assert has_counterfactual_api(orchestration.OrchestrationEnv)


def test_adapter_deltas_equal_the_envs_own_counterfactuals(finished_env) -> None:
    from orchestrl.envs.orchestration.edits import Edit as Native

    adapter = as_counterfactual_env(finished_env)
    spec = adapter.counterfactual_spec()
    assert spec is finished_env.last_spec
    native = {
        EditFamily.BASE_DUTY: Native.revert_duty(),
        EditFamily.DOWNGRADE_CAPACITY: Native.downgrade_capacity(),
    }
    seen = set()
    for agent in finished_env.possible_agents:
        families = adapter.counterfactual_edits(spec, agent)
        assert EditFamily.ALTERNATIVE in families
        for family, edit in native.items():
            expected = finished_env.counterfactual(spec, agent, edit)
            if family not in families:
                assert not expected.applicable
                with pytest.raises(EditNotApplicable):
                    adapter.counterfactual(spec, agent, Edit(family))
                continue
            outcome = adapter.counterfactual(spec, agent, Edit(family))
            assert outcome.base_reward == pytest.approx(expected.base_reward)
            assert outcome.delta == pytest.approx(expected.delta)
            assert "nodes_run" in outcome.terms
            seen.add(family)
        if EditFamily.DROP_EDGE in families:
            outcome = adapter.counterfactual(spec, agent, Edit(EditFamily.DROP_EDGE))
            assert outcome.delta == pytest.approx(outcome.base_reward - outcome.reward)
            seen.add(EditFamily.DROP_EDGE)
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
