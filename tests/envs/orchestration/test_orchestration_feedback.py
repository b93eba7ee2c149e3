"""Round two sees real feedback (each agent its own node, every node on the shared board, the team
its output against the target and the example rows), and ``auto`` actions resolve to what the data
profile implies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.orchestration.actions import AUTO
from orchestrl.envs.orchestration.board import survived
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.features import BOARD_NODE, FEEDBACK_KINDS, MAX_EXAMPLES, OWN_NODE
from orchestrl.envs.orchestration.spec import ROLES, Capacity, Role
from orchestrl.envs.spaces import OBS_KEY


def _second_round(env: OrchestrationEnv, seed: int, actions: dict) -> dict[str, np.ndarray]:
    env.reset(seed=seed)
    obs, *_ = env.step(actions)
    return {agent: o[OBS_KEY] for agent, o in obs.items()}


def test_round_two_feedback_changes_when_one_node_changes() -> None:
    env = OrchestrationEnv(level=2, rounds=2)
    env.reset(seed=6)
    expert = env.expert_actions()
    post = "agent_2"
    role = ROLES[int(expert[post][0]) - 1]
    other = next(j for j in range(len(env.task.candidates[role])) if j != int(expert[post][1]))
    changed = {**expert, post: np.array([expert[post][0], other, *expert[post][2:]])}
    before, after = _second_round(env, 6, expert), _second_round(env, 6, changed)
    blocks = env.builder.offsets()
    for agent in env.possible_agents:  # every agent sees the team's output move
        assert not np.array_equal(before[agent][blocks["feedback"]], after[agent][blocks["feedback"]])
    first = _second_round(env, 6, expert)["agent_0"]
    np.testing.assert_array_equal(first, before["agent_0"])  # and nothing else moves it


def test_feedback_says_which_example_rows_the_output_holds() -> None:
    env = OrchestrationEnv(level=1, rounds=2)
    env.reset(seed=2)
    expert = env.expert_actions()
    obs, *_ = env.step(expert)
    n = len(env.task.public.examples)
    feedback = obs["agent_0"][OBS_KEY][env.builder.offsets()["feedback"]]
    kinds = len(FEEDBACK_KINDS)
    layout = env.layout
    start = kinds + OWN_NODE + 1 + len(ROLES) + layout.duties + int(layout.nvec[2])
    valid, schema, ratio, share = feedback[start : start + 4]
    held = feedback[start + 4 : start + 4 + 2 * n : 2]
    if env.last_score.success == 1.0:
        assert valid == schema == share == 1.0 and ratio == 0.0 and held.all()
    idle = {a: np.zeros(5, dtype=np.int64) for a in env.possible_agents}
    idle["agent_0"] = np.array([1 + ROLES.index(Role.FILTER), 0, 0, 0, 0])  # keep complete rows
    env.reset(seed=2)
    obs, *_ = env.step(idle)
    feedback = obs["agent_0"][OBS_KEY][env.builder.offsets()["feedback"]]
    assert feedback[start + 1] < 1.0 or feedback[start + 2] != 0.0  # the columns or the rows differ


@pytest.mark.parametrize("level", [3, 4])
def test_auto_capacity_and_inputs_resolve_from_the_data(level: int) -> None:
    env = OrchestrationEnv(level=level, rounds=1)
    env.reset(seed=3)
    task, layout = env.task, env.layout
    view = task.public.view
    for role in (Role.FILTER, Role.JOIN, Role.AGGREGATE):
        for j, duty in enumerate(task.candidates[role]):
            home = view.home(role, duty)
            if home is None:
                continue
            action = np.array([1 + ROLES.index(role), j, AUTO, layout.auto_input, layout.auto_input + 1])
            node = layout.decode_node(task, 0, action, before=[])
            need = view.capacity_needed(role, duty, home, set())[0]
            assert Capacity(node["capacity"]) is need
            if role is Role.FILTER and home >= 0:
                assert node["deps"] == [task.source_names[home]]
            if role is Role.JOIN:
                assert node["deps"][0] == task.source_names[0] and node["deps"][1] == task.source_names[home]
            if role is Role.AGGREGATE:
                assert node["deps"] == [task.source_names[0]]


# ------------------------------------------------------------------------------ the shared board
def test_every_agent_sees_every_node_on_the_board_after_a_round() -> None:
    """The board is the same for every agent and reports each node the team wrote: status, and for
    the output of a plan that succeeds, every example row held."""
    env = OrchestrationEnv(level=2, rounds=2)
    first, _ = env.reset(seed=6)
    cut = env.builder.offsets()["board"]
    width = BOARD_NODE + MAX_EXAMPLES
    assert not any(o[OBS_KEY][cut].any() for o in first.values())  # nothing on it before a round
    obs, *_, infos = env.step(env.expert_actions())
    assert all(i["success"] == i["examples_held"] == 1.0 for i in infos.values())
    boards = [o[OBS_KEY][cut].reshape(env.layout.agents, width) for o in obs.values()]
    for other in boards[1:]:
        np.testing.assert_array_equal(other, boards[0])
    spec, n = env.last_spec, len(env.task.public.examples)
    assert env.last_score.success == 1.0
    for slot, agent in enumerate(env.possible_agents):
        line = boards[0][slot]
        wrote = any(node.id == agent for node in spec.nodes)
        assert line[0] == float(wrote) and line[1] == float(wrote)  # wrote a node, and it ran ok
        assert line[6] == float(agent == spec.output_id)
        if agent == spec.output_id:
            assert line[5] == 1.0 and (line[BOARD_NODE : BOARD_NODE + n] == 1.0).all()


def test_an_example_row_survives_a_node_whose_output_agrees_with_it_on_the_columns_it_has() -> None:
    examples = pd.DataFrame({"city": ["Oslo", "Rome"], "total": [3, 5]})
    target = frozenset(examples.columns)
    kept = pd.DataFrame({"city": ["Oslo", "Lima"], "qty": [1, 2]})  # Rome filtered out before totals
    assert survived(kept, target, examples) == (1, -1)
    assert survived(pd.DataFrame({"qty": [1]}), target, examples) == (0, 0)  # nothing to tell
    assert survived(pd.DataFrame({"city": ["Rome"], "total": [3]}), target, examples) == (-1, -1)
