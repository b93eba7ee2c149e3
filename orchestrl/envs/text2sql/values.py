"""Value linking: which question words name a value stored in which column, looked up in the database.

As in BRIDGE (Lin et al., EMNLP 2020) and RAT-SQL's value-based linking (Wang et al., ACL 2020),
each text column's stored values are read from the SQLite file itself, and every span of one to
:data:`MAX_VALUE_WORDS` question words is compared with them (by :func:`.tokenizer.normal_form`,
so case and a plural do not matter). "flights to Lyon" then links "Lyon" to every column holding
the value Lyon, with no column name in the question; the observation carries these links
(:mod:`.observation`) and the env copies a chosen span as the stored value ("tokyo" -> ``Tokyo``,
"penguins" -> ``Penguin``).

A number is linked by range: "released before 1980" links 1980 to every numeric column whose
stored values lie on both sides of it or reach it (a year, not a box office), while "the 3 newest"
links 3 to none of them, so it reads as a count (:meth:`ValueIndex.range_links`).

Only public inputs are read: the question and the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrl.envs.text2sql.schemas import Schema
from orchestrl.envs.text2sql.sql_runner import open_read_only
from orchestrl.envs.text2sql.tokenizer import is_number, normal_phrase, number_text, split_words

MAX_VALUE_WORDS = 3
"""The longest value a question can name (and the composer can copy)."""
MAX_DISTINCT = 5000
"""Distinct values read per column (a larger column is linked on its first ones)."""


@dataclass(frozen=True)
class ValueIndex:
    """Per column slot (1-based, as in :meth:`.schemas.Schema.columns`): normal form -> stored value."""

    by_slot: dict[int, dict[str, str]]
    ranges: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Per numeric column slot (keys left out): its smallest and largest stored value."""

    @classmethod
    def from_database(cls, path: Path | str, schema: Schema) -> ValueIndex:
        """Reads every text column's distinct values (at most :data:`MAX_DISTINCT`) and every
        numeric column's range from ``path``, opened read-only."""
        by_slot: dict[int, dict[str, str]] = {}
        ranges: dict[int, tuple[float, float]] = {}
        con = open_read_only(path)
        try:
            for slot, (table, column) in enumerate(schema.columns, start=1):
                if column.role in ("key", "fk"):
                    continue
                if column.numeric:
                    low, high = con.execute(
                        f'SELECT MIN("{column.name}"), MAX("{column.name}") FROM "{table.name}"'
                    ).fetchone()
                    if low is not None:
                        ranges[slot] = (float(low), float(high))
                    continue
                rows = con.execute(
                    f'SELECT DISTINCT "{column.name}" FROM "{table.name}" '
                    f'WHERE "{column.name}" IS NOT NULL LIMIT {MAX_DISTINCT}'
                ).fetchall()
                index: dict[str, str] = {}
                for (value,) in rows:
                    words = split_words(str(value))
                    if 0 < len(words) <= MAX_VALUE_WORDS:
                        index.setdefault(normal_phrase(words), str(value))
                by_slot[slot] = index
        finally:
            con.close()
        return cls(by_slot, ranges)

    def range_links(self, words: Sequence[str]) -> list[set[int]]:
        """Per question word, the numeric column slots whose stored range holds it (a number)."""
        linked: list[set[int]] = []
        for word in words:
            if not is_number(word):
                linked.append(set())
                continue
            value = float(number_text(word))
            linked.append({slot for slot, (low, high) in self.ranges.items() if low <= value <= high})
        return linked

    def links(self, words: Sequence[str]) -> list[set[int]]:
        """Per question word, the column slots holding a value that a span containing it names."""
        linked: list[set[int]] = [set() for _ in words]
        for start in range(len(words)):
            for length in range(1, MAX_VALUE_WORDS + 1):
                span = words[start : start + length]
                if len(span) < length or not any(w[0].isalnum() for w in span):
                    break
                phrase = normal_phrase(span)
                for slot, index in self.by_slot.items():
                    if phrase in index:
                        for i in range(start, start + length):
                            linked[i].add(slot)
        return linked

    def stored(self, slot: int, words: Sequence[str]) -> str | None:
        """The value of column ``slot`` that ``words`` name, as stored (None if it holds none)."""
        return self.by_slot.get(slot, {}).get(normal_phrase(words))
