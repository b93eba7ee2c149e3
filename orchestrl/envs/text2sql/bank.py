"""The question bank: every schema's database and questions for one seed, split and checked.

Building it writes (or reuses) the SQLite files, reads each one's stored values for value linking
(:mod:`.values`), generates each schema's questions (training and validation schemas in the
training grammar; test schemas in it and in the held-out grammar, half each), runs every gold
query on the real database and keeps only questions with a well-posed answer: a non-empty result
without NULLs, and for ``ORDER BY .. LIMIT k`` no tie at the k-th place (otherwise "which product is
the cheapest" would have two right answers and execution match would depend on SQLite's tie order).

A bank is built once per process for each (seed, data dir) and shared by every env instance there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrl.envs.text2sql.database import default_data_dir, ensure_database, generate_rows
from orchestrl.envs.text2sql.grammar import TrainGrammar
from orchestrl.envs.text2sql.grammar_heldout import HeldOutGrammar
from orchestrl.envs.text2sql.query import Agg, Order, render_sql
from orchestrl.envs.text2sql.questions import Question, generate_questions
from orchestrl.envs.text2sql.schemas import SCHEMAS, SPLIT_SCHEMAS, SPLITS, Schema
from orchestrl.envs.text2sql.sql_runner import SQLRunner
from orchestrl.envs.text2sql.values import ValueIndex

QUESTIONS_PER_KIND = {"train": 24, "validation": 8, "test": 8}
"""Distinct questions of each kind per table (before filtering)."""
HELD_OUT = frozenset({HeldOutGrammar.name})


@dataclass(frozen=True)
class QuestionBank:
    seed: int
    data_dir: Path
    db_paths: dict[str, Path]
    """Schema name -> its SQLite file."""
    values: dict[str, ValueIndex]
    """Schema name -> the values stored in its database."""
    splits: dict[str, tuple[Question, ...]]

    def questions(self, split: str) -> tuple[Question, ...]:
        if split not in self.splits:
            raise ValueError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
        return self.splits[split]


def build_bank(seed: int, data_dir: Path | str | None = None) -> QuestionBank:
    """Writes or reuses the databases for ``seed`` under ``data_dir`` and returns the checked questions."""
    root = Path(data_dir) if data_dir is not None else default_data_dir(seed)
    db_paths: dict[str, Path] = {}
    values: dict[str, ValueIndex] = {}
    splits: dict[str, tuple[Question, ...]] = {}
    for split, names in SPLIT_SCHEMAS.items():
        kept: list[Question] = []
        grammars = (TrainGrammar(), HeldOutGrammar()) if split == "test" else (TrainGrammar(),)
        for name in names:
            schema = SCHEMAS[name]
            rows = generate_rows(schema, seed)
            db_paths[name] = ensure_database(schema, seed, root, rows)
            values[name] = ValueIndex.from_database(db_paths[name], schema)
            questions = generate_questions(
                schema, rows, values[name], seed, grammars, QUESTIONS_PER_KIND[split], HELD_OUT
            )
            kept += checked(questions, schema, db_paths[name])
        splits[split] = tuple(kept)
    return QuestionBank(seed=seed, data_dir=root, db_paths=db_paths, values=values, splits=splits)


def checked(questions: list[Question], schema: Schema, db_path: Path) -> list[Question]:
    """The questions whose gold query has a well-posed answer, with their gold rows."""
    with SQLRunner(db_path) as runner:
        return [q for q in (_with_answer(q, schema, runner) for q in questions) if q is not None]


@functools.lru_cache(maxsize=8)
def _cached(seed: int, data_dir: str) -> QuestionBank:
    return build_bank(seed, data_dir)


def load_bank(seed: int, data_dir: Path | str | None = None) -> QuestionBank:
    """:func:`build_bank`, memoised per process (and re-checked: a deleted file is rebuilt)."""
    key = str((Path(data_dir) if data_dir is not None else default_data_dir(seed)).resolve())
    bank = _cached(seed, key)
    if not all(p.exists() for p in bank.db_paths.values()):
        _cached.cache_clear()
        bank = _cached(seed, key)
    return bank


def _with_answer(question: Question, schema: Schema, runner: SQLRunner) -> Question | None:
    result = runner.run(question.gold_sql)
    if not result.ok:
        raise RuntimeError(f"gold SQL of {question.qid} failed: {result.error} | {question.gold_sql}")
    if not result.rows or any(v is None for row in result.rows for v in row):
        return None
    if _tied(question, schema, runner):
        return None
    return replace(question, gold_rows=result.rows)


def _tied(question: Question, schema: Schema, runner: SQLRunner) -> bool:
    """Whether ties in the ORDER BY key make the answer ambiguous: at the LIMIT, or anywhere in an
    unlimited sorted list."""
    plan = question.plan
    if plan.order == Order.NONE:
        return False
    probe = replace(plan, limit=0)
    if plan.order_by:
        probe = replace(probe, select=plan.order_by, agg=Agg.NONE)
    keys = [row[-1] for row in runner.run(render_sql(probe, schema)).rows]
    if not plan.limit:
        return len(set(keys)) < len(keys)
    return len(keys) > plan.limit and keys[plan.limit - 1] == keys[plan.limit]
