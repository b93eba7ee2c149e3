"""The processes behind :class:`.sandbox.SandboxPool`: a zygote, the workers it forks, and a
fresh process per job.

The zygote starts once per pool (``python -m orchestrl.envs.orchestration.sandbox.worker``), imports
pandas and runs every op once so nothing is left to import lazily. For each worker (a fork, far
cheaper than a cold start) it forks a supervisor, which opens a new PID namespace and forks its
init, which forks the worker; the worker's socket goes to the pool over the zygote's control
channel (SCM_RIGHTS). When the worker dies its init tells the pool how (a CPU-limit signal or
anything else) and exits, and the kernel kills whatever is left in the namespace; killing the
worker therefore kills everything its jobs started. (The worker is not the init itself: the
kernel does not deliver a signal at its default action, such as the CPU limit's, to an init.)

A worker confines itself (:mod:`.confine`), then takes jobs until the pool closes its channel.
Sources, compiled code and node outputs are cached in the worker by key (LRU), so the pool ships
only what a worker has not seen; tables go back as pickles. Each job gets a fresh namespace, the
inlined runtime and the generated node section, and calls the requested node functions in order,
in a process forked for it from the warm worker: its reply comes back through a pipe, then the
worker kills every process left in its namespace and wipes the job's temp dir, so monkeypatches,
threads and children die with the job. A job whose code :mod:`.certify` proves to be compiler
output runs in the worker itself (it cannot change anything that outlives it), which keeps
uncached pipeline executions at in-process speed.

Kinds of failure a job reports per node: ``exception`` (the code raised), ``denied`` (audit hook),
``memory``, ``cpu_limit``, ``crash`` (the job's process died), ``bad_output`` (not a table / too
large), ``upstream`` (an input failed). ``denied``, ``memory``, ``cpu_limit`` and ``crash`` are
fatal: the pool replaces the worker (a worker that ran the job itself exits after replying).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import json
import os
import pickle
import select
import shutil
import socket
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.sandbox import confine, procs
from orchestrl.envs.orchestration.sandbox.certify import NODE_FUNCTION, certify
from orchestrl.envs.orchestration.sandbox.framing import (
    HEADER,
    MAX_FRAME,
    encode_frame,
    recv_frame,
    send_frame,
)

FATAL = {"denied", "memory", "cpu_limit", "crash"}
_SOURCE_CACHE = 64
_CODE_CACHE = 128
_OUTPUT_CACHE = 256


# ------------------------------------------------------------------------------------------ zygote
def zygote_main(ctrl_fd: int) -> None:
    """Warm up, then start a worker for each spawn request until the pool hangs up."""
    ctrl = socket.socket(fileno=ctrl_fd)
    _warm_up()
    confine.become_subreaper()  # what a dead supervisor leaves comes here, to be killed at exit
    children: dict[int, Path] = {}
    ctrl.sendmsg([json.dumps({"op": "ready", "pid": os.getpid()}).encode()])
    ctrl.settimeout(1.0)
    try:
        while True:
            try:
                msg, _, _, _ = socket.recv_fds(ctrl, 65536, 0)
            except TimeoutError:
                _reap(children, block=False)
                continue
            except OSError:
                break
            if not msg:
                break
            request = json.loads(msg)
            if request["op"] == "spawn":
                _spawn(ctrl, request, children)
            _reap(children, block=False)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        _reap(children, block=True)
        procs.end_processes(None, kill_all=False)


def _spawn(ctrl: socket.socket, request: dict[str, Any], children: dict[int, Path]) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    info_r, info_w = os.pipe()
    root = Path(request["root"])
    supervisor = os.fork()
    if supervisor == 0:  # never returns
        ctrl.close()
        ours.close()
        os.close(info_r)
        _supervise(theirs, info_w, root, request)
    theirs.close()
    os.close(info_w)
    children[supervisor] = root
    with os.fdopen(info_r, "rb") as f:
        info = json.loads(f.read() or b"{}")  # EOF once the worker is up (or failed to start)
    fds, pidfd = [], None
    if info.get("pid"):
        fds.append(ours.fileno())
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(int(info["pid"]))
            fds.append(pidfd)
    reply = {"op": "spawned", "pid": info.get("pid"), "init": info.get("init"), "supervisor": supervisor}
    socket.send_fds(ctrl, [json.dumps(reply).encode()], fds)
    ours.close()
    if pidfd is not None:
        os.close(pidfd)


def _supervise(sock: socket.socket, info_w: int, root: Path, request: dict[str, Any]) -> None:
    """The zygote's child for one worker: opens the worker's PID namespace (only the children of
    the process that does so enter it), forks its init, and waits for that."""
    status = 1
    zygote = os.getppid()
    try:
        confine.die_with_parent()
        if os.getppid() != zygote:
            raise SystemExit(1)
        why_not = confine.new_pid_namespace() if request["kernel"] else "isolation='process'"
        init = _fork_tied(lambda alive: _namespace_init(sock, info_w, root, request, alive, why_not))
        os.close(info_w)
        sock.close()
        os.waitpid(init, 0)
        status = 0
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _namespace_init(
    sock: socket.socket,
    info_w: int,
    root: Path,
    request: dict[str, Any],
    parent_alive: int,
    why_not: str | None,
) -> None:
    """PID 1 of the worker's namespace: forks the worker, reaps what is re-parented to it, and
    when the worker dies tells the pool how (a CPU-limit signal or not) and exits, and the kernel
    kills whatever is left in the namespace. The worker is not the init itself because the kernel
    does not deliver a signal left at its default action (the CPU limit's SIGVTALRM, SIGXCPU) to
    an init."""
    status = 1
    try:
        _die_with_parent(parent_alive)
        if why_not is not None:
            confine.become_subreaper()  # no namespace: orphans of a dead worker's jobs come here
        worker = _fork_tied(lambda alive: _worker_entry(sock, info_w, root, request, alive, why_not))
        os.close(info_w)
        while True:
            pid, wait_status, usage = os.wait4(-1, 0)
            if pid == worker:
                break
        if why_not is not None:
            procs.end_processes(None, kill_all=False)
        sig = os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else 0
        with contextlib.suppress(OSError):
            send_frame(sock, {"op": "died", "signal": sig, "cpu_s": usage.ru_utime + usage.ru_stime})
        status = 0
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _fork_tied(child: Callable[[int], None]) -> int:
    """Forks a process that runs ``child(parent_alive)`` and never returns; ``parent_alive`` is
    the read end of a pipe whose write end only this process holds, so it reads EOF once this
    process is gone (see :func:`_die_with_parent`)."""
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(alive_w)
        child(alive_r)
        os._exit(1)
    os.close(alive_r)
    return pid


def _die_with_parent(parent_alive: int) -> None:
    """SIGKILL on the parent's death from now on; exits if it died before this was set."""
    confine.die_with_parent()
    if select.select([parent_alive], [], [], 0)[0]:  # EOF: it is gone already
        raise SystemExit(1)
    os.close(parent_alive)


def _reap(children: dict[int, Path], block: bool) -> None:
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            shutil.rmtree(children.pop(pid), ignore_errors=True)


def _warm_up() -> None:
    """Runs every op at every capacity once, so no job triggers a lazy import (which the
    chroot and the audit hook would refuse)."""
    import argparse  # noqa: F401 - used by generated modules' main()
    import collections  # noqa: F401 - what a job may import is what is already loaded
    import datetime  # noqa: F401
    import decimal  # noqa: F401
    import encodings.idna  # noqa: F401 - so a hostname lookup reaches the audit hook
    import functools  # noqa: F401
    import hashlib  # noqa: F401
    import itertools  # noqa: F401
    import math  # noqa: F401
    import re  # noqa: F401
    import statistics  # noqa: F401
    import subprocess  # noqa: F401 - loaded so that spawning is denied by the hook, clearly
    import tempfile  # noqa: F401

    from orchestrl.envs.orchestration import ops

    frame = pd.DataFrame(
        {
            "k": pd.Series([" A x", "a  X", None, "b"], dtype="str"),
            "o": pd.Series(["$1,200.5", "3", None, " 4 "], dtype="object"),
            "n": [1.0, 2.0, np.nan, 4.0],
            "i": np.array([1, 2, 3, 4], dtype="int64"),
        }
    )
    other = pd.DataFrame({"k": ["a x", "b"], "z": [1.5, 2.5]})
    for cap in ("small", "medium", "large"):
        ops.op_filter(frame, "k", "eq", "a x", cap)
        ops.op_filter(frame, "o", "gt", 2.0, cap)
        ops.op_filter(frame, "k", "notnull", None, cap)
        ops.op_filter(frame, None, "notnull", None, cap)
        ops.op_dedup(frame, ("k",), cap)
        ops.op_dedup(frame, None, cap)
        ops.op_join(frame, other, "k", "k", "inner", cap)
        ops.op_join(frame, other, None, None, "left", cap)
        for op in ("mul", "add", "sub", "div"):
            ops.op_derive(frame, "d", op, "o", "n", cap)
        ops.op_derive(frame, "d", "nonnull", None, None, cap)
        for fn in ("sum", "mean", "count", "max", "min"):
            ops.op_aggregate(frame, ("k",), "o", fn, "v", cap)
        ops.op_aggregate(frame, None, None, "size", "count", cap)
        ops.op_topk(frame, "o", 2, False, cap)
        ops.op_topk(frame, None, 2, True, cap)
        ops.op_select(frame, (("k", "key"), ("n", "num")), cap)
    for table in (frame, frame[frame["i"] > 1], frame.iloc[:0]):
        pickle.loads(pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL))
    frame.copy(deep=False)
    repr(frame)


