"""The orchestration spec: one node per agent, validated by pydantic, serialised as YAML.

A spec is what the team writes. Each node has a *role* (a base role), a *duty* (the role's
parameters; every role has a parameter-free base duty, its default), a *capacity*
(small / medium / large: how much effort the node spends normalising what it compares) and
*deps* (source tables or other nodes). The output node's table is the answer (default: the last
node). Example::

    version: 1
    task: {level: 2, split: train, seed: 7}
    sources: [orders, customers]
    nodes:
    - id: agent_0
      role: filter
      duty: {kind: filter, column: status, op: eq, value: shipped}
      capacity: small
      deps: [orders]
    - id: agent_1
      role: join
      duty: {kind: join, left_on: customer, right_on: customer}
      capacity: medium
      deps: [agent_0, customers]
    output: agent_1

Every structural error (cycle, dangling dependency, role/duty mismatch, wrong number of inputs...)
surfaces as a :class:`SpecError` whose ``issues`` carry a stable ``code``; nothing else escapes
:func:`parse_spec`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

IDENT = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class Role(StrEnum):
    FILTER = "filter"
    DEDUP = "dedup"
    JOIN = "join"
    DERIVE = "derive"
    AGGREGATE = "aggregate"
    TOPK = "topk"
    SELECT = "select"


ROLES: tuple[Role, ...] = tuple(Role)


class Capacity(StrEnum):
    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"


CAPACITIES: tuple[Capacity, ...] = tuple(Capacity)


class _Duty(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @property
    def is_base(self) -> bool:
        """True for the role's parameter-free default."""
        return self == type(self)()

    def columns_read(self) -> tuple[str, ...]:
        """Columns whose values this duty compares, groups or parses (what capacity acts on)."""
        return ()


class FilterDuty(_Duty):
    """Keep rows where ``column op value``. Base: keep complete rows (no missing field).

    ``eq`` / ``ne`` compare with a text value, ``in`` with a set of them, ``gt`` / ``ge`` / ``lt`` /
    ``le`` with a number; ``notnull`` keeps rows where ``column`` is filled."""

    kind: Literal["filter"] = "filter"
    column: str | None = None
    op: Literal["eq", "ne", "in", "gt", "ge", "lt", "le", "notnull"] = "notnull"
    value: str | float | tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> FilterDuty:
        if self.column is None and (self.op != "notnull" or self.value is not None):
            raise PydanticCustomError("duty", "a filter without a column is the base duty (op notnull)")
        if self.op in ("eq", "ne") and not isinstance(self.value, str):
            raise PydanticCustomError("duty", "eq/ne filters compare with a text value")
        if self.op == "in" and not (isinstance(self.value, tuple) and self.value):
            raise PydanticCustomError("duty", "in filters compare with a non-empty list of text values")
        if self.op in ("gt", "ge", "lt", "le") and not isinstance(self.value, int | float):
            raise PydanticCustomError("duty", "gt/ge/lt/le filters compare with a number")
        if self.op == "notnull" and self.value is not None:
            raise PydanticCustomError("duty", "notnull filters take no value")
        return self

    def columns_read(self) -> tuple[str, ...]:
        return () if self.column is None else (self.column,)


class DedupDuty(_Duty):
    """Drop rows repeating an earlier row on ``subset``. Base: exact duplicates (all columns)."""

    kind: Literal["dedup"] = "dedup"
    subset: tuple[str, ...] | None = None

    def columns_read(self) -> tuple[str, ...]:
        return self.subset or ()


class JoinDuty(_Duty):
    """Merge two inputs on ``left_on == right_on``. Base: natural join on shared column names."""

    kind: Literal["join"] = "join"
    left_on: str | None = None
    right_on: str | None = None
    how: Literal["inner", "left"] = "inner"

    @model_validator(mode="after")
    def _keys(self) -> JoinDuty:
        if (self.left_on is None) != (self.right_on is None):
            raise PydanticCustomError("duty", "a join names both keys or neither")
        return self

    def columns_read(self) -> tuple[str, ...]:
        return tuple(c for c in (self.left_on, self.right_on) if c is not None)


