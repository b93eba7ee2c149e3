"""Spec -> Python/pandas source: one module, one function per node, in topological order.

The module inlines the runtime (:mod:`.ops`), so it runs stand-alone::

    python pipeline.py --data DIR [--out result.parquet]

where ``DIR`` holds one ``<source>.parquet`` (see :func:`.tasks.write_task_data`) or ``<source>.csv``
(what ``orchestrl plan`` writes beside it) per source table.
The sandbox receives the same text in two parts, the runtime (compiled once per worker) and the
node section (compiled per job), and calls the node functions one by one so that cached node
outputs can be skipped.

Every value in the spec reaches the source through :func:`_literal`, which only emits Python
literals of validated types, so a spec cannot inject code.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.spec import NodeSpec, OrchestrationSpec

RUNTIME_SOURCE: str = inspect.getsource(ops)
RUNTIME_KEY: str = hashlib.blake2b(RUNTIME_SOURCE.encode(), digest_size=16).hexdigest()

CALLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "filter": ("op_filter", ("column", "op", "value")),
    "dedup": ("op_dedup", ("subset",)),
    "join": ("op_join", ("left_on", "right_on", "how")),
    "derive": ("op_derive", ("name", "op", "left", "right", "digits", "fmt")),
    "aggregate": ("op_aggregate", ("by", "column", "fn", "name", "more")),
    "topk": ("op_topk", ("column", "k", "ascending")),
    "select": ("op_select", ("columns",)),
}
"""Each role's function in :mod:`.ops` and the duty fields it takes, in order."""

_MAIN = '''

def run(sources):
    """Runs every node in order; returns {node id: (frame, work)}."""
    results = {}
    for node_id, fn, deps in PIPELINE:
        inputs = [sources[d] if d in sources else results[d][0] for d in deps]
        results[node_id] = fn(*inputs)
    return results


def main(argv=None):
    import argparse
    import json
    import pathlib
    import sys

    parser = argparse.ArgumentParser(description="Run this compiled pipeline on a task's data.")
    parser.add_argument("--data", required=True, help="folder of <source>.parquet or .csv")
    parser.add_argument("--out", help="write the output table here (parquet); default: CSV on stdout")
    args = parser.parse_args(argv)
    data = pathlib.Path(args.data)
    sources = {}
    for name in SOURCES:
        path = data / f"{name}.parquet"
        sources[name] = pd.read_parquet(path) if path.exists() else pd.read_csv(data / f"{name}.csv")
    results = run(sources)
    frame = results[OUTPUT][0]
    if args.out:
        frame.to_parquet(args.out, index=False)
    else:
        sys.stdout.write(frame.to_csv(index=False))
    summary = {"output": OUTPUT, "rows": len(frame), "work": sum(w for _, w in results.values())}
    print(json.dumps(summary), file=sys.stderr)


if __name__ == "__main__":
    main()
'''


@dataclass(frozen=True)
class CompiledPipeline:
    """A compiled spec: the runtime, the generated node section, and how to call each node."""

    spec_digest: str
    nodes_source: str
    functions: Mapping[str, str]
    inputs: Mapping[str, tuple[str, ...]]
    order: tuple[str, ...]
    output: str
    sources: tuple[str, ...]
    runtime_source: str = RUNTIME_SOURCE
    runtime_key: str = RUNTIME_KEY

    @cached_property
    def nodes_key(self) -> str:
        return hashlib.blake2b(self.nodes_source.encode(), digest_size=16).hexdigest()

    @cached_property
    def source(self) -> str:
        """The whole stand-alone module."""
        header = (
            f'"""Pipeline compiled by orchestrl from spec {self.spec_digest}.\n\n'
            f"Run: python pipeline.py --data DIR [--out FILE.parquet]\n"
            f"DIR holds <source>.parquet or <source>.csv per source table: {', '.join(self.sources)}.\n"
            f'Output node: {self.output}.\n"""\n\n'
        )
        return header + self.runtime_source + "\n\n" + self.nodes_source + _MAIN

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.source)
        return path


def compile_spec(spec: OrchestrationSpec) -> CompiledPipeline:
    """Generates the pipeline module for ``spec`` (assumed validated)."""
    order = spec.topological_order()
    functions = {node_id: f"node_{i}" for i, node_id in enumerate(order)}
    parts = ["# ---- nodes, in topological order (generated from the spec) ----"]
    for node_id in order:
        parts.append(_node_function(spec.node(node_id), functions[node_id]))
    table = "\n".join(
        f"    ({_literal(n)}, {functions[n]}, {_literal(tuple(spec.node(n).deps))})," for n in order
    )
    parts.append(f"PIPELINE = (\n{table}\n)")
    parts.append(f"OUTPUT = {_literal(spec.output_id)}")
    parts.append(f"SOURCES = {_literal(tuple(spec.sources))}")
    return CompiledPipeline(
        spec_digest=spec.digest(),
        nodes_source="\n\n\n".join(parts) + "\n",
        functions=functions,
        inputs={n.id: tuple(n.deps) for n in spec.nodes},
        order=order,
        output=spec.output_id,
        sources=tuple(spec.sources),
    )


def _node_function(node: NodeSpec, name: str) -> str:
    op, fields = CALLS[node.role.value]
    duty = node.duty.model_dump()
    params = [f"in{i}" for i in range(len(node.deps))]
    args = ", ".join(
        [*params, *(f"{f}={_literal(duty[f])}" for f in fields), f"capacity={_literal(node.capacity.value)}"]
    )
    doc = f"{node.id}: {node.role.value}, capacity {node.capacity.value}; inputs: {', '.join(node.deps)}"
    return f'def {name}({", ".join(params)}):\n    """{_escape_doc(doc)}"""\n    return {op}({args})'


def _escape_doc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _literal(value: Any) -> str:
    """Python source for a validated spec value (str, number, bool, None, tuples of them)."""
    if value is None or isinstance(value, bool | int | str):
        return repr(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("non-finite number in spec")
        return repr(value)
    if isinstance(value, tuple | list):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TypeError(f"cannot compile a {type(value).__name__} into a pipeline")
