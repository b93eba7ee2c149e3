"""``orchestrl ask`` with a team trained in the session (``conftest.checkpoint``): on a test-schema
database file and on one built by hand; read-only (bytes and mtime unchanged); anything beyond the
action space is one line."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrl.apps.text2sql.ask import Database, Team
from orchestrl.cli import app
from orchestrl.envs.text2sql.bank import QuestionBank
from orchestrl.envs.text2sql.env import Text2SQLEnv
from orchestrl.envs.text2sql.observation import encode_observation


def _fingerprint(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns


def _ask(checkpoint: Path, db: Path, question: str):
    return CliRunner().invoke(app, ["ask", "--checkpoint", str(checkpoint), "--db", str(db), question])


def test_ask_answers_on_a_test_schema_database_file_and_leaves_it_untouched(
    checkpoint: Path, bank: QuestionBank
) -> None:
    db = bank.db_paths["flights"]
    before = _fingerprint(db)
    result = _ask(checkpoint, db, "How many flights are there?")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["SQL: SELECT COUNT(*) FROM flights", "80", "(1 row)"]
    assert _fingerprint(db) == before


def test_ask_answers_on_a_database_built_by_hand_and_leaves_it_untouched(
    checkpoint: Path, pets: Path
) -> None:
    before = _fingerprint(pets)
    result = _ask(checkpoint, pets, "How many pets are there?")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["SQL: SELECT COUNT(*) FROM pets", "5", "(1 row)"]
    result = _ask(checkpoint, pets, "How many pets are dogs?")
    assert result.exit_code in (0, 1), result.output  # the team may be wrong; it always answers in SQL
    assert result.output.startswith("SQL: ")
    assert _fingerprint(pets) == before
    assert sorted(p.name for p in pets.parent.iterdir()) == ["pets.sqlite"]  # no journal, no -wal


def test_ask_sees_what_the_env_shows_the_team(checkpoint: Path, bank: QuestionBank, bank_dir: Path) -> None:
    """The schema read from the file gives the very observation the env gives, so a team answers a
    file as it answered its env."""
    env = Text2SQLEnv(split="test", data_dir=bank_dir)
    for i in range(0, len(env.questions), 53):
        obs, _ = env.reset(options={"question_index": i})
        q = env.question
        db = Database.open(bank.db_paths[q.schema])
        np.testing.assert_array_equal(
            encode_observation(q.words, db.schema, db.values), obs["sql_composer"]["observations"]
        )
    team = Team.load(checkpoint)
    assert team.module.net.spec.agents == ("schema_extractor", "sql_composer")


def _db(tmp_path: Path, name: str, script: str) -> Path:
    path = tmp_path / name
    con = sqlite3.connect(path)
    con.executescript(script)
    con.close()
    return path


@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            "CREATE TABLE a (id INTEGER); CREATE TABLE b (id INTEGER); CREATE TABLE c (id INTEGER);",
            "3 tables: the action space holds at most 2 tables",
        ),
        (
            "CREATE TABLE wide (" + ", ".join(f"c{i} INTEGER" for i in range(15)) + ");",
            "15 columns: the action space holds at most 14 columns",
        ),
        (
            "CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (id INTEGER PRIMARY KEY,"
            " a INTEGER REFERENCES p(id), b INTEGER REFERENCES p(id));",
            "2 foreign keys between its tables: the action space joins along at most 1",
        ),
        ('CREATE TABLE "my pets" (id INTEGER);', "identifier 'my pets'"),
        ("", "the database has no tables"),
    ],
    ids=["tables", "columns", "foreign-keys", "identifier", "empty"],
)
def test_a_database_beyond_the_action_space_is_one_line_naming_the_limit(
    checkpoint: Path, tmp_path: Path, script: str, message: str
) -> None:
    db = _db(tmp_path, "x.sqlite", script)
    before = _fingerprint(db)
    result = _ask(checkpoint, db, "How many rows are there?")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: x.sqlite: ") and message in lines[0], lines
    assert _fingerprint(db) == before


def test_other_bad_input_is_one_line_too(checkpoint: Path, pets: Path, tmp_path: Path) -> None:
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("hello")
    cases = [
        (checkpoint, tmp_path / "missing.sqlite", "How many pets?", "missing.sqlite: no such file"),
        (checkpoint, not_sqlite, "How many pets?", "notes.sqlite: not a readable SQLite database"),
        (checkpoint, pets, " ".join(["pets"] * 41), "the question has 41 words: the layout holds at most 40"),
        (tmp_path, pets, "How many pets?", "no NeuroMAS module checkpoint"),
    ]
    for ckpt, db, question, message in cases:
        result = _ask(ckpt, db, question)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], lines


def test_constrained_decoding_gives_every_where_a_value_it_can_hold(
    checkpoint: Path, bank: QuestionBank
) -> None:
    """With constrained decoding (the default) a WHERE on a text column compares with = or != to a
    value the column stores and any other WHERE to a number; the same team decoding each component
    by its own argmax breaks that on some test question."""
    from orchestrl.envs.text2sql.query import Op
    from orchestrl.envs.text2sql.schemas import SCHEMAS
    from orchestrl.envs.text2sql.tokenizer import is_number

    questions = bank.questions("test")
    words = [q.words for q in questions]
    schemas = [SCHEMAS[q.schema] for q in questions]
    values = [bank.values[q.schema] for q in questions]

    def broken(plans) -> list[int]:
        out = []
        for k, (plan, schema, index) in enumerate(zip(plans, schemas, values, strict=True)):
            if not plan.where:
                continue
            column = schema.columns[plan.where - 1][1]
            if column.numeric:
                fits = is_number(plan.value)
            else:
                fits = plan.value in index.by_slot.get(plan.where, {}).values() and plan.op in (Op.EQ, Op.NE)
            if not fits:
                out.append(k)
        return out

    constrained = Team.load(checkpoint).plans(words, schemas, values)
    free = Team.load(checkpoint, constrained=False).plans(words, schemas, values)
    assert sum(1 for p in constrained if p.where) >= 20
    assert broken(constrained) == []
    assert broken(free)

    k = broken(free)[0]  # `orchestrl ask` decodes so, and --free-decoding as the free team does
    from orchestrl.envs.text2sql.query import render_sql

    question, db = questions[k], bank.db_paths[questions[k].schema]
    for flags, plan in (([], constrained[k]), (["--free-decoding"], free[k])):
        result = CliRunner().invoke(
            app, ["ask", "--checkpoint", str(checkpoint), "--db", str(db), *flags, question.text]
        )
        assert result.output.splitlines()[0] == f"SQL: {render_sql(plan, schemas[k])}", result.output
