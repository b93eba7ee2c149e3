"""Questions, gold SQL and splits: what the bank promises about the task."""

from __future__ import annotations

import operator
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from orchestrl.envs.text2sql.actions import copied_value
from orchestrl.envs.text2sql.bank import QuestionBank, build_bank
from orchestrl.envs.text2sql.database import Rows, generate_rows
from orchestrl.envs.text2sql.grammar import expand
from orchestrl.envs.text2sql.observation import Q_WORDS
from orchestrl.envs.text2sql.query import Agg, Op, Order, PlanError, QueryPlan, column_ref, parse_sql
from orchestrl.envs.text2sql.questions import KINDS
from orchestrl.envs.text2sql.schemas import SCHEMAS, SPLIT_SCHEMAS, Schema
from orchestrl.envs.text2sql.scoring import results_match
from orchestrl.envs.text2sql.tokenizer import (
    PIECE_VOCAB_SIZE,
    identifier_words,
    normal_form,
    split_words,
    word_pieces,
)
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS


def test_splits_hold_disjoint_schemas_with_unseen_table_names(bank: QuestionBank) -> None:
    tables = {
        split: {t.name for name in names for t in SCHEMAS[name].tables}
        for split, names in SPLIT_SCHEMAS.items()
    }
    assert not tables["test"] & (tables["train"] | tables["validation"])
    assert not tables["validation"] & tables["train"]
    for split, names in SPLIT_SCHEMAS.items():
        assert {q.schema for q in bank.questions(split)} == set(names)


def test_only_the_test_split_uses_the_held_out_grammar(bank: QuestionBank) -> None:
    assert not any(q.unseen_phrasing for q in bank.questions("train"))
    assert not any(q.unseen_phrasing for q in bank.questions("validation"))
    test = bank.questions("test")
    assert 0.35 < sum(q.unseen_phrasing for q in test) / len(test) < 0.65
    # phrasings only the held-out grammar writes never reach training or validation
    held_only = re.compile(r"\b(tally|north of|short of|in excess of|pull up|looking only at)\b", re.I)
    assert not any(held_only.search(q.text) for s in ("train", "validation") for q in bank.questions(s))
    assert sum(bool(held_only.search(q.text)) for q in test if q.unseen_phrasing) > 15


@pytest.mark.parametrize(
    ("family", "pattern"),
    [
        ("comparative: more than", r"\bmore than \d"),
        ("comparative: over", r"\bover \d"),
        ("comparative: at least", r"\bat least \d"),
        ("comparative: fewer than", r"\bfewer than \d"),
        ("comparative adjective", r"\b(older|cheaper|longer|more expensive|taller) than \d"),
        ("superlative adjective first", r"^(the )?(cheapest|oldest|longest|most expensive|tallest) "),
        ("superlative adjective last", r"\bis the (cheapest|oldest|longest|most expensive|tallest)\?$"),
        ("superlative noun", r"\bwith the (highest|lowest|largest|smallest) "),
        ("names of", r"\bnames? of\b"),
        ("which", r"^which\b"),
        ("list", r"^list\b"),
        ("a value without a column cue", r"\b(in|from|to|by) [A-Z][a-z]+( [A-Z][a-z]+)?[?.]?$"),
        ("a value with a column cue", r"\bwhose \w+( \w+)? is [A-Z]"),
        (
            "a value as a plural noun",
            r"\b(engineers|managers|analysts|mysteries|biographies|forwards|defenders)\b",
        ),
        (
            "a value before the table",
            r"\b(Kitchen|Electronics|Jazz|Rock|Diesel|Electric) (products|items|songs|tracks|cars)\b",
        ),
        ("lower case", r"^[a-z][^A-Z]*$"),
        ("singular table noun", r"\bthe (product|student|song|car|hotel|city|player) (with|whose|that)\b"),
    ],
)
def test_the_training_grammar_has_each_paraphrase_family(
    bank: QuestionBank, family: str, pattern: str
) -> None:
    regex = re.compile(pattern, re.I if family not in ("lower case", "a value without a column cue") else 0)
    hits = [q.text for q in bank.questions("train") if regex.search(q.text)]
    assert len(hits) >= 5, family


