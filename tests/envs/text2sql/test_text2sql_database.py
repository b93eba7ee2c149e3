"""Generated databases: deterministic, reused, safe to create from several processes at once."""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from orchestrl.envs.text2sql import database
from orchestrl.envs.text2sql.database import (
    database_path,
    default_data_dir,
    ensure_database,
    generate_rows,
)
from orchestrl.envs.text2sql.observation import check_fits
from orchestrl.envs.text2sql.schemas import SCHEMAS, SPLIT_SCHEMAS, Combo, Pick
from orchestrl.envs.text2sql.tokenizer import split_words
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _ensure_all(data_dir: Path, seed: int = 0) -> dict[str, Path]:
    return {name: ensure_database(schema, seed, data_dir) for name, schema in SCHEMAS.items()}


def test_there_are_at_least_eight_domains_and_several_have_a_foreign_key() -> None:
    assert len(SCHEMAS) >= 8
    joined = [s for s in SCHEMAS.values() if s.foreign_key is not None]
    assert len(joined) >= 4
    assert {name for names in SPLIT_SCHEMAS.values() for name in names} == set(SCHEMAS)


def test_same_seed_gives_byte_identical_files_and_another_seed_differs(tmp_path: Path) -> None:
    first, second = _ensure_all(tmp_path / "a"), _ensure_all(tmp_path / "b")
    other = _ensure_all(tmp_path / "c", seed=1)
    for name in SCHEMAS:
        assert _digest(first[name]) == _digest(second[name])
        assert _digest(first[name]) != _digest(other[name])


def test_existing_files_are_reused_not_rewritten(tmp_path: Path) -> None:
    path = ensure_database(SCHEMAS["shop"], 0, tmp_path)
    before = path.stat()
    assert ensure_database(SCHEMAS["shop"], 0, tmp_path) == path
    after = path.stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_database_holds_the_generated_rows_with_a_working_foreign_key(tmp_path: Path) -> None:
    schema = SCHEMAS["shop"]
    rows = generate_rows(schema, 0)
    path = ensure_database(schema, 0, tmp_path, rows)
    con = sqlite3.connect(path)
    try:
        stored = con.execute("SELECT * FROM orders ORDER BY id").fetchall()
        orphans = con.execute(
            "SELECT COUNT(*) FROM orders LEFT JOIN products ON orders.product_id = products.id "
            "WHERE products.id IS NULL"
        ).fetchone()[0]
    finally:
        con.close()
    assert stored == rows["orders"]
    assert orphans == 0
    assert len({r[1] for r in rows["products"]}) == len(rows["products"]), "labels are unique"


def test_default_data_dir_is_under_the_project_runs_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_data_dir(7) == tmp_path / "runs" / "cache" / "text2sql" / "7"


def test_every_schema_fits_the_layout_and_its_values_can_be_copied_from_a_question() -> None:
    for schema in SCHEMAS.values():
        check_fits(schema)
        for table, column in schema.columns:
            spec = column.values
            words = (
                spec.pool
                if isinstance(spec, Pick)
                else (*spec.first, *spec.second)
                if isinstance(spec, Combo)
                else ()
            )
            for word in words:
                words = split_words(word)
                assert " ".join(words) == word and len(words) <= MAX_VALUE_WORDS, (table.name, word)
                assert all(w.isalnum() for w in words)


def _race(data_dir: str, barrier: Any) -> None:
    barrier.wait()
    _ensure_all(Path(data_dir))


def test_processes_racing_to_create_the_files_leave_one_intact_copy(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(3)
    shared = tmp_path / "shared"
    workers = [ctx.Process(target=_race, args=(str(shared), barrier)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    reference = _ensure_all(tmp_path / "alone")
    for name, path in reference.items():
        assert _digest(database_path(shared, SCHEMAS[name], 0)) == _digest(path)
    assert sorted(p.name for p in shared.iterdir()) == sorted(p.name for p in reference.values())


def _rewrite_forever(path: str, rounds: int) -> None:
    schema = SCHEMAS["shop"]
    rows = generate_rows(schema, 0)
    for _ in range(rounds):
        database._write_atomically(schema, rows, Path(path))


def test_a_reader_never_sees_a_half_written_file_while_it_is_replaced(tmp_path: Path) -> None:
    path = ensure_database(SCHEMAS["shop"], 0, tmp_path)
    writer = mp.get_context("fork").Process(target=_rewrite_forever, args=(str(path), 40))
    writer.start()
    reads = 0
    while writer.is_alive() or reads < 20:
        con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        try:
            assert con.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 70
        finally:
            con.close()
        reads += 1
    writer.join(timeout=60)
    assert writer.exitcode == 0
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
