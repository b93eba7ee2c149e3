"""Questions from templates: paraphrased English, its gold :class:`QueryPlan`, and where the value is.

Each *kind* of question (``count_where``, ``top_k``, ``join_agg``...) is a small function that picks
columns by role and a value from the real rows, and returns the gold plan plus the words that fill
its phrasings. Phrasings come in two families: seen ones, used by every split, and held-out ones
(``held_out=True``), used only by the test split, so the test measures unseen wording as well as
unseen schemas. Held-out wording exists at three levels: whole sentences, condition phrases
("with price exceeding 30") and single words ("largest").

A WHERE value is always copied verbatim from the question, so its token span is recorded: the
expert points at it and a policy has to. Every kind and its gold SQL shape::

    list_where        SELECT t.label FROM t WHERE t.c op v
    star_where        SELECT * FROM t WHERE t.c op v
    count_all         SELECT COUNT(*) FROM t
    count_where       SELECT COUNT(*) FROM t WHERE t.c op v
    agg_all           SELECT AGG(t.n) FROM t
    agg_where         SELECT AGG(t.n) FROM t WHERE t.c op v
    group_count       SELECT t.c, COUNT(*) FROM t GROUP BY t.c
    group_agg         SELECT t.c, AGG(t.n) FROM t GROUP BY t.c
    superlative       SELECT t.label FROM t ORDER BY t.n DESC|ASC LIMIT 1
    top_k             SELECT t.label FROM t ORDER BY t.n DESC|ASC LIMIT k
    sorted_list       SELECT t.label FROM t ORDER BY t.n ASC|DESC
    group_argmax      SELECT t.c, COUNT(*) FROM t GROUP BY t.c ORDER BY COUNT(*) DESC|ASC LIMIT 1
    where_superlative SELECT t.label FROM t WHERE t.c = v ORDER BY t.n DESC|ASC LIMIT 1
    join_count        SELECT COUNT(*) FROM child JOIN parent ON .. WHERE parent.c op v
    join_list         SELECT parent.label FROM child JOIN parent ON .. WHERE child.c op v
    join_agg          SELECT AGG(child.n) FROM child JOIN parent ON .. WHERE parent.c op v
    join_group        SELECT parent.c, COUNT(*) FROM child JOIN parent ON .. GROUP BY parent.c
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from orchestrl.envs.text2sql.database import Rows
from orchestrl.envs.text2sql.query import Agg, Op, Order, QueryPlan, render_sql
from orchestrl.envs.text2sql.schemas import Column, Role, Schema, Table
from orchestrl.envs.text2sql.tokenizer import tokenize

MAX_VALUE_TOKENS = 3
"""The longest value span a question contains (and the composer can point at)."""
_SENTINEL = "\ue000"


@dataclass(frozen=True)
class Phrasing:
    text: str
    held_out: bool = False


def _p(*texts: str, held: tuple[str, ...] = ()) -> tuple[Phrasing, ...]:
    return tuple(Phrasing(t) for t in texts) + tuple(Phrasing(t, held_out=True) for t in held)


@dataclass(frozen=True)
class Question:
    """One question with its gold answer; ``gold_rows`` is filled in by :mod:`.bank`."""

    qid: str
    schema: str
    kind: str
    text: str
    tokens: tuple[str, ...]
    plan: QueryPlan
    gold_sql: str
    value_span: tuple[int, int] | None
    """(first token, number of tokens) of the WHERE value, or None without WHERE."""
    unseen_phrasing: bool
    gold_rows: tuple[tuple[Any, ...], ...] = field(default=(), compare=False)

    @property
    def ordered(self) -> bool:
        """Whether the answer's row order matters (the gold query has ORDER BY)."""
        return self.plan.order != Order.NONE


# ---------------------------------------------------------------------------------------------
# Phrasings. Placeholders: {T}/{t} table plural/singular, {P}/{p} parent table (joins), {L} label
# column (of the parent in joins: {PL}), {C} category, {N} number, {agg}, {ext}, {dir}, {most},
# {k}, {cond} (a condition phrase, which carries the value).

