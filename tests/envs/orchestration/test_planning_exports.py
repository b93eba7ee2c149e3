"""The planning env's source exports: deterministic, varied, joinable, clean when asked, and dirty in
every advertised way when asked, each kind of dirt recognised from the values alone."""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.orchestration.planning.exports import (
    DIRT,
    DOMAIN_BY_NAME,
    DOMAINS,
    FACT_ROWS,
    KINDS,
    LOOKUP_ROWS,
    Category,
    Export,
    Ident,
    Key,
    Number,
    Ref,
    Stamp,
    Table,
    Text,
    generate_sources,
)

SEEDS = range(60)
ISO = re.compile(r"\d{4}-\d{2}-\d{2}")
SPELLED_NUMBER = re.compile(r"\$[\d,]+(\.\d+)?|[\d.]+%|\d{1,3}(,\d{3})+(\.\d+)?")
NA_TOKENS = {"N/A", "n/a", "-", ""}


def export(seed: int, tables: int | None = None, dirty: bool = False) -> Export:
    return generate_sources(np.random.default_rng(seed), 1 + seed % 3 if tables is None else tables, dirty)


@pytest.fixture(scope="module")
def clean() -> list[Export]:
    return [export(seed) for seed in SEEDS]


@pytest.fixture(scope="module")
def dirty() -> list[Export]:
    return [export(seed, dirty=True) for seed in SEEDS]


def schema(result: Export) -> dict[str, Table]:
    domain = DOMAIN_BY_NAME[result.domain]
    return {table.name: table for table in (domain.fact, *domain.lookups)}


def declared(result: Export, table: Table, column: str) -> tuple[str, ...]:
    """A category column's values as declared: by its table, or by the lookup a fact copied it
    from (a denormalised attribute)."""
    domain = DOMAIN_BY_NAME[result.domain]
    for owner in (table, *domain.lookups):
        if column in owner.kinds:
            return owner.column(column).values
    raise KeyError(column)


def texts(values: pd.Series) -> list[str]:
    return [value for value in values if isinstance(value, str)]


def dirt_seen(result: Export) -> set[str]:
    """The kinds of dirt visible in an export's values (names as in ``DIRT``)."""
    seen = set()
    tables = schema(result)
    for name, frame in result.sources.items():
        table = tables[name]
        if frame.duplicated().any():
            seen.add("duplicates")
        key = frame.drop_duplicates()[table.row_key.name].astype(str).str.strip()
        if key.duplicated().any():
            seen.add("versions")
        for column, kind in result.kinds[name].items():
            values = frame[column]
            words = texts(values)
            if values.isna().any():
                seen.add("missing")
            if any(word != word.strip() for word in words):
                seen.add("stray_spaces")
            if kind == "number" and any(SPELLED_NUMBER.fullmatch(word.strip()) for word in words):
                seen.add("number_text")
            if kind == "number" and any(word.strip() in NA_TOKENS for word in words):
                seen.add("na_tokens")
            if kind == "date" and any(not ISO.fullmatch(word.strip()) for word in words):
                seen.add("date_text")
            if kind == "category":
                values_declared = declared(result, table, column)
                folded = {value.casefold() for value in values_declared}
                if any(w.strip() not in values_declared and w.strip().casefold() in folded for w in words):
                    seen.add("case_variants")
    return seen


def test_same_seed_gives_the_same_export() -> None:
    for seed in range(12):
        for dirty in (False, True):
            first, second = export(seed, dirty=dirty), export(seed, dirty=dirty)
            assert first.domain == second.domain and first.kinds == second.kinds
            assert list(first.sources) == list(second.sources)
            for name, frame in first.sources.items():
                pd.testing.assert_frame_equal(frame, second.sources[name])
    facts = [next(iter(export(seed, tables=1).sources.values())) for seed in range(6)]
    assert len({fact.to_csv() for fact in facts}) == len(facts)


def test_many_domains_are_reachable() -> None:
    assert len(DOMAINS) >= 14 and len(DOMAIN_BY_NAME) == len(DOMAINS)
    reached = {export(seed, tables=1).domain for seed in range(300)}
    assert reached == set(DOMAIN_BY_NAME)
    assert len({export(seed, tables=3).domain for seed in range(100)}) >= 6


def test_domains_follow_the_schema_rules() -> None:
    spellings = set()
    for domain in DOMAINS:
        fact = domain.fact
        assert len(fact.of(Ident)) == 1 and not fact.of(Key)
        assert sorted(ref.lookup for ref in fact.of(Ref)) == sorted(t.name for t in domain.lookups)
        assert len(fact.of(Category)) >= 2 and 2 <= len(fact.of(Number)) <= 3
        assert len(domain.lookups) <= 2
        for lookup in domain.lookups:
            assert len(lookup.of(Key)) == 1 and not lookup.of(Ident, Ref)
            assert 1 <= len(lookup.of(Category)) <= 2 and len(lookup.of(Number)) <= 1
            # names for half the largest lookup at least (draw_keys caps a lookup at its names)
            assert len(lookup.of(Text)) == 1 and lookup.of(Text)[0].variety >= LOOKUP_ROWS[1] // 2
            spellings.add(domain.ref(lookup).name == lookup.row_key.name)
        for table in (fact, *domain.lookups):
            assert table.name.isidentifier()
            assert len(set(table.kinds)) == len(table.columns)
            assert all(3 <= len(category.values) <= 8 for category in table.of(Category))
    assert spellings == {True, False}  # join keys named alike in some domains, differently in others


