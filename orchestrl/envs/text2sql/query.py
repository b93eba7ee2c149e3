"""The SQL grammar the agents fill in, and how a filled-in plan becomes SQL text.

Every question's gold query and every query the team writes is a :class:`QueryPlan`::

    SELECT [group_by,] <agg>(<select>)
    FROM <table> [JOIN <other table> ON <foreign key>]
    [WHERE <where> <op> <value>]
    [GROUP BY <group_by>]
    [ORDER BY <order_by or the selected aggregate> ASC|DESC]
    [LIMIT <limit>]

Columns are *slots*: 1..n index the schema's columns in schema order and are rendered qualified
(``products.price``); slot 0 is ``*`` for ``select`` and means "absent" for ``where`` and
``group_by``, and "the selected expression" for ``order_by``. Values are rendered as numbers when
they look like one and as quoted, escaped strings otherwise, so no value can inject SQL.

:func:`parse_sql` reads SQL in this exact form back into its plan: a query the grammar can express
is one that parses and renders to itself.

A plan that cannot be rendered at all (an empty slot, a join in a one-table schema) raises
:class:`PlanError`; a plan that renders to SQL SQLite rejects (``SUM(*)``, a column of a table not
in ``FROM``) is left for SQLite to reject. Both count as invalid SQL in the reward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from orchestrl.envs.text2sql.schemas import Schema


class Agg(IntEnum):
    NONE = 0
    COUNT = 1
    SUM = 2
    AVG = 3
    MIN = 4
    MAX = 5


class Op(IntEnum):
    EQ = 0
    NE = 1
    GT = 2
    LT = 3
    GE = 4
    LE = 5

    @property
    def sql(self) -> str:
        return ("=", "!=", ">", "<", ">=", "<=")[self]


class Order(IntEnum):
    NONE = 0
    ASC = 1
    DESC = 2


LIMITS: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
"""The LIMIT choices; 0 = no LIMIT."""


class PlanError(ValueError):
    """A plan names something the schema does not have."""


@dataclass(frozen=True)
class QueryPlan:
    """One query in the env's grammar; see the module docstring for each slot's meaning."""

    table: int
    select: int = 0
    agg: Agg = Agg.NONE
    join: bool = False
    where: int = 0
    op: Op = Op.EQ
    value: str | None = None
    group_by: int = 0
    order: Order = Order.NONE
    order_by: int = 0
    limit: int = 0


_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_SQL_TOKEN = re.compile(r"'(?:[^']|'')*'|[A-Za-z_][A-Za-z_0-9.]*|\d+(?:\.\d+)?|[^\s]")


def sql_literal(value: str) -> str:
    """A number as itself, anything else as a single-quoted string with quotes doubled."""
    if _NUMBER.match(value):
        return value
    return "'" + value.replace("'", "''") + "'"


def sql_tokens(sql: str) -> int:
    """Number of lexical tokens in ``sql`` (a quoted string counts once): the length cost's unit."""
    return len(_SQL_TOKEN.findall(sql))


def column_ref(schema: Schema, slot: int) -> str:
    columns = schema.columns
    if not 1 <= slot <= len(columns):
        raise PlanError(f"column slot {slot} is empty in schema '{schema.name}' ({len(columns)} columns)")
    table, column = columns[slot - 1]
    return f"{table.name}.{column.name}"


def render_sql(plan: QueryPlan, schema: Schema) -> str:
    """The SQL text of ``plan`` over ``schema``."""
    if not 0 <= plan.table < len(schema.tables):
        raise PlanError(f"table slot {plan.table} is empty in schema '{schema.name}'")
    selected = _selected(plan, schema)
    head = f"{column_ref(schema, plan.group_by)}, {selected}" if plan.group_by else selected
    parts = [f"SELECT {head}", f"FROM {_from(plan, schema)}"]
    if plan.where:
        if plan.value is None or not plan.value.strip():
            raise PlanError("WHERE needs a value")
        parts.append(f"WHERE {column_ref(schema, plan.where)} {Op(plan.op).sql} {sql_literal(plan.value)}")
    if plan.group_by:
        parts.append(f"GROUP BY {column_ref(schema, plan.group_by)}")
    if plan.order != Order.NONE:
        target = column_ref(schema, plan.order_by) if plan.order_by else selected
        parts.append(f"ORDER BY {target} {Order(plan.order).name}")
    if plan.limit:
        parts.append(f"LIMIT {int(plan.limit)}")
    return " ".join(parts)


