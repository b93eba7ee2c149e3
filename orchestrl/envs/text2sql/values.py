"""Value linking: which question words name a value stored in which column, looked up in the database.

As in BRIDGE (Lin et al., EMNLP 2020) and RAT-SQL's value-based linking (Wang et al., ACL 2020),
each text column's stored values are read from the SQLite file itself, and every span of one to
:data:`MAX_VALUE_WORDS` question words is compared with them (by :func:`.tokenizer.normal_form`,
so case and a plural do not matter). "flights to Lyon" then links "Lyon" to every column holding
the value Lyon, with no column name in the question; the observation carries these links
(:mod:`.observation`) and the env copies a chosen span as the stored value ("tokyo" -> ``Tokyo``,
"penguins" -> ``Penguin``).

Only public inputs are read: the question and the database. Numbers are not linked (any number
can be compared with any numeric column).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrl.envs.text2sql.schemas import Schema
from orchestrl.envs.text2sql.sql_runner import open_read_only
from orchestrl.envs.text2sql.tokenizer import normal_phrase, split_words

MAX_VALUE_WORDS = 3
"""The longest value a question can name (and the composer can copy)."""
MAX_DISTINCT = 5000
"""Distinct values read per column (a larger column is linked on its first ones)."""


@dataclass(frozen=True)
class ValueIndex:
    """Per column slot (1-based, as in :meth:`.schemas.Schema.columns`): normal form -> stored value."""

    by_slot: dict[int, dict[str, str]]

    @classmethod
    def from_database(cls, path: Path | str, schema: Schema) -> ValueIndex:
        """Reads every text column's distinct values (at most :data:`MAX_DISTINCT`) from ``path``,
        opened read-only."""
        by_slot: dict[int, dict[str, str]] = {}
        con = open_read_only(path)
        try:
            for slot, (table, column) in enumerate(schema.columns, start=1):
                if column.numeric or column.role in ("key", "fk"):
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
        return cls(by_slot)

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
