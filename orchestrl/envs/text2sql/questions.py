"""Questions with their gold :class:`QueryPlan`: what to ask (the kinds) and how to say it (a grammar).

Each *kind* of question (``count_where``, ``top_k``, ``join_agg``...) is a small function that picks
columns by role and a value from the real rows, and returns the gold plan plus :class:`Slots`: what
the question is about (tables, columns, the condition, the ordering). A grammar (:mod:`.grammar`
for training, :mod:`.grammar_heldout` written separately and used only by the test split) turns
the slots into English with many paraphrases. Every kind and its gold SQL shape::

    list_where        SELECT t.label FROM t WHERE t.c op v
    star_where        SELECT * FROM t WHERE t.c op v
    count_all         SELECT COUNT(*) FROM t
    count_where       SELECT COUNT(*) FROM t WHERE t.c op v
    agg_all           SELECT AGG(t.n) FROM t
    agg_where         SELECT AGG(t.n) FROM t WHERE t.c op v
    group_count       SELECT t.c, COUNT(*) FROM t GROUP BY t.c
    group_agg         SELECT t.c, AGG(t.n) FROM t GROUP BY t.c
    superlative       SELECT t.label|* FROM t ORDER BY t.n DESC|ASC LIMIT 1
    top_k             SELECT t.label|* FROM t ORDER BY t.n DESC|ASC LIMIT k
    sorted_list       SELECT t.label FROM t ORDER BY t.n ASC|DESC
    group_argmax      SELECT t.c, COUNT(*) FROM t GROUP BY t.c ORDER BY COUNT(*) DESC|ASC LIMIT 1
    where_superlative SELECT t.label|* FROM t WHERE t.c = v ORDER BY t.n DESC|ASC LIMIT 1
    join_count        SELECT COUNT(*) FROM child JOIN parent ON .. WHERE parent.c op v
    join_list         SELECT parent.label FROM child JOIN parent ON .. WHERE child.c op v
    join_agg          SELECT AGG(child.n) FROM child JOIN parent ON .. WHERE parent.c op v
    join_group        SELECT parent.c, COUNT(*) FROM child JOIN parent ON .. GROUP BY parent.c

A WHERE value is named in the question as a span of words (as stored, in lower case, as a plural
noun, a number with thousands separators) whose copy (:func:`.actions.copied_value`) is the stored
value; its span is recorded, since the expert points at it and a policy has to.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from orchestrl.envs.text2sql.actions import copied_value
from orchestrl.envs.text2sql.database import Rows
from orchestrl.envs.text2sql.observation import Q_WORDS
from orchestrl.envs.text2sql.query import Agg, Op, Order, QueryPlan, render_sql
from orchestrl.envs.text2sql.schemas import Column, Role, Schema, Span, Table
from orchestrl.envs.text2sql.tokenizer import split_words
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS, ValueIndex

VALUE_MARK = "\ue000"
"""Where a grammar puts the condition's value; replaced by the value's words after rendering."""


@dataclass(frozen=True)
class Question:
    """One question with its gold answer; ``gold_rows`` is filled in by :mod:`.bank`."""

    qid: str
    schema: str
    kind: str
    text: str
    words: tuple[str, ...]
    plan: QueryPlan
    gold_sql: str
    value_span: tuple[int, int] | None
    """(first word, number of words) of the WHERE value, or None without WHERE."""
    unseen_phrasing: bool
    """Phrased by the held-out grammar."""
    gold_rows: tuple[tuple[Any, ...], ...] = field(default=(), compare=False)

    @property
    def ordered(self) -> bool:
        """Whether the answer's row order matters (the gold query has ORDER BY)."""
        return self.plan.order != Order.NONE


@dataclass(frozen=True)
class Condition:
    table: Table
    column: Column
    op: Op
    value: str
    """The value as the plan holds it (stored text, or a threshold such as "250")."""


@dataclass(frozen=True)
class Slots:
    """What a question is about; a grammar decides how to say it."""

    kind: str
    table: Table
    parent: Table | None = None
    """The other table of a join (the one the foreign key points to)."""
    number: Column | None = None
    """The aggregated or ordered column."""
    agg: Agg = Agg.NONE
    category: Column | None = None
    """The grouped-by column."""
    cond: Condition | None = None
    order: Order = Order.NONE
    k: int = 0
    star: bool = False
    """The answer is whole rows (``SELECT *``), not the label column."""


