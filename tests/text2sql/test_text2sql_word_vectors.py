"""Pretrained word vectors give held-out phrasings the meaning of the seen words they paraphrase."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from orchestrl.envs.text2sql import word_vectors
from orchestrl.envs.text2sql.observation import VOCAB
from orchestrl.envs.text2sql.tokenizer import SPECIAL_TOKENS


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("word_vectors")


@pytest.fixture(scope="module")
def table(cache: Path) -> np.ndarray:
    return word_vectors.vocabulary_vectors(cache)


def test_every_vocabulary_word_has_a_unit_vector_and_nothing_else_does(table: np.ndarray) -> None:
    assert table.shape == (VOCAB.size, word_vectors.DIM) and table.dtype == np.float32
    words = [VOCAB.token_id(w) for w in VOCAB.words]
    np.testing.assert_allclose(np.linalg.norm(table[words], axis=1), 1.0, atol=1e-4)
    assert not table[: len(SPECIAL_TOKENS)].any()  # <pad>, <unk>, <star>, type tokens
    assert not table[VOCAB.number_offset :].any()  # hash buckets of out-of-vocabulary words


@pytest.mark.parametrize(
    ("held_out", "seen"),
    [("largest", "highest"), ("smallest", "lowest"), ("combined", "total"), ("exceeding", "greater")],
)
def test_a_held_out_word_sits_nearest_the_seen_word_it_paraphrases(
    table: np.ndarray, held_out: str, seen: str
) -> None:
    candidates = ["highest", "lowest", "total", "average", "greater", "less"]
    similarity = {c: float(table[VOCAB.token_id(held_out)] @ table[VOCAB.token_id(c)]) for c in candidates}
    assert max(similarity, key=similarity.get) == seen


def test_the_table_is_computed_once_then_read_from_the_cache(
    cache: Path, table: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = list(cache.glob("minilm_words_*.npy"))
    assert len(files) == 1
    word_vectors.vocabulary_vectors.cache_clear()

    def no_model(vocab: object) -> np.ndarray:
        raise AssertionError("the model was loaded although the cache holds the table")

    monkeypatch.setattr(word_vectors, "_compute", no_model)
    np.testing.assert_array_equal(word_vectors.vocabulary_vectors(cache), table)
    word_vectors.vocabulary_vectors.cache_clear()


def test_an_unwritable_cache_dir_still_gives_the_table(table: np.ndarray, tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    np.testing.assert_array_equal(word_vectors.vocabulary_vectors(blocker / "cache"), table)
    assert blocker.read_text() == "not a directory"