# ------------------------------------------------------------------------------------------ worker
def _worker_entry(
    sock: socket.socket,
    info_w: int,
    root: Path,
    request: dict[str, Any],
    parent_alive: int,
    no_pid_namespace: str | None,
) -> None:
    status = 0
    try:
        _quiet_stdio()
        # Its pid and its init's as the host sees them (this /proc is the host's), for the pool.
        init = int(Path("/proc/self/status").read_text().split("PPid:")[1].split()[0])
        os.write(info_w, json.dumps({"pid": int(os.readlink("/proc/self")), "init": init}).encode())
        os.close(info_w)
        root.mkdir(parents=True, exist_ok=True)
        caps, tmp = confine.confine(
            root,
            memory_mb=int(request["memory_mb"]),
            file_mb=int(request["file_mb"]),
            open_files=int(request["open_files"]),
            kernel=bool(request["kernel"]),
            pid_namespace=no_pid_namespace is None,
        )
        if no_pid_namespace:
            caps.notes.append(no_pid_namespace)
        _die_with_parent(parent_alive)  # after the uid switch, which clears it
        confine.become_subreaper()  # orphans of its jobs come back here to be killed
        violations: list[str] = []
        armed = [False]
        confine.install_cpu_handler()
        confine.install_audit_hook(tmp, violations, armed)
        caps.audit_hook = True
        if not request["trust_certified"]:
            caps.fresh_process = "every job"
        send_frame(sock, {"op": "hello", "pid": os.getpid(), "capabilities": caps.as_dict(), "tmp": str(tmp)})
        Worker(
            sock,
            tmp,
            violations,
            armed,
            kill_all=caps.pid_namespace or caps.own_uid,
            trust_certified=bool(request["trust_certified"]),
        ).serve()
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _quiet_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


