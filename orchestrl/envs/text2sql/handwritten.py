"""Questions written by hand, kept apart from every grammar (``tests/data/text2sql_natural*.jsonl``).

One JSON object per line: ``{"id", "schema", "question", "sql"}``, the SQL in the exact form the
action space renders (:func:`.query.parse_sql` reads it back into its plan, so every question is
one the team can answer). Gold rows come from running that SQL on the bank's database; the value
span is where the question names the WHERE value (:func:`.actions.copied_value` of it gives the
plan's value), as for generated questions.
"""

from __future__ import annotations

import json
from pathlib import Path

from orchestrl.envs.text2sql.actions import copied_value
from orchestrl.envs.text2sql.bank import QuestionBank, checked
from orchestrl.envs.text2sql.query import PlanError, parse_sql
from orchestrl.envs.text2sql.questions import Question
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.envs.text2sql.tokenizer import split_words
from orchestrl.envs.text2sql.values import MAX_VALUE_WORDS

KIND = "handwritten"


def load_handwritten(path: Path | str, bank: QuestionBank) -> list[Question]:
    """The questions of ``path`` with their gold rows on ``bank``'s databases. Raises ``ValueError``
    naming the file and line of a question the action space cannot express or whose answer is not
    well posed (empty, NULL, or tied at its LIMIT)."""
    path = Path(path)
    questions = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        where = f"{path.name}:{number} ({item.get('id')})"
        if item["schema"] not in SCHEMAS:
            raise ValueError(f"{where}: unknown schema {item['schema']!r}")
        schema = SCHEMAS[item["schema"]]
        try:
            plan = parse_sql(item["sql"], schema)
        except PlanError as err:
            raise ValueError(f"{where}: {err}") from None
        words = tuple(split_words(item["question"]))
        span = None
        if plan.where:
            values = bank.values[schema.name]
            span = next(
                (
                    (start, n)
                    for n in range(1, MAX_VALUE_WORDS + 1)
                    for start in range(len(words) - n + 1)
                    if copied_value(words[start : start + n], plan.where, values) == plan.value
                ),
                None,
            )
            if span is None:
                raise ValueError(f"{where}: the question names no span whose copy is {plan.value!r}")
        question = Question(
            qid=f"{schema.name}/{KIND}/{item['id']}",
            schema=schema.name,
            kind=KIND,
            text=item["question"],
            words=words,
            plan=plan,
            gold_sql=item["sql"],
            value_span=span,
            unseen_phrasing=True,
        )
        answered = checked([question], schema, bank.db_paths[schema.name])
        if not answered:
            raise ValueError(f"{where}: the gold SQL has no well-posed answer (empty, NULL or tied)")
        questions.append(answered[0])
    return questions
