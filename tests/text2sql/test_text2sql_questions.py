"""Questions, gold SQL and splits: what the bank promises about the task."""

from __future__ import annotations

import operator
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from orchestrl.envs.text2sql.bank import QuestionBank, build_bank
from orchestrl.envs.text2sql.database import Rows, generate_rows
from orchestrl.envs.text2sql.observation import Q_LEN, VOCAB, schema_texts
from orchestrl.envs.text2sql.query import Agg, Op, Order, QueryPlan, column_ref
from orchestrl.envs.text2sql.questions import KINDS, MAX_VALUE_TOKENS
from orchestrl.envs.text2sql.schemas import SCHEMAS, SPLIT_SCHEMAS, Schema
from orchestrl.envs.text2sql.scoring import results_match
from orchestrl.envs.text2sql.tokenizer import NUMBER_BUCKETS, PAD_ID, UNK_ID, Vocabulary, tokenize


def test_splits_hold_disjoint_schemas_with_unseen_table_names(bank: QuestionBank) -> None:
    tables = {
        split: {t.name for name in names for t in SCHEMAS[name].tables}
        for split, names in SPLIT_SCHEMAS.items()
    }
    assert not tables["test"] & (tables["train"] | tables["validation"])
    assert not tables["validation"] & tables["train"]
    for split, names in SPLIT_SCHEMAS.items():
        assert {q.schema for q in bank.questions(split)} == set(names)


def test_only_the_test_split_uses_held_out_phrasings(bank: QuestionBank) -> None:
    assert not any(q.unseen_phrasing for q in bank.questions("train"))
    assert not any(q.unseen_phrasing for q in bank.questions("validation"))
    test = bank.questions("test")
    assert 0.25 < sum(q.unseen_phrasing for q in test) / len(test) < 0.75


def test_every_split_asks_every_kind_and_covers_the_whole_grammar(bank: QuestionBank) -> None:
    for split in SPLIT_SCHEMAS:
        questions = bank.questions(split)
        assert {q.kind for q in questions} == set(KINDS), split
        plans = [q.plan for q in questions]
        assert {Agg(p.agg) for p in plans} == set(Agg)
        assert {Op(p.op) for p in plans if p.where} == set(Op)
        assert {Order(p.order) for p in plans} == set(Order)
        assert {p.limit for p in plans} >= {0, 1, 2, 3, 4, 5}
        assert (
            any(p.join for p in plans)
            and any(p.group_by for p in plans)
            and any(p.select == 0 for p in plans)
        )


def test_questions_fit_the_observation_and_values_are_spans_of_them(bank: QuestionBank) -> None:
    for split in SPLIT_SCHEMAS:
        for q in bank.questions(split):
            assert len(q.tokens) <= Q_LEN
            assert list(q.tokens) == tokenize(q.text)
            if q.plan.where:
                start, length = q.value_span
                assert 1 <= length <= MAX_VALUE_TOKENS
                assert " ".join(q.tokens[start : start + length]) == q.plan.value
            else:
                assert q.value_span is None


def test_questions_are_distinct_and_every_answer_is_well_posed(bank: QuestionBank) -> None:
    for split in SPLIT_SCHEMAS:
        texts = [q.text for q in bank.questions(split)]
        assert len(texts) == len(set(texts))
        for q in bank.questions(split):
            assert q.gold_rows and all(v is not None for row in q.gold_rows for v in row)


def test_bank_is_deterministic_in_its_seed(tmp_path: Path, bank: QuestionBank) -> None:
    again = build_bank(0, tmp_path / "again")
    other = build_bank(1, tmp_path / "other")

    def summary(b: QuestionBank) -> list[tuple[str, str, str]]:
        return [(q.qid, q.text, q.gold_sql) for s in SPLIT_SCHEMAS for q in b.questions(s)]

    assert summary(again) == summary(bank)
    assert summary(other) != summary(bank)


# --- gold SQL against an independent evaluation in Python ------------------------------------

_OPS = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.GT: operator.gt,
    Op.LT: operator.lt,
    Op.GE: operator.ge,
    Op.LE: operator.le,
}
_AGGS = {Agg.COUNT: len, Agg.SUM: sum, Agg.AVG: statistics.fmean, Agg.MIN: min, Agg.MAX: max}


