"""Counterfactual re-execution: each edit family, cache use, and replay from an episode record."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrl.envs.counterfactual import Edit, EditFamily, EditNotApplicable
from orchestrl.envs.orchestration.actions import agent_id
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.solver import spec_actions
from orchestrl.envs.orchestration.spec import Capacity


@pytest.fixture(scope="module")
def finished() -> OrchestrationEnv:
    """A level-4 episode that writes the hidden reference (capacities above small at some nodes)."""
    env = OrchestrationEnv(level=4, rounds=1)
    env.reset(seed=1)
    env.step(spec_actions(env.task.reference, env.task, env.layout))
    assert env.last_score.success == 1.0
    return env


def test_reverting_a_duty_restores_the_base_duty(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    agent = spec.nodes[0].id
    result = finished.replay(spec, agent, Edit.base_duty())
    assert result.applicable and result.spec.node(agent).duty.is_base
    assert result.base_reward == pytest.approx(finished.last_score.total)
    assert result.delta == pytest.approx(result.base_reward - result.reward) and result.delta > 0
    assert {"score", "success", "r_success", "r_efficiency", "r_graph", "r_process", "r_penalty"} <= set(
        result.terms
    )


def test_only_the_edited_node_and_its_descendants_run_again(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    last = spec.nodes[-1]
    result = finished.replay(spec, last.id, Edit.base_duty())
    assert result.nodes_run == 1 and result.cache_hits == len(spec.nodes) - 1
    first = spec.nodes[0]
    result = finished.replay(spec, first.id, Edit.base_duty())
    assert result.nodes_run <= 1 + len(spec.descendants(first.id))


def test_dropping_an_edge_rewires_the_node_to_its_parents_input(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    node = next(n for n in spec.nodes if n.deps[0].startswith("agent_") and len(n.deps) == 1)
    parent = spec.node(node.deps[0])
    result = finished.replay(spec, node.id, Edit.drop_edge())
    assert result.applicable and result.spec.node(node.id).deps == (parent.deps[0],)


def test_dropping_a_source_edge_leaves_an_invalid_spec_with_a_penalty(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    node = next(n for n in spec.nodes if n.deps[0] in spec.sources and len(n.deps) == 1)
    result = finished.replay(spec, node.id, Edit.drop_edge(0))
    assert result.applicable and result.spec is None and result.spec_errors == ("arity",)
    assert result.reward < 0 and result.terms["r_penalty"] < 0


def test_downgrading_capacity_steps_down_one_level(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    strong = next(n for n in spec.nodes if n.capacity is not Capacity.SMALL)
    result = finished.replay(spec, strong.id, Edit.downgrade_capacity())
    levels = list(Capacity)
    assert result.spec.node(strong.id).capacity is levels[levels.index(strong.capacity) - 1]
    assert result.delta > 0  # the reference capacity was needed
    weak = next(n for n in spec.nodes if n.capacity is Capacity.SMALL)
    noop = finished.replay(spec, weak.id, Edit.downgrade_capacity())
    assert not noop.applicable and noop.delta == 0.0


def test_swapping_in_another_action_replaces_the_node(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    agent = spec.nodes[-1].id
    idle = finished.replay(spec, agent, Edit.alternative(np.zeros(5, dtype=np.int64)))
    assert idle.applicable and agent not in {n.id for n in idle.spec.nodes}
    assert idle.spec.output_id == spec.nodes[-2].id
    same = finished.replay(
        spec, agent, Edit.alternative(spec_actions(spec, finished.task, finished.layout)[agent])
    )
    assert not same.applicable
    assert Edit.alternative([1, 2, 0, 0, 0]).family is EditFamily.ALTERNATIVE


def alternatives(env: OrchestrationEnv, slot: int, action: np.ndarray, rng: np.random.Generator) -> list:
    """Other actions of agent ``slot``: each component changed alone (what a policy's alternative
    mostly is), and two drawn uniformly from the mask."""
    space, mask = env.action_space(agent_id(slot)), env.layout.mask(env.task, slot)
    parts = np.split(mask, np.cumsum(space.nvec)[:-1])
    out = []
    for k, part in enumerate(parts):
        choices = [v for v in np.flatnonzero(part) if v != action[k]]
        if choices:
            changed = action.copy()
            changed[k] = rng.choice(choices)
            out.append(changed)
    return out + [space.sample(mask=mask) for _ in range(2)]


@pytest.mark.parametrize(("level", "seeds"), [(2, (0, 1, 2)), (3, (0, 1))])
def test_an_alternative_scores_as_the_team_acting_with_it(level: int, seeds: tuple[int, ...]) -> None:
    """The true counterfactual: for every agent i and alternatives u'_i, the replayed reward is the
    score of the spec the env decodes from {u_-i, u'_i} (here: a fresh env playing that joint
    action), so later agents' inputs and ``auto`` capacities resolve against i's new node."""
    env, judge = OrchestrationEnv(level=level, rounds=1), OrchestrationEnv(level=level, rounds=1)
    rng = np.random.default_rng(level)
    for seed in seeds:
        env.reset(seed=seed)
        team = env.expert_actions()  # the solver's final spec
        env.step(team)
        spec = env.counterfactual_spec()
        assert spec is not None
        for slot, agent in enumerate(env.possible_agents):
            for action in alternatives(env, slot, np.asarray(team[agent]), rng):
                replayed = env.replay(spec, agent, Edit.alternative(action))
                judge.reset(seed=seed)
                _, rewards, *_ = judge.step({**team, agent: action})
                assert replayed.reward == pytest.approx(rewards[agent]), (seed, agent, action.tolist())
                assert replayed.spec in (None, judge.counterfactual_spec())


def test_an_idle_agent_has_nothing_to_revert(finished: OrchestrationEnv) -> None:
    spec = finished.last_spec
    written = {n.id for n in spec.nodes}
    idle = next((a for a in finished.possible_agents if a not in written), None)
    if idle is None:
        pytest.skip("every agent wrote a node in this task")
    assert not finished.replay(spec, idle, Edit.base_duty()).applicable


def test_an_episode_record_lets_a_fresh_env_replay_counterfactuals() -> None:
    env = OrchestrationEnv(level=2, rounds=1)
    env.reset(seed=12)
    *_, infos = env.step(spec_actions(env.task.reference, env.task, env.layout))
    record = infos["agent_0"]["episode"]
    yaml_text = env.last_yaml
    learner_side = OrchestrationEnv(level=2, rounds=1)  # never reset: the spec names its task
    replayed = learner_side.replay(yaml_text, "agent_0", Edit.base_duty())
    original = env.replay(None, "agent_0", Edit.base_duty())
    assert replayed.reward == pytest.approx(original.reward)
    assert replayed.base_reward == pytest.approx(record["score"])
    assert set(record["actions"]) == set(env.possible_agents)
    # an alternative needs the team's actions: a spec read back carries none, the env encodes it
    swap = Edit.alternative(np.array(record["actions"]["agent_0"]) * [1, 0, 1, 1, 1])
    assert learner_side.replay(yaml_text, "agent_0", swap).reward == pytest.approx(
        env.replay(None, "agent_0", swap).reward
    )


def worse_team(seed: int, team: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``team`` with one agent's action changed so that the spec is still valid but holds fewer of
    the example rows."""
    probe = OrchestrationEnv(level=3, rounds=1)
    probe.reset(seed=seed)
    try:
        for slot in rng.permutation(len(probe.possible_agents)):
            agent = probe.possible_agents[slot]
            for action in alternatives(probe, int(slot), np.asarray(team[agent]), rng):
                probe.reset(seed=seed)
                *_, infos = probe.step({**team, agent: action})
                info = next(iter(infos.values()))
                if info["valid"] and info["examples_held"] < 1.0:
                    return {**team, agent: action}
    finally:
        probe.close()
    raise AssertionError(f"no valid worse team for task {seed}")