COND_PHRASES: dict[Op, tuple[Phrasing, ...]] = {
    Op.EQ: _p("whose {col} is {v}", "with a {col} of {v}", held=("where the {col} equals {v}",)),
    Op.NE: _p("whose {col} is not {v}", "with a {col} other than {v}", held=("excluding {col} {v}",)),
    Op.GT: _p(
        "whose {col} is greater than {v}",
        "with {col} above {v}",
        "where the {col} is more than {v}",
        held=("with {col} exceeding {v}",),
    ),
    Op.LT: _p("whose {col} is less than {v}", "with {col} below {v}", held=("with {col} under {v}",)),
    Op.GE: _p("whose {col} is at least {v}", "where the {col} is {v} or more"),
    Op.LE: _p("whose {col} is at most {v}", "where the {col} is {v} or less"),
}
AGG_PHRASES: dict[Agg, tuple[Phrasing, ...]] = {
    Agg.AVG: _p("average", "mean"),
    Agg.SUM: _p("total", held=("combined",)),
    Agg.MIN: _p("minimum", "lowest", held=("smallest",)),
    Agg.MAX: _p("maximum", "highest", held=("largest",)),
}
EXTREME_PHRASES: dict[Order, tuple[Phrasing, ...]] = {
    Order.DESC: _p("highest", "greatest", held=("largest",)),
    Order.ASC: _p("lowest", held=("smallest",)),
}
DIRECTION_PHRASES: dict[Order, tuple[Phrasing, ...]] = {
    Order.ASC: _p("from lowest to highest", "in ascending order", held=("smallest first",)),
    Order.DESC: _p("from highest to lowest", "in descending order", held=("largest first",)),
}
MOST_PHRASES: dict[Order, tuple[Phrasing, ...]] = {
    Order.DESC: _p("most", held=("largest number of",)),
    Order.ASC: _p("fewest", held=("smallest number of",)),
}

KIND_PHRASES: dict[str, tuple[Phrasing, ...]] = {
    "list_where": _p(
        "List the {L} of {T} {cond}.",
        "Show the {L} of all {T} {cond}.",
        "What are the {L} values of {T} {cond}?",
        held=("Give me the {L} of every {t} {cond}.",),
    ),
    "star_where": _p(
        "Show all information about {T} {cond}.",
        "Display every column for {T} {cond}.",
        held=("Return the full records of {T} {cond}.",),
    ),
    "count_all": _p(
        "How many {T} are there?",
        "Count the {T}.",
        "What is the number of {T}?",
        held=("Tell me how many {T} exist.",),
    ),
    "count_where": _p(
        "How many {T} are there {cond}?",
        "Count the {T} {cond}.",
        "What is the number of {T} {cond}?",
        held=("Find how many {T} exist {cond}.",),
    ),
    "agg_all": _p(
        "What is the {agg} {N} of all {T}?",
        "Find the {agg} {N} across {T}.",
        "Compute the {agg} {N} over all {T}.",
        held=("Across all {T}, what is the {agg} {N}?",),
    ),
    "agg_where": _p(
        "What is the {agg} {N} of {T} {cond}?",
        "Find the {agg} {N} among {T} {cond}.",
        held=("For {T} {cond}, what is the {agg} {N}?",),
    ),
    "group_count": _p(
        "How many {T} are there for each {C}?",
        "Count the {T} per {C}.",
        "For each {C}, how many {T} are there?",
        held=("Show the number of {T} in every {C}.",),
    ),
    "group_agg": _p(
        "What is the {agg} {N} of {T} for each {C}?",
        "For each {C}, give the {agg} {N} of the {T}.",
        "Show the {agg} {N} of {T} grouped by {C}.",
        held=("Break down the {agg} {N} of {T} by {C}.",),
    ),
    "superlative": _p(
        "Which {t} has the {ext} {N}? Give its {L}.",
        "What is the {L} of the {t} with the {ext} {N}?",
        held=("Find the {L} of the {t} whose {N} is the {ext}.",),
    ),
    "top_k": _p(
        "List the {L} of the {k} {T} with the {ext} {N}.",
        "Which {k} {T} have the {ext} {N}? Show their {L}.",
        held=("Return the {L} for the {k} {T} that have the {ext} {N}.",),
    ),
    "sorted_list": _p(
        "List the {L} of all {T} sorted by {N} {dir}.",
        "Show every {t} {L}, ordered by {N} {dir}.",
        held=("Sort the {T} by {N} {dir} and list their {L}.",),
    ),
    "group_argmax": _p(
        "Which {C} has the {most} {T}?",
        "Find the {C} with the {most} {T}.",
        held=("Which {C} is home to the {most} {T}?",),
    ),
    "where_superlative": _p(
        "Among {T} {cond}, which has the {ext} {N}? Give its {L}.",
        "What is the {L} of the {t} {cond} with the {ext} {N}?",
        held=("Of all {T} {cond}, find the {L} of the one with the {ext} {N}.",),
    ),
    "join_count": _p(
        "How many {T} belong to {P} {cond}?",
        "Count the {T} of {P} {cond}.",
        held=("What is the number of {T} linked to {P} {cond}?",),
    ),
    "join_list": _p(
        "List the {PL} of {P} that have {T} {cond}.",
        "Show the {PL} of {P} with {T} {cond}.",
        held=("Which {P} have {T} {cond}? Give their {PL}.",),
    ),
    "join_agg": _p(
        "What is the {agg} {N} of {T} for {P} {cond}?",
        "Find the {agg} {N} of the {T} of {P} {cond}.",
        held=("For {P} {cond}, compute the {agg} {N} of their {T}.",),
    ),
    "join_group": _p(
        "How many {T} are there for each {p} {C}?",
        "Count the {T} per {p} {C}.",
        held=("Show the number of {T} for every {p} {C}.",),
    ),
}