BINARY_OPS = ("mul", "add", "sub", "div")
"""Arithmetic of two number columns."""
UNARY_OPS = ("number", "date", "trim", "lower", "upper", "title", "round")
"""Rewrites of one column (``name`` may be ``left`` itself: cleaned in place): numbers parsed out
of text (currency, thousands separators, percent signs), dates in ``fmt`` written as ISO dates,
stray spaces trimmed, case normalised, numbers rounded to ``digits``."""
DATE_FORMAT = r"^(?:%[aAdmyYbBHMS]|[-/. :T,])+$"


class DeriveDuty(_Duty):
    """Add ``name = left op right`` (:data:`BINARY_OPS`) or ``name = op(left)`` (:data:`UNARY_OPS`).
    Base: ``filled`` = number of non-missing fields per row."""

    kind: Literal["derive"] = "derive"
    name: str = "filled"
    op: Literal[
        "mul", "add", "sub", "div", "number", "date", "trim", "lower", "upper", "title", "round", "nonnull"
    ] = "nonnull"
    left: str | None = None
    right: str | None = None
    digits: int | None = Field(default=None, ge=0, le=6)
    fmt: Annotated[str, Field(pattern=DATE_FORMAT, max_length=32)] | None = None

    @model_validator(mode="after")
    def _operands(self) -> DeriveDuty:
        if self.op == "nonnull" and (self.left is not None or self.right is not None):
            raise PydanticCustomError("duty", "the nonnull derive takes no operand")
        if self.op in BINARY_OPS and (self.left is None or self.right is None):
            raise PydanticCustomError("duty", "derive ops other than nonnull take two operands")
        if self.op in UNARY_OPS and (self.left is None or self.right is not None):
            raise PydanticCustomError("duty", f"derive {self.op} rewrites one column (left)")
        if (self.op == "round") != (self.digits is not None):
            raise PydanticCustomError("duty", "round takes digits; other derive ops take none")
        if (self.op == "date") != (self.fmt is not None):
            raise PydanticCustomError("duty", "date takes the format it parses (fmt); other ops take none")
        return self

    def columns_read(self) -> tuple[str, ...]:
        return tuple(c for c in (self.left, self.right) if c is not None)


AggregateFn = Literal["sum", "mean", "count", "max", "min", "nunique", "size"]


class AggregateDuty(_Duty):
    """One row per ``by`` group with ``name = fn(column)``, and one more column per entry of
    ``more`` (``(name, fn, column)``). Base: row count per first column."""

    kind: Literal["aggregate"] = "aggregate"
    by: tuple[str, ...] | None = None
    column: str | None = None
    fn: AggregateFn = "size"
    name: str = "count"
    more: tuple[tuple[str, AggregateFn, str | None], ...] = ()

    @model_validator(mode="after")
    def _column(self) -> AggregateDuty:
        for _, fn, column in ((self.name, self.fn, self.column), *self.more):
            if (fn == "size") != (column is None):
                raise PydanticCustomError("duty", "size counts rows (no column); other functions need one")
        names = [self.name, *(m[0] for m in self.more)]
        if len(set(names)) != len(names) or set(names) & set(self.by or ()):
            raise PydanticCustomError("duty", "aggregate names each output column once")
        return self

    def columns_read(self) -> tuple[str, ...]:
        measured = (self.column, *(m[2] for m in self.more))
        return (*(self.by or ()), *(c for c in measured if c))


class TopKDuty(_Duty):
    """The ``k`` rows with the largest ``column`` (smallest if ascending), in that order; every
    row, sorted, when ``k`` is None. Base: top 10, first number."""

    kind: Literal["topk"] = "topk"
    column: str | None = None
    k: int | None = Field(default=10, ge=1, le=100_000)
    ascending: bool = False

    def columns_read(self) -> tuple[str, ...]:
        return () if self.column is None else (self.column,)


class SelectDuty(_Duty):
    """Keep and rename columns (``{old: new}``, in output order). Base: keep everything."""

    kind: Literal["select"] = "select"
    columns: tuple[tuple[str, str], ...] | None = None

    @field_validator("columns", mode="before")
    @classmethod
    def _mapping(cls, value: Any) -> Any:
        return tuple(value.items()) if isinstance(value, Mapping) else value

    @field_validator("columns")
    @classmethod
    def _unique(cls, value: tuple[tuple[str, str], ...] | None) -> tuple[tuple[str, str], ...] | None:
        if value is not None:
            if not value:
                raise PydanticCustomError("duty", "select keeps at least one column")
            if len({old for old, _ in value}) != len(value) or len({new for _, new in value}) != len(value):
                raise PydanticCustomError("duty", "select names each column once")
        return value