class Grammar(Protocol):
    name: str

    def phrase(self, slots: Slots, rng: np.random.Generator) -> tuple[str, str | None]:
        """The question (with :data:`VALUE_MARK` where the value goes) and the value's surface form."""
        ...


# ---------------------------------------------------------------------------------------------
# The kinds.


class _Draft:
    """Picks columns and values for one question."""

    def __init__(self, schema: Schema, rows: Rows, rng: np.random.Generator) -> None:
        self.schema, self.rows, self.rng = schema, rows, rng

    def pick(self, items: list[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))] if items else None

    def slot(self, table: Table, column: Column) -> int:
        return self.schema.column_slot(table.name, column.name)

    def condition(
        self,
        table: Table,
        roles: tuple[Role, ...] = ("category", "number"),
        ops: tuple[Op, ...] | None = None,
    ) -> Condition | None:
        """A condition on a random column of ``table`` with a value from its rows."""
        column = self.pick(table.with_role(*roles))
        if column is None:
            return None
        cell = self.pick([r[table.columns.index(column)] for r in self.rows[table.name]])
        if column.numeric:
            choices = [Op.GT, Op.LT, Op.GE, Op.LE]
            span = column.values
            if column.lex.counted and isinstance(span, Span) and span.hi - span.lo <= 40:
                choices.append(Op.EQ)  # "with 3 bedrooms", not "with 806072 inhabitants"
            op = self.pick(list(ops or choices))
            value = str(cell) if op == Op.EQ else _round_threshold(cell)
        else:
            op = self.pick(list(ops or (Op.EQ, Op.EQ, Op.EQ, Op.NE)))
            value = str(cell)
        return Condition(table, column, op, value)

    def where(self, cond: Condition) -> dict[str, Any]:
        return {"where": self.slot(cond.table, cond.column), "op": cond.op, "value": cond.value}


def _round_threshold(value: float) -> str:
    """A threshold a person would write: whole numbers, large ones to two significant digits."""
    number = round(value)
    if abs(number) >= 10_000:
        digits = len(str(abs(number))) - 2
        number = round(number, -digits)
    return str(int(number))


Built = tuple[Slots, QueryPlan] | None
"""The slots a grammar phrases and the gold plan; None when the kind does not apply."""
KindFn = Callable[[_Draft, Table, Table | None], Built]


def _list_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t)
    if t.label is None or cond is None:
        return None
    plan = QueryPlan(d.schema.table_index(t.name), select=d.slot(t, t.label), **d.where(cond))
    return Slots("list_where", t, cond=cond), plan


def _star_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t)
    if cond is None:
        return None
    plan = QueryPlan(d.schema.table_index(t.name), **d.where(cond))
    return Slots("star_where", t, cond=cond, star=True), plan


def _count_all(d: _Draft, t: Table, _: Table | None) -> Built:
    return Slots("count_all", t), QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT)


def _count_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t)
    if cond is None:
        return None
    plan = QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT, **d.where(cond))
    return Slots("count_where", t, cond=cond), plan


def _aggregate(d: _Draft, t: Table) -> tuple[Column, Agg] | None:
    number = d.pick(t.with_role("number"))
    if number is None:
        return None
    return number, d.pick(
        [Agg.AVG, Agg.SUM, Agg.MIN, Agg.MAX] if number.additive else [Agg.AVG, Agg.MIN, Agg.MAX]
    )


def _agg_all(d: _Draft, t: Table, _: Table | None) -> Built:
    chosen = _aggregate(d, t)
    if chosen is None:
        return None
    number, agg = chosen
    plan = QueryPlan(d.schema.table_index(t.name), select=d.slot(t, number), agg=agg)
    return Slots("agg_all", t, number=number, agg=agg), plan