@pytest.mark.parametrize("tables", [1, 2, 3])
def test_tables_are_respected_fact_first(tables: int) -> None:
    for seed in range(40):
        result = export(seed, tables=tables)
        domain = DOMAIN_BY_NAME[result.domain]
        names = list(result.sources)
        assert len(names) == tables and names[0] == domain.fact.name
        assert set(names[1:]) <= {lookup.name for lookup in domain.lookups}
        assert FACT_ROWS[0] <= len(result.sources[names[0]]) <= FACT_ROWS[1]
        assert all(LOOKUP_ROWS[0] <= len(result.sources[name]) <= LOOKUP_ROWS[1] for name in names[1:])
        assert [join.lookup for join in result.joins] == names[1:]


def test_tables_out_of_range_are_refused() -> None:
    for tables in (0, 4):
        with pytest.raises(ValueError):
            generate_sources(np.random.default_rng(0), tables, False)


def test_join_keys_overlap(clean: list[Export], dirty: list[Export]) -> None:
    orphans = 0
    for result in clean:
        fact = result.sources[next(iter(result.sources))]
        for join in result.joins:
            lookup_keys = result.sources[join.lookup][join.lookup_column]
            assert lookup_keys.is_unique
            matched = fact[join.fact_column].isin(set(lookup_keys))
            assert matched.mean() >= 0.9
            orphans += int((~matched).any())
    assert orphans > 0  # now and then a fact names a key its lookup lacks
    for result in dirty:
        fact = result.sources[next(iter(result.sources))]
        for join in result.joins:
            lookup_keys = set(result.sources[join.lookup][join.lookup_column].astype(str).str.strip())
            assert fact[join.fact_column].astype(str).str.strip().isin(lookup_keys).mean() >= 0.8


def test_clean_exports_are_clean(clean: list[Export]) -> None:
    for result in clean:
        assert dirt_seen(result) == set()
        for name, frame in result.sources.items():
            table = schema(result)[name]
            assert frame[table.row_key.name].is_unique
            for column, kind in result.kinds[name].items():
                values = frame[column]
                if kind == "number":
                    assert pd.api.types.is_numeric_dtype(values)
                if kind == "date":
                    assert all(ISO.fullmatch(day) for day in values)
                if kind == "category":
                    assert set(values) <= set(declared(result, table, column))


def test_dirty_exports_show_every_kind_of_dirt(dirty: list[Export]) -> None:
    seen = [dirt_seen(result) for result in dirty]
    assert set().union(*seen) == {dirt.name for dirt in DIRT}
    assert all(seen), "a dirty export has some dirt"
    assert 1.0 <= np.mean([len(kinds) for kinds in seen]) <= 3.0


def test_an_export_is_what_its_csv_files_read_as(clean: list[Export], dirty: list[Export]) -> None:
    """A generated table is the one a user's file of it gives (``"N/A"`` or an empty cell missing,
    numbers parsed), so a task and the same task through files are one task."""
    for result in [*clean, *dirty]:
        for frame in result.sources.values():
            back = pd.read_csv(io.StringIO(frame.to_csv(index=False)))
            pd.testing.assert_frame_equal(back, frame)


def test_values_are_plain_and_kinds_cover_every_column(clean: list[Export], dirty: list[Export]) -> None:
    for result in [*clean, *dirty]:
        assert list(result.kinds) == list(result.sources)
        for name, frame in result.sources.items():
            assert name.isidentifier()
            assert list(result.kinds[name]) == list(frame.columns)
            assert set(result.kinds[name].values()) <= set(KINDS)
            for column in frame.columns:
                values = frame[column]
                assert not pd.api.types.is_datetime64_any_dtype(values)
                plain = (str, int, float, np.integer, np.floating)
                assert all(isinstance(value, plain) or pd.isna(value) for value in values)


def test_a_change_log_lists_each_records_latest_version_first(dirty: list[Export]) -> None:
    """Versions of a record (its row key again, with a later stamp) come newest first, as change-log
    exports list them: the first row of a record is its latest."""
    logs = 0
    for result in dirty:
        for name, frame in result.sources.items():
            table = schema(result)[name]
            distinct = frame.drop_duplicates()
            key = distinct[table.row_key.name].astype(str).str.strip()
            if table.stamp is None or not key.duplicated().any():
                continue
            logs += 1
            stamps = distinct[table.stamp.name].astype(str)
            for _, rows in stamps.groupby(key, sort=False):
                if len(rows) > 1 and all(ISO.fullmatch(s) for s in rows):
                    assert rows.iloc[0] == max(rows), rows.tolist()
    assert logs >= 3


def test_a_fact_leaves_some_columns_out_and_carries_attributes_of_things_it_names() -> None:
    """An export holds the columns someone picked (never the row key, a change log's stamp or the
    key of a table exported beside it), and sometimes the names and categories of a thing it refers
    to that no exported table lists (a customer's name beside its id): every row naming that thing
    carries the same ones."""
    narrower = carried = 0
    for seed in range(60):
        result = export(seed, dirty=bool(seed % 2))
        domain = DOMAIN_BY_NAME[result.domain]
        fact = result.sources[domain.fact.name]
        declared = [column.name for column in domain.fact.columns]
        assert domain.fact.row_key.name in fact.columns
        assert all(join.fact_column in fact.columns for join in result.joins)
        assert all(stamp.name in fact.columns for stamp in domain.fact.of(Stamp))
        narrower += len(set(declared) - set(fact.columns)) > 0
        for lookup in domain.lookups:
            copied = [c for c in fact.columns if c not in declared and c in lookup.kinds]
            if not copied:
                continue
            assert lookup.name not in result.sources
            carried += 1
            refs = fact[domain.ref(lookup).name].astype(str).str.strip()
            assert (fact[copied].groupby(refs).nunique(dropna=False) <= 1).all().all()
            assert result.kinds[domain.fact.name][copied[0]] == lookup.kinds[copied[0]]
    assert narrower >= 20 and carried >= 5
