"""The :class:`.schemas.Schema` of any SQLite file, if it fits the action space.

Reads the file's tables, columns, primary keys and foreign keys (opened read-only, ``mode=ro``;
nothing is written) and maps them onto what the env's observation and action space know:

- a column's SQL type by SQLite's affinity rules: ``INT`` -> ``INTEGER``; ``REAL``/``FLOA``/
  ``DOUB``/``NUMERIC``/``DECIMAL`` -> ``REAL``; anything else -> ``TEXT``;
- its role: ``key`` (the primary key), ``fk`` (the foreign key column), ``number`` (numeric),
  ``category`` (text);
- the one join the action space can express: a foreign key from one table to the other's key.

A file that does not fit raises :class:`.observation.LimitError` with a one-line message naming the
limit: more than :data:`.observation.MAX_TABLES` tables or :data:`.observation.MAX_COLUMNS` columns,
more than one foreign key between its tables, or an identifier the SQL renderer cannot write bare
(letters, digits and ``_`` only).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from orchestrl.envs.text2sql.observation import MAX_TABLES, LimitError, check_fits
from orchestrl.envs.text2sql.schemas import Column, ForeignKey, Role, Schema, SqlType, Table
from orchestrl.envs.text2sql.sql_runner import open_read_only
from orchestrl.envs.text2sql.tokenizer import identifier_words, normal_form

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def sql_type(declared: str) -> SqlType:
    """SQLite's column affinity (https://sqlite.org/datatype3.html, 3.1) on the three types the env knows."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")) or not upper:
        return "TEXT"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB", "NUMERIC", "DECIMAL")):
        return "REAL"
    return "TEXT"


def schema_from_sqlite(path: Path | str) -> Schema:
    """The schema of the SQLite file at ``path`` (see the module docstring)."""
    path = Path(path)
    try:
        con = open_read_only(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except sqlite3.DatabaseError as err:
        raise LimitError(f"{path.name}: not a readable SQLite database ({err})") from None
    try:
        return _read(con, path)
    except sqlite3.DatabaseError as err:
        raise LimitError(f"{path.name}: not a readable SQLite database ({err})") from None
    finally:
        con.close()


def _read(con: sqlite3.Connection, path: Path) -> Schema:
    names = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
        )
    ]
    if not names:
        raise LimitError(f"{path.name}: the database has no tables")
    if len(names) > MAX_TABLES:
        raise LimitError(
            f"{path.name}: {len(names)} tables: the action space holds at most {MAX_TABLES} tables "
            f"({', '.join(names)})"
        )
    foreign = []
    for name in names:
        for row in con.execute(f'PRAGMA foreign_key_list("{name}")'):
            _, _, parent, column, parent_column = row[:5]
            if parent in names and parent != name:
                foreign.append(ForeignKey(name, column, parent, parent_column or "id"))
    if len(foreign) > 1:
        raise LimitError(
            f"{path.name}: {len(foreign)} foreign keys between its tables: the action space joins along "
            "at most 1 foreign key"
        )
    fk = foreign[0] if foreign else None
    tables = []
    for name in names:
        _check_identifier(path, name)
        columns = []
        for _, column, declared, _, _, pk in con.execute(f'PRAGMA table_info("{name}")'):
            _check_identifier(path, f"{name}.{column}")
            kind = sql_type(declared or "")
            role: Role = "key" if pk else "number" if kind != "TEXT" else "category"
            if fk is not None and fk.child == name and fk.column == column:
                role = "fk"
            columns.append(Column(column, kind, role))
        words = identifier_words(name)
        singular = " ".join([*words[:-1], normal_form(words[-1])]) if words else name
        tables.append(Table(name, singular, " ".join(words) or name, 0, tuple(columns)))
    schema = Schema(path.stem, tuple(tables), fk)
    try:
        check_fits(schema)
    except LimitError as err:
        raise LimitError(f"{path.name}: {err}") from None
    return schema


def _check_identifier(path: Path, name: str) -> None:
    if not all(_IDENTIFIER.match(part) for part in name.split(".")):
        raise LimitError(
            f"{path.name}: identifier {name!r}: the action space writes names bare, so only letters, "
            "digits and _ fit"
        )