def template_texts() -> Iterator[str]:
    """Every phrasing text (seen and held out): the tokenizer's vocabulary is built from these."""
    families = [COND_PHRASES, AGG_PHRASES, EXTREME_PHRASES, DIRECTION_PHRASES, MOST_PHRASES, KIND_PHRASES]
    for family in families:
        for phrasings in family.values():
            for p in phrasings:
                yield p.text


# ---------------------------------------------------------------------------------------------
# The kinds.


class _Draft:
    """Collects one question's choices; remembers whether any held-out wording was used."""

    def __init__(self, schema: Schema, rows: Rows, rng: np.random.Generator, held_out: bool) -> None:
        self.schema, self.rows, self.rng, self.held_out = schema, rows, rng, held_out
        self.unseen = False
        self.value: str | None = None

    def say(self, options: tuple[Phrasing, ...]) -> str:
        pool = [p for p in options if self.held_out or not p.held_out]
        choice = pool[int(self.rng.integers(len(pool)))]
        self.unseen |= choice.held_out
        return choice.text

    def pick(self, items: list[Any]) -> Any:
        return items[int(self.rng.integers(len(items)))] if items else None

    def slot(self, table: Table, column: Column) -> int:
        return self.schema.column_slot(table.name, column.name)

    def condition(
        self,
        table: Table,
        roles: tuple[Role, ...] = ("category", "number"),
        ops: tuple[Op, ...] | None = None,
    ) -> tuple[str, int, Op] | None:
        """A condition on a random column of ``table``: (phrase with the value, slot, op)."""
        column = self.pick(table.with_role(*roles))
        if column is None:
            return None
        cells = [r[table.columns.index(column)] for r in self.rows[table.name]]
        cell = self.pick(cells)
        if column.numeric:
            op = self.pick(list(ops or (Op.GT, Op.LT, Op.GE, Op.LE)))
            self.value = _round_threshold(cell)
        else:
            op = self.pick(list(ops or (Op.EQ, Op.EQ, Op.EQ, Op.NE)))
            self.value = str(cell)
        phrase = self.say(COND_PHRASES[op]).format(col=column.say, v=_SENTINEL)
        return phrase, self.slot(table, column), op


def _round_threshold(value: float) -> str:
    """A threshold a person would write: whole numbers, large ones to two significant digits."""
    number = round(value)
    if abs(number) >= 10_000:
        digits = len(str(abs(number))) - 2
        number = round(number, -digits)
    return str(int(number))


Built = tuple[dict[str, str], QueryPlan] | None
"""The words that fill a kind's phrasings and the gold plan; None when the kind does not apply."""
KindFn = Callable[[_Draft, Table, Table | None], Built]


def _names(t: Table) -> dict[str, str]:
    return {"T": t.plural, "t": t.singular}


def _list_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t)
    if t.label is None or cond is None:
        return None
    phrase, where, op = cond
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, t.label), where=where, op=op, value=d.value
    )
    return {**_names(t), "L": t.label.say, "cond": phrase}, plan


