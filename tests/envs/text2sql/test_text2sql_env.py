"""The PettingZoo env: API, expert, observation layout, masks, rewards and failure handling."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import pytest
from gymnasium.spaces import MultiDiscrete
from pettingzoo.test import parallel_api_test

from orchestrl.envs.registry import get_env, make_env
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY
from orchestrl.envs.text2sql.actions import COMPOSER, EXTRACTOR, NVEC, copied_value, decode, split_mask
from orchestrl.envs.text2sql.env import Text2SQLEnv
from orchestrl.envs.text2sql.observation import (
    COLUMN_SLOTS,
    LAYOUT,
    OBS_DIM,
    encode_observation,
    observation_high,
)
from orchestrl.envs.text2sql.query import Agg, Op
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.envs.text2sql.tokenizer import PIECE_VOCAB_SIZE, split_words, word_pieces

SPLITS = ("train", "validation", "test")


@pytest.fixture
def env(bank_dir: Path) -> Text2SQLEnv:
    return Text2SQLEnv(split="train", data_dir=bank_dir)


def _index_of(env: Text2SQLEnv, kind: str, schema: str | None = None) -> int:
    return next(i for i, q in enumerate(env.questions) if q.kind == kind and schema in (None, q.schema))


def test_passes_the_pettingzoo_parallel_api_test(env: Text2SQLEnv) -> None:
    parallel_api_test(env, num_cycles=10)


def test_registry_builds_it_with_validated_kwargs(bank_dir: Path) -> None:
    entry = get_env("text2sql")
    entry.check_kwargs(
        {"split": "test", "data_dir": str(bank_dir), "db_seed": 0, "question_kinds": ["top_k"]}
    )
    env = make_env("text2sql", split="test", data_dir=str(bank_dir), question_kinds=["top_k"])
    assert isinstance(env, Text2SQLEnv) and {q.kind for q in env.questions} == {"top_k"}
    with pytest.raises(ValueError, match="unknown split"):
        Text2SQLEnv(split="dev", data_dir=bank_dir)


def test_without_data_dir_the_databases_go_under_the_project_runs_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = Text2SQLEnv(split="validation", db_seed=3)
    cache = tmp_path / "runs" / "cache" / "text2sql" / "3"
    assert {p.parent for p in env.bank.db_paths.values()} == {cache}
    assert sorted(p.name for p in cache.iterdir()) == sorted(p.name for p in env.bank.db_paths.values())


@pytest.mark.parametrize("split", SPLITS)
def test_expert_solves_every_question_with_the_gold_sql(split: str, bank_dir: Path) -> None:
    env = Text2SQLEnv(split=split, data_dir=bank_dir)
    for i, question in enumerate(env.questions):
        obs, _ = env.reset(options={"question_index": i})
        actions = env.expert_actions()
        for agent, action in actions.items():
            mask = split_mask(obs[agent][MASK_KEY], NVEC[agent])
            assert all(m[a] == 1 for m, a in zip(mask, action, strict=True)), (question.qid, agent)
        _, rewards, terms, truncs, infos = env.step(actions)
        assert rewards == {EXTRACTOR: 1.0, COMPOSER: 1.0}, (question.text, infos[EXTRACTOR]["error"])
        assert all(terms.values()) and not any(truncs.values()) and env.agents == []
        for agent in (EXTRACTOR, COMPOSER):
            info = infos[agent]
            assert info["sql"] == question.gold_sql
            assert info["metrics"] == {
                "success": 1.0,
                "valid_sql": 1.0,
                "sql_tokens": info["metrics"]["sql_tokens"],
                "excess_tokens": 0.0,
                "timeout": 0.0,
                "extractor_slot_acc": 1.0,
                "composer_slot_acc": 1.0,
            }
        assert env.evaluate_sql(question.gold_sql).reward == 1.0


def test_spaces_are_masked_multidiscrete_and_a_dict_with_the_documented_sizes(env: Text2SQLEnv) -> None:
    obs, _ = env.reset(seed=3)
    for agent in env.possible_agents:
        space = env.action_space(agent)
        assert isinstance(space, MultiDiscrete) and tuple(space.nvec) == NVEC[agent]
        assert env.observation_space(agent)[OBS_KEY].shape == (OBS_DIM,)
        assert env.observation_space(agent)[MASK_KEY].shape == (sum(NVEC[agent]),)
        assert env.observation_space(agent).contains(obs[agent])
        assert all(m.sum() >= 1 for m in split_mask(obs[agent][MASK_KEY], NVEC[agent]))
    np.testing.assert_array_equal(obs[EXTRACTOR][OBS_KEY], obs[COMPOSER][OBS_KEY])


def test_layout_offsets_are_the_documented_ones() -> None:
    """A model's text encoder hard-codes these through LAYOUT; changing them is a breaking change."""
    documented = {
        "question_pieces": (0, 40, 4),
        "table_pieces": (160, 2, 4),
        "column_pieces": (168, 15, 10),
        "question_features": (318, 40, 6),
        "question_links": (558, 40, 3),
        "table_features": (678, 2, 3),
        "column_features": (684, 15, 9),
        "global_features": (819, 1, 2),
    }
    assert {s.name: (s.offset, s.rows, s.width) for s in LAYOUT.segments} == documented
    assert OBS_DIM == 821


