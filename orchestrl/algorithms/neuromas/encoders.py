"""What an agent node perceives: its observation as a set of encoded rows.

An encoder turns one agent's flat observation into ``tokens`` (B, T, dim) plus a padding mask. A
node attends over its agents' tokens, and a *pointer* action component scores a range of them
(one row per choice), so the same weights act on schemas they have never seen. ``blind(obs)`` gives
the same rows with no content (a learned vector per row and the padding mask): the pointer keys of a
node that does not read its observation (``observe: inputs``), which knows *which* rows exist and
where they sit but not what they say, so what it points at comes from its messages alone. The row
places (question position, table or column slot) are the same learned codes every encoded row
carries, so a message can name a place in the one coordinate system both sides share.

- :class:`MlpEncoder`: any flat ``Box`` observation (MPE, the orchestration env): one token.
- :class:`Text2SQLEncoder`: the Text2SQL layout (:mod:`orchestrl.envs.text2sql.observation`):
  question words, table and column rows, encoded by a small relation-aware transformer in the
  spirit of RAT-SQL (Wang et al. 2020): attention gets a learned bias per head for each
  schema-linking relation (a question word names a column, a table, a column's table, or a value
  stored in a column, as BRIDGE links values; a number lies in a numeric column's stored range; a
  column belongs to a table; two question words are neighbours), read from the observation's link
  bits.

A word is read through all-MiniLM-L6-v2's pretrained WordPiece vectors (:mod:`orchestrl.envs.
text2sql.word_vectors`), frozen, through a learned projection: the mean of its pieces' static
vectors, or (``contextual``) the frozen model's state of the word in the context of its question,
cached per question. Without ``word_vectors`` each piece gets a learned embedding instead (the
ablation: no pretrained meaning). Behaviour cloning drops whole words to zero at random
(``token_dropout``) so the policy learns to read around a word it cannot place.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from orchestrl.envs.text2sql import actions as t2s_actions
from orchestrl.envs.text2sql import observation as t2s_obs
from orchestrl.envs.text2sql.tokenizer import PIECE_VOCAB_SIZE
from orchestrl.envs.text2sql.word_vectors import DIM as PRETRAINED_DIM
from orchestrl.envs.text2sql.word_vectors import ContextualStates, piece_vectors


@dataclass(frozen=True)
class Encoded:
    tokens: torch.Tensor
    """(B, T, dim) encoded rows."""
    pad: torch.Tensor
    """(B, T) True where a row is absent."""
    places: torch.Tensor | None = None
    """(B, T, dim) where each row sits, with no content (the blind rows), if the layout has places."""
    relations: torch.Tensor | None = None
    """(B, T, T) the relation id between two rows (0: none), for an encoder that reads relations
    and a node that reads its rows (blind rows have none)."""


class MlpEncoder(nn.Module):
    """A flat observation -> one token (no pointer rows)."""

    relation_kinds = 0

    def __init__(self, obs_dim: int, dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, dim))

    def forward(self, obs: torch.Tensor, token_dropout: float = 0.0) -> Encoded:
        tokens = self.net(obs.float())[:, None, :]
        return Encoded(tokens, torch.zeros(tokens.shape[:2], dtype=torch.bool, device=obs.device))

    def blind(self, obs: torch.Tensor) -> Encoded:
        tokens = torch.zeros(obs.shape[0], 1, self.net[-1].out_features, device=obs.device)
        return Encoded(tokens, torch.zeros(tokens.shape[:2], dtype=torch.bool, device=obs.device))

    def pointer_rows(self, agent: str, n_components: int) -> list[slice | None]:
        return [None] * n_components


# -- Text2SQL ----------------------------------------------------------------------------------
Q, NT, NC = t2s_obs.Q_WORDS, t2s_obs.MAX_TABLES, t2s_obs.COLUMN_SLOTS
T = Q + NT + NC
QUESTION_ROWS = slice(0, Q)
TABLE_ROWS = slice(Q, Q + NT)
COLUMN_ROWS = slice(Q + NT, T)
POINTS_AT = {
    "table": TABLE_ROWS,
    "select": COLUMN_ROWS,
    "where": COLUMN_ROWS,
    "group_by": COLUMN_ROWS,
    "order_by": COLUMN_ROWS,
    "value_start": QUESTION_ROWS,
}
"""Action components that are pointers, and the rows they point at (see ``actions.py``)."""

# Relations between the T rows (symmetric); 0 = none. A later one overrides an earlier one.
(
    REL_NEIGHBOUR,
    REL_TABLE_OF_COLUMN_NAMED,
    REL_COLUMN_NAMED,
    REL_TABLE_NAMED,
    REL_VALUE_OF_COLUMN,
    REL_COLUMN_OF_TABLE,
    REL_NUMBER_IN_RANGE,
) = range(1, 8)
N_RELATIONS = 8


class RelationBlock(nn.Module):
    """Pre-LN transformer block whose attention logits get a learned bias per (relation, head)."""

    def __init__(self, dim: int, heads: int, ff: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.rel_bias = nn.Embedding(N_RELATIONS, heads)
        nn.init.zeros_(self.rel_bias.weight)
        self.ff = nn.Sequential(nn.Linear(dim, ff), nn.GELU(), nn.Linear(ff, dim))

    def forward(self, x: torch.Tensor, relations: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        bias = self.rel_bias(relations).permute(0, 3, 1, 2)  # (B, H, T, T)
        bias = bias.masked_fill(pad[:, None, None, :], -1e9)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(attended)
        return x + self.ff(self.norm2(x))


def _bits(links: torch.Tensor, n: int) -> torch.Tensor:
    """(..., ) integer bit sets stored as floats -> (..., n) booleans."""
    return ((links.round().long()[..., None] >> torch.arange(n, device=links.device)) & 1).bool()


class Text2SQLEncoder(nn.Module):
    """Question, table and column rows -> contextual row encodings (B, Q + NT + NC, dim)."""

    relation_kinds = N_RELATIONS

    def __init__(
        self, dim: int, heads: int = 4, layers: int = 2, word_vectors: bool = True, contextual: bool = False
    ) -> None:
        super().__init__()
        self.word_vectors, self.contextual = word_vectors, contextual
        if word_vectors:
            # Frozen and not part of the state: every encoder in the process shares the one table,
            # rebuilt from the pinned model, so weight syncs and checkpoints stay small.
            self.register_buffer("pretrained", piece_vectors(), persistent=False)
            self.piece_proj = nn.Linear(PRETRAINED_DIM, dim, bias=False)
        else:
            self.piece_embed = nn.Embedding(PIECE_VOCAB_SIZE, dim, padding_idx=0)
            nn.init.normal_(self.piece_embed.weight, std=0.1)
        if contextual:
            if not word_vectors:
                raise ValueError("contextual token states need word_vectors (the pretrained model)")
            self.context = ContextualStates()
            self.context_proj = nn.Linear(PRETRAINED_DIM, dim, bias=False)
        self.position = nn.Parameter(torch.randn(Q, dim) * 0.02)
        self.segment = nn.Parameter(torch.randn(3, dim) * 0.02)
        self.question_features = nn.Linear(t2s_obs.QUESTION_FEATURES + 4, dim)
        self.table_features = nn.Linear(t2s_obs.TABLE_FEATURES, dim)
        self.column_features = nn.Linear(t2s_obs.COLUMN_FEATURES, dim)
        self.column_table_words = nn.Linear(dim, dim, bias=False)
        self.global_features = nn.Linear(t2s_obs.GLOBAL_FEATURES, dim)
        self.slot_codes = nn.Parameter(torch.randn(NT + NC, dim) * 0.02)
        self.blocks = nn.ModuleList(RelationBlock(dim, heads, 2 * dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def pointer_rows(self, agent: str, n_components: int) -> list[slice | None]:
        names = t2s_actions.COMPONENTS[agent]
        if len(names) != n_components:
            raise ValueError(
                f"{agent} has {n_components} action components, the text2sql layout {len(names)}"
            )
        return [POINTS_AT.get(name) for name in names]

    def _words(self, pieces: torch.Tensor, token_dropout: float) -> torch.Tensor:
        """(B, R, P) piece ids -> (B, R, dim): each row's pieces, averaged (zero for no pieces)."""
        ids = pieces.round().long()
        flat = ids.reshape(-1, ids.shape[-1])
        table = self.pretrained if self.word_vectors else self.piece_embed.weight
        words = F.embedding_bag(flat, table, mode="mean", padding_idx=0).view(*ids.shape[:-1], -1)
        if self.word_vectors:
            words = self.piece_proj(words)  # linear: projecting the mean = the mean of the projections
        return self._dropout(words, token_dropout)

    @staticmethod
    def _dropout(words: torch.Tensor, token_dropout: float) -> torch.Tensor:
        if token_dropout <= 0:
            return words
        keep = torch.rand(words.shape[:-1], device=words.device) >= token_dropout
        return words * keep[..., None]

    def _pad(self, obs: torch.Tensor) -> torch.Tensor:
        view = t2s_obs.LAYOUT.view
        present = [
            view(obs, name)[..., 0] for name in ("question_features", "table_features", "column_features")
        ]
        return torch.cat(present, 1) < 0.5

    def _places(self) -> torch.Tensor:
        """(T, dim) where each row sits: question position, table or column slot, and segment. Added
        to every encoded row, and all a blind row holds, so a place a message describes can be
        matched by a node that does not read the rows."""
        return torch.cat(
            [
                self.position + self.segment[0],
                self.slot_codes[:NT] + self.segment[1],
                self.slot_codes[NT:] + self.segment[2],
            ]
        )

    def blind(self, obs: torch.Tensor) -> Encoded:
        """Rows without content: which rows exist and where, not what they say (see the module
        docstring)."""
        obs = obs.float()
        places = self._places().expand(obs.shape[0], -1, -1)
        return Encoded(places, self._pad(obs), places)

    def forward(self, obs: torch.Tensor, token_dropout: float = 0.0) -> Encoded:
        obs = obs.float()
        view = t2s_obs.LAYOUT.view
        q_pieces = view(obs, "question_pieces")  # (B, Q, P)
        c_pieces = view(obs, "column_pieces")  # (B, NC, table pieces + column pieces)
        q_feat, t_feat = view(obs, "question_features"), view(obs, "table_features")
        c_feat, g_feat = view(obs, "column_features"), view(obs, "global_features")[:, 0]
        links = view(obs, "question_links")
        name_links = _bits(links[..., 0], t2s_obs.NAME_LINK_BITS)
        col_named, table_named = name_links[..., :NC], name_links[..., NC:]  # (B, Q, NC), (B, Q, NT)
        value_of = _bits(links[..., 1], NC)  # (B, Q, NC)
        in_range = _bits(links[..., 2], NC)  # (B, Q, NC)
        table_slot = c_feat[..., 6].round().long()  # (B, NC)
        col_present = c_feat[..., 0] > 0.5
        of_table = (table_slot[:, :, None] == torch.arange(NT, device=obs.device)) & col_present[:, :, None]
        col_table_named = torch.einsum("bqt,bct->bqc", table_named.float(), of_table.float()) > 0

        if self.contextual:
            words = self._dropout(self.context_proj(self.context.question_states(q_pieces)), token_dropout)
        else:
            words = self._words(q_pieces, token_dropout)
        q_links = torch.stack(
            [col_named.any(-1), table_named.any(-1), value_of.any(-1), in_range.any(-1)], -1
        ).float()
        x_q = words + self.question_features(torch.cat([q_feat, q_links], -1))
        x_t = self._words(view(obs, "table_pieces"), token_dropout) + self.table_features(t_feat)
        tp = t2s_obs.TABLE_PIECES
        x_c = (
            self._words(c_pieces[..., tp:], token_dropout)
            + self.column_table_words(self._words(c_pieces[..., :tp], token_dropout))
            + self.column_features(c_feat)
        )
        x = torch.cat([x_q, x_t, x_c], 1) + self._places() + self.global_features(g_feat)[:, None]
        pad = self._pad(obs)
        relations = self._relations(
            q_feat, col_named, table_named, col_table_named, value_of, in_range, of_table
        )
        for block in self.blocks:
            x = block(x, relations, pad)
        return Encoded(self.norm(x), pad, self._places().expand(obs.shape[0], -1, -1), relations)

    @staticmethod
    def _relations(
        q_feat: torch.Tensor,
        col_named: torch.Tensor,
        table_named: torch.Tensor,
        col_table_named: torch.Tensor,
        value_of: torch.Tensor,
        in_range: torch.Tensor,
        of_table: torch.Tensor,
    ) -> torch.Tensor:
        """(B, T, T) relation ids, symmetric; a later relation overrides an earlier one."""
        b = q_feat.shape[0]
        rel = torch.zeros(b, T, T, dtype=torch.long, device=q_feat.device)

        def put(rows: slice, cols: slice, mask: torch.Tensor, value: int) -> None:
            rel[:, rows, cols][mask] = value
            rel[:, cols, rows][mask.transpose(1, 2)] = value

        idx = torch.arange(Q, device=rel.device)
        present_q = q_feat[..., 0] > 0.5
        adjacent = ((idx[:, None] - idx[None, :]).abs() == 1) & present_q[:, :, None] & present_q[:, None, :]
        put(QUESTION_ROWS, QUESTION_ROWS, adjacent, REL_NEIGHBOUR)
        put(QUESTION_ROWS, COLUMN_ROWS, col_table_named, REL_TABLE_OF_COLUMN_NAMED)
        put(QUESTION_ROWS, COLUMN_ROWS, col_named, REL_COLUMN_NAMED)
        put(QUESTION_ROWS, TABLE_ROWS, table_named, REL_TABLE_NAMED)
        put(QUESTION_ROWS, COLUMN_ROWS, value_of, REL_VALUE_OF_COLUMN)
        put(QUESTION_ROWS, COLUMN_ROWS, in_range, REL_NUMBER_IN_RANGE)
        put(COLUMN_ROWS, TABLE_ROWS, of_table, REL_COLUMN_OF_TABLE)
        return rel


def make_encoder(
    kind: str,
    obs_dim: int,
    dim: int,
    heads: int,
    text_layers: int,
    word_vectors: bool = True,
    contextual: bool = False,
) -> nn.Module:
    if kind == "mlp":
        return MlpEncoder(obs_dim, dim)
    if kind == "text2sql":
        if obs_dim != t2s_obs.OBS_DIM:
            raise ValueError(f"the text2sql encoder reads {t2s_obs.OBS_DIM} values, the env gives {obs_dim}")
        return Text2SQLEncoder(dim, heads, text_layers, word_vectors, contextual)
    raise ValueError(f"unknown encoder '{kind}'")
