"""The two agents' action spaces, their masks, and how a joint action becomes a :class:`QueryPlan`.

Both agents act at once, in the single step of an episode; the env assembles one query from both.
Every component is an index into a per-question candidate list, pointer style, so the same policy
can act on a schema it has never seen:

``schema_extractor`` (tables, columns, conditions: *what* the query is about)
    ``table``     FROM table slot (row of ``table_ids``)
    ``join``      0/1: join the table the foreign key links to it
    ``select``    column slot selected (0 = ``*``)
    ``where``     column slot of the condition (0 = no WHERE)
    ``group_by``  column slot grouped by (0 = no GROUP BY)
    ``order_by``  column slot sorted by (0 = the selected expression)

``sql_composer`` (operators, values, shape: *how* the query says it)
    ``agg``           :class:`.query.Agg` applied to the selected column
    ``op``            :class:`.query.Op` of the condition
    ``value_start``   question word where the condition's value starts
    ``value_length``  value length - 1 (1..MAX_VALUE_WORDS words)
    ``order``         :class:`.query.Order` (NONE = no ORDER BY)
    ``limit``         index into :data:`.query.LIMITS` (0 = no LIMIT)

The composer's ``op``/``value`` only matter if the extractor chose a WHERE column, and its
``order`` sorts by the extractor's ``order_by``: neither agent can write the query alone. The value
is the copied span as the database stores it when the WHERE column holds a value the span names
("tokyo" -> ``Tokyo``, "penguins" -> ``Penguin``; :mod:`.values`), a number without its thousands
separators ("200,000" -> ``200000``), else the span's words as written.

Masks rule out only what cannot exist for this question (an absent table or column slot, a join
without a foreign key, a value position past the question's end): never a semantic hint.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import MultiDiscrete

from orchestrl.envs.text2sql.observation import COLUMN_SLOTS, MAX_TABLES, Q_WORDS
from orchestrl.envs.text2sql.query import LIMITS, Agg, Op, Order, QueryPlan, column_ref
from orchestrl.envs.text2sql.schemas import Schema
from orchestrl.envs.text2sql.tokenizer import is_number, number_text
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS, ValueIndex

EXTRACTOR = "schema_extractor"
COMPOSER = "sql_composer"
AGENTS: tuple[str, ...] = (EXTRACTOR, COMPOSER)

EXTRACTOR_COMPONENTS: tuple[str, ...] = ("table", "join", "select", "where", "group_by", "order_by")
EXTRACTOR_NVEC: tuple[int, ...] = (MAX_TABLES, 2, COLUMN_SLOTS, COLUMN_SLOTS, COLUMN_SLOTS, COLUMN_SLOTS)
COMPOSER_COMPONENTS: tuple[str, ...] = ("agg", "op", "value_start", "value_length", "order", "limit")
COMPOSER_NVEC: tuple[int, ...] = (len(Agg), len(Op), Q_WORDS, MAX_VALUE_WORDS, len(Order), len(LIMITS))

COMPONENTS: dict[str, tuple[str, ...]] = {EXTRACTOR: EXTRACTOR_COMPONENTS, COMPOSER: COMPOSER_COMPONENTS}
NVEC: dict[str, tuple[int, ...]] = {EXTRACTOR: EXTRACTOR_NVEC, COMPOSER: COMPOSER_NVEC}


def where_mask(words: Sequence[str], schema: Schema, values: ValueIndex) -> np.ndarray:
    """The WHERE column slots a question can fill, from its public inputs (constrained decoding):
    none (slot 0); a text column when some span of the question names one of its stored values; any
    other column when the question holds a number. A float32 0/1 vector over the ``where``
    component."""
    mask = np.zeros(COLUMN_SLOTS, dtype=np.float32)
    mask[0] = 1.0
    linked = set().union(*values.links(words)) if words else set()
    has_number = any(is_number(w) for w in words)
    for slot, (_, column) in enumerate(schema.columns[: COLUMN_SLOTS - 1], start=1):
        mask[slot] = float(has_number if column.numeric else slot in linked)
    return mask


def linked_span(
    where: int,
    start_logits: np.ndarray,
    length_logits: np.ndarray,
    words: Sequence[str],
    schema: Schema,
    values: ValueIndex,
) -> tuple[int, int] | None:
    """The (value_start, value_length) the composer scores highest among the spans that give column
    ``where`` a value it can hold: a stored value of a text column, one number for any other. None
    when no span of the question does (the caller keeps the composer's own choice)."""
    numeric = schema.columns[where - 1][1].numeric
    best, best_score = None, -np.inf
    for start in range(min(len(words), len(start_logits))):
        for length in range(1, min(MAX_VALUE_WORDS, len(length_logits)) + 1):
            span = words[start : start + length]
            if len(span) < length:
                break
            fits = length == 1 and is_number(span[0]) if numeric else values.stored(where, span) is not None
            score = start_logits[start] + length_logits[length - 1]
            if fits and score > best_score:
                best, best_score = (start, length - 1), score
    return best


def split_mask(mask: np.ndarray, nvec: tuple[int, ...] | np.ndarray) -> tuple[np.ndarray, ...]:
    """The flat mask cut into one int8 vector per component (gymnasium's MultiDiscrete format)."""
    bounds = np.cumsum([0, *[int(n) for n in nvec]])
    return tuple(np.asarray(mask[a:b]).astype(np.int8) for a, b in itertools.pairwise(bounds))


class MaskedMultiDiscrete(MultiDiscrete):
    """A ``MultiDiscrete`` whose ``sample(mask=...)`` also takes the flat float mask of the observation.

    Gymnasium wants a tuple of int8 vectors; the env's observations carry one flat vector (the
    project's convention, see :mod:`orchestrl.envs.spaces`), and PettingZoo's API test samples with
    that. Everything else is plain ``MultiDiscrete``, so RLlib treats it as one.
    """

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        if mask is not None and not isinstance(mask, tuple):
            mask = split_mask(np.asarray(mask), self.nvec)
        return super().sample(mask=mask, probability=probability)


def action_spaces() -> dict[str, MaskedMultiDiscrete]:
    return {agent: MaskedMultiDiscrete(np.array(NVEC[agent], dtype=np.int64)) for agent in AGENTS}


def action_masks(n_words: int, schema: Schema) -> dict[str, np.ndarray]:
    """One flat float32 0/1 mask per agent for a question of ``n_words`` words over ``schema``;
    every component keeps at least one 1."""
    n_tables, n_columns = len(schema.tables), len(schema.columns)
    columns = _first(COLUMN_SLOTS, 1 + n_columns)
    extractor = [
        _first(MAX_TABLES, n_tables),
        np.array([1.0, float(schema.foreign_key is not None)], dtype=np.float32),
        columns,
        columns,
        columns,
        columns,
    ]
    composer = [
        np.ones(len(Agg), np.float32),
        np.ones(len(Op), np.float32),
        _first(Q_WORDS, n_words),
        np.ones(MAX_VALUE_WORDS, np.float32),
        np.ones(len(Order), np.float32),
        np.ones(len(LIMITS), np.float32),
    ]
    return {EXTRACTOR: np.concatenate(extractor), COMPOSER: np.concatenate(composer)}


def _first(size: int, n: int) -> np.ndarray:
    mask = np.zeros(size, dtype=np.float32)
    mask[: max(1, min(n, size))] = 1.0
    return mask


def _components(agent: str, action: Any) -> dict[str, int]:
    values = np.asarray(action, dtype=np.int64).reshape(-1)
    nvec = NVEC[agent]
    if values.shape != (len(nvec),) or np.any(values < 0) or np.any(values >= np.array(nvec)):
        raise ValueError(f"{agent} action {values.tolist()} is outside MultiDiscrete({list(nvec)})")
    return dict(zip(COMPONENTS[agent], (int(v) for v in values), strict=True))


def decode(
    extractor_action: Any, composer_action: Any, words: Sequence[str], schema: Schema, values: ValueIndex
) -> QueryPlan:
    """The query both agents' choices describe for a question of ``words`` over ``schema``."""
    ex, co = _components(EXTRACTOR, extractor_action), _components(COMPOSER, composer_action)
    value = None
    if ex["where"]:
        start, length = co["value_start"], co["value_length"] + 1
        value = copied_value(words[start : start + length], ex["where"], values)
    return QueryPlan(
        table=ex["table"],
        select=ex["select"],
        agg=Agg(co["agg"]),
        join=bool(ex["join"]),
        where=ex["where"],
        op=Op(co["op"]),
        value=value,
        group_by=ex["group_by"],
        order=Order(co["order"]),
        order_by=ex["order_by"],
        limit=LIMITS[co["limit"]],
    )


def copied_value(span: Sequence[str], slot: int, values: ValueIndex) -> str | None:
    """The WHERE value a span of question words gives for column ``slot`` (see the module docstring)."""
    if not span:
        return None
    stored = values.stored(slot, span)
    if stored is not None:
        return stored
    if len(span) == 1 and is_number(span[0]):
        return number_text(span[0])
    return " ".join(span)


def describe(
    plan: QueryPlan, schema: Schema, value_span: tuple[int, int] | None
) -> dict[str, dict[str, Any]]:
    """Each agent's choices as a JSON-ready slot object (what the team "said" to each other)."""

    def ref(slot: int, zero: str | None) -> str | None:
        if slot == 0:
            return zero
        try:
            return column_ref(schema, slot)
        except ValueError:
            return f"<empty column slot {slot}>"

    tables = [t.name for t in schema.tables]
    table = tables[plan.table] if plan.table < len(tables) else f"<empty table slot {plan.table}>"
    fk = schema.foreign_key
    joined = None
    if plan.join:
        joined = (fk.parent if table == fk.child else fk.child) if fk else "<no foreign key>"
    extractor = {
        "from": table,
        "join": joined,
        "select": ref(plan.select, "*"),
        "where": ref(plan.where, None),
        "group_by": ref(plan.group_by, None),
        "order_by": ref(plan.order_by, "<selected>"),
    }
    composer = {
        "agg": Agg(plan.agg).name,
        "op": Op(plan.op).sql,
        "value": plan.value,
        "value_span": list(value_span) if value_span else None,
        "order": Order(plan.order).name,
        "limit": plan.limit or None,
    }
    return {EXTRACTOR: extractor, COMPOSER: composer}
