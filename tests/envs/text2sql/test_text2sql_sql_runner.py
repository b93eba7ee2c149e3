"""Hostile SQL is refused or stopped, and the database file stays byte-identical."""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrl.envs.text2sql.database import ensure_database
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.envs.text2sql.sql_runner import SQLRunner, connect_read_only

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return ensure_database(SCHEMAS["shop"], 0, tmp_path)


@pytest.fixture
def runner(db: Path) -> Iterator[SQLRunner]:
    with SQLRunner(db, timeout_s=0.3) as r:
        yield r


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_select_returns_rows(runner: SQLRunner) -> None:
    result = runner.run("SELECT COUNT(*) FROM products WHERE price > 0")
    assert result.ok and result.rows == ((24,),)


HOSTILE = [
    ("ATTACH DATABASE '{outside}' AS other", "refused"),
    ("INSERT INTO products VALUES (99, 'Evil Lamp', 'Kitchen', 'Acme', 1.0, 1)", "refused"),
    ("UPDATE products SET price = 0", "refused"),
    ("DELETE FROM orders", "refused"),
    ("DROP TABLE orders", "refused"),
    ("CREATE TABLE evil (x)", "refused"),
    ("PRAGMA user_version = 42", "refused"),
    ("PRAGMA journal_mode = WAL", "refused"),
    ("VACUUM INTO '{outside}'", "refused"),
    ("REPLACE INTO products VALUES (1, 'Evil Lamp', 'Kitchen', 'Acme', 1.0, 1)", "refused"),
    # Past the keyword check (it starts with WITH / SELECT): the connection itself refuses.
    ("WITH x AS (SELECT 1) INSERT INTO orders SELECT * FROM orders", "refused"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "refused"),
    ("SELECT 1; DROP TABLE orders", "refused"),
    ("SELECT load_extension('/tmp/evil')", "refused"),
    ("SELECT length(randomblob(500000000))", "too_long"),
    (ENDLESS, "timeout"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c ORDER BY x", "timeout"),
    ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", "too_many_rows"),
    ("SELECT 1 " + "+ 1 " * 2000, "too_long"),
]


@pytest.mark.parametrize(("sql", "kind"), HOSTILE, ids=[h[0][:40] for h in HOSTILE])
def test_hostile_sql_is_refused_or_stopped_and_the_file_is_unchanged(
    sql: str, kind: str, runner: SQLRunner, db: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.db"
    before = _digest(db)
    started = time.monotonic()
    result = runner.run(sql.format(outside=outside))
    assert not result.ok
    assert result.error_kind == kind, result.error
    assert time.monotonic() - started < 5
    assert _digest(db) == before
    assert not outside.exists()
    assert runner.run("SELECT COUNT(*) FROM orders").rows == ((70,),), "the runner keeps working"


@pytest.mark.parametrize(
    "sql",
    [
        "ATTACH DATABASE '{outside}' AS other",
        "VACUUM INTO '{outside}'",
        "INSERT INTO products VALUES (99, 'Evil Lamp', 'Kitchen', 'Acme', 1.0, 1)",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "PRAGMA query_only = OFF",
        "PRAGMA user_version = 42",
        "BEGIN IMMEDIATE",
    ],
)
def test_the_connection_refuses_writes_without_the_keyword_check(sql: str, db: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.db"
    before = _digest(db)
    con = connect_read_only(db)
    try:
        with pytest.raises(sqlite3.DatabaseError):
            con.execute(sql.format(outside=outside))
    finally:
        con.close()
    assert _digest(db) == before
    assert not outside.exists()


def test_failures_are_logged_with_their_kind(runner: SQLRunner, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="orchestrl.envs.text2sql.sql_runner"):
        runner.run("SELEC name FROM products")
        runner.run("SELECT * FROM nowhere")
        runner.run("DROP TABLE orders")
        runner.run(ENDLESS)
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        messages[0][0] == logging.INFO and "SQL error" in messages[0][1] and "syntax error" in messages[0][1]
    )
    assert messages[1][0] == logging.INFO and "no such table: nowhere" in messages[1][1]
    assert messages[2][0] == logging.WARNING and "SQL refused" in messages[2][1]
    assert messages[3][0] == logging.WARNING and "SQL timeout" in messages[3][1]


def test_empty_and_missing_inputs_fail_cleanly(runner: SQLRunner, tmp_path: Path) -> None:
    assert runner.run("   ").error_kind == "error"
    assert runner.run("SELECT missing_column FROM products").error_kind == "error"
    with pytest.raises(FileNotFoundError):
        SQLRunner(tmp_path / "absent.sqlite").run("SELECT 1")
