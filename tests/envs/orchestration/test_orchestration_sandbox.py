"""The sandbox: hostile programs are stopped or denied, reported, and the pool stays healthy."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import orchestrl
from orchestrl.envs.orchestration.sandbox.framing import ProtocolError, load_table
from orchestrl.envs.orchestration.sandbox.pool import (
    Call,
    Job,
    SandboxLimits,
    SandboxPool,
    close_shared_pool,
    remove_stale_dirs,
    shared_pool,
)

TABLE = pd.DataFrame({"k": ["a", "b", "c"], "v": [1.0, 2.0, 3.0]})
SOURCES = {"t": ("table-key", pickle.dumps(TABLE))}


def program(body: str, wall_s: float = 5.0, cpu_s: float = 1.0) -> Job:
    """A job calling ``node()`` whose body is ``body`` (indented into the function)."""
    code = "def node():\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    return Job(code=[(f"code-{hash(code)}", code)], calls=[Call("n", "node")], cpu_s=cpu_s, wall_s=wall_s)


def assert_healthy(pool: SandboxPool) -> None:
    job = Job(
        code=[("ok", "def node(t):\n    return t[t.v > 1], 1.0\n")],
        calls=[Call("n", "node", ("t",))],
        sources=SOURCES,
    )
    result = pool.run(job)
    assert result.ok, result.nodes["n"].message
    assert load_table(result.nodes["n"].frame)["k"].tolist() == ["b", "c"]


def test_reading_etc_passwd_is_denied(pool: SandboxPool) -> None:
    result = pool.run(program("return open('/etc/passwd').read()"))
    assert result.fatal == "denied"
    assert result.nodes["n"].kind == "denied" and "root:" not in result.nodes["n"].message
    assert_healthy(pool)


def test_reading_the_repository_is_denied(pool: SandboxPool) -> None:
    secret = Path(orchestrl.__file__).resolve()
    result = pool.run(program(f"return open({str(secret)!r}).read()"))
    assert result.nodes["n"].kind == "denied"
    assert_healthy(pool)


def test_opening_a_socket_is_denied(pool: SandboxPool) -> None:
    result = pool.run(program("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)"))
    assert result.nodes["n"].kind == "denied"
    assert_healthy(pool)


def test_a_swallowed_violation_is_still_reported(pool: SandboxPool) -> None:
    body = "import os\ntry:\n    os.listdir('/')\nexcept Exception:\n    pass\n"
    body += "import pandas\nreturn pandas.DataFrame()"
    result = pool.run(program(body))
    assert result.fatal == "denied"
    assert_healthy(pool)


def test_fork_bomb_is_stopped(pool: SandboxPool) -> None:
    result = pool.run(program("import os\nwhile True:\n    os.fork()"))
    assert result.nodes["n"].kind == "denied"
    result = pool.run(program("import subprocess\nsubprocess.run(['sh', '-c', ':(){ :|:& };:'])"))
    assert result.nodes["n"].kind == "denied"
    assert_healthy(pool)


def test_allocating_10_gb_is_refused(pool: SandboxPool) -> None:
    result = pool.run(program("block = bytearray(10 * 2**30)\nreturn block"))
    assert result.fatal == "memory" and result.nodes["n"].kind == "memory"
    assert_healthy(pool)


def test_infinite_loop_hits_the_cpu_limit(pool: SandboxPool) -> None:
    result = pool.run(program("while True:\n    pass", cpu_s=0.3, wall_s=30))
    assert result.fatal == "cpu_limit" and result.nodes["n"].kind == "cpu_limit"
    assert_healthy(pool)


def test_sleeping_past_the_wall_limit_kills_the_worker(pool: SandboxPool) -> None:
    result = pool.run(program("import time\ntime.sleep(60)", wall_s=1.0))
    assert result.fatal == "timeout" and result.nodes["n"].kind == "timeout"
    assert result.wall_s < 5
    assert_healthy(pool)


def test_writing_outside_the_temp_dir_is_denied(pool: SandboxPool, tmp_path: Path) -> None:
    repository = Path(orchestrl.__file__).resolve().parent.parent / "escape.txt"
    result = pool.run(program(f"open({str(repository)!r}, 'w').write('x')"))
    assert result.nodes["n"].kind == "denied"
    assert not repository.exists()
    elsewhere = tmp_path / "escape.txt"  # a host temp dir is not the job's temp dir
    result = pool.run(program(f"open({str(elsewhere)!r}, 'w').write('x')"))
    assert result.nodes["n"].status == "error" and not elsewhere.exists()
    assert_healthy(pool)


def test_the_temp_dir_is_private_and_wiped_between_jobs(pool: SandboxPool) -> None:
    write = "import os, tempfile, pandas\nd = tempfile.gettempdir()\n"
    write += "open(os.path.join(d, 'note'), 'w').write('hi')\n"
    write += "return pandas.DataFrame({'files': os.listdir(d)})"
    first = pool.run(program(write))
    assert first.fatal is None, first.nodes["n"].message
    assert load_table(first.nodes["n"].frame)["files"].tolist() == ["note"]
    look = (
        "import os, tempfile, pandas\nreturn pandas.DataFrame({'files': os.listdir(tempfile.gettempdir())})"
    )
    second = pool.run(program(look))
    assert load_table(second.nodes["n"].frame).empty


def test_a_crashing_worker_is_replaced(pool: SandboxPool) -> None:
    before = pool.stats["spawned"]
    result = pool.run(program("import os\nos._exit(3)"))
    assert result.fatal == "crash"
    assert_healthy(pool)
    assert pool.stats["spawned"] == before + 1


def test_ordinary_exceptions_are_reported_and_do_not_recycle_the_worker(pool: SandboxPool) -> None:
    recycled = pool.stats["recycled"]
    result = pool.run(program("raise KeyError('no_such_column')"))
    assert result.fatal is None
    assert result.nodes["n"].kind == "exception" and "no_such_column" in result.nodes["n"].message
    assert pool.stats["recycled"] == recycled


def test_worker_results_cannot_run_code_in_the_parent() -> None:
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(ProtocolError):
        load_table(pickle.dumps(Evil()))
    with pytest.raises(ProtocolError):
        load_table(pickle.dumps({"not": "a table"}))
    assert load_table(pickle.dumps(TABLE)).equals(TABLE)


def test_capabilities_report_kernel_isolation_as_root(pool: SandboxPool, is_root: bool) -> None:
    caps = pool.capabilities
    assert caps["audit_hook"] and "RLIMIT_AS" in caps["rlimits"]
    if is_root:
        assert caps["pid_namespace"] and caps["network_namespace"] and caps["chroot"] and caps["own_uid"]


def test_without_kernel_isolation_the_hook_still_denies_and_says_so() -> None:
    with SandboxPool(workers=1, limits=SandboxLimits(isolation="process")) as degraded:
        caps = degraded.capabilities
        assert not caps["chroot"] and any("off" in n for n in caps["notes"])
        assert degraded.run(program("return open('/etc/passwd').read()")).nodes["n"].kind == "denied"
        assert degraded.run(program("import socket\nsocket.socket()")).nodes["n"].kind == "denied"
        assert_healthy(degraded)


def test_closing_a_pool_leaves_no_processes_or_directories(alive: Callable[[int], bool]) -> None:
    pool = SandboxPool(workers=2)
    assert_healthy(pool)
    pids, base = pool.pids(), pool._base
    assert len(pids) == 3 and all(alive(p) for p in pids)
    pool.close()
    assert not any(alive(p) for p in pids)
    assert not base.exists()
    with pytest.raises(RuntimeError):
        pool.run(program("return None"))


def test_a_pool_removes_the_directory_of_a_pool_whose_process_was_killed(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", KILLED_OWNER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        base = Path(owner.stdout.readline().strip())
    finally:
        owner.kill()  # SIGKILL: no close(), no finaliser
        owner.wait()
    assert base.is_dir() and base.parent == tmp_path
    live = tmp_path / f"orchestrl-sbx-{os.getpid()}-x"  # this process's: kept
    live.mkdir()
    assert remove_stale_dirs(tmp_path) == [base]
    assert not base.exists() and live.exists()


KILLED_OWNER = """
from orchestrl.envs.orchestration.sandbox.pool import SandboxPool
pool = SandboxPool(workers=1)
print(pool._base, flush=True)
import time; time.sleep(60)
"""


def test_many_envs_share_one_process_wide_pool() -> None:
    first = shared_pool()
    assert shared_pool(workers=2) is first and first.size >= 2


def test_the_last_env_to_close_stops_the_shared_pool_and_removes_its_directory(
    alive: Callable[[int], bool],
) -> None:
    from orchestrl.envs.orchestration.env import OrchestrationEnv

    close_shared_pool()  # envs of earlier tests that were never closed hold the old one
    envs = [OrchestrationEnv(level=1, rounds=1) for _ in range(2)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
        # the expert's spec runs in the sandbox (a random one may be invalid and run nothing)
        env.step(env.expert_actions())
    pool = shared_pool()
    pids, base = pool.pids(), pool._base
    envs[0].close()
    envs[0].close()  # twice: still one release
    assert all(alive(p) for p in pids) and base.exists()  # the other env still uses it
    envs[1].close()  # a Ray env runner is killed right after this: no exit handler would run
    assert not any(alive(p) for p in pids)
    assert not base.exists()


def test_a_dead_zygote_is_restarted(pool: SandboxPool) -> None:
    zygote = pool._zygote
    assert zygote is not None
    (idle,) = pool._idle
    zygote.kill()
    zygote.wait()
    deadline = time.monotonic() + 10.0
    while not idle.gone() and time.monotonic() < deadline:  # its idle worker dies with it
        time.sleep(0.01)
    assert idle.gone()
    first = pool.run(program("return None"))  # not sent to the dead worker: a new one runs it
    assert first.fatal is None, first.nodes["n"].message
    assert_healthy(pool)
    assert pool.stats["zygote_restarts"] == 1
