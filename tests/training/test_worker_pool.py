"""The benchmarks' worker pool: a seed's run must not depend on the invocation (no Ray).

Three interpreters are spawned in all (each imports torch: seconds apiece on 2 cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrl.training.runtime import worker_pool


def pid_and_string_hash() -> tuple[int, int]:
    return os.getpid(), hash("agent_0")


def test_each_task_gets_a_fresh_process_when_asked_and_every_process_hashes_strings_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    with worker_pool(1, tmp_path, fresh_per_task=True) as pool:
        fresh = [pool.submit(pid_and_string_hash).result(timeout=120) for _ in range(2)]
    assert fresh[0][0] != fresh[1][0]
    with worker_pool(1, tmp_path) as pool:  # the default keeps its workers
        kept = [pool.submit(pid_and_string_hash).result(timeout=120) for _ in range(2)]
    assert kept[0][0] == kept[1][0]
    # Three interpreters from two pools, as two invocations of a benchmark would start them.
    assert len({h for _, h in fresh + kept}) == 1
    assert os.environ["PYTHONHASHSEED"] == "0"
