"""Which job code can run in the warm worker instead of a fresh process: the compiler's own output.

A worker runs every job in a process forked for it, so nothing a job does outlives it; that costs
CPU per job (copy-on-write faults after the fork), more than the job itself (``benchmarks/sandbox.py``;
``benchmarks/RESULTS.md``, section "LEMON sandbox"). Code
that is provably the compiler's output (:mod:`..compiler`) is exempt, because it cannot change
anything that outlives it. It passes :func:`certify` only if each part is either

- the pipeline runtime, character for character (the source of :mod:`..ops`, whose functions are
  pure: they return new frames and never assign to anything but their own locals and copies), or
- a node section: ``def node_N(in0, ...):`` functions whose body is an optional docstring and
  ``return op_<role>(in0, ..., field=<literal>, ..., capacity=<literal>)``, where the keywords are
  the role's duty fields (:data:`..spec.DUTY_TYPES`), enumerated fields take one of their allowed
  values, and a literal is a str/number/bool/None or a tuple of them; plus ``PIPELINE``,
  ``OUTPUT`` and ``SOURCES`` assigned tuples of literals and node function names.

Such code defines functions in a fresh namespace and calls the runtime on shallow copies of the
job's tables (pandas copy-on-write); it has no attribute access, no subscripts, no imports and no
way to name a module, a builtin or the worker's objects, so it can only compute (or raise, or hit
a limit, after which the worker is replaced). Everything else, including code that differs from
compiler output by one character, runs in a fresh process.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import typing
from typing import Any

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.spec import DUTY_TYPES

RUNTIME_DIGEST = hashlib.blake2b(inspect.getsource(ops).encode(), digest_size=16).hexdigest()
"""Computed at import, in the zygote, before any chroot hides the source file."""

NODE_FUNCTION = re.compile(r"node_[0-9]{1,6}")
_PARAM = re.compile(r"in[0-9]{1,3}")
_TABLES = frozenset({"PIPELINE", "OUTPUT", "SOURCES"})


def _vocabulary() -> dict[str, dict[str, frozenset[Any] | None]]:
    """``op_<role>`` -> {keyword: allowed values, or None for any literal}."""
    calls: dict[str, dict[str, frozenset[Any] | None]] = {}
    for role, duty in DUTY_TYPES.items():
        fields: dict[str, frozenset[Any] | None] = {}
        for name, info in duty.model_fields.items():
            if name == "kind":
                continue
            literal = typing.get_origin(info.annotation) is typing.Literal
            fields[name] = frozenset(typing.get_args(info.annotation)) if literal else None
        fields["capacity"] = frozenset(ops.CAPACITY_COST)
        calls[f"op_{role.value}"] = fields
    return calls


OP_CALLS = _vocabulary()


def is_runtime(text: str) -> bool:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest() == RUNTIME_DIGEST


def certify(text: str, tree: ast.Module) -> bool:
    """True when ``text`` (parsed as ``tree``) is the runtime or a node section (module docstring)."""
    if is_runtime(text):
        return True
    defined: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef):
            if not _node_function(statement) or statement.name in defined:
                return False
            defined.add(statement.name)
        elif isinstance(statement, ast.Assign):
            target = statement.targets[0] if len(statement.targets) == 1 else None
            if not (isinstance(target, ast.Name) and target.id in _TABLES):
                return False
            if not _literal(statement.value, defined):
                return False
        else:
            return False
    return True


def _node_function(fn: ast.FunctionDef) -> bool:
    args = fn.args
    if (
        not NODE_FUNCTION.fullmatch(fn.name)
        or fn.decorator_list
        or fn.returns is not None
        or args.posonlyargs
        or args.vararg
        or args.kwonlyargs
        or args.kwarg
        or args.defaults
        or getattr(fn, "type_params", None)
    ):
        return False
    params = [a.arg for a in args.args]
    if any(a.annotation is not None or not _PARAM.fullmatch(a.arg) for a in args.args):
        return False
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and _string(body[0].value):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return False
    fields = OP_CALLS.get(call.func.id)
    if fields is None:
        return False
    if [a.id if isinstance(a, ast.Name) else None for a in call.args] != params:
        return False
    seen = set()
    for keyword in call.keywords:
        if keyword.arg is None or keyword.arg not in fields or keyword.arg in seen:
            return False
        seen.add(keyword.arg)
        if not _literal(keyword.value, set()):
            return False
        allowed = fields[keyword.arg]
        if allowed is not None and ast.literal_eval(keyword.value) not in allowed:
            return False
    return "capacity" in seen


def _string(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _literal(node: ast.expr, names: set[str]) -> bool:
    """A str/int/float/bool/None constant, a negated number, a tuple of literals, or (in the
    tables) the name of a node function defined above."""
    if isinstance(node, ast.Constant):
        return node.value is None or type(node.value) in (str, int, float, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
    if isinstance(node, ast.Tuple):
        return all(_literal(element, names) for element in node.elts)
    return isinstance(node, ast.Name) and node.id in names
