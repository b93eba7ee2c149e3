"""Nothing a sandbox job does outlives it: state, threads, processes, CPU past its budget.

Processes are counted the way an operator would, independently of the pool's own bookkeeping:
every live process whose uid is one of the workers' uids or that sits in one of the workers' PID
namespaces (both read from /proc), plus every descendant of the zygote.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.sandbox.confine import Capabilities
from orchestrl.envs.orchestration.sandbox.framing import load_table
from orchestrl.envs.orchestration.sandbox.pool import Call, Job, SandboxLimits, SandboxPool
from orchestrl.envs.orchestration.tasks import generate_task

LEFT = pd.DataFrame({"k": ["a", "b", "c"], "v": [1.0, 2.0, 3.0]})
RIGHT = pd.DataFrame({"k": ["a", "c"], "w": [10.0, 30.0]})
SOURCES = {"left": ("left-key", pickle.dumps(LEFT)), "right": ("right-key", pickle.dumps(RIGHT))}
MERGE = Job(
    code=[("merge", "def node(a, b):\n    return a.merge(b, on='k'), 1.0\n")],
    calls=[Call("n", "node", ("left", "right"))],
    sources=SOURCES,
)


def program(body: str, deps: tuple[str, ...] = (), cpu_s: float = 1.0, wall_s: float = 10.0) -> Job:
    args = ", ".join(deps)
    code = f"def node({args}):\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    return Job(
        code=[(f"code-{hash(code)}", code)],
        calls=[Call("n", "node", deps)],
        sources=SOURCES,
        cpu_s=cpu_s,
        wall_s=wall_s,
    )


def merged(pool: SandboxPool) -> list[float]:
    result = pool.run(MERGE)
    assert result.ok, result.nodes["n"].message
    return load_table(result.nodes["n"].frame)["w"].tolist()


# ------------------------------------------------------------------------ counting processes
def _status(pid: int) -> dict[str, str]:
    out = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def _namespace(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


class Census:
    """The processes of one pool: by the workers' uids and PID namespaces (learned while the
    workers live, so they still count after the pool is gone), and the zygote's descendants."""

    def __init__(self, pool: SandboxPool) -> None:
        self.pool = pool
        self.uids: set[int] = set()
        self.namespaces: set[int] = set()
        self.learn()

    def learn(self) -> None:
        host_uid, host_ns = os.getuid(), _namespace(os.getpid())
        for pid in self.pool.pids()[1:]:
            uid = int(_status(pid).get("Uid", "-1").split()[0])
            if uid != host_uid:
                self.uids.add(uid)
            ns = _namespace(pid)
            if ns is not None and ns != host_ns:
                self.namespaces.add(ns)

    def processes(self) -> set[int]:
        found = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            status = _status(pid)
            if not status or status.get("State", "").startswith("Z"):
                continue
            if int(status.get("Uid", "-1").split()[0]) in self.uids or _namespace(pid) in self.namespaces:
                found.add(pid)
        zygote = self.pool.pids()[:1]
        frontier = list(zygote)
        while frontier:  # and every descendant of the zygote
            pid = frontier.pop()
            for task in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(OSError):
                    kids = [int(p) for p in (task / "children").read_text().split()]
                    found.update(k for k in kids if not _status(k).get("State", "Z").startswith("Z"))
                    frontier.extend(kids)
        return found

    def extra(self) -> set[int]:
        """Processes of the pool beyond its zygote, its workers and their ancestors below it."""
        zygote, *workers = self.pool.pids()
        own = {zygote}
        for pid in workers:
            while pid not in own and pid > 1:
                own.add(pid)
                pid = int(_status(pid).get("PPid", "0"))
        return self.processes() - own

    def threads(self) -> dict[int, int]:
        return {pid: int(_status(pid).get("Threads", "0")) for pid in self.pool.pids()[1:]}


