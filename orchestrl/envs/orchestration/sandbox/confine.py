"""Confinement of one sandbox worker process and of each job it runs.

Layers, strongest first (what applies is reported as :class:`Capabilities`):

1. Kernel isolation, as root: a PID namespace of the worker's own (its init exits with the
   worker, so killing the worker kills everything a job started, and the worker kills every other
   process in it after each job), a private network namespace (no interfaces, so nothing to connect to),
   ``chroot`` into the worker's own empty directory (no ``/etc``, no repository, no site-packages:
   everything a job may use is imported before), and a switch to an unprivileged uid of its own,
   so the root directory is read-only, ``RLIMIT_NPROC`` bites and nothing else can be signalled.
   Without root, user namespaces are tried for the PID and network namespaces alone.
2. A fresh process per job (see :mod:`.worker` and :mod:`.certify`): monkeypatches, threads and
   children die with the job.
3. Resource limits: address space (memory), file size, open files, processes, core dumps; CPU time
   per job (:func:`set_cpu_budget`): a catchable exception at the budget, then the kernel kills the
   job's process a quarter second later (a CPU-time timer that sends SIGKILL), whatever the job
   did to its signals, with ``RLIMIT_CPU``, whose hard limit a job process cannot raise, behind it.
4. An audit hook: file access outside the job's temp dir, sockets, ``ctypes``, process creation
   (``_posixsubprocess.fork_exec`` included, which raises no audit event of its own on 3.11),
   signals, rlimits and heap walking raise :class:`SandboxViolation`. This turns obvious attempts
   into a clear ``denied`` error. It is a tripwire, not a boundary: Python code written to defeat an
   in-process hook can. Without root it is the only guard of files and (without user namespaces)
   the network: the non-root fallback is a tripwire, not a boundary.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
UID_BASE = 1_000_000
JOB_PROCESSES = 8
"""``RLIMIT_NPROC`` of a worker's own uid: the worker, one job process and a few of its threads or
children; a fork bomb stops there (and dies with the job)."""
CPU_KILL_AFTER_S = 0.25
"""How long past its CPU budget a job that swallows the budget's exception (or ignores its signal)
may run before the kernel kills its process (see :func:`set_cpu_budget`)."""


class SandboxViolation(PermissionError):
    """A job did something the sandbox forbids (raised by the audit hook)."""


class CpuLimitExceeded(BaseException):
    """The job used up its CPU-time budget (``SIGPROF``)."""


class SandboxUnavailable(RuntimeError):
    """Strict isolation was asked for and this machine cannot provide it."""


STRICT_LAYERS = ("pid_namespace", "network_namespace", "chroot", "own_uid")


@dataclass
class Capabilities:
    """What confinement a worker actually got; the pool reports the first worker's."""

    root: bool = False
    pid_namespace: bool = False
    network_namespace: bool = False
    chroot: bool = False
    own_uid: bool = False
    uid: int = -1  # the worker's uid (its jobs' too), as the host sees it
    pid_namespace_id: int = 0  # inode of its PID namespace (0: none of its own)
    rlimits: list[str] = field(default_factory=list)
    audit_hook: bool = False
    fresh_process: str = "every job not certified as compiler output (see certify.py)"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def boundary(self) -> bool:
        """True when files and network are fenced by the kernel, not only by the audit hook."""
        return self.chroot and self.own_uid and self.network_namespace

    def missing_for_strict(self) -> list[str]:
        return [name for name in STRICT_LAYERS if not getattr(self, name)]

    def summary(self) -> str:
        kernel = [
            n
            for n, on in (
                ("pidns", self.pid_namespace),
                ("netns", self.network_namespace),
                ("chroot", self.chroot),
                ("own uid", self.own_uid),
            )
            if on
        ]
        text = (
            f"kernel: {', '.join(kernel) or 'none'}; rlimits: {', '.join(self.rlimits)}; "
            f"audit hook: {'on' if self.audit_hook else 'off'}"
        )
        if not self.boundary:
            text += (
                " (DEGRADED: files"
                + ("" if self.network_namespace else " and network")
                + " are guarded by the audit hook only, a tripwire, not a boundary)"
            )
        return text


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (so no worker outlives its pool). Call it after
    any uid change: the kernel clears this setting when credentials change."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process (so it can kill them)."""
    _libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def new_pid_namespace() -> str | None:
    """Puts this process's future children in a new PID namespace (the first one is its init);
    returns None, or why not. As root a plain PID namespace; otherwise inside a new user namespace,
    if the kernel allows unprivileged ones. ``os.unshare`` is Python 3.12+, hence libc."""
    libc = _libc()
    root = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWPID if root else CLONE_NEWUSER | CLONE_NEWPID) != 0:
        return f"unshare(pid) failed: {os.strerror(ctypes.get_errno())}"
    if not root:
        _map_own_ids(uid, gid)
    return None


