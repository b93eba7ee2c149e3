"""The hand-written evaluation sets: written by people, answerable in the action space, checked on
the databases, and kept apart from the grammars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrl.envs.text2sql.bank import QuestionBank
from orchestrl.envs.text2sql.handwritten import load_handwritten
from orchestrl.envs.text2sql.schemas import SPLIT_SCHEMAS

DATA = Path(__file__).resolve().parents[2] / "data"
NATURAL = DATA / "text2sql_natural.jsonl"
NATURAL_DEV = DATA / "text2sql_natural_dev.jsonl"


@pytest.mark.parametrize(
    ("path", "split", "at_least"), [(NATURAL, "test", 60), (NATURAL_DEV, "validation", 25)]
)
def test_every_question_parses_runs_and_names_its_value(
    bank: QuestionBank, path: Path, split: str, at_least: int
) -> None:
    questions = load_handwritten(
        path, bank
    )  # raises on SQL outside the grammar, ill-posed answers, no value span
    assert len(questions) >= at_least
    assert {q.schema for q in questions} == set(SPLIT_SCHEMAS[split])  # test schemas only: never trained on
    assert len({q.text for q in questions}) == len(questions)
    kinds = {
        (q.plan.agg, bool(q.plan.where), bool(q.plan.group_by), bool(q.plan.join), q.plan.limit > 0)
        for q in questions
    }
    assert len(kinds) >= 10  # varied: not one shape asked many times


def test_no_hand_written_question_is_a_generated_one(bank: QuestionBank) -> None:
    generated = {q.text.lower().rstrip("?.") for split in SPLIT_SCHEMAS for q in bank.questions(split)}
    for path in (NATURAL, NATURAL_DEV):
        for q in load_handwritten(path, bank):
            assert q.text.lower().rstrip("?.") not in generated, q.text


def test_a_bad_line_is_refused_with_its_file_and_line(bank: QuestionBank, tmp_path: Path) -> None:
    good = json.loads(NATURAL.read_text().splitlines()[0])
    cases = [
        (
            {**good, "sql": "SELECT COUNT(*) FROM flights WHERE flights.origin = 'Cairo' AND 1 = 1"},
            "not in the grammar",
        ),
        ({**good, "question": "How many flights are there?"}, "names no span"),
        ({**good, "sql": "SELECT COUNT(*) FROM flights WHERE flights.origin = 'Atlantis'"}, "names no span"),
        ({**good, "schema": "mars"}, "unknown schema"),
    ]
    for item, message in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(good) + "\n" + json.dumps(item) + "\n")
        with pytest.raises(ValueError, match=rf"bad.jsonl:2 .*{message}"):
            load_handwritten(path, bank)


def test_an_env_poses_a_file_of_hand_written_questions_and_its_expert_answers_them(
    bank_dir: Path, tmp_path: Path
) -> None:
    """``questions_file``: every episode is one of the file's questions (never a generated one), and
    the expert's actions for it execute to its gold rows; a path that is no file is named."""
    from orchestrl.envs.text2sql.env import Text2SQLEnv

    env = Text2SQLEnv(split="validation", data_dir=bank_dir, questions_file=NATURAL_DEV)
    try:
        texts = {q.text for q in env.questions}
        assert len(texts) == len(NATURAL_DEV.read_text().splitlines())
        for i in range(len(env.questions)):
            _, infos = env.reset(options={"question_index": i})
            assert infos["schema_extractor"]["question"] in texts
            _, rewards, *_ = env.step(env.expert_actions())
            assert rewards["sql_composer"] > 0.9, env.question.text
    finally:
        env.close()
    with pytest.raises(ValueError, match=r"questions_file: .*missing.jsonl is not a file"):
        Text2SQLEnv(split="validation", data_dir=bank_dir, questions_file=tmp_path / "missing.jsonl")