def test_layout_segments_tile_the_observation() -> None:
    offsets = [(s.offset, s.size) for s in LAYOUT.segments]
    assert offsets[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(offsets))
    assert sum(n for _, n in offsets) == OBS_DIM
    batch = np.arange(3 * OBS_DIM, dtype=np.float32).reshape(3, OBS_DIM)
    view = LAYOUT.view(batch, "column_pieces")
    assert view.shape == (3, LAYOUT["column_pieces"].rows, LAYOUT["column_pieces"].width)
    assert view[1, 0, 0] == batch[1, LAYOUT["column_pieces"].offset]


def test_observation_points_where_the_expert_points(env: Text2SQLEnv) -> None:
    """The rows the expert's indices select hold the words the question is about."""
    observations, _ = env.reset(options={"question_index": _index_of(env, "join_agg")})
    question, schema = env.question, SCHEMAS[env.question.schema]
    obs = observations[EXTRACTOR][OBS_KEY]
    expert = env.expert_actions()
    pieces = LAYOUT.view(obs, "question_pieces")
    start, _ = question.value_span
    assert expert[COMPOSER][2] == start
    assert pieces[start, 0] == word_pieces(question.words[start])[0]
    n = len(question.words)
    assert np.all(pieces[n:] == 0) and np.all(pieces[:n, 0] > 0) and np.all(pieces < PIECE_VOCAB_SIZE)
    table, column = schema.columns[expert[EXTRACTOR][2] - 1]
    column_pieces = LAYOUT.view(obs, "column_pieces")[expert[EXTRACTOR][2]]
    assert column_pieces[4] == word_pieces(column.words[0])[0]
    assert column_pieces[0] == word_pieces(table.words[0])[0]
    table_pieces = LAYOUT.view(obs, "table_pieces")[expert[EXTRACTOR][0]]
    assert table_pieces[0] == word_pieces(schema.tables[expert[EXTRACTOR][0]].words[0])[0]
    features = LAYOUT.view(obs, "column_features")
    assert features[: 1 + len(schema.columns), 0].all() and not features[1 + len(schema.columns) :].any()
    assert np.all(obs <= observation_high())


def test_the_observation_is_a_function_of_the_public_inputs_only(env: Text2SQLEnv) -> None:
    """What the env shows is encode_observation(words, schema, stored values): the gold plan is not an
    input, so two questions with the same words and schema look the same whatever their answers."""
    for i in range(0, len(env.questions), 97):
        observations, _ = env.reset(options={"question_index": i})
        q = env.question
        public = encode_observation(q.words, SCHEMAS[q.schema], env.bank.values[q.schema])
        np.testing.assert_array_equal(observations[EXTRACTOR][OBS_KEY], public)
        np.testing.assert_array_equal(observations[COMPOSER][OBS_KEY], public)


def _links(obs: np.ndarray, word: int) -> tuple[set[int], set[int]]:
    names, values, _ = LAYOUT.view(obs, "question_links")[word].astype(int)
    return {b for b in range(COLUMN_SLOTS + 2) if names >> b & 1}, {
        b for b in range(COLUMN_SLOTS) if values >> b & 1
    }