def _star_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t, roles=("category",))
    if cond is None:
        return None
    phrase, where, op = cond
    plan = QueryPlan(d.schema.table_index(t.name), where=where, op=op, value=d.value)
    return {**_names(t), "cond": phrase}, plan


def _count_all(d: _Draft, t: Table, _: Table | None) -> Built:
    return _names(t), QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT)


def _count_where(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t)
    if cond is None:
        return None
    phrase, where, op = cond
    plan = QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT, where=where, op=op, value=d.value)
    return {**_names(t), "cond": phrase}, plan


def _aggregate(d: _Draft, t: Table) -> tuple[Column, Agg, str] | None:
    number = d.pick(t.with_role("number"))
    if number is None:
        return None
    agg = d.pick([Agg.AVG, Agg.SUM, Agg.MIN, Agg.MAX] if number.additive else [Agg.AVG, Agg.MIN, Agg.MAX])
    return number, agg, d.say(AGG_PHRASES[agg])


def _agg_all(d: _Draft, t: Table, _: Table | None) -> Built:
    chosen = _aggregate(d, t)
    if chosen is None:
        return None
    number, agg, word = chosen
    plan = QueryPlan(d.schema.table_index(t.name), select=d.slot(t, number), agg=agg)
    return {**_names(t), "N": number.say, "agg": word}, plan


def _agg_where(d: _Draft, t: Table, _: Table | None) -> Built:
    chosen, cond = _aggregate(d, t), d.condition(t, roles=("category",))
    if chosen is None or cond is None:
        return None
    (number, agg, word), (phrase, where, op) = chosen, cond
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, number), agg=agg, where=where, op=op, value=d.value
    )
    return {**_names(t), "N": number.say, "agg": word, "cond": phrase}, plan


def _group_count(d: _Draft, t: Table, _: Table | None) -> Built:
    category = d.pick(t.with_role("category"))
    if category is None:
        return None
    plan = QueryPlan(d.schema.table_index(t.name), agg=Agg.COUNT, group_by=d.slot(t, category))
    return {**_names(t), "C": category.say}, plan


def _group_agg(d: _Draft, t: Table, _: Table | None) -> Built:
    category, chosen = d.pick(t.with_role("category")), _aggregate(d, t)
    if category is None or chosen is None:
        return None
    number, agg, word = chosen
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, number), agg=agg, group_by=d.slot(t, category)
    )
    return {**_names(t), "C": category.say, "N": number.say, "agg": word}, plan


def _ranked(
    d: _Draft,
    t: Table,
    limit: int,
    where: tuple[str, int, Op] | None = None,
) -> Built:
    number = d.pick(t.with_role("number"))
    if t.label is None or number is None:
        return None
    order = d.pick([Order.DESC, Order.ASC])
    fills = {
        **_names(t),
        "L": t.label.say,
        "N": number.say,
        "ext": d.say(EXTREME_PHRASES[order]),
        "k": str(limit),
    }
    plan = QueryPlan(
        d.schema.table_index(t.name),
        select=d.slot(t, t.label),
        order=order,
        order_by=d.slot(t, number),
        limit=limit,
    )
    if where is not None:
        phrase, slot, op = where
        fills["cond"] = phrase
        plan = replace(plan, where=slot, op=op, value=d.value)
    return fills, plan


def _superlative(d: _Draft, t: Table, _: Table | None) -> Built:
    return _ranked(d, t, limit=1)


def _top_k(d: _Draft, t: Table, _: Table | None) -> Built:
    return _ranked(d, t, limit=int(d.rng.integers(2, 6)))


def _where_superlative(d: _Draft, t: Table, _: Table | None) -> Built:
    cond = d.condition(t, roles=("category",), ops=(Op.EQ,))
    return None if cond is None else _ranked(d, t, limit=1, where=cond)


def _sorted_list(d: _Draft, t: Table, _: Table | None) -> Built:
    number = d.pick(t.with_role("number"))
    if t.label is None or number is None:
        return None
    order = d.pick([Order.ASC, Order.DESC])
    plan = QueryPlan(
        d.schema.table_index(t.name), select=d.slot(t, t.label), order=order, order_by=d.slot(t, number)
    )
    return {**_names(t), "L": t.label.say, "N": number.say, "dir": d.say(DIRECTION_PHRASES[order])}, plan