def _agg_where(d: _Draft, t: Table, _: Table | None) -> Built:
    chosen, cond = _aggregate(d, t), d.condition(t, roles=("category",))
    if chosen is None or cond is None:
        return None
    number, agg = chosen
    plan = QueryPlan(d.schema.table_index(t.name), select=d.slot(t, number), agg=agg, **d.where(cond))
    return Slots("agg_where", t, number=number, agg=agg, cond=cond), plan


def _group_count(d: _Draft, t: Table, _: Table | None) -> Built:
    category = d.pick(t.with_role("category"))
    if category is None:
        return None
    plan = QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT, group_by=d.slot(t, category))
    return Slots("group_count", t, category=category), plan


def _group_agg(d: _Draft, t: Table, _: Table | None) -> Built:
    category, chosen = d.pick(t.with_role("category")), _aggregate(d, t)
    if category is None or chosen is None:
        return None
    number, agg = chosen
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, number), agg=agg, group_by=d.slot(t, category)
    )
    return Slots("group_agg", t, number=number, agg=agg, category=category), plan


def _ranked(d: _Draft, t: Table, kind: str, limit: int, cond: Condition | None = None) -> Built:
    number = d.pick(t.with_role("number"))
    if number is None:
        return None
    order = d.pick([Order.DESC, Order.ASC])
    star = t.label is None
    plan = QueryPlan(
        d.schema.table_index(t.name),
        select=0 if star else d.slot(t, t.label),
        order=order,
        order_by=d.slot(t, number),
        limit=limit,
    )
    if cond is not None:
        plan = replace(plan, **d.where(cond))
    return Slots(kind, t, number=number, cond=cond, order=order, k=limit, star=star), plan


def _superlative(d: _Draft, t: Table, _: Table | None) -> Built:
    return _ranked(d, t, "superlative", limit=1)


def _top_k(d: _Draft, t: Table, _: Table | None) -> Built:
    return _ranked(d, t, "top_k", limit=int(d.rng.integers(2, 6)))


def _where_superlative(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t, roles=("category",), ops=(Op.EQ,))
    return None if cond is None else _ranked(d, t, "where_superlative", limit=1, cond=cond)


def _sorted_list(d: _Draft, t: Table, _: Table | None) -> Built:
    number = d.pick(t.with_role("number"))
    if t.label is None or number is None:
        return None
    order = d.pick([Order.ASC, Order.DESC])
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, t.label), order=order, order_by=d.slot(t, number)
    )
    return Slots("sorted_list", t, number=number, order=order), plan


def _group_argmax(d: _Draft, t: Table, _: Table | None) -> Built:
    category = d.pick(t.with_role("category"))
    if category is None:
        return None
    order = d.pick([Order.DESC, Order.ASC])
    plan = QueryPlan(
        d.schema.table_index(t.name), agg=Agg.COUNT, group_by=d.slot(t, category), order=order, limit=1
    )
    return Slots("group_argmax", t, category=category, order=order, k=1), plan


def _join_count(d: _Draft, child: Table, parent: Table | None) -> Built:
    cond = d.condition(parent, roles=("category",)) if parent else None
    if parent is None or cond is None:
        return None
    plan = QueryPlan(d.schema.table_index(child.name), agg=Agg.COUNT, join=True, **d.where(cond))
    return Slots("join_count", child, parent=parent, cond=cond), plan


def _join_list(d: _Draft, child: Table, parent: Table | None) -> Built:
    cond = d.condition(child, roles=("category",), ops=(Op.EQ,))
    if parent is None or parent.label is None or cond is None:
        return None
    plan = QueryPlan(
        d.schema.table_index(child.name), select=d.slot(parent, parent.label), join=True, **d.where(cond)
    )
    return Slots("join_list", child, parent=parent, cond=cond), plan


def _join_agg(d: _Draft, child: Table, parent: Table | None) -> Built:
    chosen = _aggregate(d, child)
    cond = d.condition(parent, roles=("category",), ops=(Op.EQ,)) if parent else None
    if parent is None or chosen is None or cond is None:
        return None
    number, agg = chosen
    plan = QueryPlan(
        d.schema.table_index(child.name),
        select=d.slot(child, number),
        agg=agg,
        join=True,
        **d.where(cond),
    )
    return Slots("join_agg", child, parent=parent, number=number, agg=agg, cond=cond), plan