def test_value_linking_finds_the_column_of_a_value_the_question_names_without_a_cue(env: Text2SQLEnv) -> None:
    """ "shipped to Lyon": no column word, yet "Berlin" links to the column that stores Berlin."""
    shop, values = SCHEMAS["shop"], env.bank.values["shop"]
    words = split_words("How many orders were shipped to berlin?")
    obs = encode_observation(words, shop, values)
    city = shop.column_slot("orders", "city")
    names, linked = _links(obs, words.index("berlin"))
    assert linked == {city} and not names
    assert LAYOUT.view(obs, "column_features")[city, 8] == 1.0  # a stored value is named
    assert LAYOUT.view(obs, "column_features")[city, 7] == 0.0  # its name is not
    assert LAYOUT.view(obs, "question_features")[words.index("berlin"), 4:].tolist() == [1.0, 1.0]
    # a singular names the table "products" (and the foreign key product_id), and no value
    obs = encode_observation(split_words("List every product by Acme"), shop, values)
    names, linked = _links(obs, 2)
    assert names == {COLUMN_SLOTS + shop.table_index("products"), shop.column_slot("orders", "product_id")}
    assert not linked
    assert _links(obs, 4)[1] == {shop.column_slot("products", "brand")}


def test_a_number_links_to_the_numeric_columns_whose_stored_range_holds_it(bank) -> None:
    """Range linking reads the database: a number inside a column's stored range links to it (in
    the observation's third bit set), one beyond every range to
    nothing, and a word that is not a number never."""
    zoo, values = SCHEMAS["zoo"], bank.values["zoo"]
    weight = zoo.column_slot("animals", "weight_kg")
    low, high = values.ranges[weight]
    middle = f"{(low + high) / 2:.0f}"
    words = split_words(f"Which animals weigh more than {middle} kg?")
    obs = encode_observation(words, zoo, values)
    ranged = LAYOUT.view(obs, "question_links")[:, 2].astype(int)
    at = words.index(middle)
    assert weight in {b for b in range(COLUMN_SLOTS) if ranged[at] >> b & 1}
    assert all(ranged[i] == 0 for i in range(len(words)) if i != at)
    far = split_words(
        f"Which animals weigh more than {int(10 * max(h for _, h in values.ranges.values()))} kg?"
    )
    assert not LAYOUT.view(encode_observation(far, zoo, values), "question_links")[:, 2].any()
    assert values.range_links(["3", "kg", "1,200"])[1] == set()


def test_a_copied_span_becomes_the_value_as_stored(bank) -> None:
    zoo, values = SCHEMAS["zoo"], bank.values["zoo"]
    species = zoo.column_slot("animals", "species")
    weight = zoo.column_slot("animals", "weight_kg")
    assert copied_value(["penguins"], species, values) == "Penguin"
    assert copied_value(["PENGUIN"], species, values) == "Penguin"
    assert copied_value(["1,200"], weight, values) == "1200"
    assert copied_value(["unicorns"], species, values) == "unicorns"  # no stored value: as written
    assert copied_value([], species, values) is None
    words = split_words("how many penguins live here")
    extractor = [zoo.table_index("animals"), 0, 0, species, 0, 0]
    composer = [int(Agg.COUNT), int(Op.EQ), 2, 0, 0, 0]
    plan = decode(extractor, composer, words, zoo, values)
    assert plan.value == "Penguin" and plan.where == species and plan.agg == Agg.COUNT


def test_reset_with_a_seed_is_deterministic(bank_dir: Path) -> None:
    a, b = Text2SQLEnv(data_dir=bank_dir), Text2SQLEnv(data_dir=bank_dir)
    for seed in (0, 1, 2):
        (obs_a, info_a), (obs_b, info_b) = a.reset(seed=seed), b.reset(seed=seed)
        assert info_a == info_b
        np.testing.assert_array_equal(obs_a[EXTRACTOR][OBS_KEY], obs_b[EXTRACTOR][OBS_KEY])
    picked = {a.reset(seed=s)[1][EXTRACTOR]["question_id"] for s in range(20)}
    assert len(picked) > 10


