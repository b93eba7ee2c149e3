"""NeuroMAS v3's graph on Text2SQL: the composer decides knowing the extractor's choices (its value
pointer biased by the chosen WHERE column's value links), acting and learning agree on the
log-probability, and parameters are counted where they work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import tree
from neuromas_helpers import small_experiment
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.neuromas.encoders import POINTS_AT, REL_VALUE_OF_COLUMN
from orchestrl.algorithms.neuromas.team_env import TEAM, NeuromasTeamEnv
from orchestrl.envs.text2sql.actions import COMPONENTS, COMPOSER, EXTRACTOR, NVEC
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config


def module(data_dir: Path, **knobs):
    data = small_experiment("text2sql", data_dir, word_vectors=True, **knobs)
    torch.manual_seed(0)
    return build_ppo_config(validate_config(data)).get_multi_rl_module_spec().build()[TEAM]


@pytest.fixture(scope="module")
def team_batch(t2s_data_dir: Path) -> dict:
    """The team's observation of a question whose WHERE value the question names (count_where)."""
    env = NeuromasTeamEnv({"name": "text2sql", "kwargs": {"split": "train", "data_dir": str(t2s_data_dir)}})
    try:
        questions = env.inner.raw_env.questions
        index = next(i for i, q in enumerate(questions) if q.kind == "count_where")
        obs, _ = env.reset(options={"question_index": index})
        expert = env.team_expert()[TEAM]
    finally:
        env.close()
    batch = tree.map_structure(lambda x: torch.as_tensor(np.asarray(x))[None], obs[TEAM])
    return {"obs": batch, "expert": torch.as_tensor(np.asarray(expert))[None].long()}


def _split(logits: torch.Tensor) -> dict[str, torch.Tensor]:
    n = sum(NVEC[EXTRACTOR])
    return {EXTRACTOR: logits[:, :n], COMPOSER: logits[:, n:]}


def test_a_sequential_composer_conditions_on_the_extractors_action(t2s_data_dir: Path, team_batch) -> None:
    """Two extractor actions that differ in the WHERE column: the extractor's logits stay the same,
    the composer's move (its choice embedding, trained off zero here)."""
    team = module(t2s_data_dir, sequential=True, observe="every")
    with torch.no_grad():
        for p in team.net.choices.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    given = team_batch["expert"].clone()
    other = given.clone()
    where = COMPONENTS[EXTRACTOR].index("where")
    other[0, where] = 0 if given[0, where] != 0 else 1
    with torch.no_grad():
        a = _split(team.run_graph({Columns.OBS: team_batch["obs"]}, "greedy", actions=given).env_logits)
        b = _split(team.run_graph({Columns.OBS: team_batch["obs"]}, "greedy", actions=other).env_logits)
    torch.testing.assert_close(a[EXTRACTOR], b[EXTRACTOR], rtol=0, atol=0)
    assert not torch.allclose(a[COMPOSER], b[COMPOSER])


def test_the_value_pointer_is_biased_toward_words_naming_a_value_of_the_chosen_where_column(
    t2s_data_dir: Path, team_batch
) -> None:
    """A bias on the value-of-column relation moves exactly the value pointer's logits of the words
    that name a value stored in the WHERE column the extractor chose, by exactly that bias."""
    team = module(t2s_data_dir, sequential=True, observe="every")
    components = COMPONENTS[COMPOSER]
    head = team.net.heads[COMPOSER][components.index("value_start")]
    where_slot = [n for n in COMPONENTS[EXTRACTOR] if n in POINTS_AT].index("where")
    given = team_batch["expert"]
    where = COMPONENTS[EXTRACTOR].index("where")
    assert int(given[0, where]) > 0  # the expert's WHERE column, whose value the question names
    graph = {Columns.OBS: team_batch["obs"]}
    with torch.no_grad():
        before = _split(team.run_graph(graph, "greedy", actions=given).env_logits)[COMPOSER]
        head.relation_bias[where_slot, REL_VALUE_OF_COLUMN] = 5.0
        after = _split(team.run_graph(graph, "greedy", actions=given).env_logits)[COMPOSER]
        enc = team.run_graph(graph, "greedy", actions=given).encoded[COMPOSER]
    start = sum(NVEC[COMPOSER][: components.index("value_start")])
    moved = (after - before)[0, start : start + NVEC[COMPOSER][components.index("value_start")]]
    column_row = POINTS_AT["where"].start + int(given[0, where])
    linked = enc.relations[0, column_row, POINTS_AT["value_start"]] == REL_VALUE_OF_COLUMN
    assert linked.any()
    torch.testing.assert_close(moved[linked], torch.full((int(linked.sum()),), 5.0))
    assert bool((moved[~linked] == 0).all())
    torch.testing.assert_close(after[:, :start], before[:, :start], rtol=0, atol=0)


@pytest.mark.parametrize("messages", ["continuous", "discrete"])
def test_a_sequential_team_s_acting_log_probability_is_the_learner_s(
    t2s_data_dir: Path, team_batch, messages: str
) -> None:
    """The env runner samples each agent after the one before; the learner, given those actions,
    recomputes the same log-probability (PPO's ratio starts at exactly 1)."""
    team = module(t2s_data_dir, sequential=True, observe="every", messages=messages)
    batch = {Columns.OBS: tree.map_structure(lambda x: x.repeat(16, *[1] * (x.dim() - 1)), team_batch["obs"])}
    torch.manual_seed(1)
    acted = team.forward_exploration(batch)
    assert len({tuple(row) for row in acted[Columns.ACTIONS].tolist()}) > 1  # it does sample
    trained = team.forward_train({**batch, Columns.ACTIONS: acted[Columns.ACTIONS]})
    dist = team.get_train_action_dist_cls().from_logits(trained[Columns.ACTION_DIST_INPUTS])
    torch.testing.assert_close(dist.logp(acted[Columns.ACTIONS]), acted[Columns.ACTION_LOGP])


def test_greedy_inference_decides_the_composer_after_the_extractor_s_greedy_choice(
    t2s_data_dir: Path, team_batch
) -> None:
    """``orchestrl ask`` takes the argmax of the inference logits: those are the composer's logits
    given the extractor's argmax, the same as teacher-forcing that action."""
    team = module(t2s_data_dir, sequential=True, observe="every")
    with torch.no_grad():
        for p in team.net.choices.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        graph = {Columns.OBS: team_batch["obs"]}
        inferred = team.forward_inference(graph)
        forced = team.run_graph(graph, "greedy", actions=inferred[Columns.ACTIONS]).env_logits
    torch.testing.assert_close(inferred[Columns.ACTION_DIST_INPUTS], forced, rtol=0, atol=0)


def test_live_parameters_leave_out_what_the_actions_never_reach(t2s_data_dir: Path, team_batch) -> None:
    """Under ``observe: inputs`` the composer's heads look nothing up, so their look-up weights are
    built but dead; every other count is the same network's."""
    batch = {Columns.OBS: team_batch["obs"]}
    reads_all, inputs_only = module(t2s_data_dir, observe="all"), module(t2s_data_dir, observe="inputs")
    total = sum(p.numel() for p in reads_all.net.parameters())
    assert total == sum(p.numel() for p in inputs_only.net.parameters())
    assert inputs_only.live_parameters(batch) < reads_all.live_parameters(batch) <= total
    assert all(p.grad is None for p in reads_all.net.parameters())  # it leaves no gradient behind
