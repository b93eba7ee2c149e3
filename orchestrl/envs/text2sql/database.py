"""Real SQLite databases generated from a seed, one file per schema.

Rows come from a NumPy generator seeded with ``(seed, crc32(schema name))``, so a schema's data
never depends on which other schemas were built or in which order. The same seed gives
byte-identical files.

Files are written once and reused: a writer builds the database in a temporary file in the target
folder and renames it into place (``os.replace`` is atomic on POSIX), so env instances in several
processes can race to create the same file and a reader never sees a half-written one. The file
name carries the seed and :data:`GENERATOR_VERSION`, so changing either never reuses a stale file.
Finished files are made read-only at the OS level as well; :mod:`.sql_runner` is the real guard.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from orchestrl.envs.text2sql.schemas import Combo, Pick, Schema, Span, Table

GENERATOR_VERSION = 1
"""Bump when row generation changes, so cached files from older code are not reused."""

Row = tuple[Any, ...]
Rows = dict[str, list[Row]]
"""Table name -> rows, each a tuple in the table's column order."""


def default_data_dir(seed: int) -> Path:
    """``./runs/cache/text2sql/<seed>`` under the current project dir (never the home dir)."""
    return Path.cwd() / "runs" / "cache" / "text2sql" / str(seed)


def database_path(data_dir: Path, schema: Schema, seed: int) -> Path:
    return Path(data_dir) / f"{schema.name}.seed{seed}.v{GENERATOR_VERSION}.sqlite"


def generate_rows(schema: Schema, seed: int) -> Rows:
    """The schema's rows for ``seed``: deterministic, pure Python values ready for SQLite."""
    rng = np.random.default_rng([int(seed), zlib.crc32(schema.name.encode())])
    sizes = {t.name: t.rows for t in schema.tables}
    fk = schema.foreign_key
    rows: Rows = {}
    for table in schema.tables:
        parent_rows = sizes[fk.parent] if fk and fk.child == table.name else 0
        rows[table.name] = _table_rows(table, rng, parent_rows)
    return rows


def _table_rows(table: Table, rng: np.random.Generator, parent_rows: int) -> list[Row]:
    n = table.rows
    columns: list[list[Any]] = []
    for col in table.columns:
        if col.role == "key":
            columns.append(list(range(1, n + 1)))
        elif col.role == "fk":
            columns.append([int(v) for v in rng.integers(1, parent_rows + 1, size=n)])
        elif isinstance(col.values, Combo):
            names = [f"{a} {b}" for a, b in itertools.product(col.values.first, col.values.second)]
            if len(names) < n:
                raise ValueError(f"{table.name}.{col.name}: {len(names)} names for {n} rows")
            columns.append([names[i] for i in rng.choice(len(names), size=n, replace=False)])
        elif isinstance(col.values, Pick):
            columns.append([col.values.pool[i] for i in rng.integers(0, len(col.values.pool), size=n)])
        elif isinstance(col.values, Span):
            columns.append(_numbers(col.values, rng, n))
        else:
            raise ValueError(f"{table.name}.{col.name} has no value generator")
    return [tuple(r) for r in zip(*columns, strict=True)]


def _numbers(span: Span, rng: np.random.Generator, n: int) -> list[Any]:
    if span.decimals == 0:
        return [int(v) for v in rng.integers(int(span.lo), int(span.hi) + 1, size=n)]
    return [round(float(v), span.decimals) for v in rng.uniform(span.lo, span.hi, size=n)]


def create_table_sql(schema: Schema, table: Table) -> str:
    fk = schema.foreign_key
    parts = []
    for col in table.columns:
        decl = f"{col.name} {col.sql_type}"
        if col.role == "key":
            decl += " PRIMARY KEY"
        elif col.role == "fk" and fk is not None:
            decl += f" NOT NULL REFERENCES {fk.parent}(id)"
        else:
            decl += " NOT NULL"
        parts.append(decl)
    return f"CREATE TABLE {table.name} ({', '.join(parts)})"


def ensure_database(schema: Schema, seed: int, data_dir: Path | str, rows: Rows | None = None) -> Path:
    """The path of the schema's database for ``seed``, writing it first if it does not exist yet."""
    path = database_path(Path(data_dir), schema, seed)
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(schema, rows if rows is not None else generate_rows(schema, seed), path)
    return path


def _write_atomically(schema: Schema, rows: Rows, path: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        con = sqlite3.connect(tmp)
        try:
            with con:
                for table in schema.tables:
                    con.execute(create_table_sql(schema, table))
                    marks = ", ".join("?" * len(table.columns))
                    con.executemany(f"INSERT INTO {table.name} VALUES ({marks})", rows[table.name])
        finally:
            con.close()
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
