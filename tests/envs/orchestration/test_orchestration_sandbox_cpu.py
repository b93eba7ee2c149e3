"""What the process-wide sandbox pool's processes spend, read without starting one: the CPU a
benchmark adds to its own process's to count what its envs' executions cost."""

from __future__ import annotations

from orchestrl.envs.orchestration.sandbox import pool as sandbox
from orchestrl.envs.orchestration.sandbox.pool import (
    Call,
    Job,
    close_shared_pool,
    shared_pool,
    shared_pool_cpu_seconds,
)

BUSY_S = 0.3
BUSY = Job(
    code=[
        (
            "busy",
            "def node():\n"
            "    import time\n"
            f"    end = time.process_time() + {BUSY_S}\n"
            "    while time.process_time() < end:\n"
            "        pass\n"
            "    return None\n",
        )
    ],
    calls=[Call("n", "node")],
    cpu_s=2.0,
    wall_s=20.0,
)
"""Uncertified code: it runs in a process forked for the job, which its worker reaps."""


def test_the_shared_pools_cpu_seconds_count_its_jobs_and_start_nothing() -> None:
    close_shared_pool()  # envs of earlier tests that were never closed hold the old one
    assert shared_pool_cpu_seconds() == 0.0
    assert sandbox._SHARED is None  # reading it started no pool
    pool = shared_pool()
    try:
        before = shared_pool_cpu_seconds()
        result = pool.run(BUSY)
        assert result.fatal is None and result.fresh_process, result.nodes["n"].message
        spent = shared_pool_cpu_seconds() - before
        # the job's own process (reaped by its worker), which this process's CPU time never sees
        assert BUSY_S - 0.02 <= spent < BUSY_S + 0.5, spent
    finally:
        close_shared_pool()
    assert shared_pool_cpu_seconds() == 0.0  # closed: nothing runs, nothing is counted