def episode_return(env: OrchestrationEnv, seed: int, rounds: list[dict[str, np.ndarray]]) -> float:
    env.reset(seed=seed)
    total = 0.0
    for actions in rounds:
        _, rewards, *_ = env.step(actions)
        total += next(iter(rewards.values()))
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_answer_reward_returns_the_score_of_the_teams_answer(seed: int) -> None:
    """``round_reward="answer"``: the return is the score of the spec ``answer_index`` picks from the
    rounds' examples held (a worse later round costs nothing), where ``"spec"`` returns the last
    round's; and a replay of the final spec is priced as that return had the team written the edited
    spec in its last round (a fresh env playing the same rounds with the agent's action swapped),
    without running anything when an earlier round already held every example row."""
    from orchestrl.envs.orchestration.solver import answer_index

    rng = np.random.default_rng(seed)
    env, judge = (
        OrchestrationEnv(level=3, rounds=3, round_reward="answer"),
        OrchestrationEnv(level=3, rounds=3, round_reward="answer"),
    )
    env.reset(seed=seed)
    expert = env.expert_actions()
    rounds = [expert, worse_team(seed, expert, rng), worse_team(seed, expert, rng)]
    held, scores, successes, total = [], [], [], 0.0
    for actions in rounds:
        _, rewards, _, _, infos = env.step(actions)
        info = next(iter(infos.values()))
        held.append(info["examples_held"])
        scores.append(info["score"])
        successes.append(info["success"])
        total += next(iter(rewards.values()))
    assert held[0] == 1.0 and scores[2] < scores[0]  # the solver's plan first, then worse ones
    metrics = info["metrics"]
    assert metrics["answer_success"] == successes[0] and metrics["success"] == successes[2]
    assert total == pytest.approx(scores[answer_index(held)]) == pytest.approx(scores[0])
    spec_env = OrchestrationEnv(level=3, rounds=3)  # "spec": the last round's score
    assert episode_return(spec_env, seed, rounds) == pytest.approx(scores[2])
    for order in (rounds, rounds[::-1]):  # the answer fixed by round 1, or open until round 3
        base = episode_return(env, seed, order)
        assert env.counterfactual_spec() is not None  # the final round's spec is replayed
        final = order[-1]
        for slot, agent in enumerate(env.possible_agents):
            for action in alternatives(env, slot, np.asarray(final[agent]), rng)[:2]:
                try:
                    outcome = env.counterfactual(None, agent, Edit.alternative(action))
                except EditNotApplicable:
                    continue
                swapped = [*order[:-1], {**final, agent: action}]
                assert outcome.base_reward == pytest.approx(base)
                # an answer round 1 fixed is priced without running anything
                assert outcome.terms["executions"] == (0.0 if order is rounds else 1.0)
                assert outcome.reward == pytest.approx(episode_return(judge, seed, swapped)), (agent, action)
    env.close(), judge.close(), spec_env.close()


def test_an_unknown_round_reward_is_named() -> None:
    with pytest.raises(ValueError, match="round_reward must be one of spec, answer, not 'best'"):
        OrchestrationEnv(level=1, round_reward="best")


def test_solver_k_is_the_search_stopped_after_as_many_executions_as_rounds() -> None:
    """``solver_k_success`` (with ``reference_metrics``): per task, never above the full search's
    success, never lower with more rounds, and below it somewhere at k = 1."""
    envs = {k: OrchestrationEnv(level=3, rounds=k, reference_metrics=True) for k in (1, 3)}
    idle = dict.fromkeys(envs[1].possible_agents, np.zeros(5, dtype=np.int64))
    figures = []
    for seed in range(8):
        at_k = {}
        for k, env in envs.items():
            env.reset(seed=seed)
            for _ in range(k):
                *_, infos = env.step(idle)
            at_k[k] = infos["agent_0"]["metrics"]
        full = at_k[1]["solver_success"]
        assert at_k[1]["solver_k_success"] <= at_k[3]["solver_k_success"] <= full == at_k[3]["solver_success"]
        figures.append((at_k[1]["solver_k_success"], full))
    assert any(one < full for one, full in figures), figures
    for env in envs.values():
        env.close()
