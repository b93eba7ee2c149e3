"""Runs a spec in the sandbox, node by node, reusing cached node outputs.

A node's output is cached under ``(what the node computes, hashes of its inputs)``: its role,
duty and capacity, plus the content hash of each parent's output (or of the source table). So
re-executing a spec with one node changed looks every node up in topological order: nodes above
the change hit, the changed node misses, and its descendants (whose inputs are now unknown) run
with it in one sandbox job. Deterministic failures (the code raised) are cached too; sandbox
failures (timeouts, limits, violations) are not.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

import pandas as pd

from orchestrl.envs.orchestration.compiler import CompiledPipeline, compile_spec
from orchestrl.envs.orchestration.sandbox.framing import ProtocolError, load_table
from orchestrl.envs.orchestration.sandbox.pool import Call, Job, SandboxPool
from orchestrl.envs.orchestration.spec import NodeSpec, OrchestrationSpec
from orchestrl.envs.orchestration.tasks import Task

DETERMINISTIC = {"exception", "bad_output"}


@dataclass(frozen=True)
class NodeRun:
    """What one node of an execution produced (or why not)."""

    node_id: str
    status: Literal["ok", "error", "skipped"]
    kind: str | None  # exception / denied / memory / cpu_limit / timeout / crash / protocol / upstream
    message: str
    columns: tuple[str, ...]
    rows: int
    work: float
    cpu_ms: float
    cached: bool
    output_hash: str | None


@dataclass(frozen=True)
class _Entry:
    run: NodeRun
    frame: bytes | None

    @property
    def size(self) -> int:
        return 512 + (len(self.frame) if self.frame else 0)


class NodeCache:
    """LRU of node outputs, bounded in bytes; counts hits and lookups."""

    def __init__(self, max_mb: float = 64.0) -> None:
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.lookups = 0

    def get(self, key: str) -> _Entry | None:
        self.lookups += 1
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            self._entries.move_to_end(key)
        return entry

    def put(self, key: str, entry: _Entry) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._entries[key] = entry
        self._bytes += entry.size
        while self._bytes > self.max_bytes and len(self._entries) > 1:
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= dropped.size

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class Execution:
    """The outcome of running a spec: every node, the output table, cache use and cost."""

    spec: OrchestrationSpec
    compiled: CompiledPipeline
    nodes: dict[str, NodeRun]
    output_blob: bytes | None  # the output table as the worker sent it
    output_hash: str | None
    cache_hits: int
    nodes_needed: int  # nodes that ran or came from the cache
    fatal: str | None
    cpu_ms: float  # sandbox CPU actually spent by this execution
    wall_ms: float
    frames: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Every node's output table that ran (or came from the cache) ok, as the worker sent it."""

    @cached_property
    def output(self) -> pd.DataFrame | None:
        """The output table (loaded on first use with the restricted unpickler; None if the
        output node failed or the worker sent something that is not a table)."""
        return _load(self.output_blob)

    def node_output(self, node_id: str) -> pd.DataFrame | None:
        """One node's output table (None if it did not run ok or is not a table)."""
        return _load(self.frames.get(node_id))

    @property
    def ok(self) -> bool:
        return self.output_blob is not None

    @property
    def work(self) -> float:
        """Compute cost of the spec (cached nodes count: cost is a property of the spec)."""
        return sum(n.work for n in self.nodes.values() if n.status == "ok")

    @property
    def cache_hit_rate(self) -> float:
        return self.cache_hits / self.nodes_needed if self.nodes_needed else 0.0

    @property
    def error_kinds(self) -> list[str]:
        return [n.kind for n in self.nodes.values() if n.status == "error" and n.kind]


def _load(blob: bytes | None) -> pd.DataFrame | None:
    """A table the worker sent, through the restricted unpickler; None for none or a non-table."""
    if blob is None:
        return None
    try:
        return load_table(blob)
    except ProtocolError:
        return None


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def node_cache_key(node: NodeSpec, input_hashes: list[str]) -> str:
    return _digest("|".join([node.computes, *input_hashes]).encode())


