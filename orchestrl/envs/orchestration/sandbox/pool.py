"""A pool of pre-started, confined worker processes that run generated pipeline code.

A worker is a warm process (pandas imported, every op run once) that never runs untrusted code
itself: each job runs in a process forked for it, and after the job the worker kills every
process the job left and wipes its temp dir, so nothing a job does (a monkeypatch, a thread, a
child, a changed table) reaches a later job. The worker lives in a PID namespace of its own whose
init exits with it, so killing it (after a fatal failure, every ``jobs_per_worker`` jobs, or on
:meth:`SandboxPool.close`) kills everything its jobs started. The exception is a job whose code
:mod:`.certify` proves to be compiler output (the pipeline runtime verbatim plus node functions
that each make one runtime call with literal arguments): it runs in the worker itself, because it
cannot change anything that outlives it, and a fork (copy-on-write faults) would cost more CPU
than the job itself (``benchmarks/sandbox.py`` measures both paths; figures in
``benchmarks/RESULTS.md``, section "LEMON sandbox").

What a job can reach: the tables it is given, its private temp dir (wiped after each job), CPU
for ``cpu_s`` (see :func:`.confine.set_cpu_budget`) and wall time for ``wall_s`` (then its worker
is killed), ``memory_mb`` of extra address space. What it cannot, as root: the network, any other
file (a chroot with nothing in it, under a uid of its own), other processes, a process that
outlives the job. :attr:`SandboxPool.capabilities` says which layers applied. Without root they
degrade to a fresh process per job, rlimits and an audit hook (plus PID and network namespaces
where unprivileged user namespaces are allowed): a tripwire for files and network, not a boundary.
``isolation="strict"`` refuses to start without the kernel layers.

Many envs in one process share one pool (:func:`acquire_shared_pool`); it is closed when the
last of them is closed, at exit, or explicitly with :func:`close_shared_pool`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
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

from orchestrl.envs.orchestration.sandbox import procs
from orchestrl.envs.orchestration.sandbox.confine import CPU_KILL_SIGNALS, Capabilities, SandboxUnavailable
from orchestrl.envs.orchestration.sandbox.framing import ProtocolError, load_reply, recv_frame, send_frame

DIR_PREFIX = "orchestrl-sbx-"
"""A pool's workers' directories live in ``<tmp>/orchestrl-sbx-<owner pid>-<random>/``."""

Isolation = Literal["auto", "strict", "process"]
ISOLATIONS: tuple[str, ...] = ("auto", "strict", "process")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-worker limits (set when a worker starts).

    ``isolation``: ``"auto"`` confines workers as far as this process can (everything as root; a
    tripwire without it), ``"strict"`` refuses to start unless every worker gets its PID and
    network namespaces, a chroot and a uid of its own (:class:`.confine.SandboxUnavailable`),
    ``"process"`` skips the kernel layers (the non-root fallback, on purpose). ``trust_certified``:
    certified compiler output runs in the warm worker (False: every job gets a fresh process)."""

    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 64
    jobs_per_worker: int = 2000
    isolation: Isolation = "auto"
    trust_certified: bool = True

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            check_isolation(self.isolation)


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
    cpu_s: float  # CPU the job spent (its own process's, when it had one)
    wall_s: float
    fatal: str | None  # denied / memory / cpu_limit / timeout / crash / protocol
    fresh_process: bool = True  # False: certified compiler output, run in the warm worker

    @property
    def ok(self) -> bool:
        return self.fatal is None and all(n.status == "ok" for n in self.nodes.values())


_FAILURE_NAMES = {
    "timeout": "wall-time limit reached; worker killed",
    "crash": "the worker died",
    "protocol": "the worker sent an invalid reply",
    "cpu_limit": "CPU-time limit reached; the kernel stopped the worker",
}


class _WorkerDied(Exception):
    """The worker's init reported its death (``kind``: cpu_limit or crash) and CPU time."""

    def __init__(self, kind: str, cpu_s: float) -> None:
        super().__init__(kind)
        self.kind = kind
        self.cpu_s = cpu_s


