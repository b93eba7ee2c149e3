"""Constrained decoding's two rules (:func:`.actions.where_mask`, :func:`.actions.linked_span`) on a
real test-schema database: a WHERE column is one the question can give a value, and the value is
the best-scored span that fits it."""

from __future__ import annotations

import numpy as np

from orchestrl.envs.text2sql import actions as act
from orchestrl.envs.text2sql.bank import QuestionBank
from orchestrl.envs.text2sql.observation import COLUMN_SLOTS, Q_WORDS
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.envs.text2sql.tokenizer import split_words
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS


def _slot(schema: str, ref: str) -> int:
    table, column = ref.split(".")
    return SCHEMAS[schema].column_slot(table, column)


def test_where_takes_a_text_column_only_when_the_question_names_one_of_its_values(bank: QuestionBank) -> None:
    schema, values = SCHEMAS["flights"], bank.values["flights"]
    mask = act.where_mask(split_words("how many flights go to tokyo"), schema, values)
    assert mask.shape == (COLUMN_SLOTS,)
    allowed = {slot for slot in range(COLUMN_SLOTS) if mask[slot]}
    assert allowed == {0, _slot("flights", "flights.origin"), _slot("flights", "flights.destination")}

    with_number = act.where_mask(split_words("flights longer than 5,000 km to Oslo"), schema, values)
    numeric = {slot for slot, (_, c) in enumerate(schema.columns, start=1) if c.sql_type != "TEXT"}
    allowed = {slot for slot in range(COLUMN_SLOTS) if with_number[slot]}
    assert allowed == {
        0,
        *numeric,
        _slot("flights", "flights.origin"),
        _slot("flights", "flights.destination"),
    }


def test_the_value_is_the_best_scored_span_that_fits_the_where_column(bank: QuestionBank) -> None:
    schema, values = SCHEMAS["real_estate"], bank.values["real_estate"]
    words = split_words("How many bedrooms do the houses in Green Hills have altogether?")
    start, length = np.zeros(Q_WORDS), np.zeros(MAX_VALUE_WORDS)
    green = words.index("Green")
    start[green], length[2] = 5.0, 5.0  # the composer's own argmax: "Green Hills have"
    length[1] = 4.0
    district = _slot("real_estate", "houses.district")
    assert act.linked_span(district, start, length, words, schema, values) == (green, 1)
    start[words.index("houses")] = 9.0  # a better-scored start that names no district
    assert act.linked_span(district, start, length, words, schema, values) == (green, 1)

    price = _slot("real_estate", "houses.asking_price")
    words = split_words("houses under 300,000 in Green Hills")
    start = np.zeros(Q_WORDS)
    start[words.index("Green")] = 5.0
    assert act.linked_span(price, start, length, words, schema, values) == (words.index("300,000"), 0)
    assert act.linked_span(price, start, length, split_words("houses in Green Hills"), schema, values) is None
