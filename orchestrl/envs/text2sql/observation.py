"""The flat observation vector and its layout: what a text encoder in the policy reads.

The observation is a function of the public inputs only: the question's words, the schema and the
values stored in the database (:func:`encode_observation` takes nothing else; the gold query is not
among its arguments). Both agents receive the same vector of :data:`OBS_DIM` float32 values, the
concatenation of the segments below (``rows x width`` each, row-major). Piece ids are integers
stored as floats (exact below 2**24); ``0`` is padding.

Segments, in order (rows x width, content):

- ``question_pieces`` (``Q_WORDS x WORD_PIECES`` = 40 x 4): per question word, its first WordPiece
  ids (:mod:`.tokenizer`); row i is what the composer's ``value_start = i`` points at.
- ``table_pieces`` (``MAX_TABLES x TABLE_PIECES`` = 2 x 4): each table's name pieces (table slot j).
- ``column_pieces`` (``COLUMN_SLOTS x (TABLE_PIECES + COLUMN_PIECES)`` = 15 x 10): per column slot,
  its table's name pieces (4) then its own name pieces (6); slot 0 is ``*`` (``*`` for ``select``,
  "none" for ``where``/``group_by``) and has no pieces.
- ``question_features`` (``Q_WORDS x 6``): present, a number, capitalised and not the first word,
  names a word of this schema's table or column names, lies in a span that names a stored value,
  starts such a span.
- ``question_links`` (``Q_WORDS x 3``): three bit sets per word. Name links: bit s (1..14) when the
  word is a word of column slot s's name, bit 15 + j when it is a word of table j's name. Value
  links: bit s when the word lies in a span naming a value stored in column slot s (:mod:`.values`).
  Range links: bit s when the word is a number within the stored range of numeric column slot s.
  Words compare by :func:`.tokenizer.normal_form` ("flight" names ``flights``).
- ``table_features`` (``MAX_TABLES x 3``): present, holds the foreign key, named in the question.
- ``column_features`` (``COLUMN_SLOTS x 9``): present, is ``*``, text, numeric, primary key, foreign
  key, table slot (0/1), named in the question, one of its stored values is named in the question.
- ``global_features`` (``1 x 2``): the schema has a foreign key, number of words / ``Q_WORDS``.

Absent rows (a second table in a one-table schema, unused column slots, positions past the
question) are all zeros.

Rows line up with action components: row j of ``table_*`` is table choice j, row s of ``column_*``
is column slot s, row i of ``question_*`` is value position i, so a pointer-style policy scores each
row and masks with the matching slice of the action mask. :data:`LAYOUT` gives every segment's
offset; ``LAYOUT.view(obs, name)`` slices and reshapes a (batch of) observation(s), NumPy or torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrl.envs.text2sql.schemas import Schema
from orchestrl.envs.text2sql.tokenizer import (
    PIECE_VOCAB_SIZE,
    is_number,
    normal_form,
    pieces_of,
)
from orchestrl.envs.text2sql.values import ValueIndex

Q_WORDS = 40
"""Question words kept; a longer question is refused (:class:`LimitError`)."""
WORD_PIECES = 4
"""Pieces kept per question word (a longer word is read by its first four)."""
MAX_TABLES = 2
TABLE_PIECES = 4
COLUMN_PIECES = 6
MAX_COLUMNS = 14
COLUMN_SLOTS = 1 + MAX_COLUMNS
"""Slot 0 is ``*``; slots 1..MAX_COLUMNS are the schema's columns in schema order."""
QUESTION_FEATURES = 6
TABLE_FEATURES = 3
COLUMN_FEATURES = 9
GLOBAL_FEATURES = 2
NAME_LINK_BITS = COLUMN_SLOTS + MAX_TABLES
"""Bits 1..14: column slots; 15, 16: tables (bit 0, the ``*`` slot, is never set)."""


class LimitError(ValueError):
    """The schema or the question does not fit the fixed layout (the message names the limit)."""


@dataclass(frozen=True)
class Segment:
    name: str
    offset: int
    rows: int
    width: int

    @property
    def size(self) -> int:
        return self.rows * self.width

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)


@dataclass(frozen=True)
class ObsLayout:
    """Offsets of the observation's segments; see the module docstring."""

    segments: tuple[Segment, ...]

    @classmethod
    def of(cls, *shapes: tuple[str, int, int]) -> ObsLayout:
        segments, offset = [], 0
        for name, rows, width in shapes:
            segments.append(Segment(name, offset, rows, width))
            offset += rows * width
        return cls(tuple(segments))

    @property
    def dim(self) -> int:
        last = self.segments[-1]
        return last.offset + last.size

    def __getitem__(self, name: str) -> Segment:
        for segment in self.segments:
            if segment.name == name:
                return segment
        raise KeyError(f"no segment '{name}' (have: {', '.join(s.name for s in self.segments)})")

    def view(self, obs: Any, name: str) -> Any:
        """``obs[..., segment]`` reshaped to ``(..., rows, width)``; works for NumPy and torch."""
        seg = self[name]
        part = obs[..., seg.slice]
        return part.reshape(*part.shape[:-1], seg.rows, seg.width)