def test_the_composer_alone_cannot_answer_without_the_extractor(env: Text2SQLEnv) -> None:
    env.reset(options={"question_index": _index_of(env, "count_where")})
    expert = env.expert_actions()
    wrong_column = expert[EXTRACTOR].copy()
    wrong_column[3] = 0  # the extractor forgets the condition
    _, rewards, _, _, infos = env.step({EXTRACTOR: wrong_column, COMPOSER: expert[COMPOSER]})
    metrics = infos[COMPOSER]["metrics"]
    assert metrics["success"] == 0.0 and metrics["valid_sql"] == 1.0 and metrics["composer_slot_acc"] == 1.0
    assert metrics["extractor_slot_acc"] == pytest.approx(5 / 6)
    assert rewards[COMPOSER] == pytest.approx(-env.length_cost * metrics["excess_tokens"])
    assert infos[EXTRACTOR]["slots"][EXTRACTOR]["where"] is None


def test_sql_sqlite_rejects_costs_the_validity_penalty_and_the_env_goes_on(
    env: Text2SQLEnv, caplog: pytest.LogCaptureFixture
) -> None:
    env.reset(options={"question_index": _index_of(env, "count_all")})
    expert = env.expert_actions()
    composer = expert[COMPOSER].copy()
    composer[0] = int(Agg.SUM)  # SUM(*)
    with caplog.at_level(logging.INFO, logger="orchestrl.envs.text2sql"):
        _, rewards, _, _, infos = env.step({EXTRACTOR: expert[EXTRACTOR], COMPOSER: composer})
    assert rewards[EXTRACTOR] == -env.validity_penalty
    assert infos[EXTRACTOR]["metrics"]["valid_sql"] == 0.0 and infos[EXTRACTOR]["error_kind"] == "error"
    assert "SUM(*)" in infos[EXTRACTOR]["sql"] and any("SQL error" in r.getMessage() for r in caplog.records)
    env.reset(seed=0)
    assert env.step(env.expert_actions())[1][EXTRACTOR] == 1.0


def test_choices_that_cannot_become_sql_cost_the_validity_penalty(env: Text2SQLEnv) -> None:
    env.reset(options={"question_index": _index_of(env, "count_all", schema="music")})
    expert = env.expert_actions()
    joined, empty_slot = expert[EXTRACTOR].copy(), expert[EXTRACTOR].copy()
    joined[1] = 1  # join in a one-table schema
    empty_slot[2] = len(SCHEMAS["music"].columns) + 1
    for extractor in (joined, empty_slot):
        env.reset(options={"question_index": _index_of(env, "count_all", schema="music")})
        _, rewards, _, _, infos = env.step({EXTRACTOR: extractor, COMPOSER: expert[COMPOSER]})
        assert rewards[COMPOSER] == -env.validity_penalty
        assert infos[COMPOSER]["sql"] is None and infos[COMPOSER]["error_kind"] == "plan"
        assert infos[COMPOSER]["metrics"]["valid_sql"] == 0.0


def test_evaluate_sql_scores_free_text_queries_and_refuses_hostile_ones(env: Text2SQLEnv) -> None:
    env.reset(options={"question_index": _index_of(env, "count_all", schema="shop")})
    table = SCHEMAS["shop"].tables[env.question.plan.table].name
    equivalent = env.evaluate_sql(f"select count(id) from {table}")
    assert equivalent.success and equivalent.reward == 1.0, "any query with the gold result scores"
    for sql, kind in [
        ("SELEC COUNT(*) FROM products", "error"),
        ("SELECT * FROM nowhere", "error"),
        ("DROP TABLE products", "refused"),
        ("SELECT " + "1 + " * 1000 + "1", "too_long"),
    ]:
        outcome = env.evaluate_sql(sql)
        assert not outcome.valid and outcome.error_kind == kind and outcome.reward == -env.validity_penalty


def test_stepping_needs_a_reset_and_both_agents(env: Text2SQLEnv) -> None:
    with pytest.raises(RuntimeError):
        env.step({})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="missing actions"):
        env.step({EXTRACTOR: env.expert_actions()[EXTRACTOR]})
    with pytest.raises(ValueError, match="outside"):
        env.step({EXTRACTOR: np.array([9, 0, 0, 0, 0, 0]), COMPOSER: env.expert_actions()[COMPOSER]})


def test_ansi_render_shows_question_gold_and_the_team_query(bank_dir: Path) -> None:
    env = Text2SQLEnv(data_dir=bank_dir, render_mode="ansi")
    env.reset(seed=0)
    env.step(env.expert_actions())
    text = env.render()
    assert env.question.text in text and env.question.gold_sql in text and "reward 1.00" in text
