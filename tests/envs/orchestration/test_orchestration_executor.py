"""The node cache: a changed node re-runs with its descendants only; failures are structured."""

from __future__ import annotations

from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.sandbox.pool import shared_pool
from orchestrl.envs.orchestration.spec import Capacity, FilterDuty, parse_spec
from orchestrl.envs.orchestration.tasks import generate_task


def _ran(execution) -> set[str]:
    return {n.node_id for n in execution.nodes.values() if n.status != "skipped" and not n.cached}


def test_changing_one_node_reruns_only_it_and_its_descendants() -> None:
    task = generate_task(4, "train", 1)
    spec = task.reference
    executor = Executor(shared_pool(), NodeCache())
    first = executor.execute(task, spec)
    assert first.ok and _ran(first) == {n.id for n in spec.nodes} and first.cache_hit_rate == 0.0
    again = executor.execute(task, spec)
    assert _ran(again) == set() and again.cache_hit_rate == 1.0
    assert again.output_hash == first.output_hash
    changed = spec.nodes[1]
    edited = spec.replace_node(changed.model_copy(update={"capacity": Capacity.LARGE}))
    third = executor.execute(task, edited)
    assert _ran(third) == {changed.id} | spec.descendants(changed.id)
    assert 0.0 < third.cache_hit_rate < 1.0
    assert executor.cache.hits >= len(spec.nodes)


def test_code_that_raises_is_a_structured_failure_that_is_cached() -> None:
    task = generate_task(1, "train", 3)
    source = task.source_names[0]
    spec = parse_spec(
        {
            "sources": [source],
            "nodes": [
                {
                    "id": "a",
                    "role": "filter",
                    "duty": FilterDuty(column="no_such_column", op="notnull").model_dump(),
                    "deps": [source],
                },
                {"id": "b", "role": "dedup", "duty": {"kind": "dedup"}, "deps": ["a"]},
            ],
        }
    )
    executor = Executor(shared_pool(), NodeCache())
    result = executor.execute(task, spec)
    assert not result.ok and result.output is None
    assert result.nodes["a"].kind == "exception" and "no_such_column" in result.nodes["a"].message
    assert result.nodes["b"].status == "skipped"
    again = executor.execute(task, spec)
    assert again.nodes["a"].cached and again.nodes["a"].kind == "exception"


def test_cache_is_bounded_in_bytes() -> None:
    task = generate_task(2, "train", 0)
    cache = NodeCache(max_mb=0.001)
    executor = Executor(shared_pool(), cache)
    executor.execute(task, task.reference)
    assert len(cache) == 1  # only the newest entry fits