LAYOUT = ObsLayout.of(
    ("question_pieces", Q_WORDS, WORD_PIECES),
    ("table_pieces", MAX_TABLES, TABLE_PIECES),
    ("column_pieces", COLUMN_SLOTS, TABLE_PIECES + COLUMN_PIECES),
    ("question_features", Q_WORDS, QUESTION_FEATURES),
    ("question_links", Q_WORDS, 3),
    ("table_features", MAX_TABLES, TABLE_FEATURES),
    ("column_features", COLUMN_SLOTS, COLUMN_FEATURES),
    ("global_features", 1, GLOBAL_FEATURES),
)
OBS_DIM = LAYOUT.dim
PIECE_SEGMENTS = ("question_pieces", "table_pieces", "column_pieces")


def observation_high() -> np.ndarray:
    """Upper bounds per entry: the largest piece id, the largest bit set, or 1 for features."""
    high = np.ones(OBS_DIM, dtype=np.float32)
    for name in PIECE_SEGMENTS:
        high[LAYOUT[name].slice] = PIECE_VOCAB_SIZE - 1
    links = LAYOUT.view(high, "question_links")
    links[:, 0] = 2**NAME_LINK_BITS - 1
    links[:, 1] = 2**COLUMN_SLOTS - 1
    links[:, 2] = 2**COLUMN_SLOTS - 1
    return high


def check_fits(schema: Schema) -> None:
    """Raises :class:`LimitError` if ``schema`` has more tables or columns than the layout holds."""
    if len(schema.tables) > MAX_TABLES:
        raise LimitError(
            f"{len(schema.tables)} tables: the action space holds at most {MAX_TABLES} tables "
            f"({', '.join(t.name for t in schema.tables)})"
        )
    if len(schema.columns) > MAX_COLUMNS:
        raise LimitError(
            f"{len(schema.columns)} columns: the action space holds at most {MAX_COLUMNS} columns "
            "over all tables"
        )


def check_question(words: Sequence[str]) -> None:
    if not words:
        raise LimitError("the question has no words")
    if len(words) > Q_WORDS:
        raise LimitError(f"the question has {len(words)} words: the layout holds at most {Q_WORDS}")


def encode_observation(words: Sequence[str], schema: Schema, values: ValueIndex) -> np.ndarray:
    """The observation vector for a question of ``words`` over ``schema`` with stored ``values``."""
    check_fits(schema)
    check_question(words)
    obs = np.zeros(OBS_DIM, dtype=np.float32)
    normal = [normal_form(w) for w in words]
    column_names = [{normal_form(w) for w in c.words} for _, c in schema.columns]
    table_names = [{normal_form(w) for w in t.words} for t in schema.tables]
    schema_words = set().union(*column_names, *table_names)
    value_links = values.links(words)
    range_links = values.range_links(words)
    fk = schema.foreign_key

    def put(name: str, row: int, entries: list[float]) -> None:
        seg = LAYOUT[name]
        start = seg.offset + row * seg.width
        obs[start : start + len(entries)] = entries

    for i, word in enumerate(words):
        put("question_pieces", i, [float(p) for p in pieces_of([word], WORD_PIECES)])
        linked = value_links[i]
        starts = bool(linked) and (i == 0 or not (linked & value_links[i - 1]))
        put(
            "question_features",
            i,
            [
                1.0,
                float(is_number(word)),
                float(i > 0 and word[0].isupper()),
                float(normal[i] in schema_words),
                float(bool(linked)),
                float(starts),
            ],
        )
        name_bits = sum(1 << s for s, names in enumerate(column_names, start=1) if normal[i] in names)
        name_bits += sum(1 << (COLUMN_SLOTS + j) for j, names in enumerate(table_names) if normal[i] in names)
        in_range = float(sum(1 << s for s in range_links[i]))
        put("question_links", i, [float(name_bits), float(sum(1 << s for s in linked)), in_range])
    mentioned = set(normal)
    for j, table in enumerate(schema.tables):
        put("table_pieces", j, [float(p) for p in pieces_of(list(table.words), TABLE_PIECES)])
        named = bool(mentioned & table_names[j])
        put("table_features", j, [1.0, float(fk is not None and fk.child == table.name), float(named)])
    put("column_features", 0, [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    valued = set().union(*value_links) if value_links else set()
    for slot, (table, column) in enumerate(schema.columns, start=1):
        pieces = pieces_of(list(table.words), TABLE_PIECES) + pieces_of(list(column.words), COLUMN_PIECES)
        put("column_pieces", slot, [float(p) for p in pieces])
        is_fk = fk is not None and fk.child == table.name and fk.column == column.name
        put(
            "column_features",
            slot,
            [
                1.0,
                0.0,
                float(not column.numeric),
                float(column.numeric),
                float(column.role == "key"),
                float(is_fk or column.role == "fk"),
                float(schema.table_index(table.name)),
                float(bool(mentioned & column_names[slot - 1])),
                float(slot in valued),
            ],
        )
    put("global_features", 0, [float(fk is not None), len(words) / Q_WORDS])
    return obs
