"""The on-disk task store: a stored task is the generated task, the generator is skipped when it is
there, bad files and unwritable stores only cost a generation, and a changed generator's tasks
are never served. No Ray."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.orchestration import tasks
from orchestrl.envs.orchestration.env import OrchestrationEnv
from orchestrl.envs.orchestration.task_store import ENV_VAR, PACKAGE, TaskStore, generator_digest

LEVEL, SEED = 3, 5


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TaskStore]:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "tasks"))
    tasks._generate.cache_clear()
    yield TaskStore(tmp_path / "tasks")
    tasks._generate.cache_clear()  # no task of this store outlives the test in memory


def observations(task: tasks.Task) -> dict:
    env = OrchestrationEnv(level=LEVEL)
    try:
        obs, _ = env.reset(seed=0, options={"task": task})
    finally:
        env.close()
    return obs


def test_a_stored_task_is_the_generated_one_and_is_not_generated_again(
    store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated = tasks.generate_task(LEVEL, "train", SEED)
    assert store.path(LEVEL, "train", SEED).is_file()
    tasks._generate.cache_clear()

    def generate_again(*args: object) -> None:
        raise AssertionError(f"generated again: {args}")

    monkeypatch.setattr(tasks, "_build", generate_again)
    loaded = tasks.generate_task(LEVEL, "train", SEED)
    assert loaded is not generated
    assert loaded.key == generated.key and loaded.reference == generated.reference
    assert loaded.candidates == generated.candidates
    for name, frame in generated.sources.items():
        pd.testing.assert_frame_equal(loaded.sources[name], frame)
    pd.testing.assert_frame_equal(loaded.target, generated.target)
    pd.testing.assert_frame_equal(loaded.public.examples, generated.public.examples)
    first, second = observations(generated), observations(loaded)
    assert first.keys() == second.keys()
    for agent in first:
        for key in first[agent]:
            np.testing.assert_array_equal(first[agent][key], second[agent][key])


def test_an_unreadable_file_is_generated_again_and_replaced(store: TaskStore) -> None:
    path = store.path(LEVEL, "train", SEED)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a pickle")
    task = tasks.generate_task(LEVEL, "train", SEED)
    assert store.load(LEVEL, "train", SEED).reference == task.reference


def test_an_unwritable_store_only_skips_storing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("the store's directory cannot be made under a file")
    monkeypatch.setenv(ENV_VAR, str(blocker))
    tasks._generate.cache_clear()
    try:
        assert tasks.generate_task(2, "train", 1).key.seed == 1
    finally:
        tasks._generate.cache_clear()
    assert blocker.is_file() and not list(tmp_path.glob("**/*.part"))


def test_no_store_is_used_when_the_variable_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "")
    monkeypatch.chdir(tmp_path)
    tasks._generate.cache_clear()
    try:
        tasks.generate_task(2, "train", 1)
    finally:
        tasks._generate.cache_clear()
    assert not list(tmp_path.iterdir())


def test_a_changed_generator_gets_a_store_of_its_own(tmp_path: Path) -> None:
    """Any module of the package counts, a subpackage's too (the planning tasks' grammar)."""
    copy = tmp_path / "orchestration"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert generator_digest(copy) == generator_digest(PACKAGE)
    for changed in ("tasks.py", "planning/grammar.py"):
        before = generator_digest(copy)
        with (copy / changed).open("a") as handle:
            handle.write("\n# one more line\n")
        generator_digest.cache_clear()
        assert generator_digest(copy) != before


def test_commands_keep_the_store_under_their_run_dir(tmp_path: Path) -> None:
    probe = (
        "import os, pathlib; from orchestrl.training.runtime import quiet_environment; "
        f"quiet_environment(pathlib.Path({str(tmp_path)!r})); print(os.environ[{ENV_VAR!r}])"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path.resolve() / "cache" / "tasks")