def _records(schema: Schema, rows: Rows, table: str) -> list[dict[str, Any]]:
    columns = schema.table(table).columns
    return [{f"{table}.{c.name}": v for c, v in zip(columns, row, strict=True)} for row in rows[table]]


def _evaluate(plan: QueryPlan, schema: Schema, rows: Rows) -> tuple[list[tuple[Any, ...]], list[Any]]:
    """What ``plan`` means, computed in Python: (rows, the ORDER BY key of each row)."""
    table = schema.tables[plan.table]
    records = _records(schema, rows, table.name)
    if plan.join:
        fk = schema.foreign_key
        parents = {r[f"{fk.parent}.id"]: r for r in _records(schema, rows, fk.parent)}
        records = [{**c, **parents[c[f"{fk.child}.{fk.column}"]]} for c in _records(schema, rows, fk.child)]
    if plan.where:
        ref = column_ref(schema, plan.where)
        numeric = schema.columns[plan.where - 1][1].numeric
        value = float(plan.value) if numeric else plan.value
        records = [r for r in records if _OPS[plan.op](r[ref], value)]

    def measure(group: list[dict[str, Any]]) -> Any:
        if plan.agg == Agg.COUNT and plan.select == 0:
            return len(group)
        return _AGGS[plan.agg]([r[column_ref(schema, plan.select)] for r in group])

    if plan.group_by:
        key = column_ref(schema, plan.group_by)
        groups: dict[Any, list[dict[str, Any]]] = {}
        for r in records:
            groups.setdefault(r[key], []).append(r)
        out = [((g, measure(members)), measure(members)) for g, members in groups.items()]
    elif plan.agg != Agg.NONE:
        out = [((measure(records),), None)]
    elif plan.select == 0:
        out = [(tuple(r.values()), None) for r in records]
    else:
        select = column_ref(schema, plan.select)
        order_key = column_ref(schema, plan.order_by) if plan.order_by else select
        out = [((r[select],), r[order_key]) for r in records]
    if plan.order != Order.NONE:
        out.sort(key=lambda item: item[1], reverse=plan.order == Order.DESC)
    if plan.limit:
        out = out[: plan.limit]
    return [row for row, _ in out], [key for _, key in out]


def test_gold_answers_match_an_independent_python_evaluation(bank: QuestionBank) -> None:
    rows = {name: generate_rows(schema, 0) for name, schema in SCHEMAS.items()}
    checked = Counter()
    for split in SPLIT_SCHEMAS:
        for q in bank.questions(split):
            expected, keys = _evaluate(q.plan, SCHEMAS[q.schema], rows[q.schema])
            ordered = q.ordered and len(set(keys)) == len(keys)
            assert results_match(q.gold_rows, expected, ordered), (q.text, q.gold_sql, q.gold_rows, expected)
            checked[q.kind] += 1
    assert set(checked) == set(KINDS)


# --- tokenizer --------------------------------------------------------------------------------


def test_tokenizer_keeps_values_whole_and_ids_are_stable() -> None:
    assert tokenize("Flights from Rio de Janeiro above 24.5?") == [
        "Flights",
        "from",
        "Rio",
        "de",
        "Janeiro",
        "above",
        "24.5",
        "?",
    ]
    shuffled = Vocabulary.from_texts(reversed(["count the products", "average price"]))
    assert shuffled == Vocabulary.from_texts(["count the products", "average price"])
    assert VOCAB.token_id("Products") == VOCAB.token_id("products") != UNK_ID
    assert VOCAB.token_id("Berlin") == VOCAB.token_id("berlin") >= VOCAB.word_offset
    assert VOCAB.number_offset <= VOCAB.token_id("1234.5") < VOCAB.number_offset + NUMBER_BUCKETS
    assert VOCAB.token_id("3") < VOCAB.number_offset, "small numbers (LIMIT k) have their own ids"
    assert VOCAB.token_id("§") == UNK_ID
    assert VOCAB.encode(["count", "the"], 4)[2:] == [PAD_ID, PAD_ID]


def test_vocabulary_knows_every_schema_word_including_held_out_schemas() -> None:
    for text in schema_texts():
        for word in text.split():
            assert VOCAB.token_id(word) < VOCAB.number_offset, word