@pytest.fixture
def fresh_pool() -> Iterator[tuple[SandboxPool, Census]]:
    """A private pool per test, and its census; anything the test leaves is killed afterwards."""
    pool = SandboxPool(workers=1, limits=SandboxLimits(memory_mb=512))
    census = Census(pool)
    try:
        yield pool, census
    finally:
        leftovers = census.processes()
        pool.close()
        for pid in census.processes() | leftovers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------- state
def test_a_patched_pandas_method_does_not_reach_the_next_job(fresh_pool) -> None:
    pool, _ = fresh_pool
    assert merged(pool) == [10.0, 30.0]
    patch = "import pandas\npandas.DataFrame.merge = lambda self, *a, **k: self.iloc[:0]\nreturn left"
    result = pool.run(program(patch, ("left",)))
    assert result.ok, result.nodes["n"].message  # the patch itself "succeeds"...
    assert merged(pool) == [10.0, 30.0]  # ...and dies with the job's process


def test_a_patch_does_not_change_the_reference_pipeline(fresh_pool) -> None:
    pool, _ = fresh_pool
    task = generate_task(2, "train", 1)
    executor = Executor(pool, NodeCache())
    before = executor.execute(task, task.reference, use_cache=False)
    assert before.ok
    for patch in (
        "import pandas\npandas.DataFrame.merge = lambda self, *a, **k: self.iloc[:0]",
        "import pandas\npandas.DataFrame.drop_duplicates = lambda self, *a, **k: self.iloc[:1]",
        "import pandas\npandas.Series.__truediv__ = lambda self, other: self * 0",
    ):
        assert pool.run(program(patch + "\nreturn left", ("left",))).ok
    after = executor.execute(task, task.reference, use_cache=False)
    assert after.output_hash == before.output_hash


def test_a_job_that_writes_into_its_input_tables_memory_does_not_change_them(fresh_pool) -> None:
    pool, _ = fresh_pool
    assert merged(pool) == [10.0, 30.0]
    body = "for block in right._mgr.blocks:  # past copy-on-write, into the cached table's memory\n"
    body += "    if block.values.dtype == 'float64':\n        block.values[:] = -1.0\nreturn right"
    result = pool.run(program(body, ("right",)))
    assert result.ok, result.nodes["n"].message
    assert load_table(result.nodes["n"].frame)["w"].tolist() == [-1.0, -1.0]
    assert merged(pool) == [10.0, 30.0]


# ------------------------------------------------------------------------------ processes
def test_a_thread_a_job_starts_dies_with_the_job_and_the_pool(fresh_pool) -> None:
    pool, census = fresh_pool
    threads = census.threads()
    body = "import threading, time\n"
    body += "threading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(int, 1)]).start()\n"
    body += "return left"
    assert pool.run(program(body, ("left",))).ok
    look = "import threading, pandas\nreturn pandas.DataFrame({'n': [threading.active_count()]})"
    result = pool.run(program(look))
    assert result.ok and load_table(result.nodes["n"].frame)["n"].tolist() == [1]
    assert census.threads() == threads
    assert census.extra() == set()
    pool.close()
    assert census.processes() == set() and pool.processes() == []


FORK_EXEC = """
import _posixsubprocess, os, time, pandas
fork_exec = _posixsubprocess.fork_exec
if getattr(fork_exec, "__closure__", None):  # walks around the audit hook's tripwire
    fork_exec = fork_exec.__closure__[0].cell_contents
r, w = os.pipe()
pids = [
    fork_exec([b"/bin/sleep"], [b"/bin/sleep"], True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w,
              True, False, -1, None, None, None, -1, lambda: time.sleep(600), False)
    for _ in range(2)
]
return pandas.DataFrame({"pid": pids})
"""


def test_processes_a_job_forks_past_the_audit_hook_die_with_the_job_and_the_pool(fresh_pool) -> None:
    pool, census = fresh_pool
    result = pool.run(program(FORK_EXEC))
    assert result.ok, result.nodes["n"].message  # they were started...
    assert len(load_table(result.nodes["n"].frame)) == 2
    assert census.extra() == set()  # ...and are gone once the job is over
    assert merged(pool) == [10.0, 30.0]
    pool.close()
    assert census.processes() == set() and pool.processes() == []


