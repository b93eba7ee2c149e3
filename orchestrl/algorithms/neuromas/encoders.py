"""What an agent node perceives: its observation as a set of encoded rows.

An encoder turns one agent's flat observation into ``tokens`` (B, T, dim) plus a padding mask. A
node attends over its agents' tokens, and a *pointer* action component scores a range of them
(one row per choice), so the same weights act on schemas they have never seen.

- :class:`MlpEncoder`: any flat ``Box`` observation (MPE, the orchestration env): one token.
- :class:`Text2SQLEncoder`: the Text2SQL layout (:mod:`orchestrl.envs.text2sql.observation`):
  question tokens, table and column rows, encoded by a small relation-aware transformer in the
  spirit of RAT-SQL (Wang et al. 2020): attention gets a learned bias per head for each
  schema-linking relation (a question word equals a column's or table's name word, a column
  belongs to a table, two question words are neighbours), computed from the token ids.

Words the model never trained on must not steer it: token embeddings start at zero, so an unseen
word (a held-out phrasing, a new schema's name) is a neutral "unknown" token, and behaviour cloning
drops known words to zero at random (``token_dropout``) so the policy learns to read around them.
With ``word_vectors`` (the directory their table is cached in) each token also carries a learned
projection of its frozen pretrained vector (:mod:`orchestrl.envs.text2sql.word_vectors`), which
dropout never touches: a word whose learned embedding is missing (dropped in training, never seen
at test time) is read by its meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from orchestrl.envs.text2sql import actions as t2s_actions
from orchestrl.envs.text2sql import observation as t2s_obs
from orchestrl.envs.text2sql.word_vectors import vocabulary_vectors


@dataclass(frozen=True)
class Encoded:
    tokens: torch.Tensor
    """(B, T, dim) encoded rows."""
    pad: torch.Tensor
    """(B, T) True where a row is absent."""


class MlpEncoder(nn.Module):
    """A flat observation -> one token (no pointer rows)."""

    def __init__(self, obs_dim: int, dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, dim))

    def forward(self, obs: torch.Tensor, token_dropout: float = 0.0) -> Encoded:
        tokens = self.net(obs.float())[:, None, :]
        return Encoded(tokens, torch.zeros(tokens.shape[:2], dtype=torch.bool, device=obs.device))

    def pointer_rows(self, agent: str, n_components: int) -> list[slice | None]:
        return [None] * n_components


# -- Text2SQL ----------------------------------------------------------------------------------
Q, NT, NC = t2s_obs.Q_LEN, t2s_obs.MAX_TABLES, t2s_obs.COLUMN_SLOTS
QUESTION_ROWS = slice(0, Q)
TABLE_ROWS = slice(Q, Q + NT)
COLUMN_ROWS = slice(Q + NT, Q + NT + NC)
POINTS_AT = {
    "table": TABLE_ROWS,
    "select": COLUMN_ROWS,
    "where": COLUMN_ROWS,
    "group_by": COLUMN_ROWS,
    "order_by": COLUMN_ROWS,
    "value_start": QUESTION_ROWS,
}
"""Action components that are pointers, and the rows they point at (see ``actions.py``)."""

# Relations between the T = Q + NT + NC rows (symmetric); 0 = none.
REL_COLUMN_NAMED, REL_TABLE_NAMED, REL_COLUMN_OF_TABLE, REL_NEIGHBOUR, REL_TABLE_OF_COLUMN_NAMED = (
    1,
    2,
    3,
    4,
    5,
)
N_RELATIONS = 6


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


class Text2SQLEncoder(nn.Module):
    """Question, table and column rows -> contextual row encodings (B, Q + NT + NC, dim)."""

    def __init__(self, dim: int, heads: int = 4, layers: int = 2, word_vectors: str | None = None) -> None:
        super().__init__()
        self.embed = nn.Embedding(t2s_obs.VOCAB_SIZE, dim, padding_idx=0)
        nn.init.zeros_(self.embed.weight)  # unseen words stay at 0: a neutral "unknown"
        self.word_vectors = word_vectors is not None
        if word_vectors is not None:
            table = torch.as_tensor(vocabulary_vectors(word_vectors))
            # Not part of the state: rebuilt from the pinned model, so weight syncs stay small.
            self.register_buffer("pretrained", table, persistent=False)
            self.pretrained_proj = nn.Linear(table.shape[1], dim, bias=False)
        self.position = nn.Parameter(torch.randn(Q, dim) * 0.02)
        self.segment = nn.Parameter(torch.randn(3, dim) * 0.02)
        self.question_features = nn.Linear(t2s_obs.QUESTION_FEATURES + 2, dim)
        self.table_features = nn.Linear(t2s_obs.TABLE_FEATURES, dim)
        self.column_features = nn.Linear(t2s_obs.COLUMN_FEATURES, dim)
        self.column_table_words = nn.Linear(dim, dim, bias=False)
        self.global_features = nn.Linear(t2s_obs.GLOBAL_FEATURES, dim)
        self.blocks = nn.ModuleList(RelationBlock(dim, heads, 2 * dim) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def pointer_rows(self, agent: str, n_components: int) -> list[slice | None]:
        names = t2s_actions.COMPONENTS[agent]
        if len(names) != n_components:
            raise ValueError(
                f"{agent} has {n_components} action components, the text2sql layout {len(names)}"
            )
        return [POINTS_AT.get(name) for name in names]

    def _ids(self, obs: torch.Tensor, name: str) -> torch.Tensor:
        return t2s_obs.LAYOUT.view(obs, name).round().long()

    def _embed(self, ids: torch.Tensor, token_dropout: float) -> torch.Tensor:
        emb = self.embed(ids)
        if token_dropout > 0:
            keep = torch.rand(ids.shape, device=ids.device) >= token_dropout
            emb = emb * keep[..., None]
        if self.word_vectors:
            emb = emb + self.pretrained_proj(self.pretrained[ids])
        return emb

    def forward(self, obs: torch.Tensor, token_dropout: float = 0.0) -> Encoded:
        obs = obs.float()
        view = t2s_obs.LAYOUT.view
        q_ids = self._ids(obs, "question_ids")[..., 0]  # (B, Q)
        t_ids = self._ids(obs, "table_ids")  # (B, NT, 2)
        c_ids = self._ids(obs, "column_ids")  # (B, NC, 6): table words, name words, type
        q_feat, t_feat = view(obs, "question_features"), view(obs, "table_features")
        c_feat, g_feat = view(obs, "column_features"), view(obs, "global_features")[:, 0]
        tw = t2s_obs.TABLE_TOKENS

        # Schema linking by exact word match (pad id 0 never matches).
        def named(words: torch.Tensor) -> torch.Tensor:  # (B, R, W) -> (B, Q, R)
            eq = (q_ids[:, :, None, None] == words[:, None, :, :]) & (words[:, None, :, :] > 0)
            return eq.any(-1)

        col_named = named(c_ids[..., tw : tw + t2s_obs.COLUMN_NAME_TOKENS])
        col_table_named = named(c_ids[..., :tw])
        table_named = named(t_ids)

        q_links = torch.stack([col_named.any(-1), table_named.any(-1)], -1).float()
        x_q = (
            self._embed(q_ids, token_dropout)
            + self.position
            + self.question_features(torch.cat([q_feat, q_links], -1))
            + self.segment[0]
        )
        x_t = self._mean_embed(t_ids, token_dropout) + self.table_features(t_feat) + self.segment[1]
        x_c = (
            self._mean_embed(c_ids[..., tw:], token_dropout)
            + self.column_table_words(self._mean_embed(c_ids[..., :tw], token_dropout))
            + self.column_features(c_feat)
            + self.segment[2]
        )
        x = torch.cat([x_q, x_t, x_c], 1) + self.global_features(g_feat)[:, None]
        pad = torch.cat([q_feat[..., 0], t_feat[..., 0], c_feat[..., 0]], 1) < 0.5
        relations = self._relations(col_named, table_named, col_table_named, c_feat, q_feat)
        for block in self.blocks:
            x = block(x, relations, pad)
        return Encoded(self.norm(x), pad)

    def _mean_embed(self, ids: torch.Tensor, token_dropout: float) -> torch.Tensor:
        present = (ids > 0).float()
        total = (self._embed(ids, token_dropout) * present[..., None]).sum(-2)
        return total / present.sum(-1, keepdim=True).clamp(min=1.0)

    @staticmethod
    def _relations(
        col_named: torch.Tensor,
        table_named: torch.Tensor,
        col_table_named: torch.Tensor,
        c_feat: torch.Tensor,
        q_feat: torch.Tensor,
    ) -> torch.Tensor:
        """(B, T, T) relation ids, symmetric; a later relation overrides an earlier one."""
        b = col_named.shape[0]
        t = Q + NT + NC
        rel = torch.zeros(b, t, t, dtype=torch.long, device=col_named.device)

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
        table_slot = c_feat[..., 4].round().long()  # (B, NC)
        present = c_feat[..., 0] > 0.5
        of_table = (table_slot[:, :, None] == torch.arange(NT, device=rel.device)) & present[:, :, None]
        put(COLUMN_ROWS, TABLE_ROWS, of_table, REL_COLUMN_OF_TABLE)
        return rel


def make_encoder(
    kind: str, obs_dim: int, dim: int, heads: int, text_layers: int, word_vectors: str | None = None
) -> nn.Module:
    if kind == "mlp":
        return MlpEncoder(obs_dim, dim)
    if kind == "text2sql":
        if obs_dim != t2s_obs.OBS_DIM:
            raise ValueError(f"the text2sql encoder reads {t2s_obs.OBS_DIM} values, the env gives {obs_dim}")
        return Text2SQLEncoder(dim, heads, text_layers, word_vectors)
    raise ValueError(f"unknown encoder '{kind}'")
