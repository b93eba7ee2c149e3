"""The benchmarks' worker pool: a seed's run must not depend on the invocation (no Ray)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrl.training.runtime import worker_pool


def string_hash() -> int:
    return hash("agent_0")


def test_workers_hash_strings_the_same_way_in_every_invocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    hashes = []
    for _ in range(2):  # two pools: two sets of fresh interpreters
        with worker_pool(1, tmp_path) as pool:
            hashes.append(pool.submit(string_hash).result(timeout=120))
    assert hashes[0] == hashes[1]
    assert os.environ["PYTHONHASHSEED"] == "0"


def test_fresh_per_task_runs_each_task_in_a_new_process(tmp_path: Path) -> None:
    with worker_pool(1, tmp_path, fresh_per_task=True) as pool:
        pids = [pool.submit(os.getpid).result(timeout=120) for _ in range(2)]
    assert pids[0] != pids[1]
    with worker_pool(1, tmp_path) as pool:  # the default keeps its workers
        pids = [pool.submit(os.getpid).result(timeout=120) for _ in range(2)]
    assert pids[0] == pids[1]
