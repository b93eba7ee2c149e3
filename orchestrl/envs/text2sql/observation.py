"""The flat observation vector and its layout: what a text encoder in the policy reads.

Both agents receive the same vector of :data:`OBS_DIM` float32 values, the concatenation of the
segments below (``rows x width`` each, row-major). Token ids are integers stored as floats; ``0``
is padding (:data:`.tokenizer.PAD_ID`); ids are below :data:`VOCAB_SIZE`.

Segments, in order (offset, rows x width, content):

- ``question_ids`` (0, ``Q_LEN x 1`` = 32 x 1): question tokens; position i is what the composer's
  ``value_start = i`` points at.
- ``table_ids`` (32, ``MAX_TABLES x TABLE_TOKENS`` = 2 x 2): each table's name words (table slot j).
- ``column_ids`` (36, ``COLUMN_SLOTS x COLUMN_TOKENS`` = 15 x 6): per column slot, its table's name
  words (2), its own name words (3) and a type token (``<text>``/``<integer>``/``<real>``);
  slot 0 is ``<star>`` (``*`` for ``select``, "none" for ``where``/``group_by``).
- ``question_features`` (126, ``Q_LEN x 4``): present, is a number, capitalised and not the first
  token (values are proper nouns), equals a word of this schema's names.
- ``table_features`` (254, ``MAX_TABLES x 3``): present, holds the foreign key, named in the question.
- ``column_features`` (260, ``COLUMN_SLOTS x 6``): present, text, numeric, key or foreign key,
  table slot (0/1), one of its name words is in the question.
- ``global_features`` (350, ``1 x 2``): the schema has a foreign key, question length / ``Q_LEN``.

``OBS_DIM`` = 352. Absent rows (a second table in a one-table schema, unused column slots,
positions past the question) are all zeros.

Rows line up with action components: row j of ``table_*`` is table choice j, row s of ``column_*``
is column slot s, row i of ``question_*`` is value position i, so a pointer-style policy scores each
row and masks with the matching slice of the action mask. :data:`LAYOUT` gives every segment's
offset; ``LAYOUT.view(obs, name)`` slices and reshapes a (batch of) observation(s), NumPy or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from orchestrl.envs.text2sql.questions import Question, template_texts
from orchestrl.envs.text2sql.schemas import SCHEMAS, Schema
from orchestrl.envs.text2sql.tokenizer import Vocabulary, identifier_words, is_number

Q_LEN = 32
"""Question tokens kept (longer questions are refused when the bank is built)."""
MAX_TABLES = 2
TABLE_TOKENS = 2
COLUMN_NAME_TOKENS = 3
COLUMN_TOKENS = TABLE_TOKENS + COLUMN_NAME_TOKENS + 1
MAX_COLUMNS = 14
COLUMN_SLOTS = 1 + MAX_COLUMNS
"""Slot 0 is ``*``; slots 1..MAX_COLUMNS are the schema's columns in schema order."""
QUESTION_FEATURES = 4
TABLE_FEATURES = 3
COLUMN_FEATURES = 6
GLOBAL_FEATURES = 2


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
    ("question_ids", Q_LEN, 1),
    ("table_ids", MAX_TABLES, TABLE_TOKENS),
    ("column_ids", COLUMN_SLOTS, COLUMN_TOKENS),
    ("question_features", Q_LEN, QUESTION_FEATURES),
    ("table_features", MAX_TABLES, TABLE_FEATURES),
    ("column_features", COLUMN_SLOTS, COLUMN_FEATURES),
    ("global_features", 1, GLOBAL_FEATURES),
)
OBS_DIM = LAYOUT.dim
QUESTION_IDS = LAYOUT["question_ids"]
TABLE_IDS = LAYOUT["table_ids"]
COLUMN_IDS = LAYOUT["column_ids"]
QUESTION_FEATURE_ROWS = LAYOUT["question_features"]
TABLE_FEATURE_ROWS = LAYOUT["table_features"]
COLUMN_FEATURE_ROWS = LAYOUT["column_features"]
GLOBAL_FEATURE_ROW = LAYOUT["global_features"]
"""Each segment's ``offset``/``rows``/``width``/``slice`` as a module constant."""


