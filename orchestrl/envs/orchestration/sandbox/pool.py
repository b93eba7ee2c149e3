"""A pool of pre-started, confined worker processes that run generated pipeline code.

Why long-lived workers: forking per execution costs about 18 ms on these machines (copy-on-write
faults after the fork), while a worker that keeps pandas loaded and gives each job a fresh
namespace runs hundreds of jobs per second (``/work/shared/notes/sandbox-facts.md``). Isolation
sits at the worker boundary: a job reaches nothing outside its worker, which is confined once at
start (:mod:`.confine`) and replaced after any fatal failure or every ``jobs_per_worker`` jobs.
Inside a worker, jobs get fresh namespaces and copy-on-write views of the cached tables: that
stops accidents, not code written to tamper with the worker's own memory.

What a job can reach: the tables it is given, its private temp dir (wiped after each job), CPU
for ``cpu_s`` and wall time for ``wall_s`` (then its worker is killed), ``memory_mb`` of extra
address space. What it cannot: the network, any other file (as root: a chroot with nothing in
it, under a uid of its own), other processes, new processes. :attr:`SandboxPool.capabilities`
says which layers applied; without root they degrade to limits plus the audit hook.

Many envs in one process share one pool (:func:`acquire_shared_pool`); it is closed when the
last of them is closed, at exit, or explicitly with :func:`close_shared_pool`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrl.envs.orchestration.sandbox.framing import ProtocolError, load_reply, recv_frame, send_frame

Isolation = Literal["auto", "process"]


@dataclass(frozen=True)
class SandboxLimits:
    """Per-worker limits (set when a worker starts)."""

    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 64
    jobs_per_worker: int = 2000
    isolation: Isolation = "auto"  # "process": no namespaces/chroot/uid (the non-root fallback)


@dataclass(frozen=True)
class Call:
    """Run ``function`` (defined by the job's code) on ``deps`` and record it as ``node_id``.

    A dep names a source table, an earlier call of the same job, or an entry of ``Job.inputs``."""

    node_id: str
    function: str
    deps: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """What a worker runs: code (each part compiled once per worker and cached by key), tables,
    and the calls to make in order."""

    code: Sequence[tuple[str, str]]  # (key, source text), executed in order in a fresh namespace
    calls: Sequence[Call]
    sources: Mapping[str, tuple[str, bytes]] = field(default_factory=dict)  # name -> (key, pickled table)
    inputs: Mapping[str, tuple[str, bytes]] = field(default_factory=dict)  # node id -> (digest, table)
    cpu_s: float = 2.0
    wall_s: float = 5.0
    max_output_mb: int = 64


@dataclass
class NodeOutcome:
    status: Literal["ok", "error"]
    kind: str | None
    message: str
    frame: bytes | None
    rows: int
    columns: tuple[str, ...]
    work: float
    cpu_ms: float


@dataclass
class JobResult:
    nodes: dict[str, NodeOutcome]
    cpu_s: float  # CPU the worker spent on the job
    wall_s: float
    fatal: str | None  # denied / memory / cpu_limit / timeout / crash / protocol

    @property
    def ok(self) -> bool:
        return self.fatal is None and all(n.status == "ok" for n in self.nodes.values())


_FAILURE_NAMES = {
    "timeout": "wall-time limit reached; worker killed",
    "crash": "the worker died",
    "protocol": "the worker sent an invalid reply",
}


class _Handle:
    def __init__(self, sock: socket.socket, pid: int, pidfd: int | None) -> None:
        self.sock = sock
        self.pid = pid
        self.pidfd = pidfd
        self.jobs = 0
        self.capabilities: dict[str, Any] | None = None
        self.sent: set[str] = set()  # keys of tables and code this worker was given

    def cpu_seconds(self) -> float:
        return _proc_cpu(self.pid)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


class SandboxPool:
    """Pre-started confined workers (see module docstring). Thread-safe; ``run`` blocks."""

    def __init__(
        self, workers: int = 1, limits: SandboxLimits | None = None, start_timeout_s: float = 60.0
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.size = max(1, int(workers))
        self._lock = threading.Condition()
        self._spawn_lock = threading.Lock()
        self._idle: list[_Handle] = []
        self._busy: set[_Handle] = set()
        self._spawning = 0
        self._closed = False
        self._next_root = 0
        self.stats: dict[str, int] = {"jobs": 0, "fatal": 0, "spawned": 0, "recycled": 0}
        self.fatal_kinds: dict[str, int] = {}
        self._retired_cpu = 0.0
        self.last_protocol_error: str | None = None
        self._capabilities: dict[str, Any] | None = None
        self._start_timeout_s = start_timeout_s
        self._base = Path(tempfile.mkdtemp(prefix="orchestrl-sbx-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._base), True)  # if never closed
        self._zygote: subprocess.Popen | None = None
        self._start_zygote()
        try:
            for _ in range(self.size):
                self._idle.append(self._spawn())
        except BaseException:
            self.close()  # no zygote or directory outlives a pool that failed to start
            raise

    def _start_zygote(self) -> None:
        """(Re)starts the zygote, which forks the workers; blocks until it has warmed up."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._ctrl = parent
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-m", "orchestrl.envs.orchestration.sandbox.worker", str(child.fileno())],
                pass_fds=(child.fileno(),),
                env=_zygote_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=str(self._base),
                close_fds=True,
            )
        finally:
            child.close()
        self._ctrl.settimeout(self._start_timeout_s)
        try:
            ready = json.loads(self._ctrl.recv(4096) or b"{}")
        except (TimeoutError, OSError, ValueError):
            ready = {}
        if ready.get("op") != "ready":
            self.close()
            raise RuntimeError("sandbox zygote failed to start")

    # ------------------------------------------------------------------------------ public API
    @property
    def capabilities(self) -> dict[str, Any]:
        """What confinement the workers got (see :class:`.confine.Capabilities`)."""
        return dict(self._capabilities or {})

    def run(self, job: Job) -> JobResult:
        """Runs ``job`` on an idle worker; every failure comes back as a :class:`JobResult`."""
        handle = self._acquire()
        started = time.monotonic()
        fatal: str | None = None
        try:
            reply = self._exchange(handle, job, started + job.wall_s)
            result = self._result(reply, job, time.monotonic() - started)
            fatal = result.fatal
        except TimeoutError:
            fatal = "timeout"
        except (EOFError, BrokenPipeError, ConnectionResetError):
            fatal = "crash"
        except (ProtocolError, OSError, KeyError, TypeError, ValueError) as exc:
            fatal = "protocol"
            self.last_protocol_error = f"{type(exc).__name__}: {exc}"
        if fatal and fatal in _FAILURE_NAMES:
            result = JobResult(
                nodes={
                    c.node_id: NodeOutcome("error", fatal, _FAILURE_NAMES[fatal], None, 0, (), 0.0, 0.0)
                    for c in job.calls
                },
                cpu_s=0.0,
                wall_s=time.monotonic() - started,
                fatal=fatal,
            )
        self._release(handle, retire=fatal is not None)
        with self._lock:
            self.stats["jobs"] += 1
            if fatal:
                self.stats["fatal"] += 1
                self.fatal_kinds[fatal] = self.fatal_kinds.get(fatal, 0) + 1
        return result

    def resize(self, workers: int) -> None:
        """Grows (never shrinks) the pool to ``workers`` workers."""
        with self._lock:
            self.size = max(self.size, int(workers))

    def pids(self) -> list[int]:
        """The zygote and every live worker (for leak checks and memory accounting)."""
        with self._lock:
            handles = [*self._idle, *self._busy]
        zygote = self._zygote
        alive = [zygote.pid] if zygote is not None and zygote.poll() is None else []
        return alive + [h.pid for h in handles]

    def cpu_seconds(self) -> float:
        """CPU time used by the zygote and every worker so far, retired ones included."""
        with self._lock:
            handles = [*self._idle, *self._busy]
            retired = self._retired_cpu
        zygote = _proc_cpu(self._zygote.pid) if self._zygote is not None else 0.0
        return retired + zygote + sum(h.cpu_seconds() for h in handles)

    def memory_mb(self) -> dict[str, float]:
        """Resident memory of the zygote and workers: RSS, and PSS (shared pages split fairly)."""
        rss = pss = 0.0
        for pid in self.pids():
            rss += _proc_kb(f"/proc/{pid}/status", "VmRSS:")
            pss += _proc_kb(f"/proc/{pid}/smaps_rollup", "Pss:")
        return {"rss_mb": rss / 1024, "pss_mb": pss / 1024}

    def close(self) -> None:
        """Stops every worker and the zygote, and removes their directories. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = [*self._idle, *self._busy]
            self._idle.clear()
            self._busy.clear()
            self._lock.notify_all()
        for handle in handles:
            handle.kill()
        with contextlib.suppress(OSError):
            self._ctrl.close()
        zygote = self._zygote
        if zygote is not None:
            try:
                zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                zygote.kill()
                zygote.wait()
        self._cleanup()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------ internals
    def _spawn(self) -> _Handle:
        with self._spawn_lock:
            self._next_root += 1
            request = json.dumps(
                {
                    "op": "spawn",
                    "root": str(self._base / f"w{self._next_root}"),
                    "memory_mb": self.limits.memory_mb,
                    "file_mb": self.limits.file_mb,
                    "open_files": self.limits.open_files,
                    "kernel": self.limits.isolation == "auto",
                }
            ).encode()
            try:
                self._ctrl.sendall(request)
                msg, fds, _, _ = socket.recv_fds(self._ctrl, 4096, 2)
            except OSError:
                msg, fds = b"", []
            if not msg or not fds:  # the zygote died: start a new one, once
                self._restart_zygote()
                self._ctrl.sendall(request)
                msg, fds, _, _ = socket.recv_fds(self._ctrl, 4096, 2)
        if not msg or not fds:
            raise RuntimeError("sandbox zygote did not spawn a worker")
        info = json.loads(msg)
        handle = _Handle(socket.socket(fileno=fds[0]), int(info["pid"]), fds[1] if len(fds) > 1 else None)
        try:
            hello = load_reply(recv_frame(handle.sock, time.monotonic() + 30.0))
        except (TimeoutError, EOFError, ProtocolError) as exc:
            handle.kill()
            raise RuntimeError(f"sandbox worker failed to start: {exc}") from None
        handle.capabilities = hello.get("capabilities")
        if self._capabilities is None:
            self._capabilities = handle.capabilities
        self.stats["spawned"] += 1
        return handle

    def _restart_zygote(self) -> None:
        with contextlib.suppress(OSError):
            self._ctrl.close()
        if self._zygote is not None:
            with contextlib.suppress(OSError):
                self._zygote.kill()
            self._zygote.wait()
        self.stats["zygote_restarts"] = self.stats.get("zygote_restarts", 0) + 1
        self._start_zygote()

    def _acquire(self) -> _Handle:
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("sandbox pool is closed")
                if self._idle:
                    handle = self._idle.pop()
                    self._busy.add(handle)
                    return handle
                if len(self._busy) + self._spawning < self.size:
                    self._spawning += 1  # reserves the slot while the worker starts
                    break
                self._lock.wait()
        try:
            handle = self._spawn()
        finally:
            with self._lock:
                self._spawning -= 1
        with self._lock:
            self._busy.add(handle)
        return handle

    def _release(self, handle: _Handle, retire: bool) -> None:
        handle.jobs += 1
        retire = retire or handle.jobs >= self.limits.jobs_per_worker
        with self._lock:
            self._busy.discard(handle)
            if not retire and not self._closed:
                self._idle.append(handle)
            self._lock.notify_all()
        if retire:
            spent = handle.cpu_seconds()
            handle.kill()
            with self._lock:
                self._retired_cpu += spent
                self.stats["recycled"] += 1

    def _exchange(self, handle: _Handle, job: Job, deadline: float) -> dict[str, Any]:
        refs = {name: key for name, (key, _) in job.sources.items()}
        message: dict[str, Any] = {
            "op": "job",
            "code_keys": [k for k, _ in job.code],
            "source_refs": refs,
            "input_refs": {node: digest for node, (digest, _) in job.inputs.items()},
            "calls": [(c.node_id, c.function, tuple(c.deps)) for c in job.calls],
            "cpu_s": job.cpu_s,
            "max_output_bytes": job.max_output_mb * 2**20,
        }
        # Ship what this worker has not seen: it keeps tables, compiled code and the node outputs
        # it produced, by key (LRU), so a re-execution sends only what changed.
        message["source_blobs"] = {k: blob for k, blob in job.sources.values() if k not in handle.sent}
        message["code_blobs"] = {k: text for k, text in job.code if k not in handle.sent}
        message["input_blobs"] = {k: blob for k, blob in job.inputs.values() if k not in handle.sent}
        handle.sent.update(message["source_blobs"], message["code_blobs"], message["input_blobs"])
        send_frame(handle.sock, message)
        reply = load_reply(recv_frame(handle.sock, deadline))
        if reply.get("op") == "missing":  # evicted from the worker's cache since: send everything
            everything = {
                "source_blobs": dict(job.sources.values()),
                "code_blobs": dict(job.code),
                "input_blobs": dict(job.inputs.values()),
            }
            send_frame(handle.sock, {**message, **everything})
            reply = load_reply(recv_frame(handle.sock, deadline))
        if reply.get("op") != "result":
            raise ProtocolError(f"unexpected reply {reply.get('op')!r}")
        handle.sent.update(str(r.get("digest")) for r in reply["nodes"].values() if r.get("digest"))
        return reply

    @staticmethod
    def _result(reply: dict[str, Any], job: Job, wall_s: float) -> JobResult:
        nodes: dict[str, NodeOutcome] = {}
        raw = reply["nodes"]
        for call in job.calls:
            r = raw[call.node_id]
            frame = r["frame"]
            if frame is not None and not isinstance(frame, bytes):
                raise ProtocolError("table is not bytes")
            nodes[call.node_id] = NodeOutcome(
                status="ok" if r["status"] == "ok" else "error",
                kind=r["kind"] and str(r["kind"]),
                message=str(r["message"]),
                frame=frame,
                rows=int(r["rows"]),
                columns=tuple(str(c) for c in r["columns"]),
                work=float(r["work"]),
                cpu_ms=float(r["cpu_ms"]),
            )
        fatal = reply.get("fatal")
        return JobResult(
            nodes=nodes, cpu_s=float(reply["cpu_s"]), wall_s=wall_s, fatal=str(fatal) if fatal else None
        )


def _zygote_env() -> dict[str, str]:
    """A minimal environment: enough to import the package, one thread per numeric library."""
    import orchestrl

    package_root = str(Path(orchestrl.__file__).resolve().parent.parent)
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONPATH": package_root,
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "OMP_THREAD_LIMIT": "1",
    }
    return env


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _proc_kb(path: str, key: str) -> float:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


# ---------------------------------------------------------------------------------- shared pool
_SHARED: SandboxPool | None = None
_SHARED_PID = 0
_SHARED_USERS = 0
_SHARED_LOCK = threading.Lock()


def _shared_pool_locked(workers: int) -> SandboxPool:
    global _SHARED, _SHARED_PID, _SHARED_USERS
    if _SHARED is None or _SHARED._closed or _SHARED_PID != os.getpid():
        _SHARED, _SHARED_PID, _SHARED_USERS = SandboxPool(workers=workers), os.getpid(), 0
    else:
        _SHARED.resize(workers)
    return _SHARED


def shared_pool(workers: int = 1) -> SandboxPool:
    """The process-wide pool (started on first use, grown to ``workers``, closed at exit). A
    forked child never uses its parent's pool: it starts its own."""
    with _SHARED_LOCK:
        return _shared_pool_locked(workers)


def acquire_shared_pool(workers: int = 1) -> SandboxPool:
    """:func:`shared_pool` for a long-lived user (an env), counted until :func:`release_shared_pool`."""
    global _SHARED_USERS
    with _SHARED_LOCK:
        pool = _shared_pool_locked(workers)
        _SHARED_USERS += 1
        return pool


def release_shared_pool(pool: SandboxPool) -> None:
    """One user of ``pool`` fewer; the last one closes it, which removes its directory. Exit
    handlers are not enough: Ray kills an env runner's process right after its envs are closed."""
    global _SHARED, _SHARED_USERS
    with _SHARED_LOCK:
        if pool is not _SHARED or _SHARED_PID != os.getpid():
            return  # closed or replaced since (or a parent's): nothing of ours to release
        _SHARED_USERS -= 1
        if _SHARED_USERS > 0:
            return
        _SHARED = None
    pool.close()


def close_shared_pool() -> None:
    """Stops the process-wide pool (a later :func:`shared_pool` starts a new one)."""
    global _SHARED
    with _SHARED_LOCK:
        pool, _SHARED = _SHARED, None
    if pool is not None and _SHARED_PID == os.getpid():
        pool.close()


atexit.register(close_shared_pool)
