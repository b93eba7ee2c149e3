"""The task family: reproducible, split-disjoint, shaped by level, realistic; candidates come from
the public inputs and can express the hidden plan."""

from __future__ import annotations

import pandas as pd
import pytest
from spec_helpers import conjunctions

from orchestrl.envs.orchestration.plans import Family, Stage, cleaning_fits, family_of, run_spec
from orchestrl.envs.orchestration.spec import Capacity, DedupDuty, FilterDuty, Role
from orchestrl.envs.orchestration.tables import TargetIndex, row_hashes
from orchestrl.envs.orchestration.task_store import ENV_VAR
from orchestrl.envs.orchestration.tasks import LEVELS, _generate, generate_task


def test_same_seed_gives_the_same_task(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "")  # generated twice, not read back from a task store
    a = generate_task(2, "train", 11)
    _generate.cache_clear()
    b = generate_task(2, "train", 11)
    assert a is not b and a.reference == b.reference and a.candidates == b.candidates
    for name in a.sources:
        pd.testing.assert_frame_equal(a.sources[name], b.sources[name])
    pd.testing.assert_frame_equal(a.public.examples, b.public.examples)


def test_train_and_heldout_splits_never_share_a_task() -> None:
    train = {generate_task(2, "train", s).target.to_csv() for s in range(12)}
    heldout = {generate_task(2, "heldout", s).target.to_csv() for s in range(12)}
    assert not train & heldout


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_each_level_has_its_shape_and_the_reference_follows_the_skeleton(level: int) -> None:
    config = LEVELS[level]
    assert len(config.skeleton) == config.agents
    for seed in range(6):
        task = generate_task(level, "train", seed)
        nodes = task.reference.nodes
        assert config.stages[0] <= len(nodes) <= config.stages[1] <= config.agents
        assert len(task.sources) <= config.max_sources
        for node in nodes:
            slot = int(node.id.rsplit("_", 1)[1])
            assert config.skeleton[slot] is family_of(node.role)
        joins = [n for n in nodes if n.role is Role.JOIN]
        assert len(joins) == len(task.sources) - 1
    if level == 4:  # branching: a join merges two chains that each did work
        merges = [
            n
            for s in range(6)
            for n in generate_task(4, "train", s).reference.nodes
            if n.role is Role.JOIN and all(d.startswith("agent_") for d in n.deps)
        ]
        assert merges


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_the_examples_are_a_handful_of_target_rows_and_the_target_is_the_reference_output(level: int) -> None:
    task = generate_task(level, "heldout", 1)
    examples, target = task.public.examples, task.target
    assert len(examples) == LEVELS[level].examples < len(target)
    assert tuple(map(str, target.columns)) == task.public.target_columns
    columns = sorted(task.public.target_columns)
    assert set(row_hashes(examples, columns).tolist()) <= set(row_hashes(target, columns).tolist())
    assert TargetIndex(target).compare(run_spec(task.sources, task.reference).output).exact


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
        fact = next(iter(generate_task(level, "train", 1).sources.values()))
        assert (len(fact.columns) > 8) == expected


def test_dirty_levels_need_larger_capacity_only_at_some_nodes() -> None:
    for level in (1, 2):
        for s in range(6):
            assert {n.capacity for n in generate_task(level, "train", s).reference.nodes} == {Capacity.SMALL}
    for level in (3, 4):
        for s in range(6):
            capacities = {n.capacity for n in generate_task(level, "train", s).reference.nodes}
            assert Capacity.SMALL in capacities and capacities != {Capacity.SMALL}


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_candidate_lists_start_with_the_base_duty_and_express_the_reference(level: int) -> None:
    for seed in range(3):
        task = generate_task(level, "train", seed)
        for role, duties in task.candidates.items():
            assert duties[0].is_base and len(duties) == LEVELS[level].duties
            assert len(set(duties)) == len(duties), role
        for node in task.reference.nodes:
            assert node.duty in task.candidates[node.role]


def test_a_level_has_tasks_with_and_without_each_post_role() -> None:
    roles = [{n.role for n in generate_task(3, "train", s).reference.nodes} for s in range(20)]
    for role in (Role.DERIVE, Role.AGGREGATE, Role.SELECT):
        assert any(role in r for r in roles) and any(role not in r for r in roles), role
    families = {family_of(n.role) for s in range(5) for n in generate_task(2, "train", s).reference.nodes}
    assert families == set(Family)


def test_invalid_level_or_split_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="level"):
        generate_task(7, "train", 0)
    with pytest.raises(ValueError, match="split"):
        generate_task(1, "test", 0)


def test_cleaning_stages_share_a_table_as_the_level_allows() -> None:
    def keep(column: str, home: int = 0) -> Stage:
        return Stage(Role.FILTER, FilterDuty(column=column, op="notnull"), home)

    dedup = Stage(Role.DEDUP, DedupDuty(), 0)
    assert cleaning_fits([keep("a"), dedup, keep("b", home=1)], 1)
    assert not cleaning_fits([keep("a"), keep("b")], 1)
    assert cleaning_fits([keep("a"), keep("b"), dedup], 2)
    assert not cleaning_fits([keep("a"), keep("b"), keep("c")], 2)
    assert not cleaning_fits([keep("a"), keep("a")], 2)  # the same column twice narrows nothing new
    assert not cleaning_fits([dedup, dedup], 2)


def test_level_five_filters_tables_twice_and_each_second_filter_narrows_the_first() -> None:
    found = 0
    for seed in range(10):
        task = generate_task(5, "train", seed)
        run = run_spec(task.sources, task.reference)
        for first, second in conjunctions(task.reference):
            found += 1
            assert task.reference.node(first).duty.column != task.reference.node(second).duty.column
            assert 0 < len(run.outputs[second]) < len(run.outputs[first])
    assert found >= 3
