"""Confinement of one sandbox worker process, applied once when the worker starts.

Layers, strongest first (what applies is reported as :class:`Capabilities`):

1. Kernel isolation, as root: a private network namespace (no interfaces, so nothing to connect
   to), ``chroot`` into the worker's own empty directory (no ``/etc``, no repository, no
   site-packages: everything a job may use is imported before), and a switch to an unprivileged
   uid of its own, so the root directory is read-only, ``RLIMIT_NPROC`` bites and nothing else can
   be signalled. Without root, a user namespace is tried for the network alone.
2. Resource limits (always): address space (memory), file size, open files, processes, core
   dumps; CPU time per job is set by the worker before each job (``RLIMIT_CPU``, SIGXCPU).
3. An audit hook (always): file access outside the job's temp dir, sockets, ``ctypes``,
   process creation, signals and heap walking raise :class:`SandboxViolation`. This turns obvious
   attempts into a clear ``denied`` error and is the only file/network guard when the kernel
   layers are missing. It is a tripwire, not a boundary: Python code written to defeat an
   in-process hook can. The kernel layers and the parent's wall-clock kill are the boundary.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
UID_BASE = 1_000_000


class SandboxViolation(PermissionError):
    """A job did something the sandbox forbids (raised by the audit hook)."""


class CpuLimitExceeded(BaseException):
    """The job used up its CPU-time budget (SIGXCPU)."""


@dataclass
class Capabilities:
    """What confinement a worker actually got; the pool reports the first worker's."""

    root: bool = False
    network_namespace: bool = False
    chroot: bool = False
    own_uid: bool = False
    rlimits: list[str] = field(default_factory=list)
    audit_hook: bool = False
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        kernel = [
            n
            for n, on in (
                ("netns", self.network_namespace),
                ("chroot", self.chroot),
                ("own uid", self.own_uid),
            )
            if on
        ]
        degraded = "" if self.chroot and self.network_namespace else " (DEGRADED: no kernel isolation"
        if degraded and self.network_namespace:
            degraded = " (DEGRADED: no chroot/uid switch"
        if degraded:
            degraded += "; files and network guarded by the audit hook only)"
        return (
            f"kernel: {', '.join(kernel) or 'none'}; rlimits: {', '.join(self.rlimits)}; "
            f"audit hook: {'on' if self.audit_hook else 'off'}{degraded}"
        )


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (so no worker outlives its pool). Call it after
    any uid change: the kernel clears this setting when credentials change."""
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


JOB_DIR = "job"
"""The job's private temp dir, under the worker's root (``/job`` once the worker is chrooted)."""


def confine(
    root_dir: Path, *, memory_mb: int, file_mb: int, open_files: int, kernel: bool
) -> tuple[Capabilities, Path]:
    """Confines the calling process; returns what applied and the job temp dir *as the process
    now sees it* (``/job`` inside a chroot: not ``/tmp``, so that no host path, such as a checkout
    or a test's temp dir under /tmp, looks like the job's own). ``root_dir`` must exist and be
    private to the worker."""
    caps = Capabilities(root=os.geteuid() == 0)
    libc = _libc()
    tmp = root_dir / JOB_DIR
    tmp.mkdir(mode=0o700, exist_ok=True)
    uid = UID_BASE + os.getpid()
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
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
            caps.network_namespace = True
        else:
            caps.notes.append("not root and no user namespaces: network guarded by the audit hook only")
    else:
        caps.notes.append("kernel isolation switched off (isolation='process')")
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
        limits["RLIMIT_NPROC"] = 4  # this worker, plus the few threads pyarrow may start; no fork bomb
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


def set_cpu_budget(seconds: float) -> None:
    """Raises :class:`CpuLimitExceeded` in the job after ``seconds`` of CPU time (a profiling timer,
    exact to the tick), with ``RLIMIT_CPU`` two seconds later as a kernel backstop (SIGXCPU)."""
    seconds = max(float(seconds), 0.01)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + seconds) + 2
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(
        resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard)
    )


def clear_cpu_budget() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)


def _on_cpu_limit(signum: int, frame: Any) -> None:
    raise CpuLimitExceeded("CPU-time limit reached")


def install_cpu_handler() -> None:
    signal.signal(signal.SIGPROF, _on_cpu_limit)
    signal.signal(signal.SIGXCPU, _on_cpu_limit)


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


def install_audit_hook(tmp: Path, violations: list[str]) -> None:
    """Denies, for the rest of the process's life, what jobs must not do (see module docstring).

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