@pytest.mark.parametrize(("words", "op"), [("more than", Op.GT), ("less than", Op.LT)])
def test_a_comparative_means_what_it_says_more_often_than_its_negation(
    bank: QuestionBank, words: str, op: Op
) -> None:
    """ "more than" is > far more often than "no more than" is <= (as people write), so a team cannot
    learn that the words without "no" mean the negated operator."""
    ops = Counter(
        q.plan.op for q in bank.questions("train") if q.plan.where and f" {words} " in f" {q.text.lower()} "
    )
    assert ops[op] >= 1.5 * (sum(ops.values()) - ops[op]), ops


def test_the_template_notation_chooses_fills_and_nests() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    outs = {expand("{How many|Count} {T}{?|}", {"T": "{cars|vehicles}"}, rng) for _ in range(200)}
    assert outs == {
        f"{a} {t}{q}" for a in ("How many", "Count") for t in ("cars", "vehicles") for q in ("?", "")
    }


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
            assert len(q.words) <= Q_WORDS
            assert list(q.words) == split_words(q.text)
            assert parse_sql(q.gold_sql, SCHEMAS[q.schema]) == q.plan  # in the action space's grammar
            if q.plan.where:
                start, length = q.value_span
                assert 1 <= length <= MAX_VALUE_WORDS
                copied = copied_value(q.words[start : start + length], q.plan.where, bank.values[q.schema])
                assert copied == q.plan.value, (q.text, q.plan.value)
            else:
                assert q.value_span is None


def test_questions_are_distinct_and_every_answer_is_well_posed(bank: QuestionBank) -> None:
    for split in SPLIT_SCHEMAS:
        texts = [(q.schema, q.text) for q in bank.questions(split)]
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
        key = column_ref(schema, plan.order_by) if plan.order_by else None
        out = [(tuple(r.values()), r[key] if key else None) for r in records]
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


# --- words, pieces, parsing ------------------------------------------------------------------


def test_words_keep_values_and_numbers_whole() -> None:
    assert split_words("What's the fare from Rio de Janeiro above 1,200 or 24.5?") == [
        "What's", "the", "fare", "from", "Rio", "de", "Janeiro", "above", "1,200", "or", "24.5", "?",
    ]  # fmt: skip
    assert identifier_words("ticket_price") == identifier_words("ticketPrice") == ["ticket", "price"]
    assert [normal_form(w) for w in ("Flights", "cities", "duplexes", "lions", "glass", "Paris")] == [
        "flight", "city", "duplex", "lion", "glass", "paris",
    ]  # fmt: skip


def test_every_word_of_every_question_gets_pretrained_pieces(bank: QuestionBank) -> None:
    """MiniLM's WordPiece vocabulary covers any text: no question word falls to [UNK] (id 100) and
    made-up words still split into known pieces."""
    unk = 100
    for split in SPLIT_SCHEMAS:
        for q in bank.questions(split):
            for word in q.words:
                pieces = word_pieces(word)
                assert pieces and unk not in pieces and max(pieces) < PIECE_VOCAB_SIZE, (q.text, word)
    assert len(word_pieces("priciest")) > 1 and unk not in word_pieces("Zorblax")
    assert word_pieces("Largest") == word_pieces("largest")  # uncased, as the model was trained


def test_parse_sql_refuses_what_the_action_space_cannot_write() -> None:
    zoo = SCHEMAS["zoo"]
    for sql in (
        "SELECT animals.name FROM animals WHERE animals.age > 3 AND animals.age < 9",
        "SELECT DISTINCT animals.name FROM animals",
        "SELECT animals.name FROM animals ORDER BY animals.age DESC LIMIT 9",
        "SELECT animals.nickname FROM animals",
        "select count(*) from animals",
    ):
        with pytest.raises(PlanError):
            parse_sql(sql, zoo)