def schema_texts() -> list[str]:
    """Every table and column name of every schema, as words."""
    texts = []
    for schema in SCHEMAS.values():
        for table in schema.tables:
            texts.append(" ".join(identifier_words(table.name)))
            texts.extend(" ".join(identifier_words(c.name)) for c in table.columns)
    return texts


VOCAB = Vocabulary.from_texts([*template_texts(), *schema_texts()])
"""Built from every phrasing (seen and held out) and every schema, so it is the same in every split."""
VOCAB_SIZE = VOCAB.size

_TYPE_TOKEN = {"TEXT": "<text>", "INTEGER": "<integer>", "REAL": "<real>"}


def observation_high() -> np.ndarray:
    """Upper bounds per entry: ``VOCAB_SIZE - 1`` for ids, 1 for features."""
    high = np.ones(OBS_DIM, dtype=np.float32)
    for name in ("question_ids", "table_ids", "column_ids"):
        high[LAYOUT[name].slice] = VOCAB_SIZE - 1
    return high


def check_fits(schema: Schema) -> None:
    """Raises if ``schema`` does not fit the fixed layout."""
    if len(schema.tables) > MAX_TABLES or len(schema.columns) > MAX_COLUMNS:
        raise ValueError(f"schema '{schema.name}' exceeds {MAX_TABLES} tables / {MAX_COLUMNS} columns")
    for table, column in schema.columns:
        if len(table.words) > TABLE_TOKENS or len(column.words) > COLUMN_NAME_TOKENS:
            raise ValueError(f"{table.name}.{column.name} has more words than the layout holds")


def encode_observation(question: Question, schema: Schema, vocab: Vocabulary = VOCAB) -> np.ndarray:
    """The observation vector for ``question`` over ``schema``."""
    check_fits(schema)
    if len(question.tokens) > Q_LEN:
        raise ValueError(f"{question.qid} has {len(question.tokens)} tokens (limit {Q_LEN})")
    obs = np.zeros(OBS_DIM, dtype=np.float32)
    words = {w.lower() for w in question.tokens}
    schema_words = {w for t, c in schema.columns for w in (*t.words, *c.words)}
    fk = schema.foreign_key

    def put(name: str, row: int, values: list[float]) -> None:
        seg = LAYOUT[name]
        start = seg.offset + row * seg.width
        obs[start : start + len(values)] = values

    put("question_ids", 0, [float(i) for i in vocab.encode(question.tokens, Q_LEN)])
    for i, token in enumerate(question.tokens):
        put(
            "question_features",
            i,
            [
                1.0,
                float(is_number(token)),
                float(i > 0 and token[0].isupper()),
                float(token.lower() in schema_words),
            ],
        )
    for j, table in enumerate(schema.tables):
        put("table_ids", j, [float(i) for i in vocab.encode(list(table.words), TABLE_TOKENS)])
        named = bool(words & {*table.words, *table.plural.split(), *table.singular.split()})
        put("table_features", j, [1.0, float(fk is not None and fk.child == table.name), float(named)])
    put("column_ids", 0, [float(vocab.token_id("<star>"))])
    put("column_features", 0, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    for slot, (table, column) in enumerate(schema.columns, start=1):
        ids = [
            *vocab.encode(list(table.words), TABLE_TOKENS),
            *vocab.encode(list(column.words), COLUMN_NAME_TOKENS),
            vocab.token_id(_TYPE_TOKEN[column.sql_type]),
        ]
        put("column_ids", slot, [float(i) for i in ids])
        put(
            "column_features",
            slot,
            [
                1.0,
                float(not column.numeric),
                float(column.numeric),
                float(column.role in ("key", "fk")),
                float(schema.table_index(table.name)),
                float(bool(words & set(column.words))),
            ],
        )
    put("global_features", 0, [float(fk is not None), len(question.tokens) / Q_LEN])
    return obs
