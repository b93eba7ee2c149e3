"""The certificate that lets compiler output skip the fresh process: everything the compiler emits
passes it, and code that differs from compiler output in any way that could leave state fails it."""

from __future__ import annotations

import ast

import pytest

from orchestrl.envs.orchestration.compiler import RUNTIME_SOURCE, compile_spec
from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.sandbox.certify import certify
from orchestrl.envs.orchestration.sandbox.pool import Call, Job, SandboxLimits, SandboxPool
from orchestrl.envs.orchestration.spec import CAPACITIES, NodeSpec, OrchestrationSpec
from orchestrl.envs.orchestration.tasks import LEVELS, generate_task


def certified(text: str) -> bool:
    return certify(text, ast.parse(text))


def _duties() -> list[tuple[str, dict]]:
    """Every enumerated duty value, the base duties, and awkward literals."""
    out: list[tuple[str, dict]] = [
        (role, {}) for role in ("filter", "dedup", "join", "derive", "aggregate", "topk")
    ]
    out.append(("select", {}))
    out += [("filter", {"column": "c", "op": op, "value": 'it\'s "x"\\n'}) for op in ("eq", "ne")]
    out += [("filter", {"column": "c", "op": op, "value": -3.5}) for op in ("gt", "lt")]
    out += [("filter", {"column": "c", "op": "notnull"})]
    out += [("dedup", {"subset": ["a", "b"]}), ("join", {"left_on": "a", "right_on": "b", "how": "left"})]
    out += [
        ("derive", {"name": "x", "op": op, "left": "a", "right": "b"}) for op in ("mul", "add", "sub", "div")
    ]
    out += [
        ("aggregate", {"by": ["g"], "column": "v", "fn": fn, "name": "s"}) for fn in ("sum", "mean", "count")
    ]
    out += [("aggregate", {"by": ["g"], "column": "v", "fn": fn, "name": "s"}) for fn in ("max", "min")]
    out += [
        ("topk", {"column": "v", "k": 3, "ascending": True}),
        ("select", {"columns": {"a": "b", "c": "d"}}),
    ]
    return out


@pytest.mark.parametrize(("role", "duty"), _duties())
def test_every_duty_the_compiler_emits_is_certified(role: str, duty: dict) -> None:
    for capacity in CAPACITIES:
        deps = ("t", "u") if role == "join" else ("t",)
        node = NodeSpec(id="agent_0", role=role, duty={"kind": role, **duty}, capacity=capacity, deps=deps)
        compiled = compile_spec(OrchestrationSpec(sources=("t", "u"), nodes=(node,)))
        assert certified(compiled.nodes_source), compiled.nodes_source


def test_the_runtime_and_every_reference_spec_are_certified() -> None:
    assert certified(RUNTIME_SOURCE)
    for level in LEVELS:
        for seed in range(12):
            assert certified(compile_spec(generate_task(level, "train", seed).reference).nodes_source)


GOOD = '''
def node_0(in0):
    """agent_0: filter"""
    return op_filter(in0, column='s', op='eq', value='x', capacity='small')


PIPELINE = (
    ('agent_0', node_0, ('t',)),
)
OUTPUT = 'agent_0'
'''
NEAR_MISSES = {
    "an attribute assignment": GOOD + "pd.DataFrame.merge = None\n",
    "an import": "import os\n" + GOOD,
    "an attribute in a call": GOOD.replace("op_filter(in0,", "op_filter(in0.T,"),
    "a call that is not an op": GOOD.replace("op_filter(", "exec("),
    "a private runtime helper": GOOD.replace(
        "op_filter(in0, column='s', op='eq', value='x', ", "_text(in0, "
    ),
    "a second statement": GOOD.replace("    return op_filter", "    in0.x = 1\n    return op_filter"),
    "a keyword the duty lacks": GOOD.replace("value='x'", "value='x', how='inner'"),
    "a value outside the vocabulary": GOOD.replace("op='eq'", "op='__init__'"),
    "a capacity outside the vocabulary": GOOD.replace("'small'", "'huge'"),
    "no capacity": GOOD.replace(", capacity='small'", ""),
    "a name as a value": GOOD.replace("value='x'", "value=in0"),
    "a call as a value": GOOD.replace("value='x'", "value=print('x')"),
    "a subscript": GOOD.replace("value='x'", "value=in0[0]"),
    "a default argument": GOOD.replace("def node_0(in0)", "def node_0(in0=print)"),
    "a decorator": GOOD.replace("def node_0", "@print\ndef node_0"),
    "a function not named node_N": GOOD.replace("node_0", "op_filter"),
    "a parameter not named inN": GOOD.replace("(in0)", "(frame)").replace("(in0,", "(frame,"),
    "inputs out of order": GOOD.replace("def node_0(in0)", "def node_0(in0, in1)"),
    "another table name": GOOD.replace("OUTPUT =", "SECRET ="),
    "a lambda in a table": GOOD.replace("'agent_0', node_0,", "'agent_0', lambda: 0,"),
    "a loop": GOOD + "for x in ():\n    pass\n",
    "an expression statement": GOOD + "print('x')\n",
    "a function defined twice": GOOD + GOOD,
    "a one-character change to the runtime": RUNTIME_SOURCE.replace("ROLE_COST = {", "ROLE_COST  = {", 1),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_code_that_is_not_compiler_output_is_not_certified(name: str) -> None:
    assert certified(GOOD)
    assert not certified(NEAR_MISSES[name])


def test_certified_jobs_run_in_the_worker_and_others_in_a_process_of_their_own() -> None:
    task = generate_task(2, "train", 0)
    hashes = {}
    for trust in (True, False):
        with SandboxPool(limits=SandboxLimits(trust_certified=trust)) as pool:
            first = Executor(pool, NodeCache()).execute(task, task.reference, use_cache=False)
            assert first.ok
            hashes[trust] = first.output_hash
            job = Job(
                code=[("ok", "def node(t):\n    return t, 1.0\n")],
                calls=[Call("n", "node", ("t",))],
                sources={"t": task.source_blobs[task.reference.sources[0]]},
            )
            assert pool.run(job).fresh_process
            compiled = compile_spec(task.reference)
            pipeline = Job(
                code=[(compiled.runtime_key, RUNTIME_SOURCE), (compiled.nodes_key, compiled.nodes_source)],
                calls=[Call(n, compiled.functions[n], task.reference.node(n).deps) for n in compiled.order],
                sources=dict(task.source_blobs),
            )
            assert pool.run(pipeline).fresh_process is not trust
    assert hashes[True] == hashes[False]