def test_processes_a_job_forks_die_when_its_worker_is_replaced(fresh_pool) -> None:
    pool, census = fresh_pool
    body = FORK_EXEC.replace('return pandas.DataFrame({"pid": pids})', "time.sleep(60)")
    result = pool.run(program(body, wall_s=1.5))
    assert result.fatal == "timeout"  # the worker was killed mid-job and replaced
    assert merged(pool) == [10.0, 30.0]
    census.learn()
    assert census.extra() == set()


def test_the_plain_call_is_denied_by_the_tripwire(fresh_pool) -> None:
    pool, census = fresh_pool
    body = FORK_EXEC.replace('if getattr(fork_exec, "__closure__", None):', "if False:")
    result = pool.run(program(body))
    assert result.nodes["n"].kind == "denied" and "fork_exec" in result.nodes["n"].message
    assert census.extra() == set()


# ------------------------------------------------------------------------------------ CPU
SWALLOWING_RECURSION = """
def dive(n):
    try:
        return dive(n + 1)
    except BaseException:
        return dive(n + 1)
return dive(0)
"""
IGNORING_LOOP = """
import signal
for s in (signal.SIGPROF, signal.SIGVTALRM, signal.SIGXCPU):
    signal.signal(s, signal.SIG_IGN)
while True:
    pass
"""


@pytest.mark.parametrize("body", [SWALLOWING_RECURSION, IGNORING_LOOP], ids=["swallows", "ignores-signals"])
def test_a_job_stops_within_its_cpu_budget(fresh_pool, body: str) -> None:
    pool, _ = fresh_pool
    budget = 0.5
    spent = pool.cpu_seconds()
    result = pool.run(program(body, cpu_s=budget, wall_s=20.0))
    spent = pool.cpu_seconds() - spent  # the job's process and the worker, read from /proc
    assert result.fatal == "cpu_limit" and result.nodes["n"].kind == "cpu_limit"
    assert spent < budget + 0.5, f"{spent:.2f} CPU-s against a {budget} s budget"
    assert merged(pool) == [10.0, 30.0]


# ----------------------------------------------------------------------------- isolation
def test_strict_isolation_starts_as_root(is_root: bool) -> None:
    if not is_root:
        pytest.skip("strict isolation needs root")
    with SandboxPool(limits=SandboxLimits(isolation="strict")) as pool:
        caps = pool.capabilities
        assert caps["pid_namespace"] and caps["network_namespace"] and caps["chroot"] and caps["own_uid"]
        assert merged(pool) == [10.0, 30.0]


def test_without_kernel_isolation_processes_still_die_with_the_job() -> None:
    """isolation='process' (no namespaces, no uid of its own): the worker is a child subreaper
    and kills its descendants, orphans included, after each job."""
    pool = SandboxPool(limits=SandboxLimits(isolation="process"))
    census = Census(pool)
    try:
        result = pool.run(program(FORK_EXEC))
        assert result.ok, result.nodes["n"].message
        assert census.extra() == set()
    finally:
        leftovers = census.processes()
        pool.close()
        for pid in leftovers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