Duty = Annotated[
    FilterDuty | DedupDuty | JoinDuty | DeriveDuty | AggregateDuty | TopKDuty | SelectDuty,
    Field(discriminator="kind"),
]
DUTY_TYPES: dict[Role, type[_Duty]] = {
    Role.FILTER: FilterDuty,
    Role.DEDUP: DedupDuty,
    Role.JOIN: JoinDuty,
    Role.DERIVE: DeriveDuty,
    Role.AGGREGATE: AggregateDuty,
    Role.TOPK: TopKDuty,
    Role.SELECT: SelectDuty,
}
ARITY: dict[Role, int] = {role: 2 if role is Role.JOIN else 1 for role in Role}


def base_duty(role: Role) -> _Duty:
    """The role's default duty (what "revert to base role" restores)."""
    return DUTY_TYPES[Role(role)]()


class NodeSpec(BaseModel):
    """One agent's node."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=IDENT)
    role: Role
    duty: Duty
    capacity: Capacity = Capacity.SMALL
    deps: tuple[str, ...]

    @model_validator(mode="before")
    @classmethod
    def _default_kind(cls, data: Any) -> Any:
        """``duty: {column: status, ...}`` under ``role: filter`` means a filter duty."""
        if isinstance(data, Mapping) and isinstance(data.get("duty"), Mapping) and "kind" not in data["duty"]:
            return {**data, "duty": {**data["duty"], "kind": data.get("role")}}
        return data

    @model_validator(mode="after")
    def _role_and_arity(self) -> NodeSpec:
        if self.duty.kind != self.role.value:
            raise PydanticCustomError(
                "role_duty_mismatch",
                "node {node}: role {role} cannot take a {kind} duty",
                {"node": self.id, "role": self.role.value, "kind": self.duty.kind},
            )
        if len(self.deps) != ARITY[self.role]:
            raise PydanticCustomError(
                "arity",
                "node {node}: {role} takes {n} input(s), got {got}",
                {"node": self.id, "role": self.role.value, "n": ARITY[self.role], "got": len(self.deps)},
            )
        if len(set(self.deps)) != len(self.deps):
            raise PydanticCustomError("arity", "node {node} lists an input twice", {"node": self.id})
        return self

    @cached_property
    def computes(self) -> str:
        """What the node computes, independent of its id and of which nodes feed it (a digest)."""
        return self.key()

    def key(self) -> str:
        """What the node computes, independent of its id and of which nodes feed it."""
        payload = json.dumps([self.role.value, self.duty.model_dump(mode="json"), self.capacity.value])
        return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()


class TaskRef(BaseModel):
    """Which generated task a spec was written for (tasks are reproducible from this)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level: int
    split: Literal["train", "heldout"]
    seed: int