class Executor:
    """Executes specs of a task through a :class:`SandboxPool` with a :class:`NodeCache`."""

    def __init__(
        self, pool: SandboxPool, cache: NodeCache | None = None, cpu_s: float = 2.0, wall_s: float = 5.0
    ) -> None:
        self.pool = pool
        self.cache = cache if cache is not None else NodeCache()
        self.cpu_s = cpu_s
        self.wall_s = wall_s
        self._compiled: OrderedDict[str, CompiledPipeline] = OrderedDict()

    def compile(self, spec: OrchestrationSpec) -> CompiledPipeline:
        digest = spec.fingerprint
        compiled = self._compiled.get(digest)
        if compiled is None:
            compiled = compile_spec(spec)
            self._compiled[digest] = compiled
            if len(self._compiled) > 256:
                self._compiled.popitem(last=False)
        return compiled

    def execute(self, task: Task, spec: OrchestrationSpec, use_cache: bool = True) -> Execution:
        """Runs ``spec`` on ``task``'s sources (validated spec assumed); never raises for what
        the generated code does."""
        started = time.perf_counter()
        compiled = self.compile(spec)
        blobs = task.source_blobs
        hashes: dict[str, str] = {name: key for name, (key, _) in blobs.items()}
        runs: dict[str, NodeRun] = {}
        frames: dict[str, bytes] = {}
        keys: dict[str, str] = {}
        pending: list[str] = []
        hits = 0
        for node_id in compiled.order:
            node = spec.node(node_id)
            if any(d in runs and runs[d].status != "ok" for d in node.deps):
                runs[node_id] = _skipped(node_id)
                continue
            if any(d in pending for d in node.deps):
                pending.append(node_id)
                continue
            keys[node_id] = node_cache_key(node, [hashes[d] for d in node.deps])
            entry = self.cache.get(keys[node_id]) if use_cache else None
            if entry is None:
                pending.append(node_id)
                continue
            hits += 1
            runs[node_id] = replace(entry.run, node_id=node_id, cached=True)
            if entry.run.status == "ok" and entry.frame is not None:
                hashes[node_id] = str(entry.run.output_hash)
                frames[node_id] = entry.frame
        cpu_ms, fatal = 0.0, None
        if pending:
            cpu_ms, fatal = self._run_pending(task, spec, compiled, pending, runs, frames, hashes, keys)
        out = runs.get(compiled.output)
        ok = out is not None and out.status == "ok"
        needed = sum(1 for r in runs.values() if r.status != "skipped")
        return Execution(
            spec=spec,
            compiled=compiled,
            nodes=runs,
            output_blob=frames[compiled.output] if ok else None,
            output_hash=out.output_hash if ok and out is not None else None,
            cache_hits=hits,
            nodes_needed=needed,
            fatal=fatal,
            cpu_ms=cpu_ms,
            wall_ms=(time.perf_counter() - started) * 1e3,
            frames=frames,
        )

    def _run_pending(
        self,
        task: Task,
        spec: OrchestrationSpec,
        compiled: CompiledPipeline,
        pending: list[str],
        runs: dict[str, NodeRun],
        frames: dict[str, bytes],
        hashes: dict[str, str],
        keys: dict[str, str],
    ) -> tuple[float, str | None]:
        running = set(pending)
        deps = {d for n in pending for d in spec.node(n).deps}
        job = Job(
            code=[
                (compiled.runtime_key, compiled.runtime_source),
                (compiled.nodes_key, compiled.nodes_source),
            ],
            calls=[Call(n, compiled.functions[n], tuple(spec.node(n).deps)) for n in pending],
            sources={name: blob for name, blob in task.source_blobs.items() if name in deps},
            inputs={d: (hashes[d], frames[d]) for d in deps if d in frames and d not in running},
            cpu_s=self.cpu_s,
            wall_s=self.wall_s,
        )
        result = self.pool.run(job)
        for node_id in pending:
            outcome = result.nodes[node_id]
            node = spec.node(node_id)
            if outcome.status == "ok" and outcome.frame is not None:
                digest = _digest(outcome.frame)
                run = NodeRun(
                    node_id,
                    "ok",
                    None,
                    "",
                    outcome.columns,
                    outcome.rows,
                    outcome.work,
                    outcome.cpu_ms,
                    False,
                    digest,
                )
                hashes[node_id] = digest
                frames[node_id] = outcome.frame
            elif outcome.kind == "upstream":
                run = _skipped(node_id)
            else:
                run = NodeRun(
                    node_id, "error", outcome.kind, outcome.message, (), 0, 0.0, outcome.cpu_ms, False, None
                )
            runs[node_id] = run
            if node_id not in keys and all(d in hashes for d in node.deps):
                keys[node_id] = node_cache_key(node, [hashes[d] for d in node.deps])
            if node_id in keys and (run.status == "ok" or run.kind in DETERMINISTIC):
                self.cache.put(keys[node_id], _Entry(run, frames.get(node_id)))
        return result.cpu_s * 1e3, result.fatal


def _skipped(node_id: str) -> NodeRun:
    return NodeRun(node_id, "skipped", "upstream", "an input failed", (), 0, 0.0, 0.0, False, None)