NON_ROOT = r"""
import json, os, sys
from orchestrl.envs.orchestration.sandbox.confine import Capabilities, SandboxUnavailable
from orchestrl.envs.orchestration.sandbox.pool import Call, Job, SandboxLimits, SandboxPool

secret = sys.argv[1]
out = {"uid": os.geteuid()}
try:
    SandboxPool(limits=SandboxLimits(isolation="strict"))
except SandboxUnavailable as exc:
    out["strict"] = str(exc)

def run(pool, body):
    code = "def node():\n" + "".join(f"    {line}\n" for line in body.strip().splitlines())
    result = pool.run(Job(code=[(str(hash(code)), code)], calls=[Call("n", "node")]))
    node = result.nodes["n"]
    return node.kind, node.message, node.frame

from orchestrl.envs.orchestration.env import OrchestrationEnv

try:
    OrchestrationEnv(level=1, sandbox_isolation="strict")
except SandboxUnavailable as exc:
    out["env_strict"] = str(exc)

with SandboxPool() as pool:
    out["capabilities"] = pool.capabilities
    out["summary"] = Capabilities(**pool.capabilities).summary()
    out["naive"] = run(pool, f"return open({secret!r}).read()")[0]
    body = '''
import _posixsubprocess, os, pandas
fork_exec = _posixsubprocess.fork_exec.__closure__[0].cell_contents
r, w = os.pipe()
e, f = os.pipe()
fork_exec([b"/bin/cat", SECRET], [b"/bin/cat"], True, (f,), None, None, -1, -1, -1, w, -1, -1, e, f,
          True, False, -1, None, None, None, -1, None, False)
os.close(w)
return pandas.DataFrame({"read": [os.read(r, 100).decode()]})
'''.replace("SECRET", repr(secret.encode()))
    kind, _, frame = run(pool, body)
    from orchestrl.envs.orchestration.sandbox.framing import load_table
    out["bypass"] = load_table(frame)["read"][0] if frame else kind
    run(pool, FORK_SLEEPERS)
    out["after_job"] = len(pool.processes())
    out["workers"] = len(pool.pids()) - 1
pool.close()
out["after_close"] = pool.processes()
print(json.dumps(out))
"""


def test_without_root_strict_refuses_to_start_and_auto_is_a_tripwire_not_a_boundary(tmp_path: Path) -> None:
    """A real non-root process (uid 1000 in a user namespace, no capabilities): strict isolation
    refuses with one line; auto starts with rlimits and the audit hook, which denies a plain
    open() but not a job written to get around it. Its processes still die with the job."""
    import shutil
    import subprocess
    import sys

    unshare = shutil.which("unshare")
    probe = [unshare or "unshare", "--user", "--map-user=1000", "--map-group=1000", "true"]
    if unshare is None or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip("no unprivileged user namespaces here to run as a non-root user")
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    script = NON_ROOT.replace("FORK_SLEEPERS", repr(FORK_EXEC))
    done = subprocess.run(
        [*probe[:-1], sys.executable, "-c", script, str(secret)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["uid"] == 1000
    for refusal in (out["strict"], out["env_strict"]):
        assert "strict" in refusal and "not root" in refusal and "\n" not in refusal
    caps = out["capabilities"]
    assert not caps["chroot"] and not caps["own_uid"] and not caps["root"]
    assert "tripwire, not a boundary" in out["summary"]
    assert out["naive"] == "denied"
    assert out["bypass"] == "s3cret"  # the hook is not a boundary: this is what the docs say
    assert out["after_job"] == 1 + 3 * out["workers"]  # zygote; supervisor, init, worker: no job process
    assert out["after_close"] == []


def test_the_env_takes_sandbox_isolation(is_root: bool) -> None:
    from orchestrl.envs.orchestration.env import OrchestrationEnv
    from orchestrl.envs.orchestration.sandbox.pool import close_shared_pool

    with pytest.raises(ValueError, match="sandbox_isolation must be 'auto' or 'strict', not 'none'"):
        OrchestrationEnv(level=1, sandbox_isolation="none")
    if not is_root:
        return
    close_shared_pool()
    env = OrchestrationEnv(level=1, rounds=1, sandbox_isolation="strict")
    try:
        env.reset(seed=0)
        # the expert's spec runs in the sandbox (a random one may be invalid and run nothing)
        env.step(env.expert_actions())
        assert env._pool is not None and env._pool.limits.isolation == "strict"
        assert not Capabilities(**env._pool.capabilities).missing_for_strict()
    finally:
        env.close()


def test_the_registry_says_the_fallback_is_a_tripwire() -> None:
    from orchestrl.envs.registry import get_env

    assert "tripwire, not a boundary" in get_env("orchestration").summary