def _selected(plan: QueryPlan, schema: Schema) -> str:
    inner = column_ref(schema, plan.select) if plan.select else "*"
    agg = Agg(plan.agg)
    return inner if agg == Agg.NONE else f"{agg.name}({inner})"


def _from(plan: QueryPlan, schema: Schema) -> str:
    table = schema.tables[plan.table]
    if not plan.join:
        return table.name
    fk = schema.foreign_key
    if fk is None:
        raise PlanError(f"schema '{schema.name}' has no foreign key to join on")
    other = fk.parent if table.name == fk.child else fk.child
    return f"{table.name} JOIN {other} ON {fk.child}.{fk.column} = {fk.parent}.{fk.parent_column}"


_SELECT = re.compile(
    r"^SELECT (?P<head>.+?) FROM (?P<table>\w+)(?: JOIN (?P<other>\w+) ON \S+ = \S+)?"
    r"(?: WHERE (?P<where>\S+) (?P<op>=|!=|>=|<=|>|<) (?P<value>'(?:[^']|'')*'|-?\d+(?:\.\d+)?))?"
    r"(?: GROUP BY (?P<group>\S+))?(?: ORDER BY (?P<order_by>\S+) (?P<order>ASC|DESC))?"
    r"(?: LIMIT (?P<limit>\d+))?$"
)
_AGGREGATED = re.compile(r"^(COUNT|SUM|AVG|MIN|MAX)\((.+)\)$")


def parse_sql(sql: str, schema: Schema) -> QueryPlan:
    """The plan whose :func:`render_sql` is ``sql``; raises :class:`PlanError` for any other SQL."""
    match = _SELECT.match(sql)
    if match is None:
        raise PlanError(f"not in the grammar's form: {sql}")
    refs = {column_ref(schema, slot): slot for slot in range(1, len(schema.columns) + 1)}

    def slot(ref: str) -> int:
        if ref not in refs:
            raise PlanError(f"schema '{schema.name}' has no column {ref}")
        return refs[ref]

    head = match["head"]
    group_by = 0
    if match["group"]:
        group_by = slot(match["group"])
        prefix = f"{match['group']}, "
        if not head.startswith(prefix):
            raise PlanError(f"GROUP BY {match['group']} is not selected first: {sql}")
        head = head[len(prefix) :]
    aggregated = _AGGREGATED.match(head)
    agg, inner = (Agg[aggregated[1]], aggregated[2]) if aggregated else (Agg.NONE, head)
    order_by = 0
    if match["order_by"] and match["order_by"] != head:
        order_by = slot(match["order_by"])
    value = match["value"]
    if value is not None and value.startswith("'"):
        value = value[1:-1].replace("''", "'")
    tables = [t.name for t in schema.tables]
    if match["table"] not in tables:
        raise PlanError(f"schema '{schema.name}' has no table {match['table']}")
    plan = QueryPlan(
        table=tables.index(match["table"]),
        select=0 if inner == "*" else slot(inner),
        agg=agg,
        join=match["other"] is not None,
        where=slot(match["where"]) if match["where"] else 0,
        op=Op([o.sql for o in Op].index(match["op"])) if match["op"] else Op.EQ,
        value=value,
        group_by=group_by,
        order=Order[match["order"]] if match["order"] else Order.NONE,
        order_by=order_by,
        limit=int(match["limit"] or 0),
    )
    if plan.limit not in LIMITS:
        raise PlanError(f"LIMIT {plan.limit} is not one of {LIMITS}: {sql}")
    if render_sql(plan, schema) != sql:
        raise PlanError(f"not in the grammar's form: {sql} (renders as {render_sql(plan, schema)})")
    return plan
