"""Processes of a sandbox: ending every process a job left, and finding a pool's processes.

A worker is a child subreaper (orphans of its jobs are re-parented to it) and kills what its jobs
left in the strongest way available to it: in a PID namespace of its own (whose init is its
parent, which it cannot signal) or under a uid of its own, ``kill(-1, SIGKILL)`` reaches exactly
the other processes of its namespace or uid, and no process can leave either; otherwise (the
non-root fallback without user namespaces) it walks ``/proc`` for its descendants until none is
left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any


def end_processes(child: int | None, kill_all: bool) -> tuple[int, Any] | None:
    """SIGKILLs every process below this one and reaps them; returns the wait status and resource
    usage of ``child`` (``os.wait4``), if it was one of them. ``kill_all``: ``kill(-1)`` reaches exactly
    this process's own (see the module docstring); otherwise it must be a child subreaper."""
    found = None
    for _ in range(100_000):
        if kill_all:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        else:
            for pid in descendants(os.getpid()):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return found
            if pid == 0:  # some still dying (or one appeared since): kill again
                time.sleep(0.0005)
                break
            if pid == child:
                found = (status, usage)
    raise RuntimeError("processes kept appearing while the sandbox killed them")


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out.extend(int(p) for p in Path(task.path, "children").read_text().split())
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before children."""
    out, frontier = [], children(pid)
    while frontier:
        out.extend(frontier)
        frontier = [c for p in frontier for c in children(p)]
    return out


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks (tells a process from a later one with its pid)."""
    stat = _stat(pid)
    return int(stat[19]) if stat else None


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def find(uids: set[int], namespaces: set[int], known: dict[int, int | None]) -> list[int]:
    """Live (not zombie) processes with a uid in ``uids``, in a PID namespace whose inode is in
    ``namespaces``, or listed in ``known`` (pid -> start time)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None or stat[0] == "Z":
            continue
        if pid in known and known[pid] == int(stat[19]):
            found.append(pid)
            continue
        try:
            if namespaces and os.stat(f"/proc/{pid}/ns/pid").st_ino in namespaces:
                found.append(pid)
                continue
            if uids and _real_uid(pid) in uids:
                found.append(pid)
        except OSError:
            continue
    return found


def _real_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return -1
