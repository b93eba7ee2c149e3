"""The run logs' environment record: each logged run says which code and library versions made it,
and a summary says when its runs span installs (no training: no Ray, no env)."""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
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


def test_a_credit_run_is_logged_with_its_environment(tmp_path: Path) -> None:
    credit = load_benchmark("credit")
    try:
        log = tmp_path / "runs.log"
        credit.record_run(
            ("orchestration_k3_l4", "ippo", 0), {"curves": {"success": [0.5]}, "wall_s": 1.0}, log
        )
        ((_, _, (_, _, _, run)),) = list(
            credit.run_log.entries([log], credit.RUN_LINE, "env, algo, seed, run")
        )
        assert run["environment"]["libraries"]["torch"] == version("torch")
        assert run["curves"] == {"success": [0.5]}
        summary = credit.run_log.environments([run, {}])
        assert summary["unrecorded_runs"] == 1 and summary["library_sets"][0]["runs"] == 1
        assert json.loads(log.read_text().split(" ", 1)[1])[3]["environment"] == run["environment"]
    finally:
        unload_benchmark(credit)