def _group_argmax(d: _Draft, t: Table, _: Table | None) -> Built:
    category = d.pick(t.with_role("category"))
    if category is None:
        return None
    order = d.pick([Order.DESC, Order.ASC])
    plan = QueryPlan(
        d.schema.table_index(t.name), agg=Agg.COUNT, group_by=d.slot(t, category), order=order, limit=1
    )
    return {**_names(t), "C": category.say, "most": d.say(MOST_PHRASES[order])}, plan


def _join_count(d: _Draft, child: Table, parent: Table | None) -> Built:
    cond = d.condition(parent, roles=("category",)) if parent else None
    if parent is None or cond is None:
        return None
    phrase, where, op = cond
    plan = QueryPlan(
        d.schema.table_index(child.name), agg=Agg.COUNT, join=True, where=where, op=op, value=d.value
    )
    return {**_names(child), "P": parent.plural, "cond": phrase}, plan


def _join_list(d: _Draft, child: Table, parent: Table | None) -> Built:
    cond = d.condition(child, roles=("category",), ops=(Op.EQ,))
    if parent is None or parent.label is None or cond is None:
        return None
    phrase, where, op = cond
    plan = QueryPlan(
        d.schema.table_index(child.name),
        select=d.slot(parent, parent.label),
        join=True,
        where=where,
        op=op,
        value=d.value,
    )
    return {**_names(child), "P": parent.plural, "PL": parent.label.say, "cond": phrase}, plan


def _join_agg(d: _Draft, child: Table, parent: Table | None) -> Built:
    chosen = _aggregate(d, child)
    cond = d.condition(parent, roles=("category",), ops=(Op.EQ,)) if parent else None
    if parent is None or chosen is None or cond is None:
        return None
    (number, agg, word), (phrase, where, op) = chosen, cond
    plan = QueryPlan(
        d.schema.table_index(child.name),
        select=d.slot(child, number),
        agg=agg,
        join=True,
        where=where,
        op=op,
        value=d.value,
    )
    return {**_names(child), "P": parent.plural, "N": number.say, "agg": word, "cond": phrase}, plan


def _join_group(d: _Draft, child: Table, parent: Table | None) -> Built:
    category = d.pick(parent.with_role("category")) if parent else None
    if parent is None or category is None:
        return None
    plan = QueryPlan(
        d.schema.table_index(child.name), agg=Agg.COUNT, join=True, group_by=d.slot(parent, category)
    )
    return {**_names(child), "p": parent.singular, "C": category.say}, plan


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
    schema: Schema, rows: Rows, seed: int, held_out: bool, per_kind: int = 6
) -> list[Question]:
    """Up to ``per_kind`` distinct questions of every applicable kind for each table of ``schema``.

    ``held_out`` admits the held-out phrasings (test split only). Deterministic in ``seed``.
    """
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
            question = _one(schema, rows, rng, held_out, kind, table, parent, index=len(questions))
            if question is None or question.text in seen:
                continue
            seen.add(question.text)
            questions.append(question)
            made += 1
    return questions


def _one(
    schema: Schema,
    rows: Rows,
    rng: np.random.Generator,
    held_out: bool,
    kind: str,
    table: Table,
    parent: Table | None,
    index: int,
) -> Question | None:
    draft = _Draft(schema, rows, rng, held_out)
    built = KINDS[kind](draft, table, parent)
    if built is None:
        return None
    fills, plan = built
    text = draft.say(KIND_PHRASES[kind]).format(**fills)
    text = text[0].upper() + text[1:]
    span = None
    if plan.where:
        assert draft.value is not None and text.count(_SENTINEL) == 1, (kind, text)
        before, _, _after = text.partition(_SENTINEL)
        span = (len(tokenize(before)), len(tokenize(draft.value)))
        text = text.replace(_SENTINEL, draft.value)
    tokens = tuple(tokenize(text))
    if span is not None and " ".join(tokens[span[0] : span[0] + span[1]]) != draft.value:
        raise AssertionError(f"value {draft.value!r} is not at {span} in {text!r}")
    return Question(
        qid=f"{schema.name}/{kind}/{index}",
        schema=schema.name,
        kind=kind,
        text=text,
        tokens=tokens,
        plan=plan,
        gold_sql=render_sql(plan, schema),
        value_span=span,
        unseen_phrasing=draft.unseen,
    )