def _join_group(d: _Draft, child: Table, parent: Table | None) -> Built:
    category = d.pick(parent.with_role("category")) if parent else None
    if parent is None or category is None:
        return None
    plan = QueryPlan(
        d.schema.table_index(child.name), agg=Agg.COUNT, join=True, group_by=d.slot(parent, category)
    )
    return Slots("join_group", child, parent=parent, category=category), plan


KINDS: dict[str, KindFn] = {
    "list_where": _list_where,
    "star_where": _star_where,
    "count_all": _count_all,
    "count_where": _count_where,
    "agg_all": _agg_all,
    "agg_where": _agg_where,
    "group_count": _group_count,
    "group_agg": _group_agg,
    "superlative": _superlative,
    "top_k": _top_k,
    "sorted_list": _sorted_list,
    "group_argmax": _group_argmax,
    "where_superlative": _where_superlative,
    "join_count": _join_count,
    "join_list": _join_list,
    "join_agg": _join_agg,
    "join_group": _join_group,
}
JOIN_KINDS = frozenset(k for k in KINDS if k.startswith("join_"))


# ---------------------------------------------------------------------------------------------
# Generation.


def generate_questions(
    schema: Schema,
    rows: Rows,
    values: ValueIndex,
    seed: int,
    grammars: tuple[Grammar, ...],
    per_kind: int = 6,
    held_out: frozenset[str] = frozenset(),
) -> list[Question]:
    """Up to ``per_kind`` distinct questions of every applicable kind for each table of ``schema``,
    each phrased by a grammar drawn uniformly from ``grammars`` (those named in ``held_out`` mark
    the question ``unseen_phrasing``). Deterministic in ``seed``."""
    rng = np.random.default_rng([int(seed), zlib.crc32(schema.name.encode()), 1])
    fk = schema.foreign_key
    targets: list[tuple[str, Table, Table | None]] = [
        (kind, t, None) for kind in KINDS if kind not in JOIN_KINDS for t in schema.tables
    ]
    if fk is not None:
        targets += [(kind, schema.table(fk.child), schema.table(fk.parent)) for kind in sorted(JOIN_KINDS)]
    questions: list[Question] = []
    seen: set[str] = set()
    for kind, table, parent in targets:
        made = 0
        for _attempt in range(per_kind * 4):
            if made == per_kind:
                break
            built = KINDS[kind](_Draft(schema, rows, rng), table, parent)
            if built is None:
                continue
            grammar = grammars[int(rng.integers(len(grammars)))]
            question = phrase_question(
                schema, values, *built, grammar, rng, f"{schema.name}/{kind}/{len(questions)}", held_out
            )
            if question is None or question.text in seen:
                continue
            seen.add(question.text)
            questions.append(question)
            made += 1
    return questions


def phrase_question(
    schema: Schema,
    values: ValueIndex,
    slots: Slots,
    plan: QueryPlan,
    grammar: Grammar,
    rng: np.random.Generator,
    qid: str,
    held_out: frozenset[str] = frozenset(),
) -> Question | None:
    """``slots`` phrased by ``grammar``; None if the text is too long or its value span does not
    copy back to the plan's value."""
    text, surface = grammar.phrase(slots, rng)
    text = text[0].upper() + text[1:] if text[:1].islower() and rng.random() < 0.8 else text
    span = None
    if plan.where:
        if surface is None or text.count(VALUE_MARK) != 1:
            raise AssertionError(f"{grammar.name} put no single value into {slots.kind}: {text!r}")
        before, _, _after = text.partition(VALUE_MARK)
        span = (len(split_words(before)), len(split_words(surface)))
        text = text.replace(VALUE_MARK, surface)
    words = tuple(split_words(text))
    if len(words) > Q_WORDS:
        return None
    if span is not None:
        copied = copied_value(words[span[0] : span[0] + span[1]], plan.where, values)
        if span[1] > MAX_VALUE_WORDS or copied != plan.value:
            return None
    return Question(
        qid=qid,
        schema=schema.name,
        kind=slots.kind,
        text=text,
        words=words,
        plan=plan,
        gold_sql=render_sql(plan, schema),
        value_span=span,
        unseen_phrasing=grammar.name in held_out,
    )
