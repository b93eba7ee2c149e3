"""Scoring: exact match up to order and float noise, partial credit, and each reward term."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.reward import RewardConfig, Scorer
from orchestrl.envs.orchestration.sandbox.pool import shared_pool
from orchestrl.envs.orchestration.spec import Capacity, parse_spec
from orchestrl.envs.orchestration.tables import TargetIndex
from orchestrl.envs.orchestration.tasks import LEVELS, generate_task

TARGET = pd.DataFrame(
    {"region": ["north", "south", "east", None], "total": [10.5, 20.25, 1 / 3, 7.0], "n": [1, 2, 3, 4]}
)


def test_same_rows_in_another_order_with_float_noise_is_a_success() -> None:
    shuffled = TARGET.sample(frac=1.0, random_state=3)[["n", "total", "region"]].reset_index(drop=True)
    shuffled["total"] = shuffled["total"] * (1 + 1e-12)
    shuffled["n"] = shuffled["n"].astype("float64")
    match = TargetIndex(TARGET).compare(shuffled)
    assert match.exact and match.credit == 1.0
    boundary = pd.DataFrame({"k": ["a", "b"], "v": [0.12345650000001, 2.0]})
    nudged = boundary.assign(v=[0.12345649999999, 2.0]).iloc[::-1]  # rounds the other way
    assert TargetIndex(boundary).compare(nudged).exact
    assert not TargetIndex(boundary).compare(boundary.assign(v=[0.1235, 2.0])).exact


def test_partial_credit_grows_with_overlap_and_stays_below_half() -> None:
    index = TargetIndex(TARGET)
    fewer_rows = index.compare(TARGET.iloc[:2])
    fewer_cols = index.compare(TARGET[["region", "total"]].iloc[:2])
    nothing = index.compare(pd.DataFrame({"other": [1]}))
    assert not fewer_rows.exact and 0 < fewer_cols.credit < fewer_rows.credit < 0.5
    assert nothing.credit == 0.0
    assert index.compare(TARGET.assign(total=TARGET["total"] + 1)).credit < 0.5


def _execution(level: int, seed: int, spec=None):
    task = generate_task(level, "train", seed)
    executor = Executor(shared_pool(), NodeCache())
    return task, executor.execute(task, spec or task.reference)


def _scorer(task, schedule: float = 0.0) -> Scorer:
    return Scorer(
        TargetIndex(task.target),
        task.reference_work,
        LEVELS[task.key.level].agents,
        RewardConfig(schedule=schedule),
        examples=task.public.examples,
    )


def test_reference_earns_the_full_efficiency_bonus_and_extra_capacity_costs() -> None:
    task, execution = _execution(2, 4)
    best = _scorer(task).score(execution)
    assert best.success == 1.0 and best.r_efficiency == pytest.approx(0.1)
    heavier = task.reference.replace_node(
        task.reference.nodes[0].model_copy(update={"capacity": Capacity.LARGE})
    )
    _, execution = _execution(2, 4, heavier)
    slower = _scorer(task).score(execution)
    assert slower.success == 1.0 and 0 < slower.r_efficiency < best.r_efficiency


def test_a_wrong_output_earns_no_efficiency_bonus_and_partial_credit_only() -> None:
    task = generate_task(2, "train", 4)
    data = task.reference.model_dump(mode="json")
    data["nodes"], data["output"] = data["nodes"][:-1], None
    task, execution = _execution(2, 4, parse_spec(data))
    score = _scorer(task).score(execution)
    assert score.success == 0.0 and score.r_efficiency == 0.0 and 0 <= score.r_success < 0.5


def test_graph_cost_grows_with_nodes_and_edges() -> None:
    task, execution = _execution(2, 4)
    score = _scorer(task).score(execution)
    nodes, edges = len(task.reference.nodes), task.reference.edges()
    assert score.r_graph == pytest.approx(-0.05 * (nodes + edges) / (3 * LEVELS[2].agents))


def test_schedule_moves_weight_from_shaping_to_the_final_result() -> None:
    task, execution = _execution(3, 6)
    dense, late = _scorer(task, 0.0).score(execution), _scorer(task, 1.0).score(execution)
    assert dense.r_process > 0 and late.r_process == 0
    assert dense.r_success == late.r_success == 1.0
    assert dense.total > late.total >= 0.99
    invalid_dense, invalid_late = _scorer(task, 0.0).invalid(), _scorer(task, 1.0).invalid()
    assert invalid_dense.r_penalty < invalid_late.r_penalty < 0
    with pytest.raises(ValueError):
        RewardConfig(schedule=1.5)


def test_every_term_is_reported_and_sums_to_the_score() -> None:
    task, execution = _execution(1, 2)
    terms = _scorer(task).score(execution).terms()
    parts = ["r_success", "r_efficiency", "r_graph", "r_process", "r_penalty"]
    assert set(parts) | {"score", "success"} == set(terms)
    assert terms["score"] == pytest.approx(float(np.sum([terms[p] for p in parts])))


def test_process_shaping_reads_the_example_rows_not_the_hidden_target() -> None:
    """Two targets that fit the same example rows: the same execution earns the same shaping
    (``r_process``), while ``r_success`` tells them apart."""
    task, execution = _execution(2, 4)
    truth = _scorer(task).score(execution)
    examples = task.public.examples
    other = TargetIndex(examples.copy())  # a target of the example rows alone fits them too
    scorer = Scorer(other, task.reference_work, LEVELS[2].agents, RewardConfig(), examples=examples)
    swapped = scorer.score(execution)
    assert truth.r_process == swapped.r_process == pytest.approx(RewardConfig().process_weight)
    assert truth.success == 1.0 and swapped.success == 0.0
