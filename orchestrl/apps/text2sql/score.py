"""Execution accuracy of a trained team on a set of questions (held-out templates, hand-written).

A question counts as answered when the team's query returns the gold query's rows on the real
database (:func:`orchestrl.envs.text2sql.scoring.results_match`: ordered when the gold query sorts).
The team writes every query through :meth:`.ask.Team.plans`, the same path ``orchestrl ask`` takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orchestrl.apps.text2sql.ask import Team
from orchestrl.envs.text2sql.query import PlanError, render_sql
from orchestrl.envs.text2sql.questions import Question
from orchestrl.envs.text2sql.schemas import SCHEMAS, Schema
from orchestrl.envs.text2sql.scoring import results_match
from orchestrl.envs.text2sql.sql_runner import SQLRunner
from orchestrl.envs.text2sql.values import ValueIndex

SCORING_TIMEOUT_S = 10.0
"""Wall-time limit of one query when scoring: every query of the grammar takes milliseconds on these
databases, so a longer limit than training's only keeps a loaded machine from failing a right one."""


def successes(
    team: Team,
    questions: Sequence[Question],
    db_paths: dict[str, Path],
    values: dict[str, ValueIndex],
    schemas: dict[str, Schema] = SCHEMAS,
) -> list[bool]:
    """Per question, whether the team's query returns its gold rows."""
    plans = team.plans(
        [q.words for q in questions],
        [schemas[q.schema] for q in questions],
        [values[q.schema] for q in questions],
    )
    runners: dict[str, SQLRunner] = {}
    out = []
    try:
        for question, plan in zip(questions, plans, strict=True):
            try:
                sql = render_sql(plan, schemas[question.schema])
            except PlanError:
                out.append(False)
                continue
            runner = runners.setdefault(
                question.schema, SQLRunner(db_paths[question.schema], timeout_s=SCORING_TIMEOUT_S)
            )
            result = runner.run(sql)
            out.append(result.ok and results_match(result.rows, question.gold_rows, question.ordered))
    finally:
        for runner in runners.values():
            runner.close()
    return out


def execution_accuracy(
    team: Team, questions: Sequence[Question], db_paths: dict[str, Path], values: dict[str, ValueIndex]
) -> float:
    hits = successes(team, questions, db_paths, values)
    return sum(hits) / len(hits) if hits else 0.0
