"""Read-only, bounded execution of untrusted SQL against one SQLite file.

Four independent guards, so that no single mistake lets a query change the database or hang a
worker:

1. The file is opened with the URI ``mode=ro`` (SQLite refuses every write) and
   ``PRAGMA query_only`` is switched on before anything else runs.
2. An authorizer allows only what a ``SELECT`` needs (``SELECT``, ``READ``, ``RECURSIVE`` and
   functions other than ``load_extension``); ``ATTACH`` (which ``VACUUM INTO`` also needs), every
   write, DDL, ``PRAGMA`` and transaction control are denied. ``SQLITE_LIMIT_ATTACHED`` is 0 too.
3. A progress handler aborts a statement after ``timeout_s`` of wall time (an endless recursive CTE
   ends there), and string/blob and SQL length limits bound memory.
4. Only one statement is accepted; statements that are not queries (``INSERT``, ``PRAGMA``...) are
   refused by their first keyword before SQLite sees them; at most ``max_rows`` rows are fetched.

Failures are values, not exceptions: :meth:`SQLRunner.run` returns a :class:`SQLResult` whose
``error_kind`` says what went wrong, and logs it (``INFO`` for ordinary SQL errors, which a learning
policy makes all the time; ``WARNING`` for refusals and time-outs).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

ErrorKind = Literal["error", "refused", "timeout", "too_long", "too_many_rows"]

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_DENIED_FUNCTIONS = frozenset({"load_extension"})
_OTHER_STATEMENTS = frozenset(
    {
        "ALTER",
        "ANALYZE",
        "ATTACH",
        "BEGIN",
        "COMMIT",
        "CREATE",
        "DELETE",
        "DETACH",
        "DROP",
        "END",
        "EXPLAIN",
        "INSERT",
        "PRAGMA",
        "REINDEX",
        "RELEASE",
        "REPLACE",
        "ROLLBACK",
        "SAVEPOINT",
        "UPDATE",
        "VACUUM",
    }
)
"""Statements other than queries: refused by name for a clear message (the connection refuses them anyway)."""
_LEADING_KEYWORD = re.compile(r"^\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*(\w+)", re.DOTALL)


@dataclass(frozen=True)
class SQLResult:
    """What one query returned: ``rows`` when ``ok``, else ``error`` and ``error_kind``."""

    ok: bool
    rows: tuple[tuple[Any, ...], ...] = ()
    error: str | None = None
    error_kind: ErrorKind | None = None
    seconds: float = 0.0


class SQLRunner:
    """Runs SELECT queries on one database file, read-only and within time and size limits.

    One connection is opened lazily and kept; the runner is cheap to keep per env instance.
    """

    def __init__(
        self,
        db_path: Path | str,
        timeout_s: float = 1.0,
        max_rows: int = 1000,
        max_sql_chars: int = 2000,
        max_value_bytes: int = 1_000_000,
    ) -> None:
        self.db_path = Path(db_path)
        self.timeout_s = float(timeout_s)
        self.max_rows = int(max_rows)
        self.max_sql_chars = int(max_sql_chars)
        self.max_value_bytes = int(max_value_bytes)
        self._con: sqlite3.Connection | None = None
        self._deadline = 0.0

    def run(self, sql: str) -> SQLResult:
        """Executes ``sql`` and returns its rows or a described failure; never raises for bad SQL."""
        start = time.monotonic()
        refusal = self._precheck(sql)
        if refusal is not None:
            return self._fail(sql, refusal, start)
        con = self._connection()
        self._deadline = start + self.timeout_s
        cursor = con.cursor()
        try:
            cursor.execute(sql)
            rows = cursor.fetchmany(self.max_rows + 1)
        except sqlite3.DatabaseError as exc:
            return self._fail(sql, self._classify(exc), start)
        except (sqlite3.Warning, OverflowError, ValueError) as exc:
            # Python < 3.12 raises sqlite3.Warning for "You can only execute one statement at a time."
            return self._fail(sql, ("refused", str(exc)), start)
        finally:
            cursor.close()
        if len(rows) > self.max_rows:
            return self._fail(sql, ("too_many_rows", f"result has more than {self.max_rows} rows"), start)
        return SQLResult(ok=True, rows=tuple(tuple(r) for r in rows), seconds=time.monotonic() - start)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> SQLRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        # A connection cannot be pickled; the copy opens its own.
        return {**self.__dict__, "_con": None}

    def _precheck(self, sql: str) -> tuple[ErrorKind, str] | None:
        if not isinstance(sql, str) or not sql.strip():
            return "error", "empty query"
        if len(sql) > self.max_sql_chars:
            return "too_long", f"query has {len(sql)} characters (limit {self.max_sql_chars})"
        match = _LEADING_KEYWORD.match(sql)
        keyword = match.group(1).upper() if match else ""
        if keyword in _OTHER_STATEMENTS:
            return "refused", f"only SELECT queries may run, not {keyword}"
        return None

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            self._con = connect_read_only(self.db_path, self.max_sql_chars, self.max_value_bytes)
            self._con.set_progress_handler(self._over_time, 1000)
        return self._con

    def _over_time(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def _classify(self, exc: sqlite3.DatabaseError) -> tuple[ErrorKind, str]:
        message = str(exc)
        if message == "interrupted":
            return "timeout", f"stopped after {self.timeout_s:g}s"
        refusals = ("not authorized", "readonly", "prohibited", "one statement at a time")
        if any(r in message for r in refusals):
            return "refused", message
        if "too big" in message or "too long" in message:
            return "too_long", message
        return "error", message

    def _fail(self, sql: str, failure: tuple[ErrorKind, str], start: float) -> SQLResult:
        kind, message = failure
        level = logging.INFO if kind == "error" else logging.WARNING
        log.log(level, "SQL %s on %s: %s | %s", kind, self.db_path.name, message, sql[:200])
        return SQLResult(ok=False, error=message, error_kind=kind, seconds=time.monotonic() - start)


def connect_read_only(
    db_path: Path | str, max_sql_chars: int = 2000, max_value_bytes: int = 1_000_000
) -> sqlite3.Connection:
    """A connection to an existing file with guards 1 and 2 of the module docstring in place.

    The caller adds a time limit (:class:`SQLRunner` installs its progress handler).
    """
    con = open_read_only(db_path)
    con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, max_sql_chars)
    con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
    con.set_authorizer(_authorize)
    return con


def open_read_only(db_path: Path | str) -> sqlite3.Connection:
    """Guard 1 alone: an existing file opened with ``mode=ro`` and ``PRAGMA query_only``. SQLite
    refuses every write; nothing else is restricted (:mod:`.introspect` reads the schema with it)."""
    path = Path(db_path)
    if not path.is_file():
        raise FileNotFoundError(path)
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    con.execute("PRAGMA query_only = ON")
    return con


def _authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
    return sqlite3.SQLITE_OK if action in _ALLOWED_ACTIONS else sqlite3.SQLITE_DENY
