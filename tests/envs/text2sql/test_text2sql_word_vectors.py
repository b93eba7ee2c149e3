"""Every word piece has a pretrained vector, and contextual states read a word in its question."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from orchestrl.envs.text2sql import word_vectors
from orchestrl.envs.text2sql.observation import WORD_PIECES
from orchestrl.envs.text2sql.tokenizer import PIECE_VOCAB_SIZE, pieces_of, split_words, word_pieces


def word_vector(word: str) -> torch.Tensor:
    table = word_vectors.piece_vectors()
    vector = table[list(word_pieces(word))].mean(0)
    return vector / vector.norm()


def test_the_table_holds_a_vector_for_every_piece_and_is_shared() -> None:
    table = word_vectors.piece_vectors()
    assert table.shape == (PIECE_VOCAB_SIZE, word_vectors.DIM) and table.dtype == torch.float32
    assert not table.requires_grad
    assert (table.norm(dim=1) > 0).all()  # no zero rows: no word is left without meaning
    assert word_vectors.piece_vectors() is table  # one tensor per process, whatever reads it


@pytest.mark.parametrize(
    ("word", "near", "far"),
    [("largest", "highest", "lowest"), ("smallest", "lowest", "highest"), ("flights", "flight", "price")],
)
def test_static_vectors_carry_meaning(word: str, near: str, far: str) -> None:
    assert float(word_vector(word) @ word_vector(near)) > float(word_vector(word) @ word_vector(far)) + 0.1


def _pieces(*questions: str) -> torch.Tensor:
    out = np.zeros((len(questions), 12, WORD_PIECES), dtype=np.int64)
    for i, q in enumerate(questions):
        for j, w in enumerate(split_words(q)):
            out[i, j] = pieces_of([w], WORD_PIECES)
    return torch.as_tensor(out)


def test_contextual_states_read_a_word_in_its_question_and_are_cached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states = word_vectors.ContextualStates()
    pieces = _pieces("the river bank flooded", "the bank raised its rates")
    out = states.question_states(pieces)
    assert out.shape == (2, 12, word_vectors.DIM)
    assert not out[0, 4:].any() and not out[1, 5:].any()  # absent words stay zero
    bank_river, bank_money = out[0, 2], out[1, 1]
    assert not torch.allclose(bank_river, bank_money, atol=1e-2)  # one word, two contexts
    monkeypatch.setattr(word_vectors, "_minilm", lambda: pytest.fail("recomputed a cached question"))
    torch.testing.assert_close(states.question_states(pieces.flip(0)), out.flip(0))


def test_a_question_s_states_do_not_depend_on_what_was_read_with_it() -> None:
    """The same bits for a question read alone and read in a batch beside a longer one, with the
    cache cleared between (batched encoding pads it, which changes the rounding)."""
    states = word_vectors.ContextualStates()
    short = _pieces("how many ships are there")
    word_vectors.CONTEXT_CACHE.clear()
    alone = states.question_states(short)
    word_vectors.CONTEXT_CACHE.clear()
    beside = states.question_states(
        torch.cat([_pieces("list every ship built before 1990 by the largest yard in norway"), short])
    )
    assert torch.equal(beside[1], alone[0])


def test_the_contextual_cache_keeps_the_questions_read_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded: past its size the least recently read question goes, one read again stays."""
    monkeypatch.setattr(word_vectors, "CONTEXT_CACHE_SIZE", 2)
    states = word_vectors.ContextualStates()
    word_vectors.CONTEXT_CACHE.clear()
    first, second, third = (_pieces(q) for q in ("how many ships", "list the ports", "which yard is oldest"))
    states.question_states(first)
    states.question_states(second)
    states.question_states(first)  # read again: now the most recent
    states.question_states(third)
    kept = set(word_vectors.CONTEXT_CACHE)
    assert kept == {first[0].numpy().tobytes(), third[0].numpy().tobytes()}
    word_vectors.CONTEXT_CACHE.clear()