class _Handle:
    def __init__(self, sock: socket.socket, pid: int, pidfd: int | None, supervisor: int, init: int) -> None:
        self.sock = sock
        self.pid = pid  # the worker
        self.supervisor = supervisor  # the zygote's child that opened its PID namespace
        self.init = init  # PID 1 of that namespace, the worker's parent
        self.pidfd = pidfd
        self.supervisor_fd: int | None = None
        with contextlib.suppress(OSError):
            self.supervisor_fd = os.pidfd_open(supervisor)
        self.jobs = 0
        self.capabilities: dict[str, Any] | None = None
        self.sent: set[str] = set()  # keys of tables and code this worker was given

    def cpu_seconds(self) -> float:
        """CPU time of the worker, of the job processes it reaped, of its init and supervisor."""
        return _proc_cpu(self.pid, reaped=True) + sum(
            _proc_cpu(pid, reaped=False) for pid in (self.init, self.supervisor)
        )

    def gone(self) -> bool:
        """Whether the worker has exited or is dying: an idle worker never speaks first, so a
        readable socket is its end of file or its init's report of its death."""
        watched = [self.sock] if self.pidfd is None else [self.sock, self.pidfd]
        try:
            return bool(select.select(watched, [], [], 0.0)[0])
        except (OSError, ValueError):
            return True

    def kill(self) -> None:
        """Kills the worker (and so, through its init, its PID namespace) and returns once it and
        its supervisor have exited, so no process of a retired worker is left when this returns."""
        with contextlib.suppress(OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        for fd in (self.pidfd, self.supervisor_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    select.select([fd], [], [], 10.0)  # readable once the process has exited
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        for fd in (self.pidfd, self.supervisor_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.pidfd = self.supervisor_fd = None


def remove_stale_dirs(tmp: Path | None = None) -> list[Path]:
    """Removes the directories of pools whose owner process is gone (killed before it could
    close them: ``SIGKILL`` runs no finaliser) and returns them. A directory whose owner pid is
    alive, or whose name carries no pid, is kept. Pids are read in this process's PID namespace:
    processes of other namespaces (containers) need a temp dir of their own (``TMPDIR``)."""
    removed = []
    for path in Path(tmp or tempfile.gettempdir()).glob(f"{DIR_PREFIX}*-*"):
        owner = path.name[len(DIR_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


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
        self.stats: dict[str, int] = {"jobs": 0, "fresh_process": 0, "fatal": 0, "spawned": 0, "recycled": 0}
        self.fatal_kinds: dict[str, int] = {}
        self._retired_cpu = 0.0
        self.last_protocol_error: str | None = None
        self._capabilities: dict[str, Any] | None = None
        self._start_timeout_s = start_timeout_s
        # Every process this pool ever started, for leak checks after close (see processes()).
        self._uids: set[int] = set()
        self._namespaces: set[int] = set()
        self._known: dict[int, int | None] = {}
        check_isolation(self.limits.isolation)
        remove_stale_dirs()
        self._base = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
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
        self._known[self._zygote.pid] = procs.start_time(self._zygote.pid)
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
        reply: dict[str, Any] | None = None
        try:
            reply = self._exchange(handle, job, started + job.wall_s)
            result = self._result(reply, job, time.monotonic() - started)
            fatal = result.fatal
        except TimeoutError:
            fatal = "timeout"
        except _WorkerDied as died:
            fatal = died.kind
            with self._lock:
                self._retired_cpu += died.cpu_s  # its /proc entry is gone
        except (EOFError, BrokenPipeError, ConnectionResetError):
            fatal = "crash"
        except (ProtocolError, OSError, KeyError, TypeError, ValueError) as exc:
            fatal = "protocol"
            self.last_protocol_error = f"{type(exc).__name__}: {exc}"
        if fatal and (fatal in ("timeout", "protocol") or reply is None):
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
            self.stats["fresh_process"] += int(result.fresh_process)
            if fatal:
                self.stats["fatal"] += 1
                self.fatal_kinds[fatal] = self.fatal_kinds.get(fatal, 0) + 1
        return result

    def require_strict(self) -> None:
        """Raises :class:`.confine.SandboxUnavailable` unless the workers got every kernel layer."""
        missing = Capabilities(**self.capabilities).missing_for_strict()
        if missing:
            raise SandboxUnavailable(_strict_error(f"the running pool's workers got no {', '.join(missing)}"))

    def resize(self, workers: int) -> None:
        """Grows (never shrinks) the pool to ``workers`` workers."""
        with self._lock:
            self.size = max(self.size, int(workers))

    def processes(self) -> list[int]:
        """Every live process this pool started, directly or through its jobs, that is still
        there, found by the workers' uids and PID namespaces and the pids of its zygote, worker
        supervisors and workers (start times checked). After :meth:`close` it must be empty."""
        with self._lock:
            uids, namespaces, known = set(self._uids), set(self._namespaces), dict(self._known)
        return procs.find(uids, namespaces, known)

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
        zygote = _proc_cpu(self._zygote.pid, reaped=False) if self._zygote is not None else 0.0
        return retired + zygote + sum(h.cpu_seconds() for h in handles)

    def memory_mb(self) -> dict[str, float]:
        """Resident memory of the zygote, workers, their inits and supervisors: RSS, and PSS
        (shared pages split fairly)."""
        rss = pss = 0.0
        with self._lock:
            supervisors = [p for h in (*self._idle, *self._busy) for p in (h.supervisor, h.init)]
        for pid in [*self.pids(), *supervisors]:
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
                    "kernel": self.limits.isolation != "process",
                    "trust_certified": self.limits.trust_certified,
                }
            ).encode()
            try:
                self._ctrl.sendall(request)
                msg, fds, _, _ = socket.recv_fds(self._ctrl, 4096, 2)
            except OSError:
                msg, fds = b"", []
            if not msg:  # the zygote died: start a new one, once
                self._restart_zygote()
                self._ctrl.sendall(request)
                msg, fds, _, _ = socket.recv_fds(self._ctrl, 4096, 2)
        if not msg or not fds:
            for fd in fds:
                os.close(fd)
            raise RuntimeError("sandbox zygote did not spawn a worker")
        info = json.loads(msg)
        handle = _Handle(
            socket.socket(fileno=fds[0]),
            int(info["pid"]),
            fds[1] if len(fds) > 1 else None,
            int(info["supervisor"]),
            int(info["init"]),
        )
        with self._lock:
            for pid in (handle.supervisor, handle.init, handle.pid):
                self._known[pid] = procs.start_time(pid)
        try:
            hello = load_reply(recv_frame(handle.sock, time.monotonic() + 30.0))
            if hello.get("op") != "hello":
                raise ProtocolError(f"expected hello, got {hello.get('op')!r}")
        except (TimeoutError, EOFError, ProtocolError) as exc:
            handle.kill()
            raise RuntimeError(f"sandbox worker failed to start: {exc}") from None
        caps = dict(hello.get("capabilities") or {})
        handle.capabilities = caps
        with self._lock:
            if caps.get("own_uid"):
                self._uids.add(int(caps["uid"]))
            if caps.get("pid_namespace_id"):
                self._namespaces.add(int(caps["pid_namespace_id"]))
        if self.limits.isolation == "strict":
            missing = Capabilities(**caps).missing_for_strict()
            if missing:
                handle.kill()
                raise SandboxUnavailable(_strict_error(f"a worker got no {', '.join(missing)}"))
        if self._capabilities is None:
            self._capabilities = caps
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
        dead: list[_Handle] = []
        try:
            with self._lock:
                while True:
                    if self._closed:
                        raise RuntimeError("sandbox pool is closed")
                    while self._idle and self._idle[-1].gone():  # died between jobs (its zygote died)
                        dead.append(self._idle.pop())
                    if self._idle:
                        handle = self._idle.pop()
                        self._busy.add(handle)
                        return handle
                    if len(self._busy) + self._spawning < self.size:
                        self._spawning += 1  # reserves the slot while the worker starts
                        break
                    self._lock.wait()
        finally:
            for handle in dead:  # no job is sent to a dead worker; its processes are reaped
                handle.kill()
                with self._lock:
                    self.stats["recycled"] += 1
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
        reply = self._reply(handle, deadline)
        if reply.get("op") == "missing":  # evicted from the worker's cache since: send everything
            everything = {
                "source_blobs": dict(job.sources.values()),
                "code_blobs": dict(job.code),
                "input_blobs": dict(job.inputs.values()),
            }
            send_frame(handle.sock, {**message, **everything})
            reply = self._reply(handle, deadline)
        if reply.get("op") != "result":
            raise ProtocolError(f"unexpected reply {reply.get('op')!r}")
        if reply.get("kept"):  # outputs of a job run in a process of its own died with it
            handle.sent.update(str(r.get("digest")) for r in reply["nodes"].values() if r.get("digest"))
        return reply

    @staticmethod
    def _reply(handle: _Handle, deadline: float) -> dict[str, Any]:
        reply = load_reply(recv_frame(handle.sock, deadline))
        if reply.get("op") == "died":  # from the worker's init: the worker is gone
            kind = "cpu_limit" if reply.get("signal") in CPU_KILL_SIGNALS else "crash"
            raise _WorkerDied(kind, float(reply.get("cpu_s", 0.0)))
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
            nodes=nodes,
            cpu_s=float(reply["cpu_s"]),
            wall_s=wall_s,
            fatal=str(fatal) if fatal else None,
            fresh_process=not reply.get("kept"),
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


def check_isolation(isolation: str) -> None:
    """Fails now, with one line, for an unknown isolation or ``"strict"`` without root (the
    workers are checked again when they start)."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"sandbox isolation must be one of {', '.join(ISOLATIONS)}, not {isolation!r}")
    if isolation == "strict" and os.geteuid() != 0:
        raise SandboxUnavailable(_strict_error(f"this process runs as uid {os.geteuid()}, not root"))


def check_env_isolation(isolation: str) -> None:
    """An env's ``sandbox_isolation`` kwarg: ``auto`` or ``strict`` (``process`` is not an env's
    choice), then checked as :func:`check_isolation` (strict without root fails here, in one line)."""
    if isolation not in ("auto", "strict"):
        raise ValueError(f"sandbox_isolation must be 'auto' or 'strict', not {isolation!r}")
    check_isolation(isolation)


def _strict_error(why: str) -> str:
    return (
        f"sandbox isolation 'strict' needs PID and network namespaces, a chroot and a uid of its own "
        f"for every worker, and {why}; set sandbox_isolation: auto to run with rlimits and an audit "
        f"hook instead (a tripwire, not a boundary)"
    )


def _proc_cpu(pid: int, reaped: bool) -> float:
    """User + system CPU seconds of a live process, plus (``reaped``) those of the children it has
    reaped (a worker's job processes; not the zygote's, whose children are counted live or when
    retired); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        used = (11, 12, 13, 14) if reaped else (11, 12)
        return sum(int(fields[i]) for i in used) / os.sysconf("SC_CLK_TCK")
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


def _shared_pool_locked(workers: int, isolation: Isolation) -> SandboxPool:
    global _SHARED, _SHARED_PID, _SHARED_USERS
    if _SHARED is None or _SHARED._closed or _SHARED_PID != os.getpid():
        pool = SandboxPool(workers=workers, limits=SandboxLimits(isolation=isolation))
        _SHARED, _SHARED_PID, _SHARED_USERS = pool, os.getpid(), 0
    else:
        if isolation == "strict":
            _SHARED.require_strict()
        _SHARED.resize(workers)
    return _SHARED


def shared_pool(workers: int = 1, isolation: Isolation = "auto") -> SandboxPool:
    """The process-wide pool (started on first use, grown to ``workers``, closed at exit). A
    forked child never uses its parent's pool: it starts its own. ``isolation="strict"`` on a
    pool started as ``"auto"`` checks that its workers got every kernel layer."""
    with _SHARED_LOCK:
        return _shared_pool_locked(workers, isolation)


def acquire_shared_pool(workers: int = 1, isolation: Isolation = "auto") -> SandboxPool:
    """:func:`shared_pool` for a long-lived user (an env), counted until :func:`release_shared_pool`."""
    global _SHARED_USERS
    with _SHARED_LOCK:
        pool = _shared_pool_locked(workers, isolation)
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


def shared_pool_cpu_seconds() -> float:
    """:meth:`SandboxPool.cpu_seconds` of this process's process-wide pool (its zygote, workers and
    their job processes, retired workers included), 0.0 while it runs none; starts nothing. The
    workers are not this process's children, so its own CPU time (``time.process_time``) misses
    what its envs' executions cost: a benchmark adds this difference over the span it measures."""
    with _SHARED_LOCK:
        pool = _SHARED if _SHARED_PID == os.getpid() else None
    return 0.0 if pool is None else pool.cpu_seconds()


def close_shared_pool() -> None:
    """Stops the process-wide pool (a later :func:`shared_pool` starts a new one)."""
    global _SHARED
    with _SHARED_LOCK:
        pool, _SHARED = _SHARED, None
    if pool is not None and _SHARED_PID == os.getpid():
        pool.close()


atexit.register(close_shared_pool)