def _map_own_ids(uid: int, gid: int) -> None:
    """In a fresh user namespace, keeps this process's uid and gid (unmapped ids cannot create
    files)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with contextlib.suppress(OSError), open(f"/proc/self/{name}", "w") as f:
            f.write(text)


JOB_DIR = "job"
"""The job's private temp dir, under the worker's root (``/job`` once the worker is chrooted)."""


def confine(
    root_dir: Path, *, memory_mb: int, file_mb: int, open_files: int, kernel: bool, pid_namespace: bool
) -> tuple[Capabilities, Path]:
    """Confines the calling process; returns what applied and the job temp dir *as the process
    now sees it* (``/job`` inside a chroot: not ``/tmp``, so that no host path, such as a checkout
    or a test's temp dir under /tmp, looks like the job's own). ``root_dir`` must exist and be
    private to the worker. ``pid_namespace``: the process is in a PID namespace of its own
    (:func:`new_pid_namespace`, and its user namespace without root)."""
    caps = Capabilities(root=os.geteuid() == 0)
    libc = _libc()
    tmp = root_dir / JOB_DIR
    tmp.mkdir(mode=0o700, exist_ok=True)
    caps.pid_namespace = pid_namespace
    caps.pid_namespace_id = os.stat("/proc/self/ns/pid").st_ino if pid_namespace else 0
    uid = UID_BASE + int(os.readlink("/proc/self"))  # this process's pid as the host sees it
    base_as = _address_space_bytes()  # before the chroot hides /proc
    if kernel and caps.root:
        if libc.unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) == 0:
            caps.network_namespace = True
        else:
            caps.notes.append(f"unshare(net) failed: {os.strerror(ctypes.get_errno())}")
        try:
            os.chown(tmp, uid, uid)
            os.chmod(root_dir, 0o555)
            os.chroot(root_dir)
            tmp = Path("/") / JOB_DIR
            os.chdir(tmp)
            caps.chroot = True
        except OSError as exc:
            caps.notes.append(f"chroot failed: {exc}")
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            caps.own_uid = True
        except OSError as exc:
            caps.notes.append(f"setuid failed: {exc}")
    elif kernel:
        uid, gid = os.getuid(), os.getgid()
        if libc.unshare(CLONE_NEWNET if caps.pid_namespace else CLONE_NEWUSER | CLONE_NEWNET) == 0:
            caps.network_namespace = True  # in the user namespace of its PID namespace, if any
            if not caps.pid_namespace:
                _map_own_ids(uid, gid)
        else:
            caps.notes.append("not root and no user namespaces: network guarded by the audit hook only")
        caps.notes.append("not root: no chroot and no uid of its own; files guarded by the audit hook only")
    else:
        caps.notes.append("kernel isolation switched off (isolation='process')")
    caps.uid = os.getuid() if not caps.own_uid else uid
    if not caps.chroot:
        os.chdir(tmp)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)

    limits = {
        "RLIMIT_AS": base_as + memory_mb * 2**20,
        "RLIMIT_FSIZE": file_mb * 2**20,
        "RLIMIT_NOFILE": open_files,
        "RLIMIT_CORE": 0,
    }
    if caps.own_uid:
        limits["RLIMIT_NPROC"] = JOB_PROCESSES
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
            caps.rlimits.append(name)
        except (OSError, ValueError) as exc:
            caps.notes.append(f"{name}: {exc}")
    caps.rlimits.append("RLIMIT_CPU(per job)")
    os.environ.clear()
    os.environ.update({"PATH": "/nonexistent", "HOME": str(tmp), "TMPDIR": str(tmp), "LANG": "C.UTF-8"})
    return caps, tmp


def _address_space_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def set_cpu_budget(seconds: float, final: bool) -> None:
    """Stops the job after ``seconds`` of CPU time, in layers:

    - ``SIGPROF`` (``ITIMER_PROF``, every 0.1 s from the budget on) raises
      :class:`CpuLimitExceeded` in the job's Python code, so it fails cleanly, node by node;
    - :data:`CPU_KILL_AFTER_S` later the kernel kills the process, so a job that swallows the
      exception, ignores the signal or is stuck in C code that never returns to Python still
      stops: with ``final`` (a process that runs one job and exits) a POSIX CPU-time timer whose
      signal is SIGKILL; otherwise (the warm worker, which runs certified jobs only) ``SIGVTALRM``
      (``ITIMER_VIRTUAL``, user time) at its default action;
    - ``RLIMIT_CPU`` (whole seconds of the process's CPU time) at the first second at least half a
      second past the budget, in case the above failed: with ``final`` the hard limit too (SIGKILL,
      and this process can never raise it again), otherwise the soft one (SIGXCPU, at its default
      action).

    The signal dispositions are set by :func:`install_cpu_handler`."""
    seconds = max(float(seconds), 0.01)
    signal.setitimer(signal.ITIMER_PROF, seconds, 0.1)
    if not final or not _kill_at_cpu_time(seconds + CPU_KILL_AFTER_S):
        signal.setitimer(signal.ITIMER_VIRTUAL, seconds + CPU_KILL_AFTER_S)
    used = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(used.ru_utime + used.ru_stime + seconds + 0.5)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit if final else hard))


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class _Sigevent(ctypes.Structure):
    _fields_ = [
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("_rest", ctypes.c_int * 12),
    ]


CLOCK_PROCESS_CPUTIME_ID = 2
SIGEV_SIGNAL = 0


def _kill_at_cpu_time(seconds: float) -> bool:
    """SIGKILL this process once it has used ``seconds`` more CPU time (all its threads); False if
    the timer could not be set. Only for a process that exits after its job: the timer stays."""
    libc = _libc()
    event = _Sigevent(sigev_signo=signal.SIGKILL, sigev_notify=SIGEV_SIGNAL)
    timer = ctypes.c_void_p()
    if libc.timer_create(CLOCK_PROCESS_CPUTIME_ID, ctypes.byref(event), ctypes.byref(timer)) != 0:
        return False
    whole = int(seconds)
    spec = _Itimerspec(it_value=_Timespec(whole, int((seconds - whole) * 1e9)))
    return libc.timer_settime(timer, 0, ctypes.byref(spec), None) == 0


def clear_cpu_budget() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))


def _on_cpu_limit(signum: int, frame: Any) -> None:
    raise CpuLimitExceeded("CPU-time limit reached")


CPU_KILL_SIGNALS = (signal.SIGVTALRM, signal.SIGXCPU, signal.SIGPROF)
"""A job process that died of one of these hit its CPU limit."""


def install_cpu_handler() -> None:
    signal.signal(signal.SIGPROF, _on_cpu_limit)
    signal.signal(signal.SIGVTALRM, signal.SIG_DFL)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)


_DENIED_PREFIXES = (
    "socket.",
    "ctypes.",
    "subprocess.",
    "os.exec",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.kill",
    "os.killpg",
    "os.setuid",
    "os.setgid",
    "os.chroot",
    "signal.pthread_kill",
    "pty.",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys.addaudithook",
    "resource.setrlimit",
    "resource.prlimit",
    "_posixsubprocess.fork_exec",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "nntplib.",
    "telnetlib.",
    "webbrowser.",
    "sqlite3.",
    "os.add_dll_directory",
    "mmap.",
)
_PATH_EVENTS: dict[str, tuple[int, ...]] = {
    "open": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.link": (0, 1),
    "os.symlink": (0, 1),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.chdir": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.lchmod": (0,),
    "os.setxattr": (0,),
    "os.getxattr": (0,),
    "os.listxattr": (0,),
    "os.removexattr": (0,),
    "shutil.copyfile": (0, 1),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
    "shutil.make_archive": (0,),
    "shutil.unpack_archive": (0, 1),
    "tempfile.mkstemp": (0,),
    "tempfile.mkdtemp": (0,),
    "glob.glob": (0,),
    "os.walk": (0,),
}


def install_audit_hook(tmp: Path, violations: list[str], armed: list[bool]) -> None:
    """Denies what jobs must not do (see module docstring) whenever ``armed[0]`` is true: the
    worker arms it around the certified jobs it runs itself and for good in each job process it
    forks, and leaves it off for its own bookkeeping (forking and killing job processes).

    Every denial is also appended to ``violations`` so the worker reports a job that swallowed
    the exception."""
    allowed = os.path.realpath(tmp)
    prefix = allowed.rstrip(os.sep) + os.sep

    def inside(path: Any) -> bool:
        if isinstance(path, int) or path is None:
            return False
        try:
            real = os.path.realpath(os.fsdecode(os.fspath(path)))
        except (TypeError, ValueError):
            return False
        return real == allowed or real.startswith(prefix)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not armed[0]:
            return
        positions = _PATH_EVENTS.get(event)
        if positions is not None:
            for i in positions:
                if i < len(args) and not inside(args[i]):
                    violations.append(f"{event} {args[i]!r}")
                    raise SandboxViolation(f"sandbox: {event} of {args[i]!r} is outside the job's temp dir")
            return
        if event.startswith(_DENIED_PREFIXES):
            violations.append(event)
            raise SandboxViolation(f"sandbox: {event} is not allowed in a job")

    sys.addaudithook(hook)
    _audit_fork_exec()


def _audit_fork_exec() -> None:
    """``_posixsubprocess.fork_exec`` (what ``subprocess`` forks with) raises no audit event on
    Python 3.11, so a job could start processes past the hook: it is replaced, in the module and
    in ``subprocess``, by a wrapper that raises one first. The original stays reachable to code
    that looks for it (a tripwire); the job's process boundary is what stops what it starts."""
    import _posixsubprocess
    import subprocess

    original: Callable[..., int] = _posixsubprocess.fork_exec

    def fork_exec(*args: Any) -> int:
        sys.audit("_posixsubprocess.fork_exec", args[0] if args else None)
        return original(*args)

    _posixsubprocess.fork_exec = fork_exec  # type: ignore[attr-defined]
    if getattr(subprocess, "_fork_exec", None) is original:
        subprocess._fork_exec = fork_exec  # type: ignore[attr-defined]
