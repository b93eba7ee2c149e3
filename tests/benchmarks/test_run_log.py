"""The run logs' environment record: each logged run says which code and library versions made it,
and a summary says when its runs span installs (no training: no Ray, no env)."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from types import ModuleType

import pytest
from credit_helpers import BENCHMARKS, load_benchmark, unload_benchmark


@pytest.fixture(scope="module")
def run_log() -> Iterator[ModuleType]:
    module = load_benchmark("run_log")
    yield module
    unload_benchmark(module)


def test_a_run_s_environment_names_the_commit_python_and_installed_libraries(run_log: ModuleType) -> None:
    env = run_log.environment()
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=BENCHMARKS, check=True
    ).stdout.strip()
    assert env["commit"] == head
    assert env["python"] == platform.python_version()
    assert env["libraries"]["torch"] == version("torch")
    assert env["libraries"]["pandas"] == version("pandas")
    assert set(env["libraries"]) == set(run_log.LIBRARIES)


def test_a_library_that_is_not_installed_is_recorded_as_none(
    run_log: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_log, "LIBRARIES", ("torch", "no-such-distribution-orchestrl"))
    assert run_log.environment()["libraries"] == {
        "torch": version("torch"),
        "no-such-distribution-orchestrl": None,
    }


def test_environments_counts_the_runs_of_each_library_set_and_those_that_recorded_none(
    run_log: ModuleType,
) -> None:
    old, new = {"torch": "2.12.0", "pandas": "3.0.0"}, {"torch": "2.13.0", "pandas": "3.1.1"}
    runs = [
        {"environment": {"commit": "a", "python": "3.11.9", "libraries": old}},
        {"environment": {"commit": "b", "python": "3.11.9", "libraries": dict(reversed(new.items()))}},
        {"environment": {"commit": "c", "python": "3.11.9", "libraries": new}},
        {"success": 1.0},
    ]
    assert run_log.environments(runs) == {
        "library_sets": [{"libraries": old, "runs": 1}, {"libraries": new, "runs": 2}],
        "unrecorded_runs": 1,
    }