class OrchestrationSpec(BaseModel):
    """A whole spec: a DAG of nodes over named source tables."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = 1
    task: TaskRef | None = None
    sources: tuple[Annotated[str, Field(pattern=IDENT)], ...] = Field(min_length=1)
    nodes: tuple[NodeSpec, ...] = Field(min_length=1)
    output: str | None = None

    @model_validator(mode="after")
    def _graph(self) -> OrchestrationSpec:
        ids = [n.id for n in self.nodes]
        if len(set(ids)) != len(ids):
            raise PydanticCustomError("duplicate_id", "node ids must be unique: {ids}", {"ids": ids})
        clash = set(ids) & set(self.sources)
        if clash:
            raise PydanticCustomError("id_clash", "node ids shadow sources: {ids}", {"ids": sorted(clash)})
        known = set(ids) | set(self.sources)
        for node in self.nodes:
            for dep in node.deps:
                if dep not in known:
                    raise PydanticCustomError(
                        "dangling_dep", "node {node} depends on unknown {dep}", {"node": node.id, "dep": dep}
                    )
        cycle = _find_cycle({n.id: [d for d in n.deps if d in set(ids)] for n in self.nodes})
        if cycle:
            raise PydanticCustomError("cycle", "dependency cycle: {path}", {"path": " -> ".join(cycle)})
        if self.output is not None and self.output not in set(ids):
            raise PydanticCustomError("unknown_output", "output {out} is not a node", {"out": self.output})
        return self

    # ----------------------------------------------------------------------------- graph helpers
    @property
    def output_id(self) -> str:
        return self.output or self.nodes[-1].id

    def node(self, node_id: str) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def topological_order(self) -> tuple[str, ...]:
        """Node ids so that every node comes after its deps (stable: spec order breaks ties)."""
        ids = {n.id for n in self.nodes}
        done: list[str] = []
        placed: set[str] = set()
        pending = list(self.nodes)
        while pending:
            for i, n in enumerate(pending):
                if all(d in placed or d not in ids for d in n.deps):
                    done.append(n.id)
                    placed.add(n.id)
                    del pending[i]
                    break
        return tuple(done)

    def edges(self) -> int:
        return sum(len(n.deps) for n in self.nodes)

    def descendants(self, node_id: str) -> set[str]:
        """Nodes whose input depends, directly or not, on ``node_id`` (excluding itself)."""
        out: set[str] = set()
        frontier = [node_id]
        while frontier:
            current = frontier.pop()
            for n in self.nodes:
                if current in n.deps and n.id not in out:
                    out.add(n.id)
                    frontier.append(n.id)
        return out

    def replace_node(self, node: NodeSpec) -> OrchestrationSpec:
        """A new spec with the node of the same id replaced (validated again: may raise)."""
        nodes = [node if n.id == node.id else n for n in self.nodes]
        data = self.model_dump(mode="json")
        data["nodes"] = [n.model_dump(mode="json") for n in nodes]
        return parse_spec(data)

    @cached_property
    def fingerprint(self) -> str:
        """A digest of the whole spec (computed once)."""
        return self.digest()

    def digest(self) -> str:
        return hashlib.blake2b(self.model_dump_json().encode(), digest_size=16).hexdigest()

    # ----------------------------------------------------------------------------- YAML
    def to_yaml(self) -> str:
        data = self.model_dump(mode="json", exclude_none=False)
        for node, spec in zip(data["nodes"], self.nodes, strict=True):
            fields = type(spec.duty).model_fields  # a None whose default is not None stays (topk's k)
            duty = node["duty"].items()
            node["duty"] = {k: v for k, v in duty if v is not None or fields[k].default is not None}
            if node["duty"].get("columns") is not None:
                node["duty"]["columns"] = dict(node["duty"]["columns"])
        if data["output"] is None:
            del data["output"]
        if data["task"] is None:
            del data["task"]
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)

    @classmethod
    def from_yaml(cls, text: str) -> OrchestrationSpec:
        return parse_spec(text)


def _find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in graph.get(v, ()):
            if state.get(w) == 1:
                return [*stack[stack.index(w) :], w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in graph:
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


class SpecIssue(BaseModel):
    """One problem found in a spec: ``code`` is stable (``cycle``, ``dangling_dep``, ...)."""

    code: str
    location: str
    message: str


class SpecError(ValueError):
    """A spec that cannot be run; ``issues`` says why, one entry per problem."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("; ".join(f"[{i.code}] {i.location}: {i.message}" for i in issues))

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its issues (copied, pickled, sent between Ray workers)."""
        return type(self), (self.issues,)

    @property
    def codes(self) -> list[str]:
        return [i.code for i in self.issues]


def parse_spec(data: str | Mapping[str, Any] | OrchestrationSpec) -> OrchestrationSpec:
    """A validated spec from YAML text, a mapping, or a spec; raises :class:`SpecError` only."""
    if isinstance(data, OrchestrationSpec):
        return data
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise SpecError([SpecIssue(code="yaml", location="", message=str(exc))]) from None
    if not isinstance(data, Mapping):
        raise SpecError([SpecIssue(code="schema", location="", message="a spec is a mapping")])
    try:
        return OrchestrationSpec.model_validate(data)
    except ValidationError as exc:
        issues = [_issue(e) for e in exc.errors()]
        if len(issues) > 1:  # "nodes is empty" only echoes the nodes that failed
            issues = [i for i in issues if not (i.code == "schema:too_short" and i.location == "nodes")]
        raise SpecError(issues) from None


def _issue(error: Mapping[str, Any]) -> SpecIssue:
    custom = {
        "cycle",
        "dangling_dep",
        "role_duty_mismatch",
        "arity",
        "duplicate_id",
        "id_clash",
        "unknown_output",
        "duty",
    }
    code = error["type"]
    if code not in custom:
        code = "union_tag_invalid" if code.startswith("union_tag") else f"schema:{code}"
    return SpecIssue(code=code, location=".".join(str(p) for p in error["loc"]), message=error["msg"])
