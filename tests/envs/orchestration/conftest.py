"""Fixtures for the LEMON env tests: the process-wide sandbox pool is stopped after the session,
and the session fails if any of its processes or directories outlive it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orchestrl.envs.orchestration.sandbox import pool as sandbox


def alive(pid: int) -> bool:
    """True while ``pid`` runs (zombies count as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="session", autouse=True)
def shared_pool_is_stopped_cleanly() -> Iterator[None]:
    yield
    pool = sandbox._SHARED
    if pool is None:
        return
    pids, base = pool.pids(), pool._base
    sandbox.close_shared_pool()
    assert not [p for p in pids if alive(p)], "sandbox processes outlived the session"
    assert not base.exists(), "sandbox directories outlived the session"


@pytest.fixture(scope="module")
def pool() -> Iterator[sandbox.SandboxPool]:
    """A private pool with tight limits, for hostile programs."""
    with sandbox.SandboxPool(workers=1, limits=sandbox.SandboxLimits(memory_mb=512)) as p:
        yield p


@pytest.fixture
def is_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture(name="alive")
def alive_fixture() -> Callable[[int], bool]:
    return alive
