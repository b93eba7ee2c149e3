"""The task family: reproducible, split-disjoint, shaped by level, realistic and honest."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.orchestration.actions import ActionLayout
from orchestrl.envs.orchestration.evidence import plan_inputs
from orchestrl.envs.orchestration.features import ObservationBuilder
from orchestrl.envs.orchestration.spec import Capacity, Role
from orchestrl.envs.orchestration.tasks import LEVELS, generate_task


def test_same_seed_gives_the_same_task() -> None:
    a, b = generate_task(2, "train", 11), generate_task(2, "train", 11)
    assert a.reference == b.reference
    for name in a.sources:
        pd.testing.assert_frame_equal(a.sources[name], b.sources[name])


def test_train_and_heldout_splits_never_share_a_task() -> None:
    train = {generate_task(2, "train", s).target.to_csv() for s in range(12)}
    heldout = {generate_task(2, "heldout", s).target.to_csv() for s in range(12)}
    assert not train & heldout


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_each_level_has_its_shape(level: int) -> None:
    config = LEVELS[level]
    tasks = [generate_task(level, "train", s) for s in range(8)]
    for task in tasks:
        nodes = task.reference.nodes
        assert config.stages[0] <= len(nodes) <= config.stages[1] <= config.agents
        assert len(task.sources) <= config.max_sources
        joins = [n for n in nodes if n.role is Role.JOIN]
        if level == 1:
            assert not joins and all(len(n.deps) == 1 for n in nodes)
        else:
            assert joins
    if level == 4:  # branching: some join merges two chains that each did work
        merges = [
            n
            for t in tasks
            for n in t.reference.nodes
            if n.role is Role.JOIN and all(d.startswith("agent_") for d in n.deps)
        ]
        assert merges


def test_sources_are_realistic_with_nulls_duplicates_and_messy_text() -> None:
    tasks = [generate_task(level, "train", s) for level in (3, 4) for s in range(10)]
    frames = [f for t in tasks for f in t.sources.values()]
    assert any(f.isna().any().any() for f in frames)
    dedups = [t for t in tasks if any(n.role is Role.DEDUP for n in t.reference.nodes)]
    assert dedups
    for task in dedups:
        node = next(n for n in task.reference.nodes if n.role is Role.DEDUP)
        source = task.sources[node.deps[0]] if node.deps[0] in task.sources else None
        if source is not None:
            assert (
                source.duplicated(subset=list(node.duty.subset)).any() or node.capacity is not Capacity.SMALL
            )
    text = pd.concat([f.select_dtypes(exclude="number").stack() for f in frames])
    assert text.astype(str).str.contains(r"^\s|\s$|[A-Z]", regex=True).any()


def test_distractor_columns_appear_from_level_three() -> None:
    for level, expected in ((2, False), (3, True)):
        task = generate_task(level, "train", 1)
        fact = next(iter(task.sources.values()))
        unused = [c for c in task.infos[0].columns if not c.in_target]
        assert (len(fact.columns) > 8) == expected
        assert unused


def test_dirty_levels_need_larger_capacity_only_at_some_nodes() -> None:
    for level in (1, 2):
        for s in range(6):
            assert {n.capacity for n in generate_task(level, "train", s).reference.nodes} == {Capacity.SMALL}
    for level in (3, 4):
        for s in range(6):
            capacities = {n.capacity for n in generate_task(level, "train", s).reference.nodes}
            assert Capacity.SMALL in capacities and capacities != {Capacity.SMALL}


def test_the_public_analysis_matches_the_hidden_reference() -> None:
    for level in sorted(LEVELS):
        task = generate_task(level, "heldout", 3)
        for position, (planned, node) in enumerate(zip(task.plan, task.reference.nodes, strict=True)):
            assert planned.role is node.role
            assert task.candidates[node.role][planned.candidate] == node.duty
            assert planned.capacity is node.capacity
            inputs = [
                task.source_names[i] if kind == "source" else f"agent_{i}"
                for kind, i in plan_inputs(task.plan)[position]
            ]
            assert inputs == list(node.deps)


def test_observations_never_read_the_hidden_pipeline() -> None:
    task = generate_task(3, "train", 2)
    config = LEVELS[3]
    builder = ObservationBuilder(ActionLayout(config.agents, config.max_sources, config.duties))
    blind = dataclasses.replace(task, reference=None, target=None, reference_work=0.0)
    np.testing.assert_array_equal(builder.task_features(task), builder.task_features(blind))
    for slot in range(config.agents):
        np.testing.assert_array_equal(builder.brief(task, slot), builder.brief(blind, slot))


def test_candidate_lists_start_with_the_base_duty_and_have_the_level_size() -> None:
    task = generate_task(4, "train", 0)
    for role, duties in task.candidates.items():
        assert duties[0].is_base
        assert len(duties) == LEVELS[4].duties
        assert len(set(duties)) == len(duties), role
