"""The processes behind :class:`.sandbox.SandboxPool`: a zygote and the workers it forks.

The zygote starts once per pool (``python -m orchestrl.envs.orchestration.sandbox.worker``), imports
pandas and runs every op once so nothing is left to import lazily, then forks a worker per
request (about 30 ms instead of a 1 s cold start) and hands the worker's socket to the pool
over its control channel (SCM_RIGHTS). A worker confines itself (:mod:`.confine`), then runs jobs
until the pool closes its channel: each job gets a fresh namespace, the inlined runtime and the
generated node section, and calls the requested node functions in order. Sources, compiled code
and the node outputs it produced are cached in the worker by key (LRU), so the pool ships only
what a worker has not seen; tables go back as pickles.

Kinds of failure a job reports per node: ``exception`` (the code raised), ``denied`` (audit hook),
``memory``, ``cpu_limit``, ``bad_output`` (not a table / too large), ``upstream`` (an input
failed). ``denied``, ``memory`` and ``cpu_limit`` are fatal: the worker replies, then exits, and
the pool starts a fresh one.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import os
import pickle
import shutil
import socket
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.envs.orchestration.sandbox import confine
from orchestrl.envs.orchestration.sandbox.framing import recv_frame, send_frame

FATAL = {"denied", "memory", "cpu_limit"}
_SOURCE_CACHE = 64
_CODE_CACHE = 128
_OUTPUT_CACHE = 256


# ------------------------------------------------------------------------------------------ zygote
def zygote_main(ctrl_fd: int) -> None:
    """Warm up, then fork a worker for each spawn request until the pool hangs up."""
    ctrl = socket.socket(fileno=ctrl_fd)
    _warm_up()
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
            if request["op"] != "spawn":
                continue
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            root = Path(request["root"])
            pid = os.fork()
            if pid == 0:  # the worker; never returns
                ctrl.close()
                ours.close()
                _worker_entry(theirs, root, request)
            theirs.close()
            children[pid] = root
            fds = [ours.fileno()]
            pidfd = None
            with contextlib.suppress(OSError, AttributeError):
                pidfd = os.pidfd_open(pid)
                fds.append(pidfd)
            socket.send_fds(ctrl, [json.dumps({"op": "spawned", "pid": pid}).encode()], fds)
            ours.close()
            if pidfd is not None:
                os.close(pidfd)
            _reap(children, block=False)
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        _reap(children, block=True)


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
def _worker_entry(sock: socket.socket, root: Path, request: dict[str, Any]) -> None:
    status = 0
    zygote = os.getppid()
    try:
        _quiet_stdio()
        root.mkdir(parents=True, exist_ok=True)
        caps, tmp = confine.confine(
            root,
            memory_mb=int(request["memory_mb"]),
            file_mb=int(request["file_mb"]),
            open_files=int(request["open_files"]),
            kernel=bool(request["kernel"]),
        )
        confine.die_with_parent()  # after the uid switch, which clears it
        if os.getppid() != zygote:  # the zygote died before that
            raise SystemExit(1)
        violations: list[str] = []
        confine.install_cpu_handler()
        confine.install_audit_hook(tmp, violations)
        caps.audit_hook = True
        send_frame(sock, {"op": "hello", "pid": os.getpid(), "capabilities": caps.as_dict(), "tmp": str(tmp)})
        Worker(sock, tmp, violations).serve()
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
    """The job loop of one confined worker."""

    def __init__(self, sock: socket.socket, tmp: Path, violations: list[str]) -> None:
        self.sock = sock
        self.tmp = tmp
        self.violations = violations
        self.sources: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self.code: OrderedDict[str, Any] = OrderedDict()
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
            reply = self.run_job(message)
            send_frame(self.sock, reply)
            if reply["fatal"]:
                return

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
                self._remember(self.code, key, compile(text, f"<pipeline {key[:8]}>", "exec"), _CODE_CACHE)
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

    def run_job(self, job: dict[str, Any]) -> dict[str, Any]:
        """Runs the job's node calls in order; never raises."""
        started = time.process_time()
        self._clear_tmp()
        namespace: dict[str, Any] = {"__name__": "orchestrl_pipeline", "__builtins__": dict(vars(builtins))}
        results: dict[str, dict[str, Any]] = {}
        frames: dict[str, pd.DataFrame] = {}
        fatal = None
        seen_violations = len(self.violations)
        try:
            confine.set_cpu_budget(float(job["cpu_s"]))
            for key in job["code_keys"]:
                exec(self.code[key], namespace)
        except BaseException as exc:
            kind, message = _classify(exc)
            fatal = kind if kind in FATAL else None
            for node_id, _, _ in job["calls"]:
                results[node_id] = _failure(kind, f"module: {message}")
            return self._reply(results, started, fatal, seen_violations)
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
        return self._reply(results, started, fatal, seen_violations)

    def _reply(self, results: dict[str, Any], started: float, fatal: str | None, seen: int) -> dict[str, Any]:
        confine.clear_cpu_budget()
        if len(self.violations) > seen and not fatal:
            fatal = "denied"  # the job swallowed the exception; it still tried
            for result in results.values():
                if result["status"] == "ok":
                    result.update(_failure("denied", f"sandbox violation: {self.violations[seen]}"))
        self._clear_tmp()
        return {"op": "result", "nodes": results, "cpu_s": time.process_time() - started, "fatal": fatal}

    def _clear_tmp(self) -> None:
        with contextlib.suppress(OSError), os.scandir(self.tmp) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        _remove_tree(entry.path)
                    else:
                        os.remove(entry.path)


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