class Worker:
    """The job loop of one confined worker (see the module docstring)."""

    def __init__(
        self,
        sock: socket.socket,
        tmp: Path,
        violations: list[str],
        armed: list[bool],
        kill_all: bool,
        trust_certified: bool = True,
    ) -> None:
        self.sock = sock
        self.tmp = tmp
        self.violations = violations
        self.armed = armed  # the audit hook's switch (on while job code may run)
        self.kill_all = kill_all  # kill(-1) reaches exactly this worker's jobs (see procs)
        self.trust_certified = trust_certified
        self.sources: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self.code: OrderedDict[str, tuple[Any, bool]] = OrderedDict()  # key -> (code, certified)
        self.outputs: OrderedDict[str, pd.DataFrame] = OrderedDict()  # node outputs by digest

    def serve(self) -> None:
        while True:
            try:
                message = pickle.loads(recv_frame(self.sock))
            except EOFError:
                return
            if message.get("op") != "job":
                return
            missing = self._missing(message)
            if missing:
                send_frame(self.sock, {"op": "missing", **missing})
                continue
            if self.trust_certified and self._certified(message):
                reply = self.run_job(message, keep=True, final=False)
                send_frame(self.sock, reply)
                if reply["fatal"]:
                    return
            else:
                self.sock.sendall(self.run_forked(message))

    def _certified(self, job: dict[str, Any]) -> bool:
        return all(self.code[key][1] for key in job["code_keys"]) and all(
            NODE_FUNCTION.fullmatch(function) for _, function, _ in job["calls"]
        )

    def run_forked(self, job: dict[str, Any]) -> bytes:
        """Runs ``job`` in a process forked for it; returns its reply frame (forwarded unread:
        the worker never unpickles what a job's process sends). Then kills every process the
        job left and wipes its temp dir."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the job's process; never returns
            status = 0
            try:
                os.close(read_end)
                self.sock.close()
                if not self.kill_all:
                    confine.die_with_parent()
                reply = self.run_job(job, keep=False, final=True)
                _write_all(write_end, encode_frame(reply))
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        os.close(write_end)
        try:
            frame = _read_frame(read_end, pid)
        finally:
            os.close(read_end)
            ended = procs.end_processes(pid, self.kill_all)
            self._clear_tmp()
        if frame is not None:
            return frame
        cpu_s = ended[1].ru_utime + ended[1].ru_stime if ended else 0.0
        killed = ended is not None and os.WIFSIGNALED(ended[0])
        if killed and (os.WTERMSIG(ended[0]) in confine.CPU_KILL_SIGNALS or cpu_s >= float(job["cpu_s"])):
            kind, message = "cpu_limit", "CPU-time limit reached; the kernel stopped the job's process"
        else:
            kind, message = "crash", "the job's process died without a reply"
        nodes = {node_id: _failure(kind, message) for node_id, _, _ in job["calls"]}
        return encode_frame({"op": "result", "nodes": nodes, "cpu_s": cpu_s, "fatal": kind, "kept": False})

    def _missing(self, job: dict[str, Any]) -> dict[str, list[str]]:
        refs = job.get("input_refs", {}).values()
        for cache, keys in (
            (self.sources, job["source_refs"].values()),
            (self.code, job["code_keys"]),
            (self.outputs, refs),
        ):
            for key in keys:  # what this job uses is the most recently used (LRU)
                if key in cache:
                    cache.move_to_end(key)
        for key, blob in job.get("source_blobs", {}).items():
            if key not in self.sources:
                self._remember(self.sources, key, pickle.loads(blob), _SOURCE_CACHE)
        for key, text in job.get("code_blobs", {}).items():
            if key not in self.code:
                self._remember(self.code, key, _compile(key, text), _CODE_CACHE)
        for key, blob in job.get("input_blobs", {}).items():
            if key not in self.outputs:
                self._remember(self.outputs, key, pickle.loads(blob), _OUTPUT_CACHE)
        sources = [k for k in job["source_refs"].values() if k not in self.sources]
        code = [k for k in job["code_keys"] if k not in self.code]
        inputs = [k for k in refs if k not in self.outputs]
        return {"sources": sources, "code": code, "inputs": inputs} if sources or code or inputs else {}

    @staticmethod
    def _remember(cache: OrderedDict[str, Any], key: str, value: Any, size: int) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > size:
            cache.popitem(last=False)

    def run_job(self, job: dict[str, Any], keep: bool, final: bool) -> dict[str, Any]:
        """Runs the job's node calls in order; never raises. ``keep``: remember the outputs (the
        worker itself runs the job); ``final``: this process exits after the job (a job's own
        process: the audit hook stays armed and the CPU limit is a hard one)."""
        started = time.process_time()
        self._clear_tmp()
        namespace: dict[str, Any] = {"__name__": "orchestrl_pipeline", "__builtins__": dict(vars(builtins))}
        results: dict[str, dict[str, Any]] = {}
        frames: dict[str, pd.DataFrame] = {}
        fatal = None
        seen_violations = len(self.violations)
        try:
            confine.set_cpu_budget(float(job["cpu_s"]), final=final)
            self.armed[0] = True
            for key in job["code_keys"]:
                exec(self.code[key][0], namespace)
        except BaseException as exc:
            kind, message = _classify(exc)
            fatal = kind if kind in FATAL else None
            for node_id, _, _ in job["calls"]:
                results[node_id] = _failure(kind, f"module: {message}")
            return self._reply(results, started, fatal, seen_violations, keep, final)
        inputs = {node: self.outputs[digest] for node, digest in job.get("input_refs", {}).items()}
        for node_id, function, deps in job["calls"]:
            if fatal:
                results[node_id] = _failure("upstream", "the job was stopped")
                continue
            args, missing = [], None
            for dep in deps:
                if dep in frames:  # shallow copies: with copy-on-write no node can alter a kept table
                    args.append(frames[dep].copy(deep=False))
                elif dep in inputs:
                    args.append(inputs[dep].copy(deep=False))
                elif dep in job["source_refs"]:
                    args.append(self.sources[job["source_refs"][dep]].copy(deep=False))
                else:
                    missing = dep
                    break
            if missing is not None:
                results[node_id] = _failure("upstream", f"input {missing} failed or is missing")
                continue
            t0 = time.process_time()
            try:
                out = namespace[function](*args)
                frame, work = out if isinstance(out, tuple) and len(out) == 2 else (out, 0.0)
                if not isinstance(frame, pd.DataFrame):
                    raise TypeError(f"node returned a {type(frame).__name__}, not a DataFrame")
                blob = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:
                kind, message = _classify(exc)
                if kind in FATAL:
                    fatal = kind
                results[node_id] = _failure(kind, message, cpu_ms=(time.process_time() - t0) * 1e3)
                continue
            if len(blob) > int(job["max_output_bytes"]):
                results[node_id] = _failure("bad_output", f"output of {len(blob)} bytes is over the limit")
                continue
            frames[node_id] = frame
            digest = hashlib.blake2b(blob, digest_size=16).hexdigest()
            if keep:
                self._remember(self.outputs, digest, frame, _OUTPUT_CACHE)
            results[node_id] = {
                "status": "ok",
                "digest": digest,
                "kind": None,
                "message": "",
                "frame": blob,
                "rows": len(frame),
                "columns": [str(c) for c in frame.columns],
                "work": float(work),
                "cpu_ms": (time.process_time() - t0) * 1e3,
            }
        return self._reply(results, started, fatal, seen_violations, keep, final)

    def _reply(
        self, results: dict[str, Any], started: float, fatal: str | None, seen: int, keep: bool, final: bool
    ) -> dict[str, Any]:
        if not final:
            self.armed[0] = False
            confine.clear_cpu_budget()
        if len(self.violations) > seen and not fatal:
            fatal = "denied"  # the job swallowed the exception; it still tried
            for result in results.values():
                if result["status"] == "ok":
                    result.update(_failure("denied", f"sandbox violation: {self.violations[seen]}"))
        if not final:
            self._clear_tmp()  # a job's own process: the worker wipes it once the process is dead
        cpu_s = time.process_time() - started
        return {"op": "result", "nodes": results, "cpu_s": cpu_s, "fatal": fatal, "kept": keep}

    def _clear_tmp(self) -> None:
        with contextlib.suppress(OSError), os.scandir(self.tmp) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        _remove_tree(entry.path)
                    else:
                        os.remove(entry.path)


def _compile(key: str, text: str) -> tuple[Any, bool]:
    """The code object, and whether it is certified compiler output (:mod:`.certify`)."""
    code = compile(text, f"<pipeline {key[:8]}>", "exec")
    try:
        certified = certify(text, ast.parse(text))
    except (SyntaxError, ValueError, RecursionError):
        certified = False
    return code, certified


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_frame(fd: int, pid: int) -> bytes | None:
    """One frame (header included) from a job's process, or None when the process exits without
    one (what it left in the pipe is read, nothing more is waited for) or sends a bad header."""
    buf = bytearray()
    need = HEADER.size
    pidfd = os.pidfd_open(pid)
    exited = False
    try:
        while len(buf) < need:
            if not exited and pidfd in select.select([fd, pidfd], [], [])[0]:
                exited = True
                os.set_blocking(fd, False)
            try:
                chunk = os.read(fd, max(need - len(buf), 1 << 16))
            except BlockingIOError:
                return None
            if not chunk:
                return None
            buf += chunk
            if need == HEADER.size and len(buf) >= need:
                (size,) = HEADER.unpack_from(buf)
                if size > MAX_FRAME:
                    return None
                need += size
        return bytes(buf[:need])
    finally:
        os.close(pidfd)


def _remove_tree(path: str) -> None:
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(entry.path)
            else:
                os.remove(entry.path)
    os.rmdir(path)


def _failure(kind: str, message: str, cpu_ms: float = 0.0) -> dict[str, Any]:
    return {
        "status": "error",
        "kind": kind,
        "message": message[:500],
        "frame": None,
        "rows": 0,
        "columns": [],
        "work": 0.0,
        "cpu_ms": cpu_ms,
    }


def _classify(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, confine.SandboxViolation):
        kind = "denied"
    elif isinstance(exc, MemoryError):
        kind = "memory"
    elif isinstance(exc, confine.CpuLimitExceeded):
        kind = "cpu_limit"
    else:
        kind = "exception"
    try:
        text = f"{type(exc).__name__}: {exc}"
    except BaseException:
        text = type(exc).__name__
    return kind, text


if __name__ == "__main__":
    zygote_main(int(sys.argv[1]))
