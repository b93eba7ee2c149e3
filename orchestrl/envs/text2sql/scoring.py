"""Execution match and the team's reward.

    reward = exec_match - validity_penalty * [SQLite rejected the query]
                        - length_cost * max(0, tokens(sql) - tokens(gold sql))

``exec_match`` compares result rows with the gold query's rows on the real database: as ordered
lists when the gold query has ``ORDER BY``, as multisets otherwise; numbers compare after rounding
to 6 decimals (``3`` equals ``3.0``). The length cost charges only tokens *beyond* the gold query's,
so a solved question scores exactly 1.0 and padding a query with clauses that change nothing still
costs something, while a short wrong query earns no bonus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from orchestrl.envs.text2sql.query import sql_tokens
from orchestrl.envs.text2sql.questions import Question
from orchestrl.envs.text2sql.sql_runner import SQLResult


@dataclass(frozen=True)
class Score:
    success: bool
    valid: bool
    reward: float
    sql_tokens: int
    excess_tokens: int
    error: str | None = None
    error_kind: str | None = None


def _normal(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return round(float(value), 6)
    return value


def results_match(rows: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], ordered: bool) -> bool:
    """Whether two results are the same answer (see the module docstring)."""
    a = [tuple(_normal(v) for v in row) for row in rows]
    b = [tuple(_normal(v) for v in row) for row in gold]
    return a == b if ordered else Counter(a) == Counter(b)


def score(
    sql: str | None,
    result: SQLResult | None,
    question: Question,
    validity_penalty: float,
    length_cost: float,
    plan_error: str | None = None,
) -> Score:
    """Scores one query for ``question``.

    ``sql`` and ``result`` are None when the agents' choices could not be assembled into SQL at
    all; ``plan_error`` then says why. Both that and a query SQLite rejects count as invalid SQL.
    """
    if sql is None or result is None:
        return Score(False, False, -validity_penalty, 0, 0, error=plan_error or "no SQL", error_kind="plan")
    if not result.ok:
        return Score(False, False, -validity_penalty, sql_tokens(sql), 0, result.error, result.error_kind)
    tokens = sql_tokens(sql)
    excess = max(0, tokens - sql_tokens(question.gold_sql))
    success = results_match(result.rows, question.gold_rows, question.ordered)
    return Score(success, True, float(success) - length_cost * excess, tokens, excess)
